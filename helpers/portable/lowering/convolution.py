"""``ConvGrad`` (com.microsoft), the gradient of ``Conv``, written with standard operators.

``ConvGrad(dY, X, W)`` returns ``dX``, ``dW`` and ``dB``, any of them left out. 1.19.2's CPU
kernel (``orttraining/training_ops/cpu/nn/conv_grad.cc``) loops over the images and the groups:
``im2col`` of the image and one product for ``dW``, one product and ``col2im`` for ``dX``, a
matrix-vector product for ``dB``. It reads ``pads`` as given and ignores ``auto_pad``: a node
with ``auto_pad=SAME_UPPER`` and no pads gets the gradient of an unpadded convolution, which is
wrong. The lowering pads as ONNX defines ``auto_pad`` (:func:`~.spatial.window_attributes`), so
there it gives torch's gradient, not the kernel's.

With ``s`` the strides, ``d`` the dilations, ``p`` the begin pads and ``G`` the groups, the
formulations (:data:`INPUT_FORMULATIONS`, :data:`WEIGHT_FORMULATIONS`):

* ``dX``, ``flipped_conv`` (strides of one): ``Conv(dY, W')`` with ``W'`` the kernel flipped in
  space, its two channel axes swapped within each group, padded by ``d * (k - 1) - p``.
* ``dX``, ``conv_transpose``: ``ConvTranspose(dY, W)`` with the same strides, dilations, pads and
  groups. The last ``(size + pads - extent) mod s`` positions of an axis take no part in the
  convolution; ``ConvTranspose`` leaves them out, so it gets ``output_padding = s - 1`` and a
  ``Slice`` to ``X``'s size (zeros there, as the kernel's ``col2im`` leaves them).
* ``dW``, ``windows_matmul`` (one group): ``X`` channels last, padded, one strided ``Slice`` per
  kernel offset (the windows), concatenated to ``(N, positions, offsets x C)``; one ``MatMul``
  per image by ``dY`` as ``(N, M, positions)``, a ``ReduceSum`` over the images, and the
  offsets moved behind the channels: the kernel's own products, in one operator.
* ``dW``, ``pointwise_matmul`` (``1 x 1``, strides one, no pads, one group):
  ``MatMul(dY, X^T)`` over the flattened positions, summed over the images.
* ``dW``, ``swapped_conv`` (any groups): ``dW[m, c, k] = sum over n, o of dY[n, m, o] *
  X[n, g*C/G + c, o*s + k*d - p]`` is a ``Conv`` whose batch is ``X``'s channels within a group
  and whose channels are its images, ``X`` laid out as ``(C/G, G*N, spatial)``, by ``dY`` as
  ``(M, N, spatial)`` (``G`` groups), strides ``d`` and dilations ``s``; its output, at least the
  kernel's size, is sliced to it and transposed to ``W``'s layout.
* ``dB``: ``ReduceSum`` of ``dY`` over every axis but the channels.

The lowering takes the first that applies (:func:`applicable_formulations`), the fastest
measured (``benchmarks/studies/lowering_costs_conv.py``, batch 64, 2 threads, a 16-core Intel
Xeon): against 1.19.2's kernel for the same output, ``flipped_conv`` takes 0.11 to 0.63 of its
time on 1.19.2, ``conv_transpose`` 0.97 to 1.10, ``windows_matmul`` 0.87 to 1.59,
``pointwise_matmul`` 0.73, ``swapped_conv`` 2.1 to 3.8 (9.7 for ``1 x 1``). A depthwise
convolution's ``dW`` has only ``swapped_conv`` here: 4.0 and 2.1 times the kernel (2.3 and 0.8
on 1.31.1). Tried for it and not kept: the windows multiplied by ``dY`` and summed one offset at
a time, 1.5 to 3.8 times the kernel (better than ``swapped_conv`` at strides of one), which
needs one input channel per group, something the node does not say; products of the windows
by ``dY`` per image and channel (``MatMul``, ``Einsum``), 2.5 to 11 times.

The sums are those of the kernel in another order: equal to float32 rounding.
"""

