"""Gradients of the arithmetic operators: sums, products, quotients, powers and their kin,
casts, ``Where``, ``Clip`` and the piecewise constant ones (the functions of one value, ``Exp``,
``Log``, ``Sqrt``..., are in :mod:`~helpers.portable.gradients.elementary`).

Every binary operator broadcasts: each operand's gradient is summed back to its own shape
(:meth:`~helpers.portable.gradients.registry.GradientContext.reduce_to`). Where a formula is
``0 * inf`` at a point (a power's at a base of 0), the gradient there is torch's.

``Sign``, ``Floor``, ``Ceil`` and ``Round`` have a gradient of 0 almost everywhere (torch's, at
their steps too): theirs is ``None``, no gradient. That is exact: a value none of its readers
gives a gradient to receives none, a node none of whose outputs receives one is skipped, and a
trained value that receives none gets zeros
(:func:`~helpers.portable.gradients.builder.build_gradients`); a node with several outputs
already meets ``None`` for an output that does not reach the loss.
"""

import numpy as np

from ..node_attributes import node_attribute
from .registry import gradient


def _binary(node, ctx, first, second):
    """The gradients of a broadcast binary node from the full-size terms ``first()`` and
    ``second()`` (called only for an operand that needs one; None for a gradient of 0)."""
    a, b = node.input
    y = node.output[0]
    grads = [first() if ctx.needs(a) else None, second() if ctx.needs(b) else None]
    return [None if g is None else ctx.reduce_to(g, x, y) for g, x in zip(grads, node.input)]


@gradient("Add")
def add_grad(node, dy, ctx):
    """``d(a + b) = da + db``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0]}  # b broadcast along the rows
    >>> written_operators(make_node("Add", ["a", "b"], ["y"]), inputs)
    ['ReduceSum', 'Reshape']
    """
    return _binary(node, ctx, lambda: dy[0], lambda: dy[0])


@gradient("Sub")
def sub_grad(node, dy, ctx):
    """``d(a - b) = da - db``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0]}  # b broadcast along the rows
    >>> written_operators(make_node("Sub", ["a", "b"], ["y"]), inputs)
    ['Neg', 'ReduceSum', 'Reshape']
    """
    return _binary(node, ctx, lambda: dy[0], lambda: ctx.op("Neg", [dy[0]]))


@gradient("Mul")
def mul_grad(node, dy, ctx):
    """``d(a b) = b da + a db``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0]}  # b broadcast along the rows
    >>> written_operators(make_node("Mul", ["a", "b"], ["y"]), inputs)
    ['Mul', 'Mul', 'ReduceSum', 'Reshape']
    """
    a, b = node.input
    return _binary(node, ctx, lambda: ctx.op("Mul", [dy[0], b]), lambda: ctx.op("Mul", [dy[0], a]))


@gradient("Div")
def div_grad(node, dy, ctx):
    """``d(a / b) = da / b - (a / b) db / b``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0]}  # b broadcast along the rows
    >>> written_operators(make_node("Div", ["a", "b"], ["y"]), inputs)
    ['Div', 'Mul', 'Div', 'Neg', 'ReduceSum', 'Reshape']
    """
    a, b = node.input
    y = node.output[0]
    return _binary(
        node,
        ctx,
        lambda: ctx.op("Div", [dy[0], b]),
        lambda: ctx.op("Neg", [ctx.op("Div", [ctx.op("Mul", [dy[0], y]), b])]),
    )


