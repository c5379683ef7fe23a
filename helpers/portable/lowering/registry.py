"""The registry of lowerings and the pass that applies them to a model.

A lowering is a function ``lower(node, ctx)`` that returns the standard nodes computing the
outputs of ``node`` (a contrib operator) from its inputs, with the same output names. It is
registered for its ``(domain, op_type)`` with :func:`register`. ``ctx``
(:class:`LoweringContext`) gives fresh names, constants and the model's opset.
"""

import numpy as np
import onnx
from onnx import numpy_helper

#: ``(domain, op_type)`` to the function that rewrites such a node with standard operators.
LOWERINGS = {}

#: The domains a step model may use: the standard ones.
STANDARD_DOMAINS = ("", "ai.onnx")


class UnsupportedOperatorError(ValueError):
    """A node whose operator has no standard formulation (yet).

    Parameters
    ----------
    op_type, domain : str
        The operator.
    layer : str
        The layer the node comes from (its name, as the exporter or the gradient builder
        wrote it).

    Examples
    --------
    >>> str(UnsupportedOperatorError("Foo", "com.microsoft", "/fc1/Foo_Grad"))[:60]
    'com.microsoft:Foo (from the layer /fc1/Foo_Grad) has no stan'
    """

    def __init__(self, op_type, domain, layer):
        self.op_type, self.domain, self.layer = op_type, domain, layer
        super().__init__(
            f"{domain}:{op_type} (from the layer {layer or 'unnamed'}) has no standard ONNX "
            "formulation in helpers.portable.lowering, so this model cannot be exported as a "
            "portable training step. Train it with the whole-training or forward/backward API on "
            "onnxruntime-training 1.19.2, or replace the layer."
        )


def register(op_type, domain="com.microsoft"):
    """Register the decorated function as the lowering of ``domain:op_type``.

    Examples
    --------
    >>> from onnx import helper
    >>> @register("Twice", domain="example.test")
    ... def _twice(node, ctx):
    ...     return [helper.make_node("Add", [node.input[0]] * 2, list(node.output))]
    >>> ("example.test", "Twice") in LOWERINGS
    True
    >>> del LOWERINGS["example.test", "Twice"]
    """

    def decorate(function):
        LOWERINGS[domain, op_type] = function
        return function

    return decorate


