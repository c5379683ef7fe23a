"""Lowerings of the gradients of the indexing operators: gather, slice.

Each gradient is a tensor of zeros of the input's shape into which the output gradient is added
at the positions the forward read: ``ScatterND`` with ``reduction='add'`` (opset 16) where
positions repeat (``Gather``, ``GatherND``), ``ScatterElements`` where they cannot (``Slice``).
"""

import numpy as np
from onnx import helper, numpy_helper

from .registry import UnsupportedOperatorError, register

#: The stop of a ``Slice`` that runs to the end of an axis.
_END = np.iinfo(np.int64).max


def _vector(ctx, value, tag):
    return ctx.constant(np.array([value], np.int64), tag)


def _zeros(ctx, shape):
    """A node writing float32 zeros of the run-time ``shape``, and its output."""
    zeros = ctx.name("zeros")
    value = numpy_helper.from_array(np.zeros(1, np.float32))
    return helper.make_node("ConstantOfShape", [shape], [zeros], value=value), zeros


def _check_scatter_add(node, ctx):
    if ctx.opset < 16:  # ScatterND's reduction attribute
        raise UnsupportedOperatorError(node.op_type, node.domain, node.name)


def _product(ctx, shape, start, stop, tag):
    """Nodes and name of the product of ``shape[start:stop]``, a 1-element vector (1 if empty)."""
    part, padded, product = ctx.name(f"{tag}_dims"), ctx.name(f"{tag}_padded"), ctx.name(tag)
    return [
        helper.make_node("Slice", [shape, start, stop], [part]),
        helper.make_node("Concat", [_vector(ctx, 1, "one"), part], [padded], axis=0),
        helper.make_node("ReduceProd", [padded], [product], keepdims=1),
    ], product


def _axis_bounds(ctx, shape, axis):
    """Nodes and the names of ``[axis]`` and ``[axis + 1]`` as positions in ``shape``."""
    if axis >= 0:
        return [], _vector(ctx, axis, "axis"), _vector(ctx, axis + 1, "after_axis")
    rank, start, after = ctx.name("rank"), ctx.name("axis"), ctx.name("after_axis")
    return (
        [
            helper.make_node("Shape", [shape], [rank]),
            helper.make_node("Add", [rank, _vector(ctx, axis, "negative_axis")], [start]),
            helper.make_node("Add", [start, _vector(ctx, 1, "one")], [after]),
        ],
        start,
        after,
    )


@register("GatherGrad")
def lower_gather_grad(node, ctx):
    """``GatherGrad(shape, indices, dY)``: ``dY`` added into zeros of ``shape`` at ``indices``
    along ``axis``.

    With ``shape = outer + [n] + inner`` around ``axis``, ``dY`` is viewed as
    ``[outer, len(indices), inner]`` and transposed to put the indices first; a
    ``ScatterND(reduction='add')`` adds it into zeros ``[n, outer, inner]`` at the indices
    (negative ones counted from the end, as ``Gather`` reads them); the result is transposed
    back and reshaped to ``shape``. Every tensor has rank 3: the lowering needs no rank from
    the model. Repeated indices add in another order than the kernel's: equal to float32
    rounding.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("GatherGrad", ["shape", "ids", "dy"], ["dx"],
    ...                         domain="com.microsoft", axis=1)
    >>> "ScatterND" in [n.op_type for n in lower_gather_grad(node, LoweringContext(17))]
    True
    """
    _check_scatter_add(node, ctx)
    shape, indices, d_y = node.input
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    nodes, start, after = _axis_bounds(ctx, shape, axis)
    outer_nodes, outer = _product(ctx, shape, _vector(ctx, 0, "begin"), start, "outer")
    inner_nodes, inner = _product(ctx, shape, after, _vector(ctx, _END, "end"), "inner")
    nodes += outer_nodes + inner_nodes
    size, count, view, viewed, by_index = (
        ctx.name(t) for t in ("n", "count", "view", "viewed", "by_index")
    )
    ids, ids64, shifted, negative, wrapped = (
        ctx.name(t) for t in ("ids", "ids64", "shifted", "negative", "wrapped")
    )
    table_shape, table, back = ctx.name("table_shape"), ctx.name("table"), ctx.name("back")
    zeros_node, zeros = _zeros(ctx, table_shape)
    nodes += [
        helper.make_node("Slice", [shape, start, after], [size]),
        helper.make_node("Size", [indices], [count]),
        helper.make_node("Reshape", [count, _vector(ctx, 1, "one")], [count + "_1d"]),
        helper.make_node("Concat", [outer, count + "_1d", inner], [view], axis=0),
        helper.make_node("Reshape", [d_y, view], [viewed]),
        helper.make_node("Transpose", [viewed], [by_index], perm=[1, 0, 2]),
        helper.make_node(
            "Reshape", [indices, ctx.constant(np.array([-1, 1], np.int64), "column")], [ids]
        ),
        helper.make_node("Cast", [ids], [ids64], to=7),  # int64
        helper.make_node("Add", [ids64, size], [shifted]),
        helper.make_node("Less", [ids64, ctx.constant(np.array(0, np.int64), "zero")], [negative]),
        helper.make_node("Where", [negative, shifted, ids64], [wrapped]),
        helper.make_node("Concat", [size, outer, inner], [table_shape], axis=0),
        zeros_node,
        helper.make_node("ScatterND", [zeros, wrapped, by_index], [table], reduction="add"),
        helper.make_node("Transpose", [table], [back], perm=[1, 0, 2]),
        helper.make_node("Reshape", [back, shape], [node.output[0]]),
    ]
    return nodes


