"""Gradients of the reductions: ``ReduceSum``, ``ReduceMean`` and their kin.

A reduction's gradient is the output gradient spread back over the reduced axes: reshaped to
the kept-dimension shape when the reduction dropped its axes, then broadcast (``Expand``) to the
input's shape; ``ReduceMean`` divides by the count of values reduced.
"""

import numpy as np

from .registry import attribute, gradient


def reduced_axes(node, ctx):
    """The axes ``node`` reduces, non-negative, or None for all of them; refuses axes computed
    at run time."""
    x = node.input[0]
    rank = ctx.rank(x)
    if len(node.input) > 1 and node.input[1]:
        value = ctx.constant_value(node.input[1])
        if value is None:
            ctx.refuse("Its axes are computed at run time; give them as a constant.")
        axes = [int(a) for a in np.ravel(value)]
    else:
        axes = attribute(node, "axes", None)
    if not axes:
        if attribute(node, "noop_with_empty_axes", 0):
            return []
        return None if rank is None else list(range(rank))
    if rank is None:
        if any(a < 0 for a in axes):
            ctx.refuse("Its input's rank is unknown and its axes are negative.")
        return sorted(axes)
    return sorted(a % rank for a in axes)


def spread(node, grad, ctx, axes):
    """``grad`` (the reduction's output gradient) broadcast to the input's shape."""
    x = node.input[0]
    if axes == []:
        return grad
    if not attribute(node, "keepdims", 1):
        if axes is None:
            grad = ctx.op("Reshape", [grad, ctx.constant(np.ones(ctx.rank(x) or 0, np.int64))])
        else:
            grad = ctx.op("Unsqueeze", [grad, ctx.axes(axes)])
    return ctx.op("Expand", [grad, ctx.shape_of(x)])


def _count(node, ctx, axes):
    """The number of values each output of the reduction summed, as a scalar of x's type."""
    x = node.input[0]
    shape = ctx.static_shape(x)
    if shape is not None:
        count = int(np.prod([shape[a] for a in (axes if axes is not None else range(len(shape)))]))
        return ctx.scalar_like(1.0 / max(count, 1), x)
    full = ctx.op("Shape", [x])
    if axes is None:
        size = ctx.op("Size", [x])
    else:
        size = ctx.op("ReduceProd", [ctx.op("Gather", [full, ctx.axes(axes)])], keepdims=0)
    return ctx.op("Reciprocal", [ctx.op("CastLike", [size, x])])


@gradient("ReduceSum")
def reduce_sum_grad(node, dy, ctx):
    """Each value reduced receives the output's gradient."""
    axes = reduced_axes(node, ctx)
    return [spread(node, dy[0], ctx, axes)] + [None] * (len(node.input) - 1)


@gradient("ReduceMean")
def reduce_mean_grad(node, dy, ctx):
    """Each value reduced receives the output's gradient divided by the count."""
    axes = reduced_axes(node, ctx)
    scaled = ctx.op("Mul", [dy[0], _count(node, ctx, axes)])
    return [spread(node, scaled, ctx, axes)] + [None] * (len(node.input) - 1)


@gradient("ReduceSumSquare")
def reduce_sum_square_grad(node, dy, ctx):
    """``d sum(x**2) = 2 x dx``."""
    x = node.input[0]
    axes = reduced_axes(node, ctx)
    twice = ctx.op("Mul", [x, ctx.scalar_like(2, x)])
    return [ctx.op("Mul", [spread(node, dy[0], ctx, axes), twice])] + [None] * (len(node.input) - 1)