class LoweringContext:
    """What a lowering needs besides its node: fresh names, constants, the opset.

    Parameters
    ----------
    opset : int
        The model's version of the standard domain.
    prefix : str
        Prefix of every name this context makes.
    known : dict, optional
        Name to value (``onnx.TensorProto`` or numpy array) of the model's constants
        (initializers that no graph input overrides, outputs of ``Constant`` nodes): what
        :meth:`constant_value` returns.
    ranks : dict, optional
        Name to rank of the values whose rank the model declares or shape inference finds:
        what :meth:`rank` returns.
    graph : onnx.GraphProto, optional
        The graph being lowered: :meth:`producer` finds the node that computes a value.

    Examples
    --------
    >>> ctx = LoweringContext(17, known={"flag": np.array(True)})
    >>> ctx.name("axes"), ctx.constant(np.array([0], np.int64), "axes")
    ('lower_0_axes', 'lower_1_axes')
    >>> [t.name for t in ctx.initializers], ctx.constant_value("flag"), ctx.constant_value("x")
    (['lower_1_axes'], array(True), None)
    """

    def __init__(self, opset, prefix="lower", known=None, ranks=None, graph=None):
        self.opset, self.prefix = opset, prefix
        self.initializers = []
        self.known = dict(known or {})
        self.ranks = dict(ranks or {})
        self._count = 0
        #: Returns the model lowered up to the node being lowered (for :meth:`rank`), or None.
        self.lowered_so_far = None
        nodes = graph.node if graph is not None else []
        self._producers = {out: node for node in nodes for out in node.output if out}

    def name(self, tag):
        """A name no other node uses."""
        name = f"{self.prefix}_{self._count}_{tag}"
        self._count += 1
        return name

    def constant(self, value, tag="const"):
        """The name of a new initializer holding ``value`` (a numpy array)."""
        name = self.name(tag)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def constant_value(self, name):
        """The value (numpy array) of ``name`` if the model holds it as a constant, else None."""
        value = self.known.get(name)
        if isinstance(value, onnx.TensorProto):
            return numpy_helper.to_array(value)
        return value

    def rank(self, name):
        """The rank of ``name`` if the model tells it, else None.

        A rank the model did not declare is looked for again, once per value, in the graph
        lowered so far (:attr:`lowered_so_far`, set by :func:`lower_model`): once the
        gradient operators before it are standard, onnx's shape inference reaches it.
        """
        if name not in self.ranks and self.lowered_so_far is not None:
            lowered = self.lowered_so_far()
            self.ranks.update(model_ranks(lowered))
            if self.ranks.get(name) is None:
                producers = {out: node for node in lowered.graph.node for out in node.output}
                self.ranks[name] = _propagated_rank(name, producers, self.ranks, self.known)
        return self.ranks.get(name)

    def cast_like(self, value, like, output):
        """The node casting ``value`` to the element type of ``like``: ``CastLike`` from opset 15,
        a ``Cast`` to float before (the optimizers train float32 tensors only).

        Examples
        --------
        >>> LoweringContext(13).cast_like("a", "b", "c").op_type
        'Cast'
        """
        from onnx import TensorProto, helper

        if self.opset >= 15:
            return helper.make_node("CastLike", [value, like], [output])
        return helper.make_node("Cast", [value], [output], to=TensorProto.FLOAT)

    def producer(self, value):
        """The node of the original graph that computes ``value``, or None (an input, a weight).

        Examples
        --------
        >>> from onnx import helper
        >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [], [])
        >>> ctx = LoweringContext(17, graph=graph)
        >>> ctx.producer("y").op_type, ctx.producer("x")
        ('Relu', None)
        """
        return self._producers.get(value)


#: Operators whose output has the rank of their inputs' broadcast (the largest rank).
_SAME_RANK = {
    "Identity",
    "Transpose",
    "Conv",
    "ConvTranspose",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Where",
    "Pad",
    "Cast",
    "Neg",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Sqrt",
    "Reciprocal",
    "Erf",
    "Abs",
    "Softmax",
    "LogSoftmax",
    "MaxPool",
    "AveragePool",
    "Equal",
    "Greater",
    "Less",
    "Not",
}


def _propagated_rank(name, producers, ranks, known, depth=0):
    """The rank of ``name`` from its producers' inputs' ranks, where shape inference stopped
    (a ``Conv`` whose inferred shape onnx gives up on); None if it cannot be told."""
    if ranks.get(name) is not None:
        return ranks[name]
    node = producers.get(name)
    if node is None or depth > 200:
        return None
    inputs = [_propagated_rank(i, producers, ranks, known, depth + 1) for i in node.input if i]
    rank = None
    if node.op_type in _SAME_RANK and inputs and None not in inputs[:1]:
        rank = max(r for r in inputs if r is not None)
    elif node.op_type in ("Squeeze", "Unsqueeze") and inputs and inputs[0] is not None:
        axes = known.get(node.input[1]) if len(node.input) > 1 else None
        if axes is not None:
            count = (
                numpy_helper.to_array(axes).size
                if isinstance(axes, onnx.TensorProto)
                else (np.asarray(axes).size)
            )
            rank = inputs[0] + (count if node.op_type == "Unsqueeze" else -count)
    if rank is not None:
        ranks[name] = rank
    return rank


