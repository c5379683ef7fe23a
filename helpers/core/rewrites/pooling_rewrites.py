"""Max pooling before the activation that feeds it, in the training graph.

A convolutional network writes ``MaxPool(Relu(x))``: the activation, and
its gradient's mask, run on the whole feature map, four times the pooled
one under a 2 x 2 window. For a non-decreasing activation ``f``, the max
of ``f`` over a window is ``f`` of the max, so ``f(MaxPool(x))`` is the
same value computed on the pooled map; the rewrite puts the pooling first
when ``f`` is ``Relu``, or ``LeakyRelu`` with a positive slope.

The gradients are equal too, ties included. onnxruntime's ``MaxPool``
(with the indices its gradient needs) and torch's both send a window's
gradient to its first maximum in scan order, padding and cells past the
edge never being one. Write ``m`` for the max of ``x`` over a window.

* ``LeakyRelu`` with a positive slope is strictly increasing: ``f(x)`` and
  ``x`` have their maxima at the same cells, so the first is the same
  cell ``i``, with ``x_i = m``; both graphs give it ``dy * f'(x_i)``.
* ``Relu``, ``m > 0``: a cell where ``x`` is not positive has ``f = 0 < m``,
  and ``f`` is the identity on the others: the maxima of ``f(x)`` are those
  of ``x``, the same first cell ``i``, and ``f'(x_i) = f'(m) = 1``.
* ``Relu``, ``m <= 0``: ``f(x)`` is 0 on the whole window, whose first cell
  ``j`` gets ``dy * f'(x_j) = 0`` (``x_j <= 0``); the rewritten graph gets
  ``dy * f'(m) = 0`` at its own first maximum. Zero everywhere in both.

A cell shared by overlapping windows sums these terms in both graphs. The
rewrite is left out where the pooling's ``Indices`` output is used (on a
window of ``Relu`` outputs all zero, it points at the first cell, not at
the max of ``x``) and where the activation's type is not a float. An
activation whose output has other readers stays for them. torch's ``ReLU6``
and ``Hardtanh``, also non-decreasing, reach the training graph as ``Where``
nodes (:mod:`helpers.core.layers.activations`) and are left as they are.

Measured by ``benchmarks/profiles/studies/max_pool_gradients.py`` (figures in
``results/kernel_survey.md``; a 2-core AMD EPYC with AVX-512, 4 interleaved rounds,
medians of the rounds' ratios): a training step with the rewrite
takes 0.94 to 0.98 of its time without it for the zoo's ``image_cnn_small``,
0.95 to 0.96 at one thread and 0.87 to 0.89 at two for ``image_cnn_large``,
0.92 to 0.97 and 0.91 to 0.93 for a ResNet-like stem (3 x 32 x 32,
convolution, batch normalization, ReLU, ``MaxPool`` 3 x 3 stride 2 padding
1). The kernels say why: ``Where``, ``Greater`` and ``Mul`` of the mask
fall from 3.5 to 0.8 milliseconds a step of ``image_cnn_large`` at one
thread (2.1 to 0.45 at two), while ``MaxPool`` with indices takes 10 to 16%
more on the raw feature map than on the ReLU's, half zeros (not studied
further).

Tried and dropped: a ``MaxPool`` whose kernel is its stride written
without the indices kernel, the windows laid on a last axis (``Slice``,
``Reshape``, ``Transpose``, ``Reshape``), ``ArgMax`` (the first maximum,
torch's rule) and ``GatherElements`` (its gradient scatters into zeros).
Exact, but the extra passes over the feature map cost more than
``MaxPool`` and ``MaxPoolGrad``: steps 1.10 to 1.17 times as long.
"""

from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_types

#: Prefix of the names of the nodes and values the rewrite adds.
POOL_PREFIX = "fast_pool__"

_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)


def _non_decreasing(node):
    """Whether ``node`` is an activation the max of a window commutes with."""
    if is_onnx_op(node, "Relu"):
        return True
    return is_onnx_op(node, "LeakyRelu") and node_attribute(node, "alpha", 0.01) > 0


def _readers(graph):
    """Value name to the number of nodes that read it, graph outputs counted as readers."""
    counts = {output.name: 1 for output in graph.output}
    for node in graph.node:
        for name in node.input:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _swapped(pool, activation, index):
    """``pool`` reading the activation's input, then the activation writing the pool's output."""
    pooled = f"{POOL_PREFIX}{index}__{pool.name or pool.output[0]}"
    before = helper.make_node(
        "MaxPool", [activation.input[0]], [pooled], name=f"{pooled}__max_pool"
    )
    before.attribute.extend(pool.attribute)
    after = helper.make_node(
        activation.op_type, [pooled], [pool.output[0]], name=f"{pooled}__activation"
    )
    after.attribute.extend(activation.attribute)
    return [before, after]


def max_pools_before_activations(model):
    """Return a copy of ``model`` where ``MaxPool(f(x))`` is ``f(MaxPool(x))``.

    ``f`` is ``Relu`` or ``LeakyRelu`` with a positive slope, of a float
    type; the pooling's ``Indices`` output must be unused. Values and
    gradients are those of the model (see the module's documentation).

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.

    Returns
    -------
    onnx.ModelProto
        The rewritten copy (the same graph when it has nothing to rewrite).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["r"]),
    ...      helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, 4, 4])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1, 2, 2])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    >>> [n.op_type for n in max_pools_before_activations(model).graph.node]
    ['MaxPool', 'Relu']
    """
    graph = model.graph
    if not any(is_onnx_op(node, "MaxPool") for node in graph.node):
        return model
    producers = {out: node for node in graph.node for out in node.output if _non_decreasing(node)}
    types, readers = value_types(model), _readers(graph)
    swaps = {}
    for index, node in enumerate(graph.node):
        activation = producers.get(node.input[0]) if is_onnx_op(node, "MaxPool") else None
        used_indices = len(node.output) > 1 and readers.get(node.output[1], 0) > 0
        if activation is not None and not used_indices and types.get(node.input[0]) in _FLOAT_TYPES:
            swaps[index] = _swapped(node, activation, index)
            readers[node.input[0]] -= 1
    if not swaps:
        return model
    nodes = []
    for index, node in enumerate(graph.node):
        if index in swaps:
            nodes.extend(swaps[index])
        elif not (_non_decreasing(node) and readers.get(node.output[0], 0) == 0):
            nodes.append(node)
    return copy_with_nodes(model, nodes)
