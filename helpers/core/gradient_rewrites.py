"""Exact rewrites that make a training graph's gradient kernels faster.

onnxruntime-training 1.19.2 computes the gradient of ``Relu`` with a CPU
kernel (``ReluGrad``) that runs on one thread and is slow: a quarter of a
training step of a 500-500-1 ReLU network. The same function written as
``x * Where(x > 0, 1, 0)`` has the same value everywhere that matters and
the same gradient (the mask, 0 at ``x = 0`` as ``ReluGrad`` gives): the
comparison has no gradient, so the backward pass is one multiplication by
a mask the forward pass already holds, which runs on the thread pool.

The rewrite is a training detail. It is applied to the graph handed to
``generate_artifacts`` or to the gradient builder, never to the inference
model a user exports (:func:`helpers.core.training_graph.training_graph`).

Candidates measured on this project's machine (2 threads, training step of
an MLP with one hidden layer, relative to ``Relu``): ``Mul`` by the mask
made with ``Where`` 0.74 (500-500-1, batch 1000) and 0.72 (100-50-1, batch
100), by the mask made with ``Cast`` of the comparison 0.74 and 0.76
(``Cast`` from bool runs on one thread), ``Max(x, 0)`` 1.09 and 0.89,
``Where(x > 0, x, 0)`` 1.26 and 1.03. The first is kept.

One difference remains, for an input that training never produces: at
``x = -inf``, ``Relu`` gives 0 and the mask product NaN, so a training run
that reaches infinite activations stops on a NaN loss at once.

A second rewrite names the batch dimension. Converters leave the first
dimension of the inputs unnamed (``None``), so the gradient builder cannot
tell that the features, the labels and the activations have the same number
of rows: it adds, for each broadcasting operator, nodes that compute at run
time which axes to sum over (``Shape``, ``BroadcastGradientArgs``,
``ReduceSum`` over no axis, which still copies its input, ``Reshape``).
Declaring one symbol, ``batch``, for the inputs that hold one row per sample
removes them: the gradient graph of a 500-500-1 network goes from 40 nodes
to 17. The optimizers feed those inputs with batches of the same rows, so
the declaration is true by construction.
"""
import onnx
from onnx import TensorProto, helper

from .graph_shapes import value_types

#: Prefix of the names of the nodes a rewrite adds; :func:`count_rewrites`
#: finds them by it.
REWRITE_PREFIX = "fast_relu__"

#: Name of the first dimension shared by the inputs that hold one row per sample.
BATCH_DIMENSION = "batch"

#: Element types the ReLU rewrite handles.
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)


def _relu_as_mask(node, elem_type, index):
    """The nodes computing ``Relu(x)`` as ``x * Where(x > 0, 1, 0)``."""
    x, y = node.input[0], node.output[0]
    tag = f"{REWRITE_PREFIX}{index}__{node.name or y}"
    zero, one = f"{tag}__zero", f"{tag}__one"
    positive, mask = f"{tag}__positive", f"{tag}__mask"
    return [
        helper.make_node(
            "Constant", [], [zero], name=zero, value=helper.make_tensor(zero, elem_type, [], [0])
        ),
        helper.make_node(
            "Constant", [], [one], name=one, value=helper.make_tensor(one, elem_type, [], [1])
        ),
        helper.make_node("Greater", [x, zero], [positive], name=f"{tag}__greater"),
        helper.make_node("Where", [positive, one, zero], [mask], name=f"{tag}__where"),
        helper.make_node("Mul", [x, mask], [y], name=f"{tag}__mul"),
    ]


def name_batch_dimension(model, input_names):
    """Give the inputs ``input_names`` one named first dimension, in place.

    The first input whose first dimension is already named gives its name;
    otherwise :data:`BATCH_DIMENSION`. A first dimension with a fixed size
    is left alone.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> name_batch_dimension(model, ["X"])
    >>> model.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    'batch'
    """
    inputs = [i for i in model.graph.input if i.name in set(input_names)]
    firsts = [i.type.tensor_type.shape.dim[0] for i in inputs if i.type.tensor_type.shape.dim]
    named = [d.dim_param for d in firsts if d.dim_param]
    symbol = named[0] if named else BATCH_DIMENSION
    for dim in firsts:
        if not dim.HasField("dim_value"):
            dim.dim_param = symbol


def rewrite_for_training(model, batch_inputs=()):
    """Return a copy of ``model`` whose gradient graph will be faster and exact.

    Each ``Relu(x)`` of the main graph becomes ``x * Where(x > 0, 1, 0)``,
    and the inputs ``batch_inputs`` share a named first dimension (see the
    module's documentation for why and for the measurements). A ``Relu``
    whose input type is unknown or not a float type is left as it is.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.
    batch_inputs : sequence of str
        Inputs that hold one row per sample and always the same number of
        rows (features, labels, sample weights); empty names no dimension.

    Returns
    -------
    onnx.ModelProto
        The rewritten copy (the same graph when it has no ``Relu``).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    >>> [n.op_type for n in rewrite_for_training(model).graph.node]
    ['Constant', 'Constant', 'Greater', 'Where', 'Mul']
    """
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    name_batch_dimension(rewritten, batch_inputs)
    if not any(node.op_type == "Relu" and node.domain in ("", "ai.onnx") for node in model.graph.node):
        return rewritten
    types = value_types(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        elem_type = types.get(node.input[0]) if node.input else None
        if node.op_type == "Relu" and node.domain in ("", "ai.onnx") and elem_type in _FLOAT_TYPES:
            nodes.extend(_relu_as_mask(node, elem_type, index))
        else:
            nodes.append(node)
    del rewritten.graph.node[:]
    rewritten.graph.node.extend(nodes)
    return rewritten


_ROLES = {"zero": "Constant", "one": "Constant", "greater": "Greater", "where": "Where", "mul": "Mul"}


def _rewrite_role(node):
    """Which node of a rewritten ``Relu`` this is (None for any other node)."""
    if not node.name.startswith(REWRITE_PREFIX):
        return None
    role = node.name.rsplit("__", 1)[-1]
    return role if _ROLES.get(role) == node.op_type else None


def count_rewrites(model):
    """Return how many ``Relu`` nodes of ``model`` are rewritten.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> count_rewrites(rewrite_for_training(mlp_onnx(3, hidden=(4, 4))))
    2
    """
    return sum(_rewrite_role(node) == "mul" for node in model.graph.node)