@gradient("Pow")
def pow_grad(node, dy, ctx):
    """``d(a ** b) = b a ** (b - 1) da + log(a) a ** b db``.

    torch's values where these are ``0 * inf``: ``da = 0`` where ``b = 0``, ``db = 0`` where
    ``a = 0`` and ``b >= 0``. A constant scalar exponent (an initializer, a ``Constant`` node)
    writes the first with that number (``2 a`` for a square, nothing for ``b = 0``); an integer
    exponent is cast to the base's type. ``db`` is written only for a floating-point exponent on
    the path to a trained value.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [1.0, 2.0], "b": np.array([2, 3])}  # an integer exponent
    >>> written_operators(make_node("Pow", ["a", "b"], ["y"]), inputs, opset=13)
    ['Cast', 'Sub', 'Pow', 'Mul', 'Equal', 'Where', 'Mul']
    """
    a, b = node.input
    y = node.output[0]

    def base():
        constant = ctx.constant_value(b)
        if constant is not None and np.size(constant) == 1:
            exponent = float(np.ravel(constant)[0])
            if exponent in (0.0, 1.0):
                return None if exponent == 0.0 else dy[0]
            if exponent == 2.0:
                slope = ctx.op("Mul", [a, ctx.scalar_like(2, a)])
            else:
                power = ctx.op("Pow", [a, ctx.scalar_like(exponent - 1, a)])
                slope = ctx.op("Mul", [power, ctx.scalar_like(exponent, a)])
            return ctx.op("Mul", [dy[0], slope])
        b_like = ctx.cast_like(b, a)
        power = ctx.op("Pow", [a, ctx.op("Sub", [b_like, ctx.scalar_like(1, a)])])
        slope = ctx.op("Mul", [b_like, power])
        zero = ctx.scalar_like(0, a)
        slope = ctx.op("Where", [ctx.op("Equal", [b_like, zero]), zero, slope])
        return ctx.op("Mul", [dy[0], slope])

    def exponent():
        zero = ctx.scalar_like(0, y)
        at_zero = ctx.op(
            "And",
            [
                ctx.op("Equal", [a, ctx.scalar_like(0, a)]),
                ctx.op("GreaterOrEqual", [b, ctx.scalar_like(0, b)]),
            ],
        )
        slope = ctx.op("Where", [at_zero, zero, ctx.op("Mul", [y, ctx.op("Log", [a])])])
        grad = ctx.op("Mul", [dy[0], slope])
        return grad if ctx.types.get(b) == ctx.types.get(y) else ctx.cast_like(grad, b)

    return _binary(node, ctx, base, exponent)


@gradient("Neg")
def neg_grad(node, dy, ctx):
    """``d(-x) = -dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Neg", ["x"], ["y"]), {"x": [1.0]})
    ['Neg']
    """
    return [ctx.op("Neg", [dy[0]])]


@gradient("Identity")
def identity_grad(node, dy, ctx):
    """The gradient passes through.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Identity", ["x"], ["y"]), {"x": [1.0]})
    []
    """
    return [dy[0]]


@gradient("Sum")
def sum_grad(node, dy, ctx):
    """``Sum`` broadcasts its operands as ``Add`` does.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0], "c": [[4.0, 5.0]]}
    >>> written_operators(make_node("Sum", ["a", "b", "c"], ["y"]), inputs)
    ['ReduceSum', 'Reshape']
    """
    y = node.output[0]
    return [ctx.reduce_to(dy[0], x, y) if ctx.needs(x) else None for x in node.input]


@gradient("Mean")
def mean_grad(node, dy, ctx):
    """``Mean`` of ``n`` operands: each one's gradient is ``dy / n``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0], "c": [[4.0, 5.0]]}
    >>> written_operators(make_node("Mean", ["a", "b", "c"], ["y"]), inputs)
    ['Mul', 'ReduceSum', 'Reshape']
    """
    y = node.output[0]
    part = ctx.op("Mul", [dy[0], ctx.scalar_like(1.0 / len(node.input), y)])
    return [ctx.reduce_to(part, x, y) if ctx.needs(x) else None for x in node.input]


@gradient("Cast")
def cast_grad(node, dy, ctx):
    """The gradient cast back to the input's type (a float input only: others need none).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Cast", ["x"], ["y"], to=1)  # to float32
    >>> written_operators(node, {"x": [1.0]}), written_operators(node, {"x": np.array([1])})
    (['Cast'], [])
    """
    x = node.input[0]
    if not ctx.needs(x):
        return [None]
    if ctx.types.get(x) == ctx.types.get(node.output[0]):
        return [dy[0]]
    return [ctx.cast_like(dy[0], x)]


@gradient("CastLike")
def cast_like_grad(node, dy, ctx):
    """As ``Cast``; the second input only gives a type.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("CastLike", ["x", "like"], ["y"])
    >>> written_operators(node, {"x": [1.0], "like": np.zeros(1, "f")})
    ['Cast']
    """
    return [cast_grad(node, dy, ctx)[0], None]


@gradient("Where")
def where_grad(node, dy, ctx):
    """The gradient goes to the branch each element came from.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": [[1.0, 2.0]], "b": [3.0]}  # b broadcast along the rows
    >>> inputs["c"] = np.array([True, False])
    >>> written_operators(make_node("Where", ["c", "a", "b"], ["y"]), inputs)
    ['Where', 'Where', 'ReduceSum', 'Reshape']
    """
    condition, a, b = node.input
    y = node.output[0]
    zero = ctx.scalar_like(0, y)
    return [
        None,
        ctx.reduce_to(ctx.op("Where", [condition, dy[0], zero]), a, y) if ctx.needs(a) else None,
        ctx.reduce_to(ctx.op("Where", [condition, zero, dy[0]]), b, y) if ctx.needs(b) else None,
    ]


