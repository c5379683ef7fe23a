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
* ``AveragePool``: the CPU kernel of its gradient takes the input's shape
  from the graph, where the batch dimension is free, and the process dies
  of a floating point exception. The pooling becomes the same average as a
  depthwise ``Conv`` with constant weights ``1 / kernel size``
  (:func:`average_pools_as_convolutions`).
* Grouped 1-D ``Conv`` (depthwise convolutions over sequences, and the
  pooling above on sequences): the CPU kernel of its gradient returns wrong
  input and weight gradients when ``group > 1`` and the kernel is not 2-D
  (it clears and writes the input gradient of every channel for each
  group). Such a convolution becomes the same 2-D convolution over a
  height of one (:func:`grouped_convolutions_in_two_dimensions`); a grouped
  3-D convolution has no such way out and is refused.
* ``BatchNormalization``: see :mod:`helpers.core.batch_norm`.
* ``ConvTranspose`` and ``Resize``, which have no gradient: see :mod:`helpers.core.resampling`.
* The speed rewrites of :mod:`helpers.core.gradient_rewrites` (``Relu`` as a
  mask, a named batch dimension), when ``fast_gradients`` is on.
"""
from collections import namedtuple

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from .batch_norm import decompose_batch_norm
from .gradient_rewrites import rewrite_for_training
from .graph_nodes import constant_node, copy_with_nodes, is_onnx_op, node_attribute
from .graph_shapes import value_shapes
from .runtime import UntrainableModelError, main_opset

#: Prefix of the names of the nodes and values these rewrites add.
TRAINING_PREFIX = "training__"

TrainingGraph = namedtuple("TrainingGraph", ["model", "statistics"])
TrainingGraph.__doc__ = """What :func:`training_graph` returns: ``(model, statistics)``.

The model to build the gradient of, and the
:class:`~helpers.core.batch_norm.RunningStatistics` of its batch
normalization layers.

