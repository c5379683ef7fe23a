"""Gradients of the arithmetic operators: sums, products, quotients, powers and their kin.

Every binary operator broadcasts: each operand's gradient is summed back to its own shape
(:meth:`~helpers.portable.gradients.registry.GradientContext.reduce_to`).
"""

from .registry import gradient


def _binary(node, ctx, first, second):
    """The gradients of a broadcast binary node from the full-size terms ``first()`` and
    ``second()`` (called only for an operand that needs one)."""
    a, b = node.input
    y = node.output[0]
    return [
        ctx.reduce_to(first(), a, y) if ctx.needs(a) else None,
        ctx.reduce_to(second(), b, y) if ctx.needs(b) else None,
    ]


@gradient("Add")
def add_grad(node, dy, ctx):
    """``d(a + b) = da + db``."""
    return _binary(node, ctx, lambda: dy[0], lambda: dy[0])


@gradient("Sub")
def sub_grad(node, dy, ctx):
    """``d(a - b) = da - db``."""
    return _binary(node, ctx, lambda: dy[0], lambda: ctx.op("Neg", [dy[0]]))


@gradient("Mul")
def mul_grad(node, dy, ctx):
    """``d(a b) = b da + a db``."""
    a, b = node.input
    return _binary(node, ctx, lambda: ctx.op("Mul", [dy[0], b]), lambda: ctx.op("Mul", [dy[0], a]))


@gradient("Div")
def div_grad(node, dy, ctx):
    """``d(a / b) = da / b - (a / b) db / b``."""
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
    """``d(a ** b) = b a ** (b - 1) da + log(a) a ** b db``."""
    a, b = node.input
    y = node.output[0]

    def base():
        b_like = b if ctx.types.get(b) == ctx.types.get(a) else ctx.op("CastLike", [b, a])
        one = ctx.scalar_like(1, a)
        power = ctx.op("Pow", [a, ctx.op("Sub", [b_like, one])])
        return ctx.op("Mul", [dy[0], ctx.op("Mul", [b_like, power])])

    def exponent():
        return ctx.op("Mul", [dy[0], ctx.op("Mul", [y, ctx.op("Log", [a])])])

    return _binary(node, ctx, base, exponent)


@gradient("Neg")
def neg_grad(node, dy, ctx):
    """``d(-x) = -dx``."""
    return [ctx.op("Neg", [dy[0]])]


@gradient("Identity")
def identity_grad(node, dy, ctx):
    """The gradient passes through."""
    return [dy[0]]


@gradient("Sum")
def sum_grad(node, dy, ctx):
    """``Sum`` broadcasts its operands as ``Add`` does."""
    y = node.output[0]
    return [ctx.reduce_to(dy[0], x, y) if ctx.needs(x) else None for x in node.input]


@gradient("Mean")
def mean_grad(node, dy, ctx):
    """``Mean`` of ``n`` operands: each one's gradient is ``dy / n``."""
    y = node.output[0]
    part = ctx.op("Mul", [dy[0], ctx.scalar_like(1.0 / len(node.input), y)])
    return [ctx.reduce_to(part, x, y) if ctx.needs(x) else None for x in node.input]


@gradient("Sqrt")
def sqrt_grad(node, dy, ctx):
    """``d sqrt(x) = dx / (2 sqrt(x))``."""
    y = node.output[0]
    return [ctx.op("Div", [dy[0], ctx.op("Mul", [y, ctx.scalar_like(2, y)])])]


@gradient("Exp")
def exp_grad(node, dy, ctx):
    """``d exp(x) = exp(x) dx``."""
    return [ctx.op("Mul", [dy[0], node.output[0]])]


@gradient("Log")
def log_grad(node, dy, ctx):
    """``d log(x) = dx / x``."""
    return [ctx.op("Div", [dy[0], node.input[0]])]


@gradient("Reciprocal")
def reciprocal_grad(node, dy, ctx):
    """``d (1 / x) = -dx / x**2 = -(1/x)**2 dx``."""
    y = node.output[0]
    return [ctx.op("Neg", [ctx.op("Mul", [dy[0], ctx.op("Mul", [y, y])])])]


@gradient("Abs")
def abs_grad(node, dy, ctx):
    """``d|x| = sign(x) dx`` (0 at 0, as torch)."""
    return [ctx.op("Mul", [dy[0], ctx.op("Sign", [node.input[0]])])]


@gradient("Erf")
def erf_grad(node, dy, ctx):
    """``d erf(x) = 2 / sqrt(pi) exp(-x**2) dx``."""
    x = node.input[0]
    square = ctx.op("Mul", [x, x])
    density = ctx.op("Exp", [ctx.op("Neg", [square])])
    scaled = ctx.op("Mul", [density, ctx.scalar_like(1.1283791670955126, x)])
    return [ctx.op("Mul", [dy[0], scaled])]


@gradient("Cast")
def cast_grad(node, dy, ctx):
    """The gradient cast back to the input's type (a float input only: others need none)."""
    x = node.input[0]
    if ctx.types.get(x) == ctx.types.get(node.output[0]):
        return [dy[0]]
    return [ctx.op("CastLike", [dy[0], x]) if ctx.opset >= 15 else _cast_to(ctx, dy[0], x)]


def _cast_to(ctx, value, like):
    return ctx.op("Cast", [value], to=ctx.types[like])


@gradient("CastLike")
def cast_like_grad(node, dy, ctx):
    """As ``Cast``; the second input only gives a type."""
    return [cast_grad(node, dy, ctx)[0], None]


def _selected(ctx, dy, condition):
    """``dy`` where ``condition`` holds, 0 elsewhere."""
    return ctx.op("Where", [condition, dy, ctx.scalar_like(0, dy)])


@gradient("Where")
def where_grad(node, dy, ctx):
    """The gradient goes to the branch each element came from."""
    condition, a, b = node.input
    y = node.output[0]
    zero = ctx.scalar_like(0, y)
    return [
        None,
        ctx.reduce_to(ctx.op("Where", [condition, dy[0], zero]), a, y) if ctx.needs(a) else None,
        ctx.reduce_to(ctx.op("Where", [condition, zero, dy[0]]), b, y) if ctx.needs(b) else None,
    ]


def _extremum_grad(node, dy, ctx):
    """``Max`` and ``Min``: the gradient goes to every operand equal to the result (torch
    splits a tie between two operands evenly; so does this for two)."""
    y = node.output[0]
    grads = []
    equal = [ctx.op("Cast", [ctx.op("Equal", [x, y])], to=ctx.types.get(y, 1)) for x in node.input]
    count = equal[0] if len(equal) == 1 else ctx.op("Sum", equal)
    share = ctx.op("Div", [dy[0], count])
    for x, mask in zip(node.input, equal):
        grads.append(ctx.reduce_to(ctx.op("Mul", [share, mask]), x, y) if ctx.needs(x) else None)
    return grads


gradient("Max")(_extremum_grad)
gradient("Min")(_extremum_grad)


@gradient("Clip")
def clip_grad(node, dy, ctx):
    """The gradient passes where ``min <= x <= max`` (torch's ``clamp`` rule), else 0."""
    x = node.input[0]
    inside = None
    for index, test in ((1, "GreaterOrEqual"), (2, "LessOrEqual")):
        if len(node.input) > index and node.input[index]:
            bound = ctx.op(test, [x, node.input[index]])
            inside = bound if inside is None else ctx.op("And", [inside, bound])
    grad = dy[0] if inside is None else _selected(ctx, dy[0], inside)
    return [grad] + [None] * (len(node.input) - 1)
