"""Gradients of the convolutions: ``Conv`` and ``ConvTranspose``.

Both are written by the lowering of onnxruntime's ``ConvGrad``
(:func:`helpers.portable.lowering.convolution.conv_grad_nodes`, which picks the fastest of its
measured formulations): the gradient builds the ``ConvGrad`` node 1.19.2's builder would write,
with ``auto_pad`` resolved into explicit pads, and lowers it on the spot
(:class:`~helpers.portable.gradients.via_lowering.LoweringView`).

* ``Conv``: ``dX``, ``dW`` and ``dB`` are that node's outputs: ``dX`` a ``Conv`` by the flipped
  kernel (strides of one) or a ``ConvTranspose``; ``dW`` the windows of ``X`` times ``dY``
  (``MatMul``, one group) or a ``Conv`` of the images as channels (any groups); ``dB`` a
  ``ReduceSum``. ``auto_pad`` ``SAME_*`` with strides above one needs the input's spatial size
  (the model fixes it, or the gradient is refused): unlike 1.19.2's kernel, which ignores
  ``auto_pad`` (wrong with ``SAME_UPPER``), the pads are those ONNX defines.
* ``ConvTranspose`` is the adjoint of a ``Conv`` ``Z = Conv(dY, W)`` with the same strides,
  dilations, groups and begin pads ``p``: ``X[i]`` meets ``Y[i s + k d - p]`` through
  ``W[k]``. So ``dX`` is that ``Conv`` of ``dY`` (end pads ``p_end - output_padding``; where that
  is negative the result is cut to ``X``'s size), and ``dW`` is the weight gradient of that
  ``Conv`` for the output gradient ``X``: ``ConvGrad(X, dY, W)``'s ``dW``. ``dB`` sums ``dY``
  over all axes but the channels. With ``output_shape`` or ``auto_pad`` the begin pads come from
  the total padding, as onnxruntime and ONNX's reference split it (more at the end for
  ``SAME_UPPER``, at the start otherwise); an ``output_shape`` needs the input's spatial size.

Measured (a step's forward convolution, loss and weight gradient, batch 64, 3 x 3 kernels,
2 threads, medians of interleaved rounds on a 2-core Intel Xeon, noisy): ``Conv`` takes 1.5 to
1.6 times the time of 1.19.2's ``ConvGrad`` kernel for 32 channels of 32 x 32, 2.2 times for a
depthwise one (the lowering's formulations: see :mod:`helpers.portable.lowering.convolution`);
``ConvTranspose`` 0.48 of 1.19.2's gradient of the ``Conv`` the project's training graph
rewrites it into (1.19.2 has no gradient of its own).
"""

import numpy as np
import onnx
from onnx import helper

from ..lowering.convolution import conv_grad_nodes
from ..lowering.spatial import window_attributes
from ..node_attributes import node_attribute
from .registry import gradient
from .via_lowering import LoweringView


def spatial_sizes(ctx, name):
    """The spatial sizes (after batch and channels) of ``name`` if the model fixes them all,
    else None.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 3, 8, 8], "z": ["N", 3, "H", 8]}, {}, set(), 17)
    >>> spatial_sizes(ctx, "x"), spatial_sizes(ctx, "z"), spatial_sizes(ctx, "unknown")
    ([8, 8], None, None)
    """
    shape = ctx.shape(name)
    if shape is None or not all(isinstance(d, int) for d in shape[2:]):
        return None
    return list(shape[2:])


def spatial_shape_of(ctx, name, rank):
    """A value holding the ``rank`` spatial sizes of ``name``: a constant when they are fixed.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 3, 8, 8]}, {}, set(), 17)
    >>> spatial_shape_of(ctx, "x", 2), spatial_shape_of(ctx, "dy", 2)
    ('grad_0_const', 'grad_5_Slice')
    """
    sizes = spatial_sizes(ctx, name)
    if sizes is not None:
        return ctx.constant(np.array(sizes, np.int64))
    return ctx.op("Slice", [ctx.op("Shape", [name]), ctx.axes([2]), ctx.axes([2 + rank])])


def explicit_window(node, ctx, kernel=None):
    """``(kernel_shape, strides, dilations, pads)`` of the convolution or pooling ``node``, the
    pads explicit (``auto_pad`` resolved on its input's spatial size); ``kernel`` stands for a
    missing ``kernel_shape``. Refuses what cannot be resolved.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 3, 8]}, {}, set(), 17)
    >>> node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2])
    >>> explicit_window(node, ctx, kernel=[3])  # 4 outputs: 1 pad, at the end
    ([3], [2], [1], [0, 1])
    """
    if kernel is not None and not node_attribute(node, "kernel_shape"):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.attribute.append(helper.make_attribute("kernel_shape", list(kernel)))
        node = copy
    try:
        return window_attributes(node, spatial_sizes(ctx, node.input[0]))
    except ValueError as error:
        ctx.refuse(str(error))


def lowered_conv_grad(ctx, inputs, outputs, window, group):
    """Add to ``ctx`` the lowering of ``ConvGrad(inputs) -> outputs`` (the outputs wanted, ""
    for the others), ``window`` its ``(kernel_shape, strides, dilations, pads)``.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {}, set(), 17)
    >>> lowered_conv_grad(ctx, ["dy", "x", "w"], ["dx"], ([3], [1], [1], [1, 1]), 1)
    >>> [n.op_type for n in ctx.nodes]
    ['Transpose', 'Slice', 'Conv']
    """
    kernel, strides, dilations, pads = window
    attrs = dict(strides=strides, dilations=dilations, pads=pads, group=group)
    if kernel:
        attrs["kernel_shape"] = list(kernel)
    node = helper.make_node("ConvGrad", inputs, outputs, domain="com.microsoft", **attrs)
    view = LoweringView(ctx)
    view.add(conv_grad_nodes(node, view))