Examples
--------
>>> from helpers.teaching.model_factories import mlp_onnx
>>> graph = training_graph(mlp_onnx(3, hidden=(4,)))
>>> graph._fields, graph.statistics.names
(('model', 'statistics'), [])
"""


def with_layer_norm_statistics(model):
    """Return a copy of ``model`` whose ``LayerNormalization`` nodes have all three outputs.

    The added outputs (mean and inverse standard deviation) are what
    onnxruntime's ``LayerNormalizationGrad`` reads; the node computes them
    anyway, so the forward pass is unchanged.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    >>> model = export_for_training(net, torch.zeros(2, 3))
    >>> [len(n.output) for n in model.graph.node if n.op_type == "LayerNormalization"]
    [1]
    >>> [len(n.output) for n in with_layer_norm_statistics(model).graph.node if n.op_type == "LayerNormalization"]
    [3]
    """
    incomplete = [
        n for n in model.graph.node
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


def _depends_on_weights(model):
    """The values of the graph computed from a float initializer (which may need a gradient)."""
    reached = {i.name for i in model.graph.initializer if i.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)}
    for node in model.graph.node:
        if any(name in reached for name in node.input):
            reached.update(node.output)
    return reached


def _pool_as_convolution(node, channels, index):
    """``AveragePool`` ``node`` as a depthwise ``Conv`` with constant weights (no padding to exclude)."""
    kernel = list(node_attribute(node, "kernel_shape", []))
    tag = f"{TRAINING_PREFIX}average_pool__{index}__{node.name or node.output[0]}"
    weights = np.full([channels, 1, *kernel], 1.0 / float(np.prod(kernel)), dtype=np.float32)
    attributes = {"group": channels, "kernel_shape": kernel}
    for name in ("strides", "pads", "dilations"):
        value = node_attribute(node, name, None)
        if value:
            attributes[name] = list(value)
    auto_pad = node_attribute(node, "auto_pad", b"NOTSET")
    if auto_pad not in (b"NOTSET", "NOTSET"):
        attributes["auto_pad"] = auto_pad
    return [
        constant_node(f"{tag}__weights", weights),
        helper.make_node("Conv", [node.input[0], f"{tag}__weights"], [node.output[0]], name=f"{tag}__conv", **attributes),
    ]


def _pool_problem(node, channels):
    """Why ``node`` cannot be written as a depthwise convolution, or None."""
    auto_pad = node_attribute(node, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    padded = any(node_attribute(node, "pads", [])) or auto_pad.startswith("SAME")
    if node_attribute(node, "ceil_mode", 0):
        return "ceil_mode=1 (torch: ceil_mode=True)"
    if padded and not node_attribute(node, "count_include_pad", 0):
        return "padding excluded from the average (torch: count_include_pad=False)"
    if channels is None:
        return "an input whose number of channels shape inference cannot tell"
    return None


def average_pools_as_convolutions(model):
    """Return a copy of ``model`` whose ``AveragePool`` nodes are depthwise convolutions.

    An average over a window is a convolution of each channel with a
    kernel of ``1 / kernel size``: the same values (to float rounding) and
    gradient, and the gradient of ``Conv`` works with a free batch size,
    unlike the CPU kernel of ``AveragePoolGrad`` in onnxruntime 1.19.2
    (see the module's documentation).

    Raises
    ------
    UntrainableModelError
        For an ``AveragePool`` that needs a gradient and that a convolution
        cannot reproduce (``ceil_mode``, padding left out of the average).

    Examples
    --------
    >>> import torch
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.AvgPool2d(2))
    >>> model = average_pools_as_convolutions(export_for_training(net, torch.zeros(1, 1, 6, 6)))
    >>> [n.op_type for n in model.graph.node]
    ['Conv', 'Constant', 'Conv']
    """
    if not any(is_onnx_op(n, "AveragePool") for n in model.graph.node):
        return model
    shapes, trained = value_shapes(model), _depends_on_weights(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "AveragePool") or node.input[0] not in trained:
            nodes.append(node)
            continue
        shape = shapes.get(node.input[0])
        channels = shape[1] if shape is not None and len(shape) > 2 else None
        problem = _pool_problem(node, channels)
        if problem is not None:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} cannot train AveragePool {node.name!r} with {problem}: the "
                "CPU kernel of its gradient crashes the process with a free batch size, and this pooling has no "
                "exact rewrite as a convolution. Use count_include_pad=True and ceil_mode=False, or a "
                "convolution with stride."
            )
        nodes.extend(_pool_as_convolution(node, channels, index))
    return copy_with_nodes(model, nodes)


def _conv_groups(node):
    return node_attribute(node, "group", 1)


def _on_axis(op_type, data, output, axis, opset, tag):
    """``Unsqueeze`` or ``Squeeze`` of ``data`` on ``axis``, in the form of ``opset`` (axes an input from 13)."""
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
    auto_pad = node_attribute(node, "auto_pad", b"NOTSET")
    if auto_pad not in (b"NOTSET", "NOTSET"):
        attributes["auto_pad"] = auto_pad
    inputs = [f"{tag}__x", f"{tag}__w", *node.input[2:]]
    return [
        *_on_axis("Unsqueeze", x, f"{tag}__x", 2, opset, f"{tag}__unsqueeze_x"),
        *_on_axis("Unsqueeze", w, f"{tag}__w", 2, opset, f"{tag}__unsqueeze_w"),
        helper.make_node("Conv", inputs, [f"{tag}__y"], name=f"{tag}__conv", **attributes),
        *_on_axis("Squeeze", f"{tag}__y", node.output[0], 2, opset, f"{tag}__squeeze"),
    ]


def grouped_convolutions_in_two_dimensions(model):
    """Return a copy of ``model`` whose grouped 1-D ``Conv`` nodes are 2-D convolutions over a height of one.

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
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.Conv1d(4, 4, 3, groups=4)
    >>> model = grouped_convolutions_in_two_dimensions(export_for_training(net, torch.zeros(1, 4, 8)))
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Unsqueeze', 'Unsqueeze', 'Conv', 'Squeeze']
    """
    grouped = [n for n in model.graph.node if is_onnx_op(n, "Conv") and _conv_groups(n) > 1]
    if not grouped:
        return model
    shapes, trained, opset = value_shapes(model), _depends_on_weights(model), main_opset(model)
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
                f"onnxruntime {onnxruntime.__version__} computes wrong gradients for the grouped convolution "
                f"{node.name!r} (group={_conv_groups(node)}, kernel of rank {rank}): its CPU kernel handles "
                "groups for 2-D kernels only. Use group=1, or a 2-D convolution."
            )
    return copy_with_nodes(model, nodes)


def training_graph(model, batch_inputs=(), fast_gradients=True):
    """Return the graph to build the gradient of, and its running statistics.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.
    batch_inputs : sequence of str
        Inputs holding one row per sample (see
        :func:`helpers.core.gradient_rewrites.rewrite_for_training`).
    fast_gradients : bool
        Also apply the speed rewrites of :mod:`helpers.core.gradient_rewrites`.
        The other rewrites are always applied: without them onnxruntime
        cannot train these layers.

    Returns
    -------
    TrainingGraph
        ``(model, statistics)``: the rewritten copy, and the
        :class:`~helpers.core.batch_norm.RunningStatistics` of its batch
        normalization layers, whose batch values the graph computes.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
    ...                           torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    >>> graph = training_graph(export_for_training(net, torch.zeros(2, 3)))
    >>> sorted({n.op_type for n in graph.model.graph.node} & {"BatchNormalization", "Relu", "LayerNormalization"})
    ['LayerNormalization']
    >>> graph.statistics.output_names[0].endswith("__batch_mean")
    True
    """
    model = with_layer_norm_statistics(model)
    from . import resampling  # noqa: PLC0415 (it imports names of this module)
    model = resampling.transposed_convolutions_as_convolutions(model)
    model = resampling.resizes_as_repeats_and_products(model)
    model = average_pools_as_convolutions(model)
    model = grouped_convolutions_in_two_dimensions(model)
    model, statistics = decompose_batch_norm(model)
    if fast_gradients:
        model = rewrite_for_training(model, batch_inputs)
    return TrainingGraph(model, statistics)
