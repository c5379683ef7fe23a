"""Gradients of the reductions: ``ReduceSum``, ``ReduceMean``, ``ReduceSumSquare``, ``ReduceL1``,
``ReduceL2``, ``ReduceLogSumExp``, ``ReduceProd``, ``ReduceMax`` and ``ReduceMin``.

A reduction's gradient is the output gradient spread back over the reduced axes: reshaped to
the kept-dimension shape when the reduction dropped its axes, then broadcast to the input's
shape, times the derivative of the reduced function (``ReduceMean`` divides by the count of
values reduced). The axes come as an attribute (below opset 18, opset 13 for
``ReduceSum``) or as a constant input.

With ``noop_with_empty_axes`` and no axes, the reduction reduces nothing: as the ONNX
specification says (onnx 1.23's reference, onnxruntime 1.31.1) each value goes through the
reduced function alone (``ReduceL1`` gives ``|x|``, ``ReduceSumSquare`` ``x**2``, the others
``x``), and the gradients follow. onnxruntime 1.19.2 returns ``x`` for every reduction then
(and fails when the axes input is absent); onnx 1.17's reference reduces every axis when the
axes are an empty constant.
"""

import numpy as np

from ..node_attributes import node_attribute
from .registry import gradient


def _rest(node):
    """``None`` for the axes input, if any."""
    return [None] * (len(node.input) - 1)


def _reduced_axes(node, ctx):
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
        axes = node_attribute(node, "axes", None)
    if not axes:
        if node_attribute(node, "noop_with_empty_axes", 0):
            return []
        return None if rank is None else list(range(rank))
    if rank is None:
        if any(a < 0 for a in axes):
            ctx.refuse("Its input's rank is unknown and its axes are negative.")
        return sorted(axes)
    return sorted(a % rank for a in axes)


def _kept(node, value, ctx, axes):
    """``value``, shaped as the reduction's output, reshaped to its keepdims form: it broadcasts
    against the input."""
    x = node.input[0]
    if axes == [] or node_attribute(node, "keepdims", 1):
        return value
    if axes is None:
        return ctx.op("Reshape", [value, ctx.constant(np.ones(ctx.rank(x) or 0, np.int64))])
    return ctx.op("Unsqueeze", [value, ctx.axes(axes)])


def _spread(node, grad, ctx, axes):
    """``grad`` (the reduction's output gradient) broadcast to the input's shape."""
    if axes == []:
        return grad
    return ctx.op("Expand", [_kept(node, grad, ctx, axes), ctx.shape_of(node.input[0])])


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
    return ctx.op("Reciprocal", [ctx.cast_like(size, x)])


@gradient("ReduceSum")
def reduce_sum_grad(node, dy, ctx):
    """Each value reduced receives the output's gradient.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    >>> written_operators(node, {"x": [[1.0, 2.0]], "axes": np.array([1])})
    ['Unsqueeze', 'Expand']
    """
    axes = _reduced_axes(node, ctx)
    return [_spread(node, dy[0], ctx, axes)] + _rest(node)


@gradient("ReduceMean")
def reduce_mean_grad(node, dy, ctx):
    """Each value reduced receives the output's gradient divided by the count.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)
    >>> written_operators(node, {"x": [[1.0, 2.0]]}, opset=13)
    ['Mul', 'Unsqueeze', 'Expand']
    """
    axes = _reduced_axes(node, ctx)
    scaled = ctx.op("Mul", [dy[0], _count(node, ctx, axes)])
    return [_spread(node, scaled, ctx, axes)] + _rest(node)


@gradient("ReduceSumSquare")
def reduce_sum_square_grad(node, dy, ctx):
    """``d sum(x**2) = 2 x dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ReduceSumSquare", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['Mul', 'Expand', 'Mul']
    """
    x = node.input[0]
    axes = _reduced_axes(node, ctx)
    twice = ctx.op("Mul", [x, ctx.scalar_like(2, x)])
    return [ctx.op("Mul", [_spread(node, dy[0], ctx, axes), twice])] + _rest(node)