import itertools

import numpy as np
from onnx import helper

from ..node_attributes import node_attribute
from .registry import register
from .spatial import dims_from, reduce, window_attributes

_INT_MAX = np.iinfo(np.int64).max


def _transposed_input_gradient(node, ctx, attrs):
    """``dX`` (``node.output[0]``) as ``ConvTranspose(dY, W)``."""
    _, strides, dilations, pads = attrs
    d_y, _, w = node.input[:3]
    d_x = node.output[0]
    shared = dict(
        strides=strides, dilations=dilations, pads=pads, group=node_attribute(node, "group", 1)
    )
    if all(s == 1 for s in strides):
        return [helper.make_node("ConvTranspose", [d_y, w], [d_x], **shared)]
    full = ctx.name("dX_full")
    nodes, sizes = dims_from(node.input[1], 2, ctx, "x_spatial")
    rank = len(strides)
    starts = ctx.constant(np.zeros(rank, np.int64), "starts")
    axes = ctx.constant(np.arange(2, 2 + rank, dtype=np.int64), "axes")
    return nodes + [
        helper.make_node(
            "ConvTranspose", [d_y, w], [full], output_padding=[s - 1 for s in strides], **shared
        ),
        helper.make_node("Slice", [full, starts, sizes, axes], [d_x]),
    ]


def _flipped_kernel(w, group, rank, ctx):
    """``W`` (M, C/G, kernel) as the kernel of the input gradient: (C, M/G, kernel), each
    group's two channel axes swapped, flipped in space. Returns ``(nodes, name)``."""
    nodes = []
    if group == 1:
        swapped = ctx.name("w_swapped")
        nodes.append(_swap_first_axes(w, rank, swapped))
    else:
        rest_nodes, rest = dims_from(w, 1, ctx, "w_rest")
        by_group, grouped, regrouped, swapped = (
            ctx.name(t) for t in ("w_by_group", "w_grouped", "w_regrouped", "w_swapped")
        )
        inner_nodes, inner = dims_from(regrouped, 2, ctx, "w_inner")
        head = ctx.constant(np.array([group, -1], np.int64), "head")
        merged, target = ctx.constant(np.array([-1], np.int64), "merged"), ctx.name("target")
        nodes += rest_nodes + [
            # (M, C/G, k) -> (G, M/G, C/G, k) -> (G, C/G, M/G, k) -> (C, M/G, k)
            helper.make_node("Concat", [head, rest], [by_group], axis=0),
            helper.make_node("Reshape", [w, by_group], [grouped]),
            helper.make_node(
                "Transpose", [grouped], [regrouped], perm=[0, 2, 1] + list(range(3, rank + 1))
            ),
            *inner_nodes,
            helper.make_node("Concat", [merged, inner], [target], axis=0),
            helper.make_node("Reshape", [regrouped, target], [swapped]),
        ]
    spatial = rank - 2
    flipped = ctx.name("w_flipped")
    nodes.append(
        helper.make_node(
            "Slice",
            [
                swapped,
                ctx.constant(np.full(spatial, -1, np.int64), "last"),
                ctx.constant(np.full(spatial, np.iinfo(np.int64).min, np.int64), "before"),
                ctx.constant(np.arange(2, rank, dtype=np.int64), "axes"),
                ctx.constant(np.full(spatial, -1, np.int64), "backwards"),
            ],
            [flipped],
        )
    )
    return nodes, flipped


