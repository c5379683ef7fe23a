"""Reverse-mode differentiation of an ONNX graph, written as standard ONNX nodes.

:func:`build_gradients` walks the nodes that lie between the values to differentiate and the
loss in reverse topological order. Each node's gradient comes from its operator's function in
:data:`~helpers.portable.gradients.registry.GRADIENTS`; a value read by several nodes receives
the sum of their gradients. The result is the forward graph followed by its backward graph, in
one model: the gradients are values of that graph, named ``NAME_grad`` as onnxruntime's
gradient builder names them.
"""

from collections import namedtuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..node_attributes import node_attribute
from .recurrent import unrolled_recurrences
from .registry import (
    FLOAT_TYPES,
    GRADIENTS,
    GradientContext,
    NoGradientError,
    value_shapes_and_types,
)
from .shapes import zeros_like

#: The standard domain's names.
_STANDARD = ("", "ai.onnx")

BuiltGradients = namedtuple("BuiltGradients", ["model", "gradients"])
BuiltGradients.__doc__ = """What :func:`build_gradients` returns: ``(model, gradients)``.

``model`` computes the forward graph's outputs and, as values of its graph, the gradients;
``gradients`` maps each differentiated value, in the order given, to its gradient's name.

Examples
--------
>>> model, gradients = BuiltGradients(onnx.ModelProto(), {"w": "w_grad"})  # unpacks
>>> gradients["w"]
'w_grad'
"""


def _float_values(types, names):
    """The values of ``names`` a gradient flows through: floats, and those shape inference left
    untyped (the output of a function operator it does not expand, say), which are floats when
    they are on a path from a float to the loss."""
    return {n for n in names if n not in types or types[n] in FLOAT_TYPES}


def _nodes_between(graph, sources, losses, types):
    """The nodes that read (through others) one of ``sources`` and reach one of ``losses``, in graph
    order, and the set of values on such paths: a value that depends on the sources through
    integers only (``Shape(x)``, the zeros ``ConstantOfShape`` makes of it) is on none."""
    nodes = list(graph.node)
    reached = set(sources)
    forward = []
    for node in nodes:
        if any(i in reached for i in node.input if i):
            forward.append(node)
            reached.update(_float_values(types, [o for o in node.output if o]))
    useful, between = set(losses), []
    for node in reversed(forward):
        if any(o in useful for o in node.output):
            between.append(node)
            useful.update(i for i in node.input if i in reached)
    between.reverse()
    return between, useful & reached


