"""Poolings that onnxruntime computes and trains as torch does.

onnxruntime-training 1.19.2 computes some poolings otherwise than torch, and
cannot train ``AveragePool``:

* ``ceil_mode=1`` of ``MaxPool`` and ``AveragePool``: torch drops a last
  window that would start in the right padding, onnxruntime does not
  (``MaxPool2d(1, stride=2, ceil_mode=True)`` on 6 x 8 gives 4 x 5 where
  torch gives 3 x 4, and the next layer fails with ``GEMM: Dimension
  mismatch``), and its average over a window that runs past the padding
  divides by the whole window. The export writes torch's windows
  (:func:`pools_as_torch_computes_them`), for inference and training.
* ``AveragePool``: the CPU kernel of its gradient takes the input's shape
  from the graph, where the batch dimension is free, and the process dies
  of a floating point exception. The training graph writes the same
  average as a depthwise ``Conv`` (:func:`average_pools_as_convolutions`).
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import constant_node, copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_types
from ..graphs.graph_values import shapes_with_a_run
from ..machine.runtime import UntrainableModelError
from .padding import (
    explicit_pads,
    needing_gradient,
    spatial_sizes,
    training_tag,
    window_attributes,
    with_attributes,
)


def _window_counts(sizes, kernel, strides, dilations, pads):
    """Per spatial axis, a pooling's number of windows: ``(floor, ceil, torch's ceil)``.

    torch drops the last window of ``ceil_mode`` when it starts in the right
    padding; onnxruntime 1.19.2 does not.
    """
    rank = len(kernel)
    counts = []
    for axis, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        span = size + pads[axis] + pads[axis + rank] - (d * (k - 1) + 1)
        floor, ceil = span // s + 1, -(-span // s) + 1
        counts.append((floor, ceil, ceil - 1 if (ceil - 1) * s >= size + pads[axis] else ceil))
    return counts


def _ceil_matters(node, sizes):
    """Whether ``ceil_mode`` of pooling ``node`` changes its output on ``sizes`` (None: unknown)."""
    if not node_attribute(node, "ceil_mode", 0):
        return False
    if sizes is None or None in sizes:
        return None
    counts = _window_counts(sizes, *window_attributes(node, len(sizes)))
    return any(floor != ceil for floor, ceil, _ in counts)


def _max_pool_with_end_pads(node, starts, ends, kernel, elem_type):
    """``MaxPool`` ``node`` with ``ceil_mode=0``, the begin pads ``starts`` and the end pads
    ``ends``.

    onnxruntime refuses pads as large as the kernel (``Pad should be smaller
    than kernel``), which torch's windows can need (``MaxPool2d(2, stride=3,
    padding=1, dilation=2, ceil_mode=True)`` on 8 x 9). The part of such an
    end pad past ``kernel - 1`` becomes a ``Pad`` by the lowest value of the
    type before the pooling: every window of torch holds an element of the
    input, so the maximum, and the element its gradient goes to, are the same.
    """
    kept = [min(end, k - 1) for end, k in zip(ends, kernel)]
    pool = with_attributes(node, ceil_mode=None, pads=list(starts) + kept)
    if kept == list(ends):
        return [pool]
    tag = f"{node.name or node.output[0]}__torch_end_pads"
    rank = len(kernel)
    extra = [0] * (2 + rank) + [0, 0] + [end - k for end, k in zip(ends, kept)]
    dtype = helper.tensor_dtype_to_np_dtype(elem_type or TensorProto.FLOAT)
    lowest = -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
    pool.input[0] = f"{tag}__padded"
    return [
        constant_node(f"{tag}__pads", extra, TensorProto.INT64),
        constant_node(f"{tag}__lowest", lowest, elem_type or TensorProto.FLOAT),
        helper.make_node(
            "Pad",
            [node.input[0], f"{tag}__pads", f"{tag}__lowest"],
            [pool.input[0]],
            name=f"{tag}__pad",
            mode="constant",
        ),
        pool,
    ]


def _torch_pool(node, sizes, elem_type):
    """The pooling ``node`` (``ceil_mode=1``) as torch computes it, with ``ceil_mode=0``.

    The end pads are those that give torch's number of windows, which never
    start in the right padding, and an average leaves them out
    (``count_include_pad=0``). Where torch counts the padding
    (``count_include_pad=True``) but not the part of the last window past
    it, the average is then multiplied by a constant map: the number of
    elements of each window inside the input over the number inside the
    padded input. (A zero ``Pad`` before the pooling would say it more
    simply, but onnxruntime 1.19.2 fuses such a ``Pad`` into the pads of an
    ``AveragePool`` with ``count_include_pad=0``, which then leaves it out.)
    """
    rank = len(sizes)
    kernel, strides, dilations, pads = window_attributes(node, rank)
    counts = _window_counts(sizes, kernel, strides, dilations, pads)
    ends = [
        max(0, (torch - 1) * s + d * (k - 1) + 1 - n - b)
        for (_, _, torch), n, b, k, s, d in zip(counts, sizes, pads, kernel, strides, dilations)
    ]
    if node.op_type == "MaxPool":
        return _max_pool_with_end_pads(node, pads[:rank], ends, kernel, elem_type)
    pool = with_attributes(node, ceil_mode=None, pads=pads[:rank] + ends, count_include_pad=0)
    if not (node_attribute(node, "count_include_pad", 0) and any(pads)):
        return [pool]
    tag = f"{node.name or node.output[0]}__torch_padding"
    pool.output[0] = f"{tag}__excluded"
    padded = [n + b + e for n, b, e in zip(sizes, pads, pads[rank:])]
    inside = _divisors(sizes, kernel, strides, dilations, pads[:rank] + ends)
    past = [max(0, end - pad) for end, pad in zip(ends, pads[rank:])]  # the pads past torch's
    counted = _divisors(padded, kernel, strides, dilations, [0] * rank + past)
    return [
        pool,
        constant_node(f"{tag}__ratios", inside / counted),
        helper.make_node(
            "Mul", [pool.output[0], f"{tag}__ratios"], node.output[:1], name=f"{tag}__counted"
        ),
    ]


def pools_as_torch_computes_them(model):
    """Return a copy of ``model`` whose ``ceil_mode=1`` poolings give torch's shapes and values.

    onnxruntime 1.19.2 counts every window that starts before the end of
    the padded input (``MaxPool2d(1, stride=2, ceil_mode=True)`` on 6 x 8
    gives 4 x 5 where torch gives 3 x 4), and its average over a window
    that runs past the padding divides by the whole window, where torch
    divides by the part inside the padded input. Where ``ceil_mode``
    changes the output, the pooling becomes ``ceil_mode=0`` with end pads
    that give torch's windows (see :func:`_torch_pool`): a maximum ignores
    the pads, an average leaves them out.

    Raises
    ------
    UntrainableModelError
        For such a pooling on an input whose spatial size is unknown.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.MaxPool2d(1, stride=2, ceil_mode=True)
    >>> pool = export_for_training(net, torch.zeros(1, 1, 6, 8)).graph.node[0]
    >>> node_attribute(pool, "ceil_mode"), node_attribute(pool, "pads")
    (None, [0, 0, 0, 0])
    """
    pools = [
        n
        for n in model.graph.node
        if is_onnx_op(n, "MaxPool", "AveragePool") and node_attribute(n, "ceil_mode", 0)
    ]
    if not pools:
        return model
    shapes = shapes_with_a_run(model, [n.input[0] for n in pools])
    types = value_types(model)
    nodes = []
    for node in model.graph.node:
        sizes = spatial_sizes(shapes, node.input[0]) if node in pools else None
        matters = _ceil_matters(node, sizes) if node in pools else False
        if matters is None:
            raise UntrainableModelError(
                f"{node.op_type} {node.name!r} has ceil_mode=1 on an input whose spatial size the "
                f"model does not fix: onnxruntime {onnxruntime.__version__} may then compute other "
                "windows than torch. Export with a fixed spatial size (dynamic axes on the batch "
                "only), or use ceil_mode=False."
            )
        nodes.extend(_torch_pool(node, sizes, types.get(node.input[0])) if matters else [node])
    return copy_with_nodes(model, nodes)


def _divisors(sizes, kernel, strides, dilations, pads):
    """The number of input elements in each window of a pooling (torch's divisors, no padding)."""
    rank, counts = len(sizes), []
    for axis, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        outputs = (size + pads[axis] + pads[axis + rank] - d * (k - 1) - 1) // s + 1
        starts = np.arange(outputs)[:, None] * s - pads[axis] + d * np.arange(k)[None, :]
        counts.append(((starts >= 0) & (starts < size)).sum(axis=1))
    divisors = counts[0]
    for count in counts[1:]:
        divisors = np.multiply.outer(divisors, count)
    return divisors.astype(np.float64)


def _pool_as_convolution(node, channels, sizes, index):
    """``AveragePool`` ``node`` as a depthwise ``Conv`` summing each window, over its size."""
    rank = len(node_attribute(node, "kernel_shape"))
    kernel, strides, dilations, pads = window_attributes(node, rank)
    tag = training_tag("average_pool", index, node)
    excluded = any(pads) and not node_attribute(node, "count_include_pad", 0)
    weight = 1.0 if excluded else 1.0 / float(np.prod(kernel))
    weights = np.full([channels, 1, *kernel], weight, dtype=np.float32)
    attributes = dict(
        group=channels, kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads
    )
    output = f"{tag}__sum" if excluded else node.output[0]
    nodes = [
        constant_node(f"{tag}__weights", weights),
        helper.make_node(
            "Conv", [node.input[0], f"{tag}__weights"], [output], name=f"{tag}__conv", **attributes
        ),
    ]
    if excluded:
        nodes += [
            constant_node(f"{tag}__divisors", _divisors(sizes, kernel, strides, dilations, pads)),
            helper.make_node(
                "Div", [output, f"{tag}__divisors"], node.output[:1], name=f"{tag}__average"
            ),
        ]
    return nodes


def _pool_problem(node, channels, sizes):
    """Why ``node`` cannot be written as a depthwise convolution, or None."""
    pads = any(node_attribute(node, "pads", []))
    excluded = pads and not node_attribute(node, "count_include_pad", 0)
    ceil = _ceil_matters(node, sizes)
    if ceil is None:
        return "ceil_mode=1 on an input whose spatial size shape inference cannot tell"
    if excluded and None in (sizes or [None]):
        return (
            "padding left out of the average (count_include_pad=0) on an input whose spatial size "
            "shape inference cannot tell"
        )
    if ceil:
        return "ceil_mode=1 whose windows onnxruntime computes otherwise than torch"
    if channels is None:
        return "an input whose number of channels shape inference cannot tell"
    return None


def average_pools_as_convolutions(model):
    """Return a copy of ``model`` whose ``AveragePool`` nodes are depthwise convolutions.

    An average over a window is a convolution of each channel with a
    kernel of ``1 / kernel size``: the same values (to float rounding) and
    gradient, and the gradient of ``Conv`` works with a free batch size,
    unlike the CPU kernel of ``AveragePoolGrad`` in onnxruntime 1.19.2,
    which takes the input's shape from the graph and dies of a floating
    point exception. An average that leaves the padding out
    (``count_include_pad=0``) sums each window with a kernel of ones and
    divides by a constant map of the number of input elements in each
    window (torch's divisors), computed from the input's spatial size.
    Its ``pads`` are explicit (:func:`explicit_pads` comes first). Every
    ``AveragePool`` whose input may need a gradient (see
    :func:`helpers.core.layers.padding.needing_gradient`) is rewritten where it can be.

    Raises
    ------
    UntrainableModelError
        For an ``AveragePool`` that needs a gradient and that a convolution
        cannot reproduce (``ceil_mode`` that onnxruntime computes otherwise
        than torch, or a spatial size needed but unknown).

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.AvgPool2d(2))
    >>> model = average_pools_as_convolutions(export_for_training(net, torch.zeros(1, 1, 6, 6)))
    >>> [n.op_type for n in model.graph.node]
    ['Conv', 'Constant', 'Conv']
    >>> net = torch.nn.Sequential(
    ...     torch.nn.Conv1d(1, 2, 3), torch.nn.AvgPool1d(3, 2, 1, count_include_pad=False))
    >>> model = average_pools_as_convolutions(export_for_training(net, torch.zeros(1, 1, 8)))
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Conv', 'Conv', 'Div']
    """
    if not any(is_onnx_op(n, "AveragePool") for n in model.graph.node):
        return model
    pools = [n.input[0] for n in model.graph.node if is_onnx_op(n, "AveragePool")]
    shapes, (trained, reached) = shapes_with_a_run(model, pools), needing_gradient(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "AveragePool") or node.input[0] not in reached:
            nodes.append(node)
            continue
        shape = shapes.get(node.input[0])
        channels = shape[1] if shape is not None and len(shape) > 2 else None
        sizes = spatial_sizes(shapes, node.input[0])
        problem = _pool_problem(node, channels, sizes)
        if problem is None:
            nodes.extend(_pool_as_convolution(node, channels, sizes, index))
        elif node.input[0] not in trained:  # only an input's gradient needs it: left to the runtime
            nodes.append(node)
        else:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} cannot train AveragePool "
                f"{node.name!r} with {problem}: the CPU kernel of its gradient crashes the "
                "process with a free batch size, and its rewrite as a convolution needs torch's "
                "windows of a fixed spatial size. Export the torch module with helpers' "
                "export_for_training (it writes torch's ceil_mode windows) and a fixed spatial "
                "size, or use count_include_pad=True and ceil_mode=False."
            )
    return copy_with_nodes(model, nodes)


def torch_padding_and_pooling(model):
    """Return a copy of an exported ``model`` whose padding and pooling run as in torch.

    What :func:`helpers.export_for_training` applies to
    every export: explicit pads instead of ``auto_pad``
    (:func:`helpers.core.layers.padding.explicit_pads`: onnxruntime does not run a
    dilated ``Conv`` with ``padding='same'``) and torch's windows for
    ``ceil_mode`` (:func:`pools_as_torch_computes_them`).

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Conv1d(1, 1, 3, padding="same", dilation=2)
    >>> conv = export_for_training(net, torch.zeros(1, 1, 8)).graph.node[0]
    >>> node_attribute(conv, "auto_pad"), node_attribute(conv, "pads")
    (None, [2, 2])
    """
    return pools_as_torch_computes_them(explicit_pads(model))
