"""Padding of convolutions and poolings, written so that onnxruntime trains it as torch does.

onnxruntime-training 1.19.2 computes the forward pass of these layers right,
with one exception below, but not always their gradient:

* ``auto_pad`` (torch's ``padding='same'`` and ``'valid'``): the gradient of
  ``Conv`` (``ConvGrad``) with ``auto_pad=SAME_UPPER`` is wrong (a weight
  gradient off by as much as its norm), and a dilated ``Conv`` with
  ``auto_pad=SAME_UPPER`` does not run at all (``Dilation not supported for
  AutoPadType::SAME_UPPER``). The same padding is written as explicit
  ``pads``, computed from the input's spatial size as ONNX defines
  ``auto_pad`` (:func:`explicit_pads`): by the export, for inference and
  training, and by the training graph, for models from elsewhere.
* ``Pad`` in ``reflect``, ``edge`` (torch's ``replicate``) or ``wrap`` mode
  (``padding_mode='reflect'`` or ``'replicate'`` of a convolution): its
  gradient exists for constant mode only (``Pad gradient currently supports
  constant mode only``). The training graph picks the padded tensor's
  elements with a ``Gather`` of constant indices along each padded axis
  (:func:`non_constant_pads_as_gathers`). torch's ``'circular'`` is
  exported as ``Slice`` and ``Concat`` (``wrap`` from opset 19), which train.

The poolings are in :mod:`helpers.core.layers.pooling`.
"""

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import (
    TRAINING_PREFIX,
    constant_node,
    copy_with_nodes,
    depends_on_weights,
    is_onnx_op,
)
from ..graphs.graph_values import shapes_with_a_run
from ..machine.runtime import UntrainableModelError, main_opset

#: The operators with ``auto_pad`` whose gradient onnxruntime has.
_AUTO_PADDED = ("Conv", "MaxPool", "AveragePool", "LpPool")

_FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)

#: numpy's name of each non-constant mode of ``Pad``, and torch's.
_PAD_MODES = {
    "reflect": ("reflect", "reflect"),
    "edge": ("edge", "replicate"),
    "wrap": ("wrap", "circular"),
}


def training_tag(kind, index, node):
    """The prefix of the names a training-graph rewrite of the ``index``-th node ``node`` adds.

    Examples
    --------
    >>> training_tag("pad", 3, helper.make_node("Pad", ["x", "p"], ["y"], name="/Pad"))
    'training__pad__3__/Pad'
    """

    return f"{TRAINING_PREFIX}{kind}__{index}__{node.name or node.output[0]}"


def needing_gradient(model):
    """The values of ``model`` that need a gradient, and those that may.

    Returns
    -------
    weights : set of str
        The values computed from a float initializer (a weight).
    any_input : set of str
        These and the values computed from a float input of the graph,
        whose gradient :class:`helpers.OrtTorchModule` computes when a
        tensor it is given requires one.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> weights, any_input = needing_gradient(mlp_onnx(3, hidden=(4,)))
    >>> "X" in weights, "X" in any_input, "hidden0" in weights
    (False, True, True)
    """

    weights = depends_on_weights(model)
    inputs = {i.name for i in model.graph.input if i.type.tensor_type.elem_type in _FLOATS}
    reached = weights | inputs
    for node in model.graph.node:
        if reached.intersection(node.input):
            reached.update(node.output)
    return weights, reached


def spatial_sizes(shapes, name):
    """The spatial sizes of ``name`` (its dimensions after batch and channels), None where unknown.

    Examples
    --------
    >>> shapes = {"x": [None, 3, 6, None], "y": [None, 4]}
    >>> spatial_sizes(shapes, "x"), spatial_sizes(shapes, "y")
    ([6, None], None)
    """
    shape = shapes.get(name)
    return None if shape is None or len(shape) < 3 else shape[2:]


def window_attributes(node, rank, kernel=None):
    """``(kernel, strides, dilations, pads)`` of a convolution or pooling ``node`` of ``rank`` axes.

    ``kernel`` is the kernel's shape when the node does not say it (a
    ``Conv`` reads it from its weights); the others default as in ONNX.

    Examples
    --------
    >>> pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2])
    >>> window_attributes(pool, 1)
    ([3], [2], [1], [0, 0])
    """
    kernel = list(node_attribute(node, "kernel_shape", None) or kernel)
    strides = list(node_attribute(node, "strides", None) or [1] * rank)
    dilations = list(node_attribute(node, "dilations", None) or [1] * rank)
    pads = list(node_attribute(node, "pads", None) or [0] * (2 * rank))
    return kernel, strides, dilations, pads


def with_attributes(node, **attributes):
    """A copy of ``node`` with ``attributes`` set (None removes one).

    Examples
    --------
    >>> node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER")
    >>> [a.name for a in with_attributes(node, auto_pad=None, pads=[1, 1]).attribute]
    ['pads']
    """
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    kept = [a for a in copy.attribute if a.name not in attributes]
    del copy.attribute[:]
    copy.attribute.extend(kept)
    copy.attribute.extend(
        helper.make_attribute(k, v) for k, v in attributes.items() if v is not None
    )
    return copy


