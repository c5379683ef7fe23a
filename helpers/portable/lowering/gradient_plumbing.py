"""Lowerings of the operators that carry gradients around: scaling, broadcast axes, accumulation.

These operators do no arithmetic of a layer: ``Scale`` divides the loss gradient by the batch
size, ``BroadcastGradientArgs`` finds the axes along which a broadcast operand's gradient is
summed (from shapes known only at run time: the batch size stays free), and
``InPlaceAccumulatorV2`` adds a gradient to its accumulation buffer.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .registry import register


@register("Scale")
def lower_scale(node, ctx):
    """``Scale(A, scale)``: ``A * float(scale)``, or ``A * (1 / float(scale))`` if ``scale_down``.

    The kernel casts ``scale`` (float or int64, one value) to float, takes its reciprocal in
    float when ``scale_down`` is set, and multiplies: ``Mul(A, Reciprocal(Cast(scale)))`` is the
    same rounding (a ``Div`` may differ by one unit in the last place).

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("Scale", ["g", "n"], ["y"], domain="com.microsoft", scale_down=1)
    >>> [n.op_type for n in lower_scale(node, LoweringContext(17))]
    ['Reshape', 'Cast', 'Reciprocal', 'CastLike', 'Mul']
    """
    scale_down = next((a.i for a in node.attribute if a.name == "scale_down"), 0)
    data, scale = node.input
    one_value, as_float, factor = ctx.name("scale"), ctx.name("scale_float"), ctx.name("factor")
    nodes = [
        helper.make_node(
            "Reshape", [scale, ctx.constant(np.zeros(0, np.int64), "scalar")], [one_value]
        ),
        helper.make_node("Cast", [one_value], [as_float], to=TensorProto.FLOAT),
    ]
    if scale_down:
        inverse = ctx.name("inverse")
        nodes.append(helper.make_node("Reciprocal", [as_float], [inverse]))
        as_float = inverse
    nodes += [
        ctx.cast_like(as_float, data, factor),
        helper.make_node("Mul", [data, factor], [node.output[0]]),
    ]
    return nodes


@register("BroadcastGradientArgs")
def lower_broadcast_gradient_args(node, ctx):
    """The axes along which each of two broadcast operands was repeated, from their shapes.

    With both shapes right-aligned on ``r = max(len(a), len(b))`` axes, axis ``k`` is one of
    ``a``'s when ``a`` has no such axis (the shorter shape), or when ``a[k] == 1 != b[k]``; the
    same for ``b``. The kernel lists them from the last axis to the first; so does this.
    Standard operators: each shape padded on the left with ``-1`` (no dimension is negative)
    by ``ConstantOfShape`` and ``Concat``, the tests with ``Equal``/``Not``/``And``/``Or``,
    the mask reversed with a ``Slice`` of step ``-1``, its indices by ``NonZero``, and
    ``k = r - 1 - index``. Every shape is a run-time value: no batch size is folded in.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node(
    ...     "BroadcastGradientArgs", ["a", "b"], ["", "b_axes"], domain="com.microsoft")
    >>> lowered = lower_broadcast_gradient_args(node, LoweringContext(17))
    >>> lowered[-1].output[0], sorted({n.op_type for n in lowered})[:4]
    ('b_axes', ['And', 'Concat', 'ConstantOfShape', 'Equal'])
    """
    shapes = list(node.input)
    sizes = [ctx.name("size_a"), ctx.name("size_b")]
    rank = ctx.name("rank")
    one, minus_one = (
        ctx.constant(np.array(1, np.int64), "one"),
        ctx.constant(np.array(-1, np.int64), "minus_one"),
    )
    nodes = [helper.make_node("Size", [s], [n]) for s, n in zip(shapes, sizes)]
    nodes.append(helper.make_node("Max", sizes, [rank]))
    padded, is_one, is_real = [], [], []
    for shape, size in zip(shapes, sizes):
        missing, missing_1d, pad, full = (
            ctx.name(t) for t in ("missing", "missing_1d", "pad", "padded")
        )
        one_flag, pad_flag, real_flag = ctx.name("is_one"), ctx.name("is_pad"), ctx.name("is_real")
        nodes += [
            helper.make_node("Sub", [rank, size], [missing]),
            helper.make_node(
                "Unsqueeze", [missing, ctx.constant(np.array([0], np.int64), "axis0")], [missing_1d]
            ),
            helper.make_node(
                "ConstantOfShape",
                [missing_1d],
                [pad],
                value=numpy_helper.from_array(np.array([-1], np.int64)),
            ),
            helper.make_node("Concat", [pad, shape], [full], axis=0),
            helper.make_node("Equal", [full, one], [one_flag]),
            helper.make_node("Equal", [full, minus_one], [pad_flag]),
            helper.make_node("Not", [pad_flag], [real_flag]),
        ]
        padded.append(pad_flag)
        is_one.append(one_flag)
        is_real.append(real_flag)
    last = ctx.name("last")
    nodes.append(helper.make_node("Sub", [rank, one], [last]))
    for side, output in enumerate(node.output):
        if not output:
            continue
        other = 1 - side
        names = [
            ctx.name(t)
            for t in (
                "other_not_one",
                "other_differs",
                "squeezed",
                "axes_mask",
                "reversed",
                "indices",
                "flat",
            )
        ]
        not_one, differs, squeezed, mask, reversed_mask, indices, flat = names
        nodes += [
            helper.make_node("Not", [is_one[other]], [not_one]),
            helper.make_node("And", [not_one, is_real[other]], [differs]),
            helper.make_node("And", [is_one[side], differs], [squeezed]),
            helper.make_node("Or", [padded[side], squeezed], [mask]),
            helper.make_node(
                "Slice",
                [
                    mask,
                    ctx.constant(np.array([-1], np.int64), "start"),
                    ctx.constant(np.array([np.iinfo(np.int64).min], np.int64), "stop"),
                    ctx.constant(np.array([0], np.int64), "axis0"),
                    ctx.constant(np.array([-1], np.int64), "step"),
                ],
                [reversed_mask],
            ),
            helper.make_node("NonZero", [reversed_mask], [indices]),
            helper.make_node(
                "Reshape", [indices, ctx.constant(np.array([-1], np.int64), "flat")], [flat]
            ),
            helper.make_node("Sub", [last, flat], [output]),
        ]
    return nodes


@register("InPlaceAccumulatorV2")
def lower_in_place_accumulator_v2(node, ctx):
    """``InPlaceAccumulatorV2(buffer, value[, overwrite])``: ``updated`` and the accumulated value.

    The kernel writes ``value`` into the buffer when ``overwrite`` is true, else
    ``buffer + value``, and returns ``updated`` (always true) and the buffer's new content. The
    lowering: ``Where(overwrite, value, Add(buffer, value))``, ``Add`` alone without
    ``overwrite``, and a constant ``[True]`` for ``updated`` (shape ``[1]``, as the kernel's).
    When ``overwrite`` is a constant of the model (:meth:`LoweringContext.constant_value`), the
    choice is made now: a step model sets the training model's ``lazy_reset_grad`` to a
    ``True`` initializer (its gradient buffers are reset every step), and the accumulated
    gradient becomes ``Identity(value)``, with no buffer read.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("InPlaceAccumulatorV2", ["buf", "g", "reset"], ["done", "acc"],
    ...                         domain="com.microsoft")
    >>> [n.op_type for n in lower_in_place_accumulator_v2(node, LoweringContext(17))]
    ['Constant', 'Add', 'Reshape', 'Where']
    >>> ctx = LoweringContext(17, known={"reset": np.array(True)})
    >>> [n.op_type for n in lower_in_place_accumulator_v2(node, ctx)]
    ['Constant', 'Identity']
    """
    buffer, value = node.input[:2]
    overwrite = node.input[2] if len(node.input) > 2 else ""
    updated = node.output[0]
    accumulated = node.output[1] if len(node.output) > 1 else ""
    nodes = []
    if updated:
        nodes.append(
            helper.make_node(
                "Constant", [], [updated], value=numpy_helper.from_array(np.array([True]))
            )
        )
    if not accumulated:
        return nodes
    known = ctx.constant_value(overwrite) if overwrite else np.array(False)
    if known is not None and bool(np.asarray(known).reshape(-1)[0]):
        return nodes + [helper.make_node("Identity", [value], [accumulated])]
    if known is not None:
        return nodes + [helper.make_node("Add", [buffer, value], [accumulated])]
    total, flag = ctx.name("sum"), ctx.name("overwrite")
    return nodes + [
        helper.make_node("Add", [buffer, value], [total]),
        helper.make_node(
            "Reshape", [overwrite, ctx.constant(np.zeros(0, np.int64), "scalar")], [flag]
        ),
        helper.make_node("Where", [flag, value, total], [accumulated]),
    ]