def build_gradients(model, wrt, loss=None, loss_gradient=None, named=(), prefix="grad"):
    """Add to ``model`` the gradient of its loss with respect to the values ``wrt``.

    Parameters
    ----------
    model : onnx.ModelProto
        A model in the standard domain whose output ``loss`` (the first output by default)
        is a scalar.
    wrt : list of str
        The values to differentiate: initializers or graph inputs (weights, and inputs for the
        forward/backward API).
    loss : str or list of str, optional
        The output to differentiate, or several: the gradient is then that of the sum of their
        products with their ``loss_gradient`` (the forward/backward API's vector-Jacobian
        product).
    loss_gradient : str or list of str, optional
        The name of a graph input holding the loss's gradient (the seed of the backward pass),
        one per output of ``loss``; a constant one when not given.
    named : sequence of str
        Values whose gradient the graph holds under the name ``NAME_grad`` (an output of the
        model, say, whose gradient a caller replaces by its own: the backward part then reads
        that name).
    prefix : str
        Prefix of the names of the nodes and values the gradients add.

    Returns
    -------
    BuiltGradients

    Raises
    ------
    helpers.portable.gradients.registry.NoGradientError
        For a node between ``wrt`` and the loss whose operator has no gradient.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> import helpers.portable.gradients  # registers the gradients
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Mul", ["x", "w"], ["y"]),
    ...      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
    ...     [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    ...     [numpy_helper.from_array(np.ones(2, np.float32), "w")])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> built = build_gradients(model, ["w"])
    >>> built.gradients
    {'w': 'w_grad'}
    >>> from onnx.reference import ReferenceEvaluator
    >>> x = np.array([[1, 2], [3, 4]], np.float32)
    >>> ReferenceEvaluator(built.model).run(["w_grad"], {"x": x})[0]
    array([4., 6.], dtype=float32)
    """
    model = unrolled_recurrences(model)  # GRU, LSTM, RNN: their cell equations over time
    graph = model.graph
    losses = [loss or graph.output[0].name] if not isinstance(loss, (list, tuple)) else loss
    if loss_gradient is None or isinstance(loss_gradient, str):
        loss_gradient = [loss_gradient]
    if len(loss_gradient) != len(losses):
        raise ValueError(f"{len(losses)} losses {losses} but {len(loss_gradient)} seeds.")
    shapes, types = value_shapes_and_types(model)
    missing = [name for name in wrt if name not in shapes and name not in types]
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    unknown = [name for name in wrt if name not in known]
    if unknown:
        raise ValueError(f"{unknown} are neither inputs nor initializers of the model.")
    not_float = [n for n in wrt if n not in missing and types.get(n) not in FLOAT_TYPES]
    if not_float:
        raise ValueError(
            f"{not_float} are not floating-point tensors: only those have a gradient. "
            "Leave them out of the values to train."
        )
    opset = next(o.version for o in model.opset_import if o.domain in _STANDARD)
    nodes, on_path = _nodes_between(graph, wrt, losses, types)
    on_path = _float_values(types, on_path) | set(wrt)
    inputs = {i.name for i in graph.input}
    constants = {
        t.name: numpy_helper.to_array(t) for t in graph.initializer if t.name not in inputs
    }
    for node in graph.node:
        value = node_attribute(node, "value") if node.op_type == "Constant" else None
        if value is not None:
            constants[node.output[0]] = numpy_helper.to_array(value)
    ctx = GradientContext(shapes, types, on_path, opset, constants, prefix)
    taken = {v for n in graph.node for v in [*n.input, *n.output]} | known
    clashes = [f"{v}_grad" for v in named if f"{v}_grad" in taken]
    if clashes:
        raise ValueError(f"The model already holds values named {clashes}.")
    contributions = {}
    for loss, seed in zip(losses, loss_gradient):
        if seed is None:
            seed = ctx.constant(np.ones(shapes.get(loss) or [], ctx.numpy_type(loss)))
        contributions.setdefault(loss, []).append(seed)
    final = {}

    def total(value):
        """The gradient of ``value``: its one contribution, or their sum."""
        if value in final:
            return final[value]
        parts = contributions.pop(value, [])
        if not parts:
            final[value] = None
        elif len(parts) == 1:
            final[value] = parts[0]
        else:
            final[value] = ctx.op("Sum", parts)
        if value in named and final[value] is not None:
            final[value] = ctx.op("Identity", [final[value]], [f"{value}_grad"])[0]
        return final[value]

    for node in reversed(nodes):
        if node.domain not in _STANDARD:
            raise NoGradientError(node.op_type, node.domain, node.name)
        dy = [total(o) if o else None for o in node.output]
        if all(g is None for g in dy):
            continue
        function = GRADIENTS.get(("", node.op_type))
        if function is None:
            raise NoGradientError(node.op_type, node.domain, node.name)
        ctx.node = node
        dx = function(node, dy, ctx)
        ctx.node = None
        if len(dx) != len(node.input):
            raise RuntimeError(
                f"The gradient of {node.op_type} returned {len(dx)} gradients for "
                f"{len(node.input)} inputs."
            )
        for name, grad in zip(node.input, dx):
            if grad is not None and ctx.needs(name):
                contributions.setdefault(name, []).append(grad)

    gradients = {}
    for name in wrt:
        grad = total(name)
        if grad is None:
            grad = zeros_like(ctx, name)
        wanted = f"{name}_grad"
        if wanted in taken:
            wanted = ctx.name(wanted)
        ctx.nodes.append(helper.make_node("Identity", [grad], [wanted], name=f"{wanted}_id"))
        gradients[name] = wanted
    result = onnx.ModelProto()
    result.CopyFrom(model)
    result.graph.node.extend(_renamed_outputs(ctx.nodes))
    result.graph.initializer.extend(ctx.initializers)
    return BuiltGradients(_with_value_shapes(result), gradients)


def _with_value_shapes(model):
    """``model`` with the shapes onnx's inference finds (symbolic dimensions propagated) as
    ``value_info``: without them onnxruntime takes seconds to plan the session of a deep graph
    (an LSTM unrolled over 160 steps: 6 s, 2 s with them)."""
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 (shapes are a hint for the runtime)
        return model


def _renamed_outputs(nodes):
    """``nodes`` where a gradient ending in an ``Identity`` is written by its producer under
    the final name instead (one node fewer per gradient), when the producer is one of these
    nodes and its output feeds nothing else."""
    produced = {o: node for node in nodes for o in node.output}
    readers = {}
    for node in nodes:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    kept = []
    for node in nodes:
        source = node.input[0] if node.op_type == "Identity" else None
        producer = produced.get(source)
        if (
            node.name.endswith("_id")
            and producer is not None
            and readers.get(source) == 1
            and producer.op_type != "Identity"
        ):
            index = list(producer.output).index(source)
            producer.output[index] = node.output[0]
            continue
        kept.append(node)
    return kept
