"""The copy of a model that onnxruntime's gradient builders are given.

onnxruntime-training 1.19.2 cannot differentiate some layers as a torch export
writes them. The training graph is the model with these layers rewritten
into an exact equivalent it can train; the model a user exports for
inference is never rewritten.

* ``LayerNormalization``: its gradient reads the node's optional outputs
  (mean and inverse standard deviation), which exporters leave out; the
  builder then stops on a C++ assertion (``gradient_builder_base.h:123 ...
  i < node_->OutputDefs().size() was false``, onnxruntime issue 19427). The
  outputs are added (:func:`with_layer_norm_statistics`).
* ``auto_pad`` and ``Pad`` in reflect or edge mode: written as explicit
  pads and ``Gather`` nodes (:mod:`helpers.core.layers.padding`).
* ``AveragePool``: written as a depthwise ``Conv`` (:mod:`helpers.core.layers.pooling`).
* Grouped 1-D ``Conv`` (depthwise convolutions over sequences, and the
  average pooling above on sequences): the CPU kernel of its gradient returns wrong
  input and weight gradients when ``group > 1`` and the kernel is not 2-D
  (it clears and writes the input gradient of every channel for each
  group). Such a convolution becomes the same 2-D convolution over a
  height of one (:func:`grouped_convolutions_in_two_dimensions`); a grouped
  3-D convolution has no such way out and is refused.
* ``BatchNormalization``: see :mod:`helpers.core.layers.batch_norm`.
* ``LayerNormalization`` over one value, ``InstanceNormalization`` (torch's
  ``GroupNorm`` and ``InstanceNorm``): see :mod:`helpers.core.layers.normalization`.
* The padding row of an embedding (torch's ``padding_idx``, recorded in the
  model's metadata at export) is kept at a zero gradient: see
  :mod:`helpers.core.layers.embedding_padding`.
* ``Elu``, ``Celu``, ``Selu``, ``Softplus``, ``HardSigmoid``, ``HardSwish``,
  ``PRelu``: no gradient in 1.19.2; see :mod:`helpers.core.layers.activations`.
* ``ConvTranspose`` and ``Resize``, which have no gradient: see
  :mod:`helpers.core.layers.resampling`.
* With ``random_draws``, the random operators (``Dropout`` in training mode...) take their
  random values as inputs, drawn by the caller from its seed: see
  :mod:`helpers.core.model_graphs.random_draws`.
* The speed rewrites of :mod:`helpers.core.rewrites.gradient_rewrites` (``Relu`` as a
  mask, max pooling before ``Relu``, a named batch dimension), when
  ``fast_gradients`` is on.
"""

from collections import namedtuple

import onnxruntime
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import (
    TRAINING_PREFIX,
    constant_node,
    copy_with_nodes,
    depends_on_weights,
    is_onnx_op,
)
from ..graphs.graph_shapes import value_shapes, with_inferred_shapes
from ..layers.activations import activations_with_gradients
from ..layers.batch_norm import decompose_batch_norm
from ..layers.embedding_padding import masked_padding_rows
from ..layers.normalization import (
    instance_norms_written_out,
    layer_norms_of_centered_inputs,
    layer_norms_of_one_value_written_out,
)
from ..layers.padding import explicit_pads, non_constant_pads_as_gathers
from ..layers.pooling import average_pools_as_convolutions
from ..layers.resampling import (
    resizes_as_repeats_and_products,
    transposed_convolutions_as_convolutions,
)
from ..machine.runtime import UntrainableModelError, main_opset
from ..rewrites.gradient_rewrites import rewrite_for_training
from .random_draws import RandomDraws, random_operators_as_inputs