def _flipped_input_gradient(node, ctx, attrs):
    """``dX`` of a convolution of strides one as ``Conv(dY, W flipped)``, padded by
    ``dilation * (kernel - 1) - pads``."""
    kernel, strides, dilations, pads = attrs
    d_y, _, w = node.input[:3]
    group = node_attribute(node, "group", 1)
    nodes, flipped = _flipped_kernel(w, group, len(strides) + 2, ctx)
    reach = [d * (k - 1) for k, d in zip(kernel, dilations)]
    return nodes + [
        helper.make_node(
            "Conv",
            [d_y, flipped],
            [node.output[0]],
            dilations=dilations,
            group=group,
            pads=[r - p for r, p in zip(reach * 2, pads)],
        )
    ]


def _swap_first_axes(value, rank, output):
    """A ``Transpose`` of ``value`` (of ``rank`` axes) into ``output``, first two axes swapped."""
    return helper.make_node("Transpose", [value], [output], perm=[1, 0] + list(range(2, rank)))


def _images_as_channels(x, group, rank, ctx):
    """``X`` (N, C, spatial) laid out as (C/G, G*N, spatial); returns ``(nodes, name)``."""
    swapped = ctx.name("x_swapped")
    swap = _swap_first_axes(x, rank, swapped)
    if group == 1:
        return [swap], swapped
    # (C, N, spatial) -> (G, C/G, N, spatial) -> (C/G, G, N, spatial) -> (C/G, G*N, spatial)
    rest_nodes, rest = dims_from(swapped, 1, ctx, "x_rest")
    space_nodes, spatial = dims_from(x, 2, ctx, "x_spatial")
    by_group, grouped, regrouped, name = (
        ctx.name(t) for t in ("by_group", "x_grouped", "x_regrouped", "x_images")
    )
    images = ctx.name("images")
    head = ctx.constant(np.array([group, -1], np.int64), "head")
    keep = ctx.constant(np.array([0, -1], np.int64), "keep")
    return [swap, *rest_nodes, *space_nodes] + [
        helper.make_node("Concat", [head, rest], [by_group], axis=0),
        helper.make_node("Reshape", [swapped, by_group], [grouped]),
        helper.make_node(
            "Transpose", [grouped], [regrouped], perm=[1, 0] + list(range(2, rank + 1))
        ),
        helper.make_node("Concat", [keep, spatial], [images], axis=0),
        helper.make_node("Reshape", [regrouped, images], [name]),
    ], name


def _swapped_weight_gradient(node, ctx, attrs):
    """``dW`` (``node.output[1]``) as a ``Conv`` of the images as channels by ``dY``."""
    _, strides, dilations, pads = attrs
    d_y, x, w = node.input[:3]
    group = node_attribute(node, "group", 1)
    rank = len(strides) + 2
    nodes, x_images = _images_as_channels(x, group, rank, ctx)
    filters, full, sliced = ctx.name("dy_swapped"), ctx.name("dW_full"), ctx.name("dW_swapped")
    kernel_nodes, kernel_sizes = dims_from(w, 2, ctx, "kernel")
    starts = ctx.constant(np.zeros(rank - 2, np.int64), "starts")
    axes = ctx.constant(np.arange(2, rank, dtype=np.int64), "axes")
    return (
        nodes
        + kernel_nodes
        + [
            _swap_first_axes(d_y, rank, filters),
            helper.make_node(
                "Conv",
                [x_images, filters],
                [full],
                strides=dilations,
                dilations=strides,
                pads=pads,
                group=group,
            ),
            helper.make_node("Slice", [full, starts, kernel_sizes, axes], [sliced]),
            _swap_first_axes(sliced, rank, node.output[1]),
        ]
    )