def _extremum_grad(node, dy, ctx):
    """``Max`` and ``Min``: the gradient is shared evenly between the operands equal to the
    result, as torch's ``maximum`` and ``minimum`` share a tie between two."""
    y = node.output[0]
    if len(node.input) == 1:
        return [dy[0]]
    equal = [ctx.cast_like(ctx.op("Equal", [x, y]), y) for x in node.input]
    share = ctx.op("Div", [dy[0], ctx.op("Sum", equal)])
    return [
        ctx.reduce_to(ctx.op("Mul", [share, mask]), x, y) if ctx.needs(x) else None
        for x, mask in zip(node.input, equal)
    ]


gradient("Max")(_extremum_grad)
gradient("Min")(_extremum_grad)


@gradient("Clip")
def clip_grad(node, dy, ctx):
    """torch's ``clamp`` rule: ``x`` receives the gradient where ``min <= x <= max``, ``min``
    where ``x < min < max``, ``max`` where ``x > max`` or ``max < min``; an absent bound is no
    test.

    torch's ``Hardtanh`` and ``ReLU6`` also export to ``Clip``, with 0 at the bounds; the
    training graph rewrites the ``Clip`` nodes their export lists
    (:mod:`helpers.core.layers.activations`): a node alone does not tell them apart.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Clip", ["x", "low", "high"], ["y"])
    >>> operators = written_operators(node, {"x": [1.0], "low": [0.0], "high": [2.0]})
    >>> operators[:4], operators.count("Where")  # one gradient each, the bounds trained too
    (['GreaterOrEqual', 'LessOrEqual', 'And', 'Where'], 3)
    """
    x = node.input[0]
    low, high = (list(node.input[1:]) + ["", ""])[:2]
    y = node.output[0]
    zero = ctx.scalar_like(0, y)
    grads = [None] * len(node.input)
    if ctx.needs(x):
        inside = None
        for test, bound in (("GreaterOrEqual", low), ("LessOrEqual", high)):
            if bound:
                within = ctx.op(test, [x, bound])
                inside = within if inside is None else ctx.op("And", [inside, within])
        grads[0] = dy[0] if inside is None else ctx.op("Where", [inside, dy[0], zero])
    if low and ctx.needs(low):
        below = ctx.op("Less", [x, low])
        if high:
            below = ctx.op("And", [below, ctx.op("Less", [low, high])])
        grads[1] = ctx.reduce_to(ctx.op("Where", [below, dy[0], zero]), low, y)
    if high and ctx.needs(high):
        above = ctx.op("Greater", [x, high])
        if low:
            above = ctx.op("Or", [above, ctx.op("Less", [high, low])])
        grads[2] = ctx.reduce_to(ctx.op("Where", [above, dy[0], zero]), high, y)
    return grads


def _no_gradient(node, dy, ctx):
    """Piecewise constant: no gradient (0 almost everywhere, and torch's 0 at the steps)."""
    return [None] * len(node.input)


for _op_type in ("Sign", "Floor", "Ceil", "Round"):
    gradient(_op_type)(_no_gradient)


@gradient("Mod")
def mod_grad(node, dy, ctx):
    """Floating-point ``Mod`` (``fmod=1``, torch's ``fmod``), ``a - b trunc(a / b)``:
    ``da = dy``, ``db = -trunc(a / b) dy``; the standard allows no other ``Mod`` of floats.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Mod", ["a", "b"], ["y"], fmod=1)
    >>> written_operators(node, {"a": [1.0], "b": [3.0]})
    ['Div', 'Abs', 'Floor', 'Sign', 'Mul', 'Mul', 'Neg']
    """
    a, b = node.input
    if not node_attribute(node, "fmod", 0):
        ctx.refuse("A Mod of floating-point values needs fmod=1.")

    def divisor():
        quotient = ctx.op("Div", [a, b])
        size = ctx.op("Floor", [ctx.op("Abs", [quotient])])
        truncated = ctx.op("Mul", [ctx.op("Sign", [quotient]), size])
        return ctx.op("Neg", [ctx.op("Mul", [dy[0], truncated])])

    return _binary(node, ctx, lambda: dy[0], divisor)
