"""Gradients of the poolings: ``MaxPool``, ``AveragePool``, ``GlobalAveragePool`` and
``GlobalMaxPool``.

* ``MaxPool``: each window's gradient goes to its first maximum, the element its ``Indices``
  output points at: ``dY`` added at those indices into zeros (the lowering of onnxruntime's
  ``MaxPoolGrad``, :func:`~helpers.portable.lowering.pooling.scattered_gradient`), whatever
  the windows (pads, dilations, ``ceil_mode``, ``auto_pad``). Where the node does not output
  its indices, or outputs them in column-major order (``storage_order=1``), the gradient
  computes the same ``MaxPool`` with row-major indices. Overlapping windows add at one index:
  ``ScatterElements`` adds from opset 16; before, only windows that cannot overlap are
  accepted.
* ``AveragePool`` is linear: ``Y[o] = r[o] * sum of X over window o`` (pads counting zero),
  ``r`` one over the divisor. So ``dX`` is the adjoint of that window sum applied to ``r dY``
  (:func:`window_sum_adjoint`): the input gradient of a depthwise convolution by a kernel of
  ones (``ConvGrad``'s, lowered: ``Conv`` by the flipped kernel at strides of one, else
  ``ConvTranspose``). Without ``ceil_mode``, with ``count_include_pad=1`` or no pads, ``r`` is
  one over the kernel's size, folded into the kernel. Otherwise ``r`` is computed by the runtime
  that runs the step, on ones of the input's spatial size: its own ``AveragePool`` of ones
  (``count / divisor``) over the number of input elements in each window (a ``Conv`` of ones);
  constant when the spatial size is fixed (the runtime folds it). Runtimes disagree with
  ``ceil_mode`` (1.19.2 and onnx 1.17's reference divide a window past the padded input by the
  whole kernel, 1.31.1 and torch by its part inside; 1.19.2 counts a window that starts in the
  padding): so the gradient is that of the forward pass as the same runtime computes it.
* ``GlobalAveragePool``: ``dY`` over the number of spatial elements, expanded to ``X``.
* ``GlobalMaxPool``: as ``MaxPool`` over one window, ``dY`` at the first maximum
  (``ArgMax``, then ``ScatterElements`` along the flattened spatial axis).

Measured (a step's forward pooling, loss and gradient, batch 64, 32 to 64 channels, 2 threads,
medians of interleaved rounds on a 2-core Intel Xeon, noisy): ``MaxPool`` takes 0.8 to 0.93 of
the time 1.19.2's ``MaxPoolGrad`` takes; recomputing the indices 0.84 to 1.12 of reusing the
node's.
``AveragePool`` takes 0.8 to 0.85 of 1.19.2's gradient of the project's depthwise ``Conv``
rewrite at strides of two, 0.24 to 0.31 at strides of one; the depthwise convolution, 0.29 to
0.35 of a one-channel convolution of the images and channels flattened together at strides of
one (onnxruntime's depthwise kernels; 0.9 to 1.3 at strides of two, on 1.19.2 and 1.31.1), which
is what the gradient falls back to where the number of channels is unknown. ``GlobalMaxPool``'s
``ArgMax`` and ``ScatterElements`` and a ``Where(Equal(X, Y))`` mask take about the same time
(the mask would send a tie's gradient to every maximum).

``Resize`` has no gradient here: the training graph computes every ``Resize`` a weight reaches
with other operators (:mod:`helpers.core.layers.resampling`) before the gradients are built.
"""

import numpy as np
from onnx import TensorProto, numpy_helper

from ..lowering.pooling import scattered_gradient
from ..node_attributes import node_attribute, node_attributes
from .convolution import (
    explicit_window,
    lowered_conv_grad,
    spatial_shape_of,
    spatial_sizes,
)
from .registry import gradient
from .shapes import zeros_like
from .via_lowering import LoweringView

#: The first opset whose ``ScatterElements`` adds the values sent to one index.
SCATTER_ADD_OPSET = 16