def auto_pads(auto_pad, sizes, kernel, strides, dilations):
    """The explicit ``pads`` (begins, then ends) of ``auto_pad``; None if they need an unknown size.

    As ONNX defines them: ``SAME_UPPER`` and ``SAME_LOWER`` pad so that the
    output has ``ceil(size / stride)`` elements, the odd element at the end
    or at the beginning; ``VALID`` does not pad.

    Examples
    --------
    >>> auto_pads("SAME_UPPER", [None], kernel=[4], strides=[1], dilations=[2])  # any size
    [3, 3]
    >>> auto_pads("SAME_LOWER", [7], kernel=[2], strides=[2], dilations=[1])
    [1, 0]
    >>> auto_pads("SAME_UPPER", [None], kernel=[2], strides=[2], dilations=[1]) is None
    True
    """
    rank = len(kernel)
    if auto_pad == "VALID":
        return [0] * (2 * rank)
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        extent = d * (k - 1) + 1
        if s == 1:
            total = extent - 1
        elif size is None:
            return None
        else:
            total = max(0, (-(-size // s) - 1) * s + extent - size)
        begin = total - total // 2 if auto_pad == "SAME_LOWER" else total // 2
        begins.append(begin)
        ends.append(total - begin)
    return begins + ends


def explicit_pads(model):
    """Return a copy of ``model`` whose convolutions and poolings have ``pads``, not ``auto_pad``.

    The same padding (see :func:`auto_pads`), so the same values; the
    gradient of ``Conv`` is right with explicit pads, wrong with
    ``auto_pad=SAME_UPPER`` in onnxruntime 1.19.2.

    Raises
    ------
    UntrainableModelError
        For a node that needs a gradient whose padding depends on a spatial
        size shape inference cannot tell.

    Examples
    --------
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> pool = helper.make_node("MaxPool", ["x"], ["y"], auto_pad="SAME_UPPER", kernel_shape=[3],
    ...                         strides=[2])
    >>> model = explicit_pads(helper.make_model(helper.make_graph([pool], "g", [x], [y])))
    >>> node_attribute(model.graph.node[0], "auto_pad"), node_attribute(model.graph.node[0], "pads")
    (None, [0, 1])
    """
    padded = [
        n
        for n in model.graph.node
        if is_onnx_op(n, *_AUTO_PADDED) and node_attribute(n, "auto_pad", "NOTSET") != "NOTSET"
    ]
    if not padded:
        return model
    shapes = shapes_with_a_run(model, [n.input[0] for n in padded])
    trained, _ = needing_gradient(model)
    nodes = []
    for node in model.graph.node:
        if node not in padded:
            nodes.append(node)
            continue
        auto_pad = node_attribute(node, "auto_pad")
        weights = shapes.get(node.input[1]) if node.op_type == "Conv" else None
        sizes = spatial_sizes(shapes, node.input[0])
        rank = len(weights) - 2 if weights else len(sizes) if sizes else None
        pads = None
        if rank is not None and (weights or node_attribute(node, "kernel_shape", None)):
            kernel, strides, dilations, _ = window_attributes(
                node, rank, weights[2:] if weights else None
            )
            pads = auto_pads(auto_pad, sizes or [None] * rank, kernel, strides, dilations)
        if pads is not None:
            nodes.append(with_attributes(node, auto_pad=None, pads=pads))
        elif set(node.input) & trained:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} computes wrong gradients for "
                f"{node.op_type} {node.name!r} with auto_pad={auto_pad} (torch: padding='same'), "
                "and its padding depends on a spatial size shape inference cannot tell. Give the "
                "model's input a fixed spatial size, or pad explicitly (torch: "
                "padding=(kernel_size - 1) // 2 with an odd kernel)."
            )
        else:
            nodes.append(node)
    return copy_with_nodes(model, nodes)


def static_value(model, name):
    """The value of ``name`` if it depends on constants only (``Pad``'s pads), else None.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Conv1d(1, 1, 3, padding=2, padding_mode="reflect")
    >>> model = export_for_training(net, torch.zeros(1, 1, 8))
    >>> pad = [n for n in model.graph.node if n.op_type == "Pad"][0]
    >>> static_value(model, pad.input[1]).tolist(), static_value(model, pad.input[0])
    ([0, 0, 2, 0, 0, 2], None)
    """
    initializers = {i.name: i for i in model.graph.initializer}
    if name in initializers:
        return onnx.numpy_helper.to_array(initializers[name])
    producers = {output: node for node in model.graph.node for output in node.output}
    needed, used, pending = [], set(), [name]
    while pending:
        value = pending.pop()
        if value in used or value == "" or value in initializers:
            continue
        if value not in producers:
            return None  # a graph input
        used.add(value)
        needed.append(producers[value])
        pending.extend(producers[value].input)
    nodes = [n for n in model.graph.node if n in needed]
    graph = helper.make_graph(
        nodes,
        "static",
        [],
        [helper.make_empty_tensor_value_info(name)],
        [initializers[i] for n in nodes for i in n.input if i in initializers],
    )
    try:
        evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=model.opset_import))
        return np.asarray(evaluator.run(None, {})[0])
    except Exception:  # noqa: BLE001 - what the reference evaluator cannot compute is not static
        return None