@register("GatherNDGrad")
def lower_gather_nd_grad(node, ctx):
    """``GatherNDGrad(shape, indices, dY) = ScatterND(zeros(shape), indices, dY, 'add')``.

    ``batch_dims`` other than 0 is refused by name (``GatherND`` of an embedding has none).
    Repeated indices add in another order than the kernel's: equal to float32 rounding.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("GatherNDGrad", ["shape", "ids", "dy"], ["dx"],
    ...                         domain="com.microsoft")
    >>> [n.op_type for n in lower_gather_nd_grad(node, LoweringContext(17))]
    ['ConstantOfShape', 'ScatterND']
    """
    _check_scatter_add(node, ctx)
    if next((a.i for a in node.attribute if a.name == "batch_dims"), 0):
        raise UnsupportedOperatorError(node.op_type, node.domain, node.name)
    shape, indices, d_y = node.input
    zeros_node, zeros = _zeros(ctx, shape)
    return [
        zeros_node,
        helper.make_node("ScatterND", [zeros, indices, d_y], [node.output[0]], reduction="add"),
    ]


def _unit_steps(node, ctx):
    """Whether the node's ``steps`` are absent or a constant of ones."""
    if len(node.input) < 6 or not node.input[5]:
        return True
    steps = ctx.constant_value(node.input[5])
    return steps is not None and bool(np.all(steps == 1))