@gradient("MaxPool")
def max_pool_grad(node, dy, ctx):
    """``dY`` added into zeros at the indices of each window's first maximum.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    >>> ctx = GradientContext({"x": ["N", 3, 8, 8]}, {}, {"x"}, 13)
    >>> ctx.node = node
    >>> max_pool_grad(node, ["dy"], ctx)
    ['grad_3_dX']
    >>> [n.op_type for n in ctx.nodes]  # doctest: +NORMALIZE_WHITESPACE
    ['MaxPool', 'Shape', 'ConstantOfShape', 'Reshape', 'Reshape', 'Reshape', 'ScatterElements',
     'Reshape']
    """
    x = node.input[0]
    indices = node.output[1] if len(node.output) > 1 else ""
    if not indices or node_attribute(node, "storage_order", 0):
        attrs = node_attributes(node)
        attrs.pop("storage_order", None)
        indices = ctx.op("MaxPool", [x], outputs=2, **attrs)[1]
    add = ctx.opset >= SCATTER_ADD_OPSET
    if not add:
        kernel = node_attribute(node, "kernel_shape")
        strides = node_attribute(node, "strides") or [1] * len(kernel)
        dilations = node_attribute(node, "dilations") or [1] * len(kernel)
        if any(s < d * (k - 1) + 1 for k, s, d in zip(kernel, strides, dilations)):
            ctx.refuse(
                f"Its windows overlap, and adding their gradients needs ScatterElements of "
                f"opset {SCATTER_ADD_OPSET} (the model has opset {ctx.opset}): export with "
                f"opset {SCATTER_ADD_OPSET} or later."
            )
    grad = ctx.name("dX")
    view = LoweringView(ctx)
    elem_type = ctx.types.get(x, TensorProto.FLOAT)
    view.add(scattered_gradient(dy[0], indices, x, grad, view, elem_type, add))
    return [grad]


def _ones_like_spatial(ctx, x, rank):
    """Ones shaped ``(1, 1, spatial sizes of x)``: a constant when the sizes are fixed."""
    sizes = spatial_sizes(ctx, x)
    if sizes is not None:
        return ctx.constant(np.ones([1, 1, *sizes], ctx.numpy_type(x)))
    shape = ctx.op("Concat", [ctx.axes([1, 1]), spatial_shape_of(ctx, x, rank)], axis=0)
    one = numpy_helper.from_array(np.ones(1, ctx.numpy_type(x)))
    return ctx.op("ConstantOfShape", [shape], value=one)


def _reciprocal_divisors(node, ctx, window, dy):
    """``1 / divisor`` of each window of ``AveragePool`` ``node``, as the runtime computes it:
    its average of ones (``count / divisor``) over the count of input elements in the window."""
    x = node.input[0]
    kernel, strides, dilations, pads = window
    rank = len(kernel)
    ones = _ones_like_spatial(ctx, x, rank)
    attrs = node_attributes(node)
    averages = ctx.op("AveragePool", [ones], **attrs)
    ceil = node_attribute(node, "ceil_mode", 0)
    # with ceil_mode, a last window more on each axis: the runtime keeps it or not
    ends = [p + (s - 1) * ceil for p, s in zip(pads[rank:], strides)]
    kernel_of_ones = ctx.constant(np.ones([1, 1, *kernel], ctx.numpy_type(x)))
    counts = ctx.op(
        "Conv",
        [ones, kernel_of_ones],
        kernel_shape=list(kernel),
        strides=strides,
        dilations=dilations,
        pads=pads[:rank] + ends,
    )
    if ceil:
        sizes, axes = spatial_shape_of(ctx, dy, rank), ctx.axes(range(2, 2 + rank))
        counts = ctx.op("Slice", [counts, ctx.axes([0] * rank), sizes, axes])
    # a window of no input element (1.19.2's last one past the padding) averages to 0
    return ctx.op("Div", [averages, ctx.op("Max", [counts, ctx.scalar_like(1, x)])])


def window_sum_adjoint(ctx, dy, x, values, window):
    """The gradient, for the output gradient ``dy``, of the sums of ``x`` (zero-padded) over the
    windows ``window`` (``(kernel_shape, strides, dilations, pads)``), each element weighted by
    ``values`` (an array of the kernel's shape), every image and channel alike: the input
    gradient of that depthwise convolution (``group`` the channels), or, where the number of
    channels is unknown, of a one-channel convolution of the images and channels flattened
    together (measured up to 3 times slower at strides of one: onnxruntime's depthwise kernels).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 3, 8]}, {}, set(), 17)
    >>> dx = window_sum_adjoint(ctx, "dy", "x", np.ones(2), ([2], [2], [1], [0, 0]))
    >>> [n.op_type for n in ctx.nodes if n.op_type not in ("Shape", "Slice")]
    ['ConvTranspose']
    >>> [t.dims for t in ctx.initializers][0]
    [3, 1, 2]
    """
    rank = len(window[0])
    channels = (ctx.shape(x) or [None, None])[1]
    if isinstance(channels, int):
        kernel = ctx.constant(np.broadcast_to(values, (channels, 1, *values.shape)).copy())
        grad = ctx.name("dX")
        lowered_conv_grad(ctx, [dy, x, kernel], [grad], window, channels)
        return grad
    flat_dy = ctx.op("Reshape", [dy, ctx.constant(np.array([-1, 1] + [0] * rank, np.int64))])
    flat_dx = ctx.name("dX_flat")
    kernel = ctx.constant(values.reshape(1, 1, *values.shape))
    lowered_conv_grad(ctx, [flat_dy, x, kernel], [flat_dx], window, 1)
    return ctx.op("Reshape", [flat_dx, ctx.shape_of(x)])


