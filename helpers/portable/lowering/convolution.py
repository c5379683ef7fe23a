"""``ConvGrad`` (com.microsoft), the gradient of ``Conv``, written with standard operators.

``ConvGrad(dY, X, W)`` returns ``dX``, ``dW`` and ``dB``, any of them left out. 1.19.2's CPU
kernel (``orttraining/training_ops/cpu/nn/conv_grad.cc``) loops over the images and the groups:
``im2col`` of the image and one product for ``dW``, one product and ``col2im`` for ``dX``, a
matrix-vector product for ``dB``. It reads ``pads`` as given and ignores ``auto_pad``: a node
with ``auto_pad=SAME_UPPER`` and no pads gets the gradient of an unpadded convolution, which is
wrong. The lowering pads as ONNX defines ``auto_pad`` (:func:`~.spatial.window_attributes`), so
there it gives torch's gradient, not the kernel's.

With ``s`` the strides, ``d`` the dilations, ``p`` the begin pads and ``G`` the groups:

* ``dX`` is ``ConvTranspose(dY, W)`` with the same strides, dilations, pads and groups. The
  last ``(size + pads - extent) mod s`` positions of an axis take no part in the convolution;
  ``ConvTranspose`` leaves them out, so it gets ``output_padding = s - 1`` and a ``Slice`` to
  ``X``'s size (zeros there, as the kernel's ``col2im`` leaves them).
* ``dW[m, c, k] = sum over n, o of dY[n, m, o] * X[n, g*C/G + c, o*s + k*d - p]``: a
  ``Conv`` whose batch is ``X``'s channels within a group and whose channels are its images,
  ``X`` laid out as ``(C/G, G*N, spatial)``, by ``dY`` laid out as ``(M, N, spatial)`` (filters
  of ``N`` channels, ``G`` groups), with strides ``d`` and dilations ``s``: its output
  ``(C/G, M, >= kernel)`` is sliced to the kernel and transposed to ``W``'s layout. A
  depthwise convolution is a batch of one. For a ``1 x 1`` kernel with strides of one and no
  pads and ``G = 1``, ``dW`` is ``MatMul(dY, X^T)`` over the flattened positions, summed over
  the batch.
* ``dB`` is ``ReduceSum`` of ``dY`` over every axis but the channels.

The sums are those of the kernel in another order: equal to float32 rounding.
"""

import numpy as np
from onnx import helper

from .registry import register
from .spatial import attribute, dims_from, reduce, window_attributes

_INT_MAX = np.iinfo(np.int64).max


def _input_gradient(node, ctx, attrs):
    """Nodes computing ``dX`` (``node.output[0]``) with ``ConvTranspose``."""
    _, strides, dilations, pads = attrs
    d_y, _, w = node.input[:3]
    d_x = node.output[0]
    group = attribute(node, "group", 1)
    if all(s == 1 for s in strides):
        return [
            helper.make_node(
                "ConvTranspose",
                [d_y, w],
                [d_x],
                strides=strides,
                dilations=dilations,
                pads=pads,
                group=group,
            )
        ]
    full = ctx.name("dX_full")
    nodes, sizes = dims_from(node.input[1], 2, ctx, "x_spatial")
    rank = len(strides)
    starts = ctx.constant(np.zeros(rank, np.int64), "starts")
    axes = ctx.constant(np.arange(2, 2 + rank, dtype=np.int64), "axes")
    return nodes + [
        helper.make_node(
            "ConvTranspose",
            [d_y, w],
            [full],
            strides=strides,
            dilations=dilations,
            pads=pads,
            group=group,
            output_padding=[s - 1 for s in strides],
        ),
        helper.make_node("Slice", [full, starts, sizes, axes], [d_x]),
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


def _weight_gradient(node, ctx, attrs):
    """Nodes computing ``dW`` (``node.output[1]``)."""
    kernel, strides, dilations, pads = attrs
    d_y, x, w = node.input[:3]
    d_w = node.output[1]
    group = attribute(node, "group", 1)
    rank = len(strides) + 2
    if (
        group == 1
        and kernel
        and all(k == 1 for k in kernel)
        and not any(pads)
        and all(s == 1 for s in strides)
    ):
        return _pointwise_weight_gradient(d_y, x, w, d_w, ctx)
    nodes, x_images = _images_as_channels(x, group, rank, ctx)
    filters = ctx.name("dy_swapped")
    full, sliced = ctx.name("dW_full"), ctx.name("dW_swapped")
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
            _swap_first_axes(sliced, rank, d_w),
        ]
    )


def _pointwise_weight_gradient(d_y, x, w, d_w, ctx):
    """``dW`` of a ``1 x 1`` convolution, strides one, no pads: ``sum_n dY_n X_n^T``."""
    d_y2, x2, x2t, products, summed = (
        ctx.name(t) for t in ("dy_flat", "x_flat", "x_flat_t", "products", "dW_2d")
    )
    flat = ctx.constant(np.array([0, 0, -1], np.int64), "flat")
    w_shape = ctx.name("w_shape")
    return [
        helper.make_node("Reshape", [d_y, flat], [d_y2]),
        helper.make_node("Reshape", [x, flat], [x2]),
        helper.make_node("Transpose", [x2], [x2t], perm=[0, 2, 1]),
        helper.make_node("MatMul", [d_y2, x2t], [products]),
        *reduce("ReduceSum", products, summed, [0], ctx),
        helper.make_node("Shape", [w], [w_shape]),
        helper.make_node("Reshape", [summed, w_shape], [d_w]),
    ]


def _bias_gradient(node, ctx, spatial_rank):
    """Nodes computing ``dB`` (``node.output[2]``)."""
    axes = [0] + list(range(2, 2 + spatial_rank))
    return reduce("ReduceSum", node.input[0], node.output[2], axes, ctx)


@register("ConvGrad")
def lower_conv_grad(node, ctx):
    """``ConvGrad`` as ``ConvTranspose`` (``dX``), a ``Conv`` over swapped axes or a ``MatMul``
    (``dW``) and a ``ReduceSum`` (``dB``), each only where its output is used.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> node = helper.make_node("ConvGrad", ["dy", "x", "w"], ["", "dw", "db"],
    ...                         domain="com.microsoft", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    >>> [n.op_type for n in lower_conv_grad(node, LoweringContext(17))]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['Transpose', 'Shape', 'Slice', 'Transpose', 'Conv', 'Slice', 'Transpose', 'ReduceSum']
    """
    attrs = window_attributes(node)
    wanted = list(node.output) + [""] * (3 - len(node.output))
    nodes = []
    if wanted[0]:
        nodes += _input_gradient(node, ctx, attrs)
    if wanted[1]:
        nodes += _weight_gradient(node, ctx, attrs)
    if wanted[2]:
        nodes += _bias_gradient(node, ctx, len(attrs[1]))
    return nodes