def _slice_pads(node, ctx):
    """Nodes and name of the ``Pad`` pads that put a unit-step slice's values back in place."""
    _, shape, starts, ends, *rest = node.input
    axes = rest[0] if rest and rest[0] else ""
    names = [ctx.name(t) for t in ("rank", "count", "axes", "negative_axes", "wrapped_axes",
                                   "dims", "pad_positions", "after_positions", "positions",
                                   "after", "lengths", "zeros", "pads")]  # fmt: skip
    rank, count, all_axes, negative_axes, wrapped, dims = names[:6]
    pad_positions, after_positions, positions, after, lengths, zeros, pads = names[6:]
    zero = ctx.constant(np.array(0, np.int64), "zero")
    nodes = [helper.make_node("Size", [shape], [rank])]
    if not axes:  # the first axes, one per start
        nodes += [
            helper.make_node("Size", [starts], [count]),
            helper.make_node(
                "Range", [zero, count, ctx.constant(np.array(1, np.int64), "step")], [all_axes]
            ),
        ]
        axes = all_axes
    else:
        nodes.append(helper.make_node("Cast", [axes], [all_axes], to=7))
        axes = all_axes
    nodes += [
        helper.make_node("Add", [axes, rank], [negative_axes]),
        helper.make_node("Less", [axes, zero], [negative_axes + "_flag"]),
        helper.make_node("Where", [negative_axes + "_flag", negative_axes, axes], [wrapped]),
        helper.make_node("Gather", [shape, wrapped], [dims]),
    ]
    bounds = []
    for bound in (starts, ends):
        as_int, shifted, flag, wrapped_bound, low, clamped = (
            ctx.name(t)
            for t in ("bound", "shifted", "negative", "wrapped", "at_most_dim", "clamped")
        )
        nodes += [
            helper.make_node("Cast", [bound], [as_int], to=7),
            helper.make_node("Add", [as_int, dims], [shifted]),
            helper.make_node("Less", [as_int, zero], [flag]),
            helper.make_node("Where", [flag, shifted, as_int], [wrapped_bound]),
            helper.make_node("Min", [wrapped_bound, dims], [low]),
            helper.make_node("Max", [low, zero], [clamped]),
        ]
        bounds.append(clamped)
    stop = ctx.name("stop")
    nodes += [
        helper.make_node("Max", [bounds[1], bounds[0]], [stop]),
        helper.make_node("Sub", [dims, stop], [after]),
        helper.make_node("Add", [wrapped, rank], [after_positions]),
        helper.make_node("Concat", [wrapped, after_positions], [positions], axis=0),
        helper.make_node("Concat", [bounds[0], after], [lengths], axis=0),
        helper.make_node("Mul", [rank, _vector(ctx, 2, "two")], [pad_positions]),
        helper.make_node(
            "ConstantOfShape", [pad_positions], [zeros],
            value=numpy_helper.from_array(np.zeros(1, np.int64)),
        ),
        helper.make_node("ScatterElements", [zeros, positions, lengths], [pads], axis=0),
    ]  # fmt: skip
    return nodes, pads


@register("SliceGrad")
def lower_slice_grad(node, ctx):
    """``SliceGrad(dY, shape, starts, ends[, axes, steps])``: ``dY`` written into zeros of
    ``shape`` where the ``Slice`` read.

    Steps absent or constant ones (the usual case): a ``Pad`` of ``dY`` by zeros, the pads
    computed at run time from the bounds as ``Slice`` reads them (negative ones counted from the
    end, clamped to the axis). Other steps: the positions are the same ``Slice`` of
    ``Range(0, size)`` reshaped to ``shape``, where one ``ScatterElements`` writes ``dY`` into
    flattened zeros. Each value is copied once: exact.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("SliceGrad", ["dy", "shape", "s", "e", "a"], ["dx"],
    ...                         domain="com.microsoft")
    >>> lower_slice_grad(node, LoweringContext(17))[-1].op_type
    'Pad'
    >>> node.input.append("steps")
    >>> lower_slice_grad(node, LoweringContext(17))[-1].op_type
    'Reshape'
    """
    d_y, shape, *bounds = node.input
    if _unit_steps(node, ctx):
        nodes, pads = _slice_pads(node, ctx)
        return nodes + [helper.make_node("Pad", [d_y, pads], [node.output[0]], mode="constant")]
    names = [ctx.name(t) for t in ("size", "size_1d", "range", "grid", "positions", "flat",
                                   "flat_dy", "written")]  # fmt: skip
    size, size_1d, numbers, grid, positions, flat, flat_d_y, written = names
    zeros_node, zeros = _zeros(ctx, size_1d)
    flatten = ctx.constant(np.array([-1], np.int64), "flatten")
    zero, one = (
        ctx.constant(np.array(0, np.int64), "zero"),
        ctx.constant(np.array(1, np.int64), "step"),
    )
    return [
        helper.make_node("ReduceProd", [shape], [size], keepdims=0),
        helper.make_node("Reshape", [size, _vector(ctx, 1, "one")], [size_1d]),
        helper.make_node("Range", [zero, size, one], [numbers]),
        helper.make_node("Reshape", [numbers, shape], [grid]),
        helper.make_node("Slice", [grid, *bounds], [positions]),
        helper.make_node("Reshape", [positions, flatten], [flat]),
        helper.make_node("Reshape", [d_y, flatten], [flat_d_y]),
        zeros_node,
        helper.make_node("ScatterElements", [zeros, flat, flat_d_y], [written], axis=0),
        helper.make_node("Reshape", [written, shape], [node.output[0]]),
    ]
