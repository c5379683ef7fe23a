"""Exact rewrites that make a training graph's gradient kernels faster.

onnxruntime-training 1.19.2 computes the gradient of ``Relu`` with a CPU
kernel (``ReluGrad``) that runs on one thread and is slow: a quarter of a
training step of a 500-500-1 ReLU network. The same function written as
``x * Where(x > 0, 1, 0)`` has the same value everywhere that matters and
the same gradient (the mask, 0 at ``x = 0`` as ``ReluGrad`` gives): the
comparison has no gradient, so the backward pass is one multiplication by
a mask the forward pass already holds, which runs on the thread pool.

The rewrites are a training detail. They are applied to the graph handed to
``generate_artifacts`` or to the gradient builder, never to the inference
model a user exports (:func:`helpers.core.model_graphs.training_graph.training_graph`),
and ``fast_gradients=False`` turns them off.

Candidates measured on the reference machine, a 2-core AMD EPYC (2 threads, training
step of an MLP with one hidden layer, relative to ``Relu``): ``Mul`` by the mask
made with ``Where`` 0.74 (500-500-1, batch 1000) and 0.72 (100-50-1, batch
100), by the mask made with ``Cast`` of the comparison 0.74 and 0.76
(``Cast`` from bool runs on one thread), ``Max(x, 0)`` 1.09 and 0.89,
``Where(x > 0, x, 0)`` 1.26 and 1.03. The first is kept.

One difference remains, for an input that training never produces: at
``x = -inf``, ``Relu`` gives 0 and the mask product NaN, so a training run
that reaches infinite activations stops on a NaN loss at once.

No exact mask runs on the thread pool alone. The mask has to pass through
a bool or an integer, or the gradient builder would differentiate it, and
every way back to a float runs on one thread in 1.19.2: ``Where``,
``Cast``, ``DequantizeLinear`` (``QuantizeLinear`` then ``Clip`` in uint8
would do, but the builder's ``QDQFusion`` refuses a ``QuantizeLinear`` not
followed by a ``DequantizeLinear``, and fuses such a pair into a
``FakeQuant`` that has a gradient). The one float path it does not follow,
the exponent of ``Pow``, gives an exact mask, ``0 ** (0 ** x)`` (its
gradient differs only at NaN), but ``Pow`` calls ``std::pow`` for every
element: 8 to 19 times ``Where``'s time on 1000 x 500 floats, steps 1.5
to 2.2 times as long. ``Cast`` of the comparison is as exact as ``Where``
and its kernel takes about 40% of ``Where``'s time here (both on one
thread), but whole steps with it took 0.90 to 1.06 of their time with
``Where`` at one thread (MLPs 500-500-1 and 100-50-1, the zoo's CNNs) and
0.7 to 1.2 at two, where the rounds of the shared machine disagreed by
more than that; it was no faster on the AMD machine above: ``Where``
stays. ``benchmarks/profiles/studies/relu_masks.py`` checks and times the
candidates; ``results/kernel_survey.md`` has its figures.

``Gather`` along the first axis of a float tensor (an embedding: rows of
a table picked by token ids) becomes ``GatherND`` over the ids with a last
axis of one: the same rows, copied the same way. The gradient of
``Gather`` is ``GatherGrad``, whose CPU kernel takes one mutex for every
element it adds, from every thread of the pool; the gradient of
``GatherND`` is ``GatherNDGrad``, one loop adding the rows in the order of
the ids, the order of ``GatherGrad`` on one thread: the same sums, bit for
bit, whatever the number of threads (``GatherGrad``'s order on two threads
depends on how they interleave). The gradient of 64 x 32 ids into a
1000 x 32 table takes 171 microseconds instead of 822, into a 20000 x 128
table 1.1 milliseconds instead of 4.8 (the forward ``GatherND`` costs
about 0.1 millisecond more than ``Gather`` there); a training step of the
zoo's token classifiers (``benchmarks/example_models.py``, batches of 64)
takes 0.3 to 0.5 of its time without the rewrite at one thread, 0.1 to
0.3 at two, where ``GatherGrad``'s threads wait for each other
(``benchmarks/profiles/studies/gather_rewrite.py``). Models of opset 12 or older
(``Unsqueeze`` took its axes as an attribute) keep their ``Gather``.

No exact formulation beats ``GatherNDGrad`` (``benchmarks/profiles/studies/embedding_gradients.py``,
a 20000 x 128 table, 64 x 32 ids, one or two threads alike): it clears the
10 MB gradient (0.5 ms once other kernels pushed it out of the cache, as in
a training step) and adds the rows in one loop dividing each element's index
by the row's width (0.5 ms). ``GatherElementsGrad`` clears as much and scatters
element by element (1.1 times as long); ``ScatterND`` with ``reduction='add'``
into zeros takes 0.9 times as long, no faster on two threads, and the gradient
builder gives it to no forward operator; de-duplicated ids or a mean over the
sequence taken first leave one addition per id and column; a one-hot product
costs hundreds of millions of multiplications. The other passes over the
table are the runtime's (clearing, ``InPlaceAccumulatorV2``'s copy into the
gradient buffer, ``SGDOptimizerV2``'s update): the update graph of
:mod:`helpers.core.updates.update_rules` on the session's threads instead made
whole-training steps of that model 1.4 times as long at one thread (two
passes, ``Mul`` then ``Sub``, for ``SGDOptimizerV2``'s one), and gained
nothing in the forward/backward API.

1-D convolutions become windows and one matrix product, whose gradients
avoid the image-by-image loops of ``ConvGrad``
(:mod:`helpers.core.rewrites.convolution_rewrites`, which has the figures).

The last rewrite names the batch dimension. Converters leave the first
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

from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import constant_node, copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_types
from ..machine.runtime import main_opset
from .convolution_rewrites import convolutions_as_products
from .pooling_rewrites import max_pools_before_activations

#: Prefix of the names of the nodes a rewrite adds; :func:`count_rewrites`
#: finds them by it.
REWRITE_PREFIX = "fast_relu__"

#: Prefix of the names of the nodes the ``Gather`` rewrite adds.
GATHER_PREFIX = "fast_gather__"

#: Name of the first dimension shared by the inputs that hold one row per sample.
BATCH_DIMENSION = "batch"

#: Element types the ReLU rewrite handles.
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)

#: Element types of the tables the ``Gather`` rewrite handles (those ``GatherNDGrad`` takes on CPU).
_TABLE_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE)

#: Operators :func:`rewrite_for_training` may replace.
_REWRITTEN = ("Relu", "Gather")


def _relu_as_mask(node, elem_type, index):
    """The nodes computing ``Relu(x)`` as ``x * Where(x > 0, 1, 0)``."""
    x, y = node.input[0], node.output[0]
    tag = f"{REWRITE_PREFIX}{index}__{node.name or y}"
    zero, one = f"{tag}__zero", f"{tag}__one"
    positive, mask = f"{tag}__positive", f"{tag}__mask"
    return [
        constant_node(zero, 0, elem_type),
        constant_node(one, 1, elem_type),
        helper.make_node("Greater", [x, zero], [positive], name=f"{tag}__greater"),
        helper.make_node("Where", [positive, one, zero], [mask], name=f"{tag}__where"),
        helper.make_node("Mul", [x, mask], [y], name=f"{tag}__mul"),
    ]


def _gather_as_gather_nd(node, index):
    """The nodes computing ``Gather(table, ids)`` (axis 0) as ``GatherND(table, Unsqueeze(ids,
    -1))``."""
    table, ids = node.input
    tag = f"{GATHER_PREFIX}{index}__{node.name or node.output[0]}"
    axes, rows = f"{tag}__axes", f"{tag}__rows"
    return [
        constant_node(axes, [-1], TensorProto.INT64),
        helper.make_node("Unsqueeze", [ids, axes], [rows], name=f"{tag}__unsqueeze"),
        helper.make_node("GatherND", [table, rows], [node.output[0]], name=f"{tag}__gather_nd"),
    ]


def _gathers_rows(node, types):
    """Whether ``node`` is a ``Gather`` of rows (axis 0) of a float table by int64 ids."""
    axis = node_attribute(node, "axis", 0)
    return (
        axis == 0
        and types.get(node.input[0]) in _TABLE_TYPES
        and types.get(node.input[1]) == TensorProto.INT64
    )


def _replacement(node, types, opset, index):
    """The nodes that replace ``node`` in the training graph, or None to keep it."""
    if not is_onnx_op(node) or not node.input:
        return None
    elem_type = types.get(node.input[0])
    if node.op_type == "Relu" and elem_type in _FLOAT_TYPES:
        return _relu_as_mask(node, elem_type, index)
    if node.op_type == "Gather" and opset >= 13 and _gathers_rows(node, types):
        return _gather_as_gather_nd(node, index)
    return None


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

    ``MaxPool(Relu(x))`` becomes ``Relu(MaxPool(x))``
    (:mod:`helpers.core.rewrites.pooling_rewrites`), then each ``Relu(x)`` of the
    main graph becomes ``x * Where(x > 0, 1, 0)``,
    each ``Gather`` of rows of a float table by int64 ids a ``GatherND``,
    the convolutions that
    :func:`~helpers.core.rewrites.convolution_rewrites.convolutions_as_products`
    takes become windows and products, and the inputs ``batch_inputs``
    share a named first dimension (see the module's documentation for why
    and for the measurements). A node whose
    input types are unknown or other types is left as it is.

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
        The rewritten copy (the same graph when it has nothing to rewrite).

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

    An embedding: rows of a table picked by token ids.

    >>> table = helper.make_tensor("table", TensorProto.FLOAT, [3, 2], [0.0] * 6)
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Gather", ["table", "ids"], ["rows"])], "g",
    ...     [helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 4])],
    ...     [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [None, 4, 2])], [table])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    >>> [n.op_type for n in rewrite_for_training(model).graph.node]
    ['Constant', 'Unsqueeze', 'GatherND']
    """
    model = max_pools_before_activations(model)
    nodes = model.graph.node
    if any(is_onnx_op(node, *_REWRITTEN) for node in nodes):
        types, opset = value_types(model), main_opset(model)
        nodes = []
        for index, node in enumerate(model.graph.node):
            replacement = _replacement(node, types, opset, index)
            nodes.extend([node] if replacement is None else replacement)
    rewritten = convolutions_as_products(copy_with_nodes(model, nodes))
    name_batch_dimension(rewritten, batch_inputs)
    return rewritten


_ROLES = {
    "zero": "Constant",
    "one": "Constant",
    "greater": "Greater",
    "where": "Where",
    "mul": "Mul",
}


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