def _kernel(node, ctx, w):
    """The kernel's spatial shape: the attribute, or the weight's static shape, or None."""
    static = ctx.static_shape(w)
    return node_attribute(node, "kernel_shape") or (static[2:] if static else None)


def _wanted(ctx, names):
    """A fresh name for the gradient of each of ``names`` (input, weight, bias) that needs one,
    "" for the others."""
    return [ctx.name(tag) if ctx.needs(n) else "" for n, tag in zip(names, ("dX", "dW", "dB"))]


@gradient("Conv")
def conv_grad(node, dy, ctx):
    """``dX``, ``dW``, ``dB``: the outputs of the ``ConvGrad`` node, lowered.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1], strides=[2])
    >>> ctx = GradientContext({"x": ["N", 3, 9], "w": [4, 3, 3]}, {}, {"x", "w", "b"}, 17)
    >>> ctx.node = node
    >>> conv_grad(node, ["dy"], ctx)
    ['grad_0_dX', 'grad_1_dW', 'grad_2_dB']
    >>> [n.op_type for n in ctx.nodes if n.op_type in ("ConvTranspose", "MatMul", "ReduceSum")]
    ['ConvTranspose', 'MatMul', 'ReduceSum', 'ReduceSum']
    """
    x, w = node.input[:2]
    window = explicit_window(node, ctx, _kernel(node, ctx, w))
    grads = _wanted(ctx, node.input)
    outputs = (grads + ["", ""])[:3]
    lowered_conv_grad(ctx, [dy[0], x, w], outputs, window, node_attribute(node, "group", 1))
    return [g or None for g in grads]


def _transposed_pads(node, ctx, kernel, strides, dilations, extra):
    """The begin and end pads ``ConvTranspose`` ``node`` crops its full output by."""
    rank = len(kernel)
    reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    target = node_attribute(node, "output_shape")
    auto_pad = node_attribute(node, "auto_pad", "NOTSET")
    if target:
        sizes = spatial_sizes(ctx, node.input[0])
        if sizes is None:
            ctx.refuse("It has an output_shape and its input's spatial size is not fixed.")
        target = target[-rank:]
        full = [s * (n - 1) + e + r for s, n, e, r in zip(strides, sizes, extra, reach)]
        totals = [f - t for f, t in zip(full, target)]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):  # the output is the input times the strides
        totals = [e + r - s for e, r, s in zip(extra, reach, strides)]
    elif auto_pad == "VALID":
        return [0] * rank, [0] * rank
    else:
        pads = node_attribute(node, "pads") or [0] * (2 * rank)
        return pads[:rank], pads[rank:]
    if min(totals) < 0:
        ctx.refuse(
            "Its output is longer than its full output (a kernel shorter than its stride with "
            "auto_pad, or a long output_shape): runtimes disagree on where the zeros go."
        )
    small = [t // 2 for t in totals]
    begin = small if auto_pad == "SAME_UPPER" else [t - h for t, h in zip(totals, small)]
    return begin, [t - b for t, b in zip(totals, begin)]


@gradient("ConvTranspose")
def conv_transpose_grad(node, dy, ctx):
    """``dX = Conv(dY, W)`` and ``dW`` that ``Conv``'s weight gradient for ``X``
    (see the module's documentation); ``dB`` sums ``dY``.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], output_padding=[1])
    >>> ctx = GradientContext({"x": ["N", 3, 5], "w": [3, 4, 3]}, {}, {"x"}, 17)
    >>> ctx.node = node
    >>> conv_transpose_grad(node, ["dy"], ctx), [n.op_type for n in ctx.nodes]
    (['grad_0_dX', None], ['Conv', 'Slice'])
    """
    x, w = node.input[:2]
    kernel = _kernel(node, ctx, w)
    if not kernel:
        ctx.refuse("Its kernel's shape is unknown: give it a kernel_shape or a fixed weight.")
    rank = len(kernel)
    strides = node_attribute(node, "strides") or [1] * rank
    dilations = node_attribute(node, "dilations") or [1] * rank
    extra = node_attribute(node, "output_padding") or [0] * rank
    begin, end = _transposed_pads(node, ctx, kernel, strides, dilations, extra)
    ends = [e - o for e, o in zip(end, extra)]  # the end pads of the adjoint convolution
    pads = begin + [max(0, e) for e in ends]
    group = node_attribute(node, "group", 1)
    grads = _wanted(ctx, node.input)
    if grads[0]:
        shared = dict(strides=strides, dilations=dilations, pads=pads, group=group)
        if min(ends) < 0:  # the last outputs read no input: cut them
            full = ctx.op("Conv", [dy[0], w], kernel_shape=list(kernel), **shared)
            sizes, axes = spatial_shape_of(ctx, x, rank), ctx.axes(range(2, 2 + rank))
            ctx.op("Slice", [full, ctx.axes([0] * rank), sizes, axes], outputs=[grads[0]])
        else:
            ctx.op("Conv", [dy[0], w], outputs=[grads[0]], kernel_shape=list(kernel), **shared)
    if grads[1]:
        window = (kernel, strides, dilations, pads)
        lowered_conv_grad(ctx, [x, dy[0], w], ["", grads[1], ""], window, group)
    if len(grads) > 2 and grads[2]:
        axes = ctx.axes([0, *range(2, 2 + rank)])
        ctx.op("ReduceSum", [dy[0], axes], outputs=[grads[2]], keepdims=0)
    return [g or None for g in grads]