TrainingGraph = namedtuple("TrainingGraph", ["model", "statistics", "draws"])
TrainingGraph.__doc__ = """What :func:`training_graph` returns: ``(model, statistics, draws)``.

The model to build the gradient of, the
:class:`~helpers.core.layers.running_statistics.RunningStatistics` of its batch
normalization layers, and the
:class:`~helpers.core.model_graphs.random_draws.RandomDraws` its random inputs take.

Examples
--------
>>> from helpers.teaching.model_factories import mlp_onnx
>>> graph = training_graph(mlp_onnx(3, hidden=(4,)))
>>> graph._fields, graph.statistics.names, len(graph.draws)
(('model', 'statistics', 'draws'), [], 0)
"""


def with_layer_norm_statistics(model):
    """Return a copy of ``model`` whose ``LayerNormalization`` nodes have all three outputs.

    The added outputs (mean and inverse standard deviation) are what
    onnxruntime's ``LayerNormalizationGrad`` reads; the node computes them
    anyway, so the forward pass is unchanged.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    >>> model = export_for_training(net, torch.zeros(2, 3))
    >>> [len(n.output) for n in model.graph.node if n.op_type == "LayerNormalization"]
    [1]
    >>> [
    ...     len(n.output)
    ...     for n in with_layer_norm_statistics(model).graph.node
    ...     if n.op_type == "LayerNormalization"
    ... ]
    [3]
    """
    incomplete = [
        n
        for n in model.graph.node
        if is_onnx_op(n, "LayerNormalization") and not (len(n.output) == 3 and all(n.output))
    ]
    if not incomplete:
        return model
    copy = copy_with_nodes(model, model.graph.node)
    for index, node in enumerate(copy.graph.node):
        if not is_onnx_op(node, "LayerNormalization"):
            continue
        tag = f"{TRAINING_PREFIX}layer_norm__{index}__{node.name or node.output[0]}"
        outputs = list(node.output) + [""] * (3 - len(node.output))
        outputs[1] = outputs[1] or f"{tag}__mean"
        outputs[2] = outputs[2] or f"{tag}__inv_std_dev"
        del node.output[:]
        node.output.extend(outputs)
    return copy


def _conv_groups(node):
    return node_attribute(node, "group", 1)


def _on_axis(op_type, data, output, axis, opset, tag):
    """``Unsqueeze`` or ``Squeeze`` of ``data`` on ``axis``, in the form of ``opset`` (axes an input
    from 13)."""
    if opset < 13:
        return [helper.make_node(op_type, [data], [output], name=tag, axes=[axis])]
    return [
        constant_node(f"{tag}__axes", [axis], TensorProto.INT64),
        helper.make_node(op_type, [data, f"{tag}__axes"], [output], name=tag),
    ]


def _conv_in_two_dimensions(node, opset, index):
    """The grouped 1-D convolution ``node`` as a 2-D one over inputs of height one."""
    tag = f"{TRAINING_PREFIX}conv1d__{index}__{node.name or node.output[0]}"
    x, w = node.input[0], node.input[1]
    attributes = {"group": _conv_groups(node)}
    kernel = node_attribute(node, "kernel_shape", None)
    if kernel:
        attributes["kernel_shape"] = [1, *kernel]
    for name in ("strides", "dilations"):
        value = node_attribute(node, name, None)
        if value:
            attributes[name] = [1, *value]
    pads = node_attribute(node, "pads", None)
    if pads:
        attributes["pads"] = [0, pads[0], 0, pads[1]]
    inputs = [f"{tag}__x", f"{tag}__w", *node.input[2:]]
    return [
        *_on_axis("Unsqueeze", x, f"{tag}__x", 2, opset, f"{tag}__unsqueeze_x"),
        *_on_axis("Unsqueeze", w, f"{tag}__w", 2, opset, f"{tag}__unsqueeze_w"),
        helper.make_node("Conv", inputs, [f"{tag}__y"], name=f"{tag}__conv", **attributes),
        *_on_axis("Squeeze", f"{tag}__y", node.output[0], 2, opset, f"{tag}__squeeze"),
    ]