def _pointwise_weight_gradient(node, ctx, attrs):
    """``dW`` of a ``1 x 1`` convolution, strides one, no pads, one group: ``sum_n dY_n X_n^T``."""
    d_y, x, w = node.input[:3]
    d_y2, x2, x2t, products, summed, w_shape = (
        ctx.name(t) for t in ("dy_flat", "x_flat", "x_flat_t", "products", "dW_2d", "w_shape")
    )
    flat = ctx.constant(np.array([0, 0, -1], np.int64), "flat")
    return [
        helper.make_node("Reshape", [d_y, flat], [d_y2]),
        helper.make_node("Reshape", [x, flat], [x2]),
        helper.make_node("Transpose", [x2], [x2t], perm=[0, 2, 1]),
        helper.make_node("MatMul", [d_y2, x2t], [products]),
        *reduce("ReduceSum", products, summed, [0], ctx),
        helper.make_node("Shape", [w], [w_shape]),
        helper.make_node("Reshape", [summed, w_shape], [node.output[1]]),
    ]


def _windows_weight_gradient(node, ctx, attrs):
    """``dW`` of a convolution of one group as one product per image of ``dY`` by the windows
    of ``X`` (channels last, one strided ``Slice`` per kernel offset), summed over the batch."""
    kernel, strides, dilations, pads = attrs
    d_y, x, _ = node.input[:3]
    spatial = len(strides)
    axes = np.arange(1, spatial + 1, dtype=np.int64)
    last, padded = ctx.name("x_last"), ctx.name("x_padded")
    nodes = [helper.make_node("Transpose", [x], [last], perm=[0, *range(2, spatial + 2), 1])]
    if any(pads):
        edges = [0, *pads[:spatial], 0, 0, *pads[spatial:], 0]
        pad_values = ctx.constant(np.array(edges, np.int64), "pads")
        nodes.append(helper.make_node("Pad", [last, pad_values], [padded]))
    else:
        padded = last
    # a window starts at offset * dilation and spans (out - 1) * stride + 1 positions
    out_nodes, out = dims_from(d_y, 2, ctx, "out")
    stride_values = ctx.constant(np.array(strides, np.int64), "strides")
    one = ctx.constant(np.ones(spatial, np.int64), "one")
    span = ctx.name("span")
    out_less, spread = ctx.name("out_less"), ctx.name("spread")
    nodes += out_nodes + [
        helper.make_node("Sub", [out, one], [out_less]),
        helper.make_node("Mul", [out_less, stride_values], [spread]),
        helper.make_node("Add", [spread, one], [span]),
    ]
    axes_name = ctx.constant(axes, "axes")
    windows = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        start = ctx.constant(np.array(offset, np.int64) * np.array(dilations), "start")
        end, window = ctx.name("end"), ctx.name("window")
        nodes += [
            helper.make_node("Add", [start, span], [end]),
            helper.make_node("Slice", [padded, start, end, axes_name, stride_values], [window]),
        ]
        windows.append(window)
    columns, rows, target = ctx.name("columns"), ctx.name("rows"), ctx.name("rows_shape")
    width_nodes, width = dims_from(columns, spatial + 1, ctx, "width")
    d_y3, products, summed, by_offset = (
        ctx.name(t) for t in ("dy_rows", "products", "dW_rows", "dW_by_offset")
    )
    return nodes + [
        helper.make_node("Concat", windows, [columns], axis=-1),
        *width_nodes,
        helper.make_node(
            "Concat", [ctx.constant(np.array([0, -1], np.int64), "head"), width], [target], axis=0
        ),
        helper.make_node("Reshape", [columns, target], [rows]),
        helper.make_node(
            "Reshape", [d_y, ctx.constant(np.array([0, 0, -1], np.int64), "flat")], [d_y3]
        ),
        helper.make_node("MatMul", [d_y3, rows], [products]),
        *reduce("ReduceSum", products, summed, [0], ctx),
        helper.make_node(
            "Reshape",
            [summed, ctx.constant(np.array([0, *kernel, -1], np.int64), "by_offset")],
            [by_offset],
        ),
        helper.make_node(
            "Transpose", [by_offset], [node.output[1]], perm=[0, spatial + 1, *axes.tolist()]
        ),
    ]