def model_ranks(model):
    """Name to rank of every value whose rank the model declares or onnx's shape inference finds
    (nodes outside the standard domain are skipped, so values after them may be missing).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> model_ranks(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    {'x': 2, 'y': 2}
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 (ranks are a hint: none is a valid answer)
        inferred = model
    graph = inferred.graph
    ranks = {t.name: len(t.dims) for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        if tensor.HasField("shape"):
            ranks[value.name] = len(tensor.shape.dim)
    return ranks


def model_constants(graph):
    """Name to ``TensorProto`` of the constants of ``graph``: initializers no graph input
    overrides, outputs of ``Constant`` nodes holding a tensor.

    Examples
    --------
    >>> from onnx import helper
    >>> node = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(2)))
    >>> graph = helper.make_graph([node], "g", [], [], initializer=[
    ...     numpy_helper.from_array(np.array(True), "flag")])
    >>> sorted(model_constants(graph))
    ['c', 'flag']
    """
    inputs = {i.name for i in graph.input}
    known = {t.name: t for t in graph.initializer if t.name not in inputs}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in STANDARD_DOMAINS:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                known[node.output[0]] = value
    return known


def is_standard(node):
    """Whether ``node`` is a standard ONNX operator.

    onnxruntime registers some gradient kernels (``MaxPoolGrad``...) in the default domain:
    they are not standard, though their domain is.

    Examples
    --------
    >>> from onnx import helper
    >>> is_standard(helper.make_node("MaxPool", ["x"], ["y"]))
    True
    >>> is_standard(helper.make_node("MaxPoolGrad", ["dy", "i"], ["dx"]))
    False
    """
    return node.domain in STANDARD_DOMAINS and onnx.defs.has(node.op_type)


def standard_opset(model):
    """The model's version of the standard ONNX domain.

    Examples
    --------
    >>> from onnx import helper
    >>> graph = helper.make_graph([], "g", [], [])
    >>> standard_opset(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    17
    """
    return next(o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS)


def lower_model(model, prefix="lower"):
    """Return a copy of ``model`` whose nodes are all in the standard ONNX domain.

    Parameters
    ----------
    model : onnx.ModelProto
    prefix : str
        Prefix of the names of the values and initializers the lowerings add: give another one
        to each of two models whose lowered graphs are merged.

    Returns
    -------
    onnx.ModelProto
        The same computation; every opset import outside the standard domain dropped.

    Raises
    ------
    UnsupportedOperatorError
        For the first node whose operator has no lowering.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> node = helper.make_node("Foo", ["x"], ["y"], domain="example.test", name="/fc/Foo")
    >>> graph = helper.make_graph(
    ...     [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> lower_model(model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helpers.portable.lowering.registry.UnsupportedOperatorError: example.test:Foo (from the ...
    """
    ctx = LoweringContext(
        standard_opset(model),
        prefix,
        known=model_constants(model.graph),
        ranks=model_ranks(model),
        graph=model.graph,
    )
    nodes = []
    ctx.lowered_so_far = lambda: _with_nodes(model, nodes, ctx.initializers)
    for node in model.graph.node:
        if is_standard(node):
            nodes.append(node)
            continue
        domain = "" if node.domain in STANDARD_DOMAINS else node.domain
        lowering = LOWERINGS.get((domain, node.op_type))
        if lowering is None:
            raise UnsupportedOperatorError(node.op_type, node.domain, node.name)
        nodes.extend(lowering(node, ctx))
    return _with_nodes(model, nodes, ctx.initializers)


def _with_nodes(model, nodes, initializers):
    """A copy of ``model`` holding ``nodes``, ``initializers`` besides its own, and only its
    standard opset imports."""
    lowered = onnx.ModelProto()
    lowered.CopyFrom(model)
    del lowered.graph.node[:]
    lowered.graph.node.extend(nodes)
    lowered.graph.initializer.extend(initializers)
    del lowered.opset_import[:]
    lowered.opset_import.extend(o for o in model.opset_import if o.domain in STANDARD_DOMAINS)
    return lowered