def grouped_convolutions_in_two_dimensions(model):
    """Return a copy of ``model`` whose grouped 1-D ``Conv`` nodes are 2-D convolutions over a
    height of one.

    The same products and sums, so the same values and gradients; the
    gradient kernel of a 2-D grouped convolution is right where the 1-D one
    of onnxruntime 1.19.2 is not (see the module's documentation).

    Raises
    ------
    UntrainableModelError
        For a grouped 3-D convolution that needs a gradient.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Conv1d(4, 4, 3, groups=4)
    >>> model = grouped_convolutions_in_two_dimensions(
    ...     export_for_training(net, torch.zeros(1, 4, 8))
    ... )
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Unsqueeze', 'Unsqueeze', 'Conv', 'Squeeze']
    """
    grouped = [n for n in model.graph.node if is_onnx_op(n, "Conv") and _conv_groups(n) > 1]
    if not grouped:
        return model
    shapes, trained, opset = value_shapes(model), depends_on_weights(model), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        shape = shapes.get(node.input[1]) if node.op_type == "Conv" else None
        rank = len(shape) - 2 if shape is not None else None
        if node not in grouped or not (set(node.input[:2]) & trained) or rank == 2:
            nodes.append(node)
        elif rank == 1:
            nodes.extend(_conv_in_two_dimensions(node, opset, index))
        else:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} computes wrong gradients for the grouped "
                f"convolution {node.name!r} (group={_conv_groups(node)}, kernel of rank {rank}): "
                "its CPU kernel handles groups for 2-D kernels only. Use group=1, or a 2-D "
                "convolution."
            )
    return copy_with_nodes(model, nodes)


def training_graph(model, batch_inputs=(), fast_gradients=True, random_draws=False):
    """Return the graph to build the gradient of, and its running statistics.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.
    batch_inputs : sequence of str
        Inputs holding one row per sample (see
        :func:`helpers.core.rewrites.gradient_rewrites.rewrite_for_training`).
    fast_gradients : bool
        Also apply the speed rewrites of :mod:`helpers.core.rewrites.gradient_rewrites`.
        The other rewrites are always applied: without them onnxruntime
        cannot train these layers.
    random_draws : bool
        Make the random operators take their values as inputs
        (:func:`~helpers.core.model_graphs.random_draws.random_operators_as_inputs`), drawn by
        the caller; False leaves them to onnxruntime's own generator.

    Returns
    -------
    TrainingGraph
        ``(model, statistics, draws)``: the rewritten copy, the
        :class:`~helpers.core.layers.running_statistics.RunningStatistics` of its batch
        normalization layers, whose batch values the graph computes, and its random inputs.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
    ...                           torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    >>> graph = training_graph(export_for_training(net, torch.zeros(2, 3)))
    >>> sorted(
    ...     {n.op_type for n in graph.model.graph.node}
    ...     & {"BatchNormalization", "Relu", "LayerNormalization"}
    ... )
    ['LayerNormalization']
    >>> graph.statistics.output_names[0].endswith("__batch_mean")
    True
    """
    if random_draws:
        model, draws = random_operators_as_inputs(model)
    else:
        draws = RandomDraws([], model)
    model = layer_norms_of_centered_inputs(layer_norms_of_one_value_written_out(model))
    model = instance_norms_written_out(model)
    model = masked_padding_rows(with_layer_norm_statistics(model))
    model = activations_with_gradients(model, TRAINING_PREFIX, fast=fast_gradients)
    model = explicit_pads(model)
    model = non_constant_pads_as_gathers(model)
    model = transposed_convolutions_as_convolutions(model)
    model = resizes_as_repeats_and_products(model)
    model = average_pools_as_convolutions(model)
    model = grouped_convolutions_in_two_dimensions(model)
    model, statistics = decompose_batch_norm(model)
    if fast_gradients:
        model = rewrite_for_training(model, batch_inputs)
    return TrainingGraph(with_inferred_shapes(model), statistics, draws)