def _bias_gradient(node, ctx, spatial_rank):
    """Nodes computing ``dB`` (``node.output[2]``)."""
    axes = [0] + list(range(2, 2 + spatial_rank))
    return reduce("ReduceSum", node.input[0], node.output[2], axes, ctx)


#: The formulations of ``dX``: name to ``function(node, ctx, window attributes)``.
INPUT_FORMULATIONS = {
    "conv_transpose": _transposed_input_gradient,
    "flipped_conv": _flipped_input_gradient,
}

#: The formulations of ``dW``.
WEIGHT_FORMULATIONS = {
    "swapped_conv": _swapped_weight_gradient,
    "windows_matmul": _windows_weight_gradient,
    "pointwise_matmul": _pointwise_weight_gradient,
}


def applicable_formulations(node):
    """The formulations of ``dX`` and of ``dW`` that can compute ``node``'s gradients, the one
    the lowering uses first.

    ``flipped_conv`` needs strides of one, a known kernel and pads within its reach;
    ``windows_matmul`` one group and a known kernel; ``pointwise_matmul`` a ``1 x 1`` kernel,
    strides of one, no pads, one group.

    Examples
    --------
    >>> from onnx import helper
    >>> applicable_formulations(helper.make_node(
    ...     "ConvGrad", [], [], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8))
    (['flipped_conv', 'conv_transpose'], ['swapped_conv'])
    """
    kernel, strides, dilations, pads = window_attributes(node)
    group = node_attribute(node, "group", 1)
    inputs, weights = ["conv_transpose"], ["swapped_conv"]
    reach = [d * (k - 1) for k, d in zip(kernel or [], dilations)]
    if kernel and all(s == 1 for s in strides) and all(p <= r for p, r in zip(pads, reach * 2)):
        inputs.insert(0, "flipped_conv")
    if kernel and group == 1:
        weights.insert(0, "windows_matmul")
        if all(k == 1 for k in kernel) and all(s == 1 for s in strides) and not any(pads):
            weights.insert(0, "pointwise_matmul")
    return inputs, weights


def conv_grad_nodes(node, ctx, input_formulation=None, weight_formulation=None):
    """The standard nodes computing the outputs of the ``ConvGrad`` ``node`` that are used.

    Parameters
    ----------
    node : onnx.NodeProto
    ctx : helpers.portable.lowering.registry.LoweringContext
    input_formulation, weight_formulation : str, optional
        A key of :data:`INPUT_FORMULATIONS`, :data:`WEIGHT_FORMULATIONS`; by default the
        first of :func:`applicable_formulations` (the fastest measured).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> node = helper.make_node("ConvGrad", ["dy", "x", "w"], ["dx"], kernel_shape=[3])
    >>> [n.op_type for n in conv_grad_nodes(node, LoweringContext(17), "conv_transpose")]
    ['ConvTranspose']
    """
    attrs = window_attributes(node)
    inputs, weights = applicable_formulations(node)
    wanted = list(node.output) + [""] * (3 - len(node.output))
    nodes = []
    if wanted[0]:
        nodes += INPUT_FORMULATIONS[input_formulation or inputs[0]](node, ctx, attrs)
    if wanted[1]:
        nodes += WEIGHT_FORMULATIONS[weight_formulation or weights[0]](node, ctx, attrs)
    if wanted[2]:
        nodes += _bias_gradient(node, ctx, len(attrs[1]))
    return nodes


@register("ConvGrad")
def lower_conv_grad(node, ctx):
    """``ConvGrad`` with standard operators, each output only where it is used
    (:func:`conv_grad_nodes`).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> node = helper.make_node("ConvGrad", ["dy", "x", "w"], ["", "dw", "db"],
    ...                         domain="com.microsoft", kernel_shape=[1, 1])
    >>> [n.op_type for n in lower_conv_grad(node, LoweringContext(17))][-3:]
    ['Shape', 'Reshape', 'ReduceSum']
    """
    return conv_grad_nodes(node, ctx)