@gradient("AveragePool")
def average_pool_grad(node, dy, ctx):
    """The adjoint of the window sums applied to ``dY`` over each window's divisor.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], pads=[1, 1])
    >>> ctx = GradientContext({"x": ["N", 3, 8]}, {}, {"x"}, 17)
    >>> ctx.node = node
    >>> dx = average_pool_grad(node, ["dy"], ctx)
    >>> [n.op_type for n in ctx.nodes][:5], ctx.nodes[-1].op_type
    (['AveragePool', 'Conv', 'Max', 'Div', 'Mul'], 'Conv')
    """
    x = node.input[0]
    window = explicit_window(node, ctx)
    kernel, pads = window[0], window[3]
    dtype = ctx.numpy_type(x)
    scaled = dy[0]
    whole = node_attribute(node, "count_include_pad", 0) or not any(pads)
    if whole and not node_attribute(node, "ceil_mode", 0):
        # every window lies inside the padded input and divides by the kernel's size
        values = np.full(kernel, 1.0 / np.prod(kernel), dtype)
    else:
        values = np.ones(kernel, dtype)
        scaled = ctx.op("Mul", [dy[0], _reciprocal_divisors(node, ctx, window, dy[0])])
    return [window_sum_adjoint(ctx, scaled, x, values, window)]


@gradient("GlobalAveragePool")
def global_average_pool_grad(node, dy, ctx):
    """``dY / (number of spatial elements)``, expanded to ``X``'s shape.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    >>> ctx = GradientContext({"x": ["N", 3, 8, 8]}, {}, {"x"}, 17)
    >>> global_average_pool_grad(node, ["dy"], ctx), [n.op_type for n in ctx.nodes]
    (['grad_5_Expand'], ['Mul', 'Shape', 'Expand'])
    """
    x, y = node.input[0], node.output[0]
    sizes = spatial_sizes(ctx, x)
    if sizes is not None:
        scale = ctx.scalar_like(1.0 / max(int(np.prod(sizes)), 1), x)
    else:
        count = ctx.op("Div", [ctx.op("Size", [x]), ctx.op("Size", [y])])
        scale = ctx.op("Reciprocal", [ctx.cast_like(count, x)])
    return [ctx.op("Expand", [ctx.op("Mul", [dy[0], scale]), ctx.shape_of(x)])]


@gradient("GlobalMaxPool")
def global_max_pool_grad(node, dy, ctx):
    """``dY`` at the first maximum of each image and channel, zeros elsewhere.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> node = helper.make_node("GlobalMaxPool", ["x"], ["y"])
    >>> ctx = GradientContext({"x": ["N", 3, 8, 8]}, {}, {"x"}, 17)
    >>> dx = global_max_pool_grad(node, ["dy"], ctx)
    >>> [n.op_type for n in ctx.nodes]  # doctest: +NORMALIZE_WHITESPACE
    ['Reshape', 'ArgMax', 'Shape', 'ConstantOfShape', 'Reshape', 'ScatterElements', 'Shape',
     'Reshape']
    """
    x = node.input[0]
    flat = ctx.op("Reshape", [x, ctx.constant(np.array([0, 0, -1], np.int64))])
    first = ctx.op("ArgMax", [flat], axis=2, keepdims=1)
    zeros = zeros_like(ctx, flat, like=x)
    flat_dy = ctx.op("Reshape", [dy[0], ctx.constant(np.array([0, 0, 1], np.int64))])
    scattered = ctx.op("ScatterElements", [zeros, first, flat_dy], axis=2)
    return [ctx.op("Reshape", [scattered, ctx.shape_of(x)])]