def _times_kept(node, dy, ctx, axes, factor):
    """``kept(dy) * factor``: the output gradient times a factor of the input's shape."""
    return [ctx.op("Mul", [_kept(node, dy[0], ctx, axes), factor])] + _rest(node)


@gradient("ReduceL1")
def reduce_l1_grad(node, dy, ctx):
    """``d sum|x| = sign(x) dx`` (0 at 0, as torch).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ReduceL1", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['Sign', 'Mul']
    """
    axes = _reduced_axes(node, ctx)
    return _times_kept(node, dy, ctx, axes, ctx.op("Sign", [node.input[0]]))


@gradient("ReduceL2")
def reduce_l2_grad(node, dy, ctx):
    """``d sqrt(sum x**2) = x / y dx``, 0 where ``y == 0`` (torch's rule: there every ``x``
    reduced is 0, and ``y`` is replaced by 1 to divide without an infinity).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ReduceL2", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['Equal', 'Where', 'Div', 'Mul']
    """
    x, y = node.input[0], node.output[0]
    axes = _reduced_axes(node, ctx)
    zero = ctx.op("Equal", [y, ctx.scalar_like(0, y)])
    safe = ctx.op("Where", [zero, ctx.scalar_like(1, y), y])
    ratio = ctx.op("Div", [dy[0], safe])
    return [ctx.op("Mul", [_kept(node, ratio, ctx, axes), x])] + _rest(node)


@gradient("ReduceLogSumExp")
def reduce_log_sum_exp_grad(node, dy, ctx):
    """``d log(sum(exp(x))) = exp(x - y) dx`` (the softmax of the values reduced).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ReduceLogSumExp", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['Sub', 'Exp', 'Mul']
    """
    x = node.input[0]
    axes = _reduced_axes(node, ctx)
    shifted = ctx.op("Sub", [x, _kept(node, node.output[0], ctx, axes)])
    return _times_kept(node, dy, ctx, axes, ctx.op("Exp", [shifted]))


@gradient("ReduceProd")
def reduce_prod_grad(node, dy, ctx):
    """``d prod(x) = y / x dx``: for inputs without zeros (a zero gives an infinite or NaN
    gradient).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ReduceProd", ["x"], ["y"], keepdims=0), {"x": [[1.0, 2.0]]})
    ['Mul', 'Unsqueeze', 'Div']
    """
    x, y = node.input[0], node.output[0]
    axes = _reduced_axes(node, ctx)
    scaled = ctx.op("Mul", [dy[0], y])
    return [ctx.op("Div", [_kept(node, scaled, ctx, axes), x])] + _rest(node)


def _extremum_grad(node, dy, ctx):
    """``ReduceMax``/``ReduceMin``: the gradient goes to the values equal to the result, split
    evenly among ties (torch's ``amax``/``amin`` rule).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = helper.make_node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)
    >>> written_operators(node, {"x": np.ones((4, 3), "f")}, opset=13)
    ['Unsqueeze', 'Equal', 'Cast', 'ReduceSum', 'Unsqueeze', 'Div', 'Mul']
    """
    x, y = node.input[0], node.output[0]
    axes = _reduced_axes(node, ctx)
    if axes == []:
        return [dy[0]] + _rest(node)
    hits = ctx.cast_like(ctx.op("Equal", [x, _kept(node, y, ctx, axes)]), x)
    sum_inputs = [hits] if axes is None else [hits, ctx.axes(axes)]
    ties = ctx.op("ReduceSum", sum_inputs, keepdims=1)
    share = ctx.op("Div", [_kept(node, dy[0], ctx, axes), ties])
    return [ctx.op("Mul", [hits, share])] + _rest(node)


gradient("ReduceMax")(_extremum_grad)
gradient("ReduceMin")(_extremum_grad)