def _gather_indices(mode, size, before, after):
    """The indices along an axis of ``size`` elements that ``Pad`` in ``mode`` reads."""
    indices = np.pad(np.arange(size), (max(before, 0), max(after, 0)), mode=_PAD_MODES[mode][0])
    return indices[max(-before, 0) : len(indices) - max(-after, 0)]


def _padded_axes(model, node, rank):
    """``(axis, before, after)`` of each axis ``Pad`` ``node`` pads; None if not constant."""
    if main_opset(model) < 11:
        widths = node_attribute(node, "pads", None)
    else:
        widths = static_value(model, node.input[1])
    has_axes = len(node.input) > 3 and node.input[3]
    axes = static_value(model, node.input[3]) if has_axes else range(rank)
    if widths is None or axes is None:
        return None
    axes = [int(a) % rank for a in axes]
    widths = [int(w) for w in widths]
    return [(a, b, e) for a, b, e in zip(axes, widths[: len(axes)], widths[len(axes) :]) if b or e]


def _pad_as_gathers(node, padded, shape, index):
    """``Pad`` ``node`` as one ``Gather`` per axis of ``padded`` (:func:`_padded_axes`)."""
    mode, tag = node_attribute(node, "mode"), training_tag("pad", index, node)
    if not padded:
        return [helper.make_node("Identity", node.input[:1], node.output[:1], name=tag)]
    nodes, data = [], node.input[0]
    for number, (axis, before, after) in enumerate(padded):
        indices = f"{tag}__indices{axis}"
        output = node.output[0] if number == len(padded) - 1 else f"{tag}__axis{axis}"
        nodes += [
            constant_node(
                indices, _gather_indices(mode, shape[axis], before, after), TensorProto.INT64
            ),
            helper.make_node("Gather", [data, indices], [output], name=output, axis=axis),
        ]
        data = output
    return nodes


def non_constant_pads_as_gathers(model):
    """Return a copy of ``model`` whose ``Pad`` nodes in reflect, edge or wrap mode are ``Gather``.

    Padding by reflection, by repeating the edge, or circularly picks
    elements of the input along each padded axis: a ``Gather`` of constant
    indices picks the same ones, and its gradient adds the output's
    gradient back into each picked element, as torch's does. onnxruntime
    1.19.2 has a gradient for constant ``Pad`` only. Every such ``Pad``
    whose input may need a gradient (see :func:`needing_gradient`) is
    rewritten, where its pads and the sizes of the padded axes are known.

    Raises
    ------
    UntrainableModelError
        For such a ``Pad`` that needs a gradient and whose pads, or the size
        of a padded axis, are not known before the model runs.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(
    ...     torch.nn.Conv1d(1, 2, 1), torch.nn.Conv1d(2, 2, 3, padding=1, padding_mode="reflect"))
    >>> model = non_constant_pads_as_gathers(export_for_training(net, torch.zeros(1, 1, 8)))
    >>> [n.op_type for n in model.graph.node if n.op_type in ("Pad", "Gather")][-1]
    'Gather'
    """
    modes = [
        node_attribute(n, "mode", "constant") if is_onnx_op(n, "Pad") else "constant"
        for n in model.graph.node
    ]
    if not set(modes) - {"constant"}:
        return model
    pads = [n for n, mode in zip(model.graph.node, modes) if mode != "constant"]
    (trained, reached) = needing_gradient(model)
    shapes = shapes_with_a_run(model, [n.input[0] for n in pads])
    nodes = []
    for index, (node, mode) in enumerate(zip(model.graph.node, modes)):
        if mode == "constant" or node.input[0] not in reached:
            nodes.append(node)
            continue
        shape = shapes.get(node.input[0])
        padded = _padded_axes(model, node, len(shape)) if shape is not None else None
        if padded is not None and all(shape[axis] is not None for axis, _, _ in padded):
            nodes.extend(_pad_as_gathers(node, padded, shape, index))
        elif node.input[0] not in trained:  # only an input's gradient needs it: left to the runtime
            nodes.append(node)
        else:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} has no gradient for Pad {node.name!r} in "
                f"mode {mode!r} (torch: padding_mode={_PAD_MODES.get(mode, (mode, mode))[1]!r}), "
                "and its pads or the size of a padded axis are not known before the model runs, "
                "so it cannot be written as a Gather. Give the model's input a fixed spatial size, "
                "or use padding_mode='zeros'."
            )
    return copy_with_nodes(model, nodes)
