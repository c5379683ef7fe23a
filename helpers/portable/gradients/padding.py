"""The gradient of ``Pad``, in every mode.

``constant``: the inside of the output gradient (a ``Slice``, or a ``Pad`` by the negated pads
where they may be negative); the padding value receives the sum of the border's gradient.
``edge``, ``reflect`` and ``wrap`` copy values of the input into the border: each padded axis is
undone in turn, the border's slices of the gradient added back where they were copied from
(reflected for ``reflect``, summed onto the end value for ``edge``, from the other end for
``wrap``). As for the indexing operators (:mod:`~helpers.portable.gradients.indexing`), a
position read more than once receives the sum of its gradients.
"""

import numpy as np

from ..node_attributes import node_attribute
from .registry import END, gradient


def _plus(ctx, a, b, sign=1):
    """``a + sign * b`` of ints or 1-element values: an int when both are ints."""
    if isinstance(a, int) and isinstance(b, int):
        return a + sign * b
    return ctx.op("Add" if sign > 0 else "Sub", [ctx.vector(a), ctx.vector(b)])


def _along(ctx, grad, axis, start, stop, step=None):
    """``grad[start:stop:step]`` along ``axis``."""
    inputs = [grad, ctx.vector(start), ctx.vector(stop), ctx.axes([axis])]
    return ctx.op("Slice", inputs + ([ctx.axes([step])] if step else []))


def _pad_along(ctx, grad, axis, rank, before, after):
    """``grad`` padded with zeros along ``axis`` only."""
    if isinstance(before, int) and isinstance(after, int):
        pads = np.zeros(2 * rank, np.int64)
        pads[axis], pads[rank + axis] = before, after
        return ctx.op("Pad", [grad, ctx.constant(pads)])
    pieces = [
        ctx.constant(np.zeros(axis, np.int64)),
        ctx.vector(before),
        ctx.constant(np.zeros(rank - 1, np.int64)),
        ctx.vector(after),
        ctx.constant(np.zeros(rank - axis - 1, np.int64)),
    ]
    return ctx.op("Pad", [grad, ctx.op("Concat", pieces, axis=0)])


def _unpad_axis(ctx, grad, mode, axis, rank, before, after, size):
    """The gradient of a ``Pad`` of ``before``/``after`` values in ``mode`` along one axis of
    length ``size``: the centre, plus each border's gradient added where it was copied from
    (reflected, for ``edge`` summed on the end value, for ``wrap`` on the other end)."""
    stop = _plus(ctx, before, size)
    parts = [_along(ctx, grad, axis, before, stop)]
    last = _plus(ctx, size, 1, -1)
    for border, head in ((before, True), (after, False)):
        if border == 0:
            continue
        piece = _along(ctx, grad, axis, 0, before) if head else _along(ctx, grad, axis, stop, END)
        if mode == "edge":
            piece = ctx.op("ReduceSum", [piece, ctx.axes([axis])], keepdims=1)
            where = (0, last) if head else (last, 0)
        elif mode == "reflect":
            piece = _along(ctx, piece, axis, -1, np.iinfo(np.int64).min, -1)
            rest = _plus(ctx, last, border, -1)
            where = (1, rest) if head else (rest, 1)
        else:  # wrap
            rest = _plus(ctx, size, border, -1)
            where = (rest, 0) if head else (0, rest)
        parts.append(_pad_along(ctx, piece, axis, rank, *where))
    return ctx.op("Sum", parts) if len(parts) > 1 else parts[0]


def _pad_amounts(ctx, pads, count):
    """``(before, after)`` per padded axis: ints when ``pads`` is a constant."""
    value = ctx.constant_value(pads)
    if value is not None:
        value = [int(v) for v in np.ravel(value)]
        return list(zip(value[:count], value[count:]))
    return [
        (ctx.op("Gather", [pads, ctx.axes([k])]), ctx.op("Gather", [pads, ctx.axes([k + count])]))
        for k in range(count)
    ]


def _crop(ctx, grad, pads, axes):
    """The gradient of a ``Pad`` in ``constant`` mode: a ``Slice`` of the inside for constant
    non-negative pads, else a ``Pad`` by the negated pads (a crop, where the pads were
    negative)."""
    known = ctx.constant_value(pads)
    if known is None or (np.asarray(known) < 0).any():
        cut = ctx.constant(-np.asarray(known)) if known is not None else ctx.op("Neg", [pads])
        return ctx.op("Pad", [grad, cut, "", axes] if axes else [grad, cut])
    begins, ends = np.split(np.ravel(known).astype(np.int64), 2)
    stops = np.where(ends > 0, -ends, END)
    inputs = [grad, ctx.constant(begins), ctx.constant(stops)]
    return ctx.op("Slice", inputs + ([axes] if axes else []))


@gradient("Pad")
def pad_grad(node, dy, ctx):
    """``constant`` mode: the inside of the gradient (the padding value receives the sum of
    the border's gradient). ``edge``, ``reflect`` and ``wrap``: each padded axis in
    turn, by slices of the gradient added back where the border copied from. The pads may be
    computed at run time (then they are assumed non-negative and, for ``wrap``, at most the
    axis' length; constant ones are checked).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import written_operators
    >>> x, pads = np.ones((4, 6), "f"), np.array([0, 2, 0, 1])
    >>> written_operators(helper.make_node("Pad", ["x", "pads"], ["y"]), {"x": x, "pads": pads})
    ['Slice']
    >>> node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge")
    >>> written_operators(node, {"x": x, "pads": pads})
    ['Slice', 'Slice', 'ReduceSum', 'Pad', 'Slice', 'ReduceSum', 'Pad', 'Sum']
    """
    x, pads = node.input[:2]
    value = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    axes = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    mode = node_attribute(node, "mode", "constant")
    grads = [None] * len(node.input)
    if mode == "constant":
        grads[0] = _crop(ctx, dy[0], pads, axes)
        if value and ctx.needs(value):
            border = ctx.op(
                "Sub",
                [
                    ctx.op("ReduceSum", [dy[0]], keepdims=0),
                    ctx.op("ReduceSum", [grads[0]], keepdims=0),
                ],
            )
            grads[2] = ctx.op("Reshape", [border, ctx.shape_of(value)])
        return grads
    rank = ctx.known_rank(x)
    if axes and ctx.constant_value(axes) is None:
        ctx.refuse("Its gradient needs its axes as a constant.")
    padded = [int(a) % rank for a in np.ravel(ctx.constant_value(axes))] if axes else range(rank)
    grad = dy[0]
    for axis, (before, after) in zip(padded, _pad_amounts(ctx, pads, len(padded))):
        if before == 0 and after == 0:
            continue
        size = ctx.length(x, axis)
        for border in (before, after):
            if isinstance(border, int) and (
                border < 0 or (isinstance(size, int) and border > size)
            ):
                ctx.refuse(f"Its gradient in {mode} mode needs pads from 0 to the axis' length.")
        grad = _unpad_axis(ctx, grad, mode, axis, rank, before, after, size)
    grads[0] = grad
    return grads
