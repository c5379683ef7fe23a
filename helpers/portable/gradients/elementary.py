"""Gradients of the elementary functions of one value: ``Sqrt``, ``Exp``, ``Log``,
``Reciprocal``, ``Abs``, ``Erf``, and the trigonometric and hyperbolic functions and their
inverses.

Each gradient is the output's gradient times the function's derivative, computed from the
node's input ``x`` or, where it is cheaper and as exact, from its output ``y`` (``Sqrt``,
``Exp``, ``Reciprocal``, ``Tan``). ``Abs``'s is 0 at 0, as torch's.
"""

from .registry import gradient


@gradient("Sqrt")
def sqrt_grad(node, dy, ctx):
    """``d sqrt(x) = dx / (2 sqrt(x))``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Sqrt", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Div']
    """
    y = node.output[0]
    return [ctx.op("Div", [dy[0], ctx.op("Mul", [y, ctx.scalar_like(2, y)])])]


@gradient("Exp")
def exp_grad(node, dy, ctx):
    """``d exp(x) = exp(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Exp", ["x"], ["y"]), {"x": [1.0]})
    ['Mul']
    """
    return [ctx.op("Mul", [dy[0], node.output[0]])]


@gradient("Log")
def log_grad(node, dy, ctx):
    """``d log(x) = dx / x``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Log", ["x"], ["y"]), {"x": [1.0]})
    ['Div']
    """
    return [ctx.op("Div", [dy[0], node.input[0]])]


@gradient("Reciprocal")
def reciprocal_grad(node, dy, ctx):
    """``d (1 / x) = -dx / x**2 = -(1/x)**2 dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Reciprocal", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Mul', 'Neg']
    """
    y = node.output[0]
    return [ctx.op("Neg", [ctx.op("Mul", [dy[0], ctx.op("Mul", [y, y])])])]


@gradient("Abs")
def abs_grad(node, dy, ctx):
    """``d|x| = sign(x) dx`` (0 at 0, as torch).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Abs", ["x"], ["y"]), {"x": [1.0]})
    ['Sign', 'Mul']
    """
    return [ctx.op("Mul", [dy[0], ctx.op("Sign", [node.input[0]])])]


@gradient("Erf")
def erf_grad(node, dy, ctx):
    """``d erf(x) = 2 / sqrt(pi) exp(-x**2) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Erf", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Neg', 'Exp', 'Mul', 'Mul']
    """
    x = node.input[0]
    square = ctx.op("Mul", [x, x])
    density = ctx.op("Exp", [ctx.op("Neg", [square])])
    scaled = ctx.op("Mul", [density, ctx.scalar_like(1.1283791670955126, x)])
    return [ctx.op("Mul", [dy[0], scaled])]


@gradient("Sin")
def sin_grad(node, dy, ctx):
    """``d sin(x) = cos(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Sin", ["x"], ["y"]), {"x": [1.0]})
    ['Cos', 'Mul']
    """
    return [ctx.op("Mul", [dy[0], ctx.op("Cos", [node.input[0]])])]


@gradient("Cos")
def cos_grad(node, dy, ctx):
    """``d cos(x) = -sin(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Cos", ["x"], ["y"]), {"x": [1.0]})
    ['Sin', 'Mul', 'Neg']
    """
    return [ctx.op("Neg", [ctx.op("Mul", [dy[0], ctx.op("Sin", [node.input[0]])])])]


@gradient("Tan")
def tan_grad(node, dy, ctx):
    """``d tan(x) = (1 + y**2) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Tan", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Add', 'Mul']
    """
    y = node.output[0]
    return [ctx.op("Mul", [dy[0], _one_and_square(ctx, y, "Add")])]


def _one_and_square(ctx, x, op_type):
    """``1 + x**2`` (``op_type="Add"``) or ``1 - x**2`` (``"Sub"``)."""
    return ctx.op(op_type, [ctx.scalar_like(1, x), ctx.op("Mul", [x, x])])


def _over_root(ctx, dy, radicand):
    return ctx.op("Div", [dy, ctx.op("Sqrt", [radicand])])


@gradient("Asin")
def asin_grad(node, dy, ctx):
    """``d asin(x) = dx / sqrt(1 - x**2)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Asin", ["x"], ["y"]), {"x": [0.5]})
    ['Mul', 'Sub', 'Sqrt', 'Div']
    """
    return [_over_root(ctx, dy[0], _one_and_square(ctx, node.input[0], "Sub"))]


@gradient("Acos")
def acos_grad(node, dy, ctx):
    """``d acos(x) = -dx / sqrt(1 - x**2)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Acos", ["x"], ["y"]), {"x": [0.5]})
    ['Mul', 'Sub', 'Sqrt', 'Div', 'Neg']
    """
    return [ctx.op("Neg", [_over_root(ctx, dy[0], _one_and_square(ctx, node.input[0], "Sub"))])]


@gradient("Asinh")
def asinh_grad(node, dy, ctx):
    """``d asinh(x) = dx / sqrt(1 + x**2)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Asinh", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Add', 'Sqrt', 'Div']
    """
    return [_over_root(ctx, dy[0], _one_and_square(ctx, node.input[0], "Add"))]


@gradient("Acosh")
def acosh_grad(node, dy, ctx):
    """``d acosh(x) = dx / sqrt(x**2 - 1)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Acosh", ["x"], ["y"]), {"x": [2.0]})
    ['Mul', 'Sub', 'Sqrt', 'Div']
    """
    x = node.input[0]
    return [_over_root(ctx, dy[0], ctx.op("Sub", [ctx.op("Mul", [x, x]), ctx.scalar_like(1, x)]))]


@gradient("Atan")
def atan_grad(node, dy, ctx):
    """``d atan(x) = dx / (1 + x**2)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Atan", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Add', 'Div']
    """
    return [ctx.op("Div", [dy[0], _one_and_square(ctx, node.input[0], "Add")])]


@gradient("Atanh")
def atanh_grad(node, dy, ctx):
    """``d atanh(x) = dx / (1 - x**2)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Atanh", ["x"], ["y"]), {"x": [0.5]})
    ['Mul', 'Sub', 'Div']
    """
    return [ctx.op("Div", [dy[0], _one_and_square(ctx, node.input[0], "Sub")])]


@gradient("Sinh")
def sinh_grad(node, dy, ctx):
    """``d sinh(x) = cosh(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Sinh", ["x"], ["y"]), {"x": [1.0]})
    ['Cosh', 'Mul']
    """
    return [ctx.op("Mul", [dy[0], ctx.op("Cosh", [node.input[0]])])]


@gradient("Cosh")
def cosh_grad(node, dy, ctx):
    """``d cosh(x) = sinh(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Cosh", ["x"], ["y"]), {"x": [1.0]})
    ['Sinh', 'Mul']
    """
    return [ctx.op("Mul", [dy[0], ctx.op("Sinh", [node.input[0]])])]
