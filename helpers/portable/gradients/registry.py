"""The registry of gradients and the context a gradient function writes its nodes with.

A gradient function ``grad(node, dy, ctx)`` receives a forward node, the names of the
gradients of its outputs (``None`` where no gradient reaches an output) and a
:class:`GradientContext`; it adds the nodes of the gradient with :meth:`GradientContext.op`
and returns one name per input of ``node``: the gradient of that input, or ``None`` (an input
that needs none, :meth:`GradientContext.needs`, or one that has none: an index, a shape).
It is registered for its operator with :func:`gradient`.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..node_attributes import node_attribute

#: ``(domain, op_type)`` to the function that writes the gradient of such a node.
GRADIENTS = {}

#: The stop of a ``Slice`` that runs to the end of an axis.
END = np.iinfo(np.int64).max

#: Element types a gradient flows through.
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)


class NoGradientError(ValueError):
    """A node on the path from a trained weight to the loss whose operator has no gradient.

    Parameters
    ----------
    op_type, domain : str
        The operator.
    layer : str
        The layer the node comes from (its name, as the exporter wrote it).
    reason : str, optional
        Why, when the operator has a gradient in general but not with these attributes.

    Examples
    --------
    >>> str(NoGradientError("TopK", "", "/head/TopK"))[:54]
    'TopK (from the layer /head/TopK) has no gradient in he'
    """

    def __init__(self, op_type, domain, layer, reason=""):
        self.op_type, self.domain, self.layer = op_type, domain, layer
        name = f"{domain}:{op_type}" if domain not in ("", "ai.onnx") else op_type
        why = f" {reason}" if reason else ""
        super().__init__(
            f"{name} (from the layer {layer or 'unnamed'}) has no gradient in "
            f"helpers.portable.gradients.{why} Freeze the weights before it "
            "(weights=...), replace the layer, or build the step with onnxruntime-training 1.19.2 "
            "(export_training_step)."
        )


def gradient(op_type, domain=""):
    """Register the decorated function as the gradient of ``domain:op_type``.

    Examples
    --------
    >>> @gradient("Twice", domain="example.test")
    ... def _twice(node, dy, ctx):
    ...     return [ctx.op("Add", [dy[0], dy[0]])]
    >>> ("example.test", "Twice") in GRADIENTS
    True
    >>> del GRADIENTS["example.test", "Twice"]
    """

    def decorate(function):
        GRADIENTS[domain, op_type] = function
        return function

    return decorate


class GradientContext:
    """What a gradient function needs besides its node: shapes, types, fresh names, constants.

    Parameters
    ----------
    shapes : dict
        Name to the shape shape inference found (a list of ints, of symbolic names as str, or
        of None where unknown); a name without an entry has an unknown rank.
    types : dict
        Name to element type (``TensorProto`` enum).
    needed : set of str
        The values a gradient is wanted for (on a path from a trained value to the loss).
    opset : int
        The model's version of the standard domain.
    constants : dict, optional
        Name to numpy array of the model's constants (initializers no input overrides).
    prefix : str
        Prefix of every name this context makes.

    Examples
    --------
    >>> ctx = GradientContext({"x": ["N", 3]}, {"x": TensorProto.FLOAT}, {"x"}, 17)
    >>> ctx.op("Neg", ["x"]), [n.op_type for n in ctx.nodes], ctx.rank("x")
    ('grad_0_Neg', ['Neg'], 2)
    """

    def __init__(self, shapes, types, needed, opset, constants=None, prefix="grad"):
        self.shapes, self.types, self.needed, self.opset = shapes, types, needed, opset
        self.constants = dict(constants or {})
        self.prefix = prefix
        self.nodes, self.initializers = [], []
        self._count = 0
        self._constant_names = {}
        #: The node whose gradient is being written (for names and messages).
        self.node = None

    # names and nodes ----------------------------------------------------------------------
    def name(self, tag):
        """A name no other value uses."""
        name = f"{self.prefix}_{self._count}_{tag}"
        self._count += 1
        return name

    def op(self, op_type, inputs, outputs=1, **attributes):
        """Add a node; return its output name (or the list of names if ``outputs`` > 1 or a
        list of names is given)."""
        if isinstance(outputs, int):
            names = [self.name(op_type) for _ in range(outputs)]
        else:
            names = list(outputs)
        self.add([helper.make_node(op_type, list(inputs), names, **attributes)])
        return names[0] if isinstance(outputs, int) and outputs == 1 else names

    def add(self, nodes):
        """Append ``nodes`` (made elsewhere: a lowering's) to the gradient's; each one without
        a name is named after the node being differentiated."""
        where = self.node.name if self.node is not None and self.node.name else "grad"
        for node in nodes:
            node.name = node.name or f"{where}_Grad/{self.name(node.op_type)}"
            self.nodes.append(node)

    def constant(self, value, dtype=None):
        """The name of an initializer holding ``value`` (shared between equal constants)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constant_names:
            name = self.name("const")
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constant_names[key] = name
        return self._constant_names[key]

    def scalar_like(self, value, like):
        """A scalar constant ``value`` of the element type of ``like``."""
        return self.constant(np.array(value, dtype=self.numpy_type(like)))

    def axes(self, axes):
        """A 1-D int64 constant of ``axes`` (the input form of opset 13 and later)."""
        return self.constant(np.array(list(axes), dtype=np.int64))

    def vector(self, value):
        """A 1-element int64 value: ``value`` itself if it is a name, else a constant (of an int,
        as :meth:`length` returns)."""
        return value if isinstance(value, str) else self.axes([value])

    def cast_like(self, value, like):
        """``value`` in the element type of ``like``: itself when it has that type, a ``Cast``
        when the type is known; when not, a ``CastLike`` from opset 15, before a ``Cast`` to
        float32 (the type :meth:`numpy_type` assumes).

        Examples
        --------
        >>> ctx = GradientContext({}, {"x": TensorProto.DOUBLE, "y": TensorProto.DOUBLE}, set(), 13)
        >>> ctx.cast_like("y", "x"), ctx.cast_like("g", "x"), ctx.nodes[0].attribute[0].i
        ('y', 'grad_0_Cast', 11)
        >>> ctx.opset = 15
        >>> ctx.cast_like("g", "unknown"), ctx.nodes[-1].op_type
        ('grad_2_CastLike', 'CastLike')
        """
        elem_type = self.types.get(like)
        if elem_type is not None and self.types.get(value) == elem_type:
            return value
        if elem_type is None and self.opset >= 15:
            return self.op("CastLike", [value, like])
        return self.op("Cast", [value], to=elem_type or TensorProto.FLOAT)

    # what is known of a value -------------------------------------------------------------
    def needs(self, name):
        """Whether a gradient is wanted for the value ``name``."""
        return bool(name) and name in self.needed

    def shape(self, name):
        """The shape of ``name`` (list of int, str or None), or None if its rank is unknown."""
        return self.shapes.get(name)

    def rank(self, name):
        """The rank of ``name``, or None."""
        shape = self.shapes.get(name)
        return None if shape is None else len(shape)

    def known_rank(self, name, what="its input"):
        """The rank of ``name``; the gradient is refused where it is unknown (``what`` names the
        value in the reason)."""
        rank = self.rank(name)
        if rank is None:
            self.refuse(f"Its gradient needs the rank of {what}; shape inference found none.")
        return rank

    def length(self, name, axis):
        """``name``'s length along ``axis``: an int when the shape tells it, else a 1-element
        value."""
        shape = self.shape(name)
        if shape is not None and isinstance(shape[axis], int):
            return shape[axis]
        return self.op("Gather", [self.op("Shape", [name]), self.axes([axis])])

    def static_shape(self, name):
        """The shape of ``name`` as ints if every dimension is known, else None."""
        shape = self.shapes.get(name)
        if shape is None or any(not isinstance(d, int) for d in shape):
            return None
        return list(shape)

    def numpy_type(self, name):
        """The numpy element type of ``name`` (float32 when unknown)."""
        return helper.tensor_dtype_to_np_dtype(self.types.get(name, TensorProto.FLOAT))

    def constant_value(self, name):
        """The value of ``name`` if it is a constant of the model, else None."""
        return self.constants.get(name)

    def refuse(self, reason):
        """Raise :class:`NoGradientError` for the node being differentiated."""
        node = self.node
        raise NoGradientError(node.op_type, node.domain, node.name, reason)

    # common pieces of gradients -----------------------------------------------------------
    def reduce_to(self, grad, operand, output):
        """``grad`` (shaped like ``output``) summed over the axes along which ``operand`` was
        broadcast to ``output``, and reshaped to ``operand``'s shape.

        The axes are found when the model is built wherever the shapes tell them; where a
        dimension is unknown on both sides, at run time (the batch size stays free).
        """
        small, large = self.shape(operand), self.shape(output)
        if small is not None and large is not None:
            axes = _broadcast_axes(small, large)
            if axes is not None:
                if not axes and len(small) == len(large):
                    return grad
                if axes:
                    grad = self.op("ReduceSum", [grad, self.axes(axes)], keepdims=1)
                if len(small) == len(large):
                    return grad
                return self.op("Reshape", [grad, self.shape_of(operand)])
        return self._reduce_at_run_time(grad, operand)

    def shape_of(self, name):
        """A value holding the shape of ``name``: a constant when it is static."""
        static = self.static_shape(name)
        if static is not None:
            return self.constant(np.array(static, dtype=np.int64))
        return self.op("Shape", [name])

    def _reduce_at_run_time(self, grad, operand):
        big, small = self.op("Shape", [grad]), self.op("Shape", [operand])
        rank_big, rank_small = self.op("Size", [big]), self.op("Size", [small])
        missing = self.op("Sub", [rank_big, rank_small])
        ones = self.op(
            "ConstantOfShape",
            [self.op("Reshape", [missing, self.constant(np.array([1], np.int64))])],
            value=numpy_helper.from_array(np.array([1], np.int64)),
        )
        padded = self.op("Concat", [ones, small], axis=0)
        one = self.constant(np.array(1, np.int64))
        repeated = self.op(
            "And",
            [self.op("Equal", [padded, one]), self.op("Not", [self.op("Equal", [big, one])])],
        )
        axes = self.op("Reshape", [self.op("NonZero", [repeated]), self.constant([-1], np.int64)])
        summed = self.op("ReduceSum", [grad, axes], keepdims=1, noop_with_empty_axes=1)
        return self.op("Reshape", [summed, small])


def _broadcast_axes(small, large):
    """The axes of ``large`` to sum ``small``'s broadcast gradient over, or None when a dimension
    leaves it open (both unknown, or two different symbols)."""
    if len(small) > len(large):
        return None
    lead = len(large) - len(small)
    axes = list(range(lead))
    for k, (s, b) in enumerate(zip(small, large[lead:]), start=lead):
        if s == b and s is not None:
            continue
        if s == 1:
            if b != 1:
                axes.append(k)
            continue
        if isinstance(s, int) and s > 1:
            continue  # an operand of more than one value is never broadcast
        if b == 1:
            continue
        return None
    return axes


def value_shapes_and_types(model):
    """Name to shape and name to element type of every value shape inference reaches.

    Examples
    --------
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> shapes, types = value_shapes_and_types(
    ...     helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    >>> shapes["y"], types["y"] == TensorProto.FLOAT
    (['N', 3], True)
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 (shapes are a hint: a missing one is found at run time)
        inferred = model
    graph = inferred.graph
    shapes, types = {}, {}
    for tensor in graph.initializer:
        shapes[tensor.name], types[tensor.name] = list(tensor.dims), tensor.data_type
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        if tensor.elem_type:
            types.setdefault(value.name, tensor.elem_type)
        if tensor.HasField("shape") and value.name not in shapes:
            shapes[value.name] = [
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tensor.shape.dim
            ]
    for node in graph.node:
        if node.op_type == "Constant":
            value = node_attribute(node, "value")
            if value is not None:
                shapes[node.output[0]], types[node.output[0]] = list(value.dims), value.data_type
    return shapes, types


def written_operators(node, inputs, opset=17):
    """The operators the gradient of ``node`` writes, when its inputs hold ``inputs``.

    Parameters
    ----------
    node : onnx.NodeProto
        One forward node.
    inputs : dict
        Input name to a numpy array: float arrays are the values differentiated (graph inputs),
        the others constants (indices, shapes, axes).
    opset : int

    Returns
    -------
    list of str
        The op types of the nodes the gradient adds, in order.

    Examples
    --------
    >>> written_operators(helper.make_node("Relu", ["x"], ["y"]), {"x": np.ones((2, 3), "f")})
    ['Greater', 'Where']
    """
    graph_inputs, initializers = [], []
    for name, value in inputs.items():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, dtype, value.shape))
        else:
            initializers.append(numpy_helper.from_array(value, name))
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "one_node", graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    shapes, types = value_shapes_and_types(model)
    needed = {i.name for i in graph_inputs} | {o for o in node.output if o}
    constants = {t.name: numpy_helper.to_array(t) for t in initializers}
    ctx = GradientContext(shapes, types, needed, opset, constants)
    ctx.node = node
    GRADIENTS["", node.op_type](node, [f"{o}_grad" if o else None for o in node.output], ctx)
    return [n.op_type for n in ctx.nodes]
