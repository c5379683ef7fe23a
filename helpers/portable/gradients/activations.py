"""Gradients of the activations: ``Relu`` and its variants, ``Softplus``, ``Softsign``, the hard
and thresholded ones, ``Sigmoid``, ``Tanh``, ``Gelu`` and ``Mish`` (the elementary functions,
trigonometric ones included, are in :mod:`~helpers.portable.gradients.elementary`).

Each gradient is the output's gradient times the function's slope, computed from the node's
input ``x`` or, where it is cheaper and as exact, from its output ``y``. Where the function has a
kink, the slope there is torch's (float64 autograd):

* ``Relu``, ``LeakyRelu``, ``PRelu``, ``Elu``, ``Celu``, ``Selu``: the branch of ``x <= 0`` at
  ``x = 0`` (0 for ``Relu``, ``alpha`` for ``LeakyRelu`` and ``Elu``, the slope for ``PRelu``,
  ``gamma * alpha`` for ``Selu``, 1 for ``Celu``, whose branches agree there);
* ``HardSigmoid``: 0 at both ends of its ramp; ``HardSwish``: 0 at -3, 1 at 3;
* ``ThresholdedRelu`` and ``Shrink``: 0 at their thresholds.

Where onnxruntime has a gradient kernel (``ReluGrad``, ``LeakyReluGrad``, ``SigmoidGrad``,
``TanhGrad``, ``GeluGrad``), the gradient is its lowering
(:mod:`helpers.portable.lowering.activations`), which follows the kernel's order of operations:
float32 results round as onnxruntime-training's do.

torch's ``Softplus(beta, threshold)`` exports as ``Mul``, ``Softplus``, ``Div`` and a ``Where``
on ``Greater`` (:mod:`helpers.core.model_graphs.torch_symbolics`), ``Mish`` at opset 17 as
``Softplus``, ``Tanh``, ``Mul``, and ``GELU`` as ``Erf`` (or ``Tanh``) arithmetic: their gradients
come from those operators'.
"""

import math

from ..node_attributes import node_attribute
from .registry import gradient
from .via_lowering import lowered


def _times(ctx, dy, slope):
    return ctx.op("Mul", [dy, slope])


def _where(ctx, condition, value, otherwise, like):
    """``Where(condition, value, otherwise)``; a number among them is a constant of ``like``'s
    type."""
    value, otherwise = (
        ctx.scalar_like(v, like) if isinstance(v, (int, float)) else v for v in (value, otherwise)
    )
    return ctx.op("Where", [condition, value, otherwise])


def _positive(ctx, x):
    return ctx.op("Greater", [x, ctx.scalar_like(0, x)])


@gradient("Relu")
def relu_grad(node, dy, ctx):
    """``dy`` where ``y > 0``, else 0 (torch's rule: 0 at 0): ``ReluGrad``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Relu", ["x"], ["y"]), {"x": [1.0]})
    ['Greater', 'Where']
    """
    y = node.output[0]
    return [lowered(ctx, "ReluGrad", [dy[0], y], like=y)]


@gradient("LeakyRelu")
def leaky_relu_grad(node, dy, ctx):
    """``dy`` where ``x > 0``, else ``alpha dy`` (torch's: ``alpha`` at 0).

    ``LeakyReluGrad`` reads the output's sign, the input's for a negative ``alpha``; it is given
    the input, whose sign is torch's test for every ``alpha``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("LeakyRelu", ["x"], ["y"], alpha=0.2), {"x": [1.0]})
    ['Greater', 'Mul', 'Where']
    """
    x, alpha = node.input[0], node_attribute(node, "alpha", 0.01)
    return [lowered(ctx, "LeakyReluGrad", [dy[0], x], like=x, alpha=alpha)]


@gradient("PRelu")
def prelu_grad(node, dy, ctx):
    """``dx = dy`` where ``x > 0``, else ``slope dy``; ``dslope = x dy`` where ``x <= 0``, summed
    over the axes the slope was broadcast along (torch's: the slope's branch at 0).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"x": [[1.0, -2.0]], "slope": [0.1]}
    >>> written_operators(make_node("PRelu", ["x", "slope"], ["y"]), inputs)[-3:]  # slope: summed
    ['Where', 'ReduceSum', 'Reshape']
    """
    x, slope = node.input
    positive = _positive(ctx, x)
    grads = [None, None]
    if ctx.needs(x):
        grads[0] = _where(ctx, positive, dy[0], _times(ctx, dy[0], slope), x)
    if ctx.needs(slope):
        grad = _where(ctx, positive, 0, _times(ctx, dy[0], x), x)
        grads[1] = ctx.reduce_to(grad, slope, node.output[0])
    return grads


def _exponential_slope(ctx, x, dy, below, above=1.0):
    """``dy`` times ``above`` where ``x > 0``, else times ``below`` (``Elu``, ``Celu``,
    ``Selu``)."""
    return _times(ctx, dy, _where(ctx, _positive(ctx, x), above, below, x))


@gradient("Elu")
def elu_grad(node, dy, ctx):
    """``dy`` where ``x > 0``, else ``alpha exp(x) dy``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Elu", ["x"], ["y"]), {"x": [1.0]})
    ['Exp', 'Mul', 'Greater', 'Where', 'Mul']
    """
    x = node.input[0]
    alpha = ctx.scalar_like(node_attribute(node, "alpha", 1.0), x)
    return [_exponential_slope(ctx, x, dy[0], ctx.op("Mul", [ctx.op("Exp", [x]), alpha]))]


@gradient("Celu")
def celu_grad(node, dy, ctx):
    """``dy`` where ``x > 0``, else ``exp(x / alpha) dy``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Celu", ["x"], ["y"], alpha=0.5), {"x": [1.0]})
    ['Div', 'Exp', 'Greater', 'Where', 'Mul']
    """
    x = node.input[0]
    alpha = ctx.scalar_like(node_attribute(node, "alpha", 1.0), x)
    return [_exponential_slope(ctx, x, dy[0], ctx.op("Exp", [ctx.op("Div", [x, alpha])]))]


@gradient("Selu")
def selu_grad(node, dy, ctx):
    """``gamma dy`` where ``x > 0``, else ``gamma alpha exp(x) dy``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Selu", ["x"], ["y"]), {"x": [1.0]})
    ['Exp', 'Mul', 'Greater', 'Where', 'Mul']
    """
    x = node.input[0]
    alpha = node_attribute(node, "alpha", 1.67326319217681884765625)
    gamma = node_attribute(node, "gamma", 1.05070102214813232421875)
    below = ctx.op("Mul", [ctx.op("Exp", [x]), ctx.scalar_like(alpha * gamma, x)])
    return [_exponential_slope(ctx, x, dy[0], below, above=gamma)]


@gradient("Softplus")
def softplus_grad(node, dy, ctx):
    """``d log(1 + exp(x)) = sigmoid(x) dx``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Softplus", ["x"], ["y"]), {"x": [1.0]})
    ['Sigmoid', 'Mul']
    """
    return [_times(ctx, dy[0], ctx.op("Sigmoid", [node.input[0]]))]


@gradient("Softsign")
def softsign_grad(node, dy, ctx):
    """``d (x / (1 + |x|)) = dx / (1 + |x|)**2``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Softsign", ["x"], ["y"]), {"x": [1.0]})
    ['Abs', 'Add', 'Mul', 'Div']
    """
    x = node.input[0]
    denominator = ctx.op("Add", [ctx.op("Abs", [x]), ctx.scalar_like(1, x)])
    return [ctx.op("Div", [dy[0], ctx.op("Mul", [denominator, denominator])])]


@gradient("HardSigmoid")
def hard_sigmoid_grad(node, dy, ctx):
    """``alpha dy`` where ``0 < y < 1`` (the ramp, ends excluded), else 0.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("HardSigmoid", ["x"], ["y"]), {"x": [1.0]})
    ['Greater', 'Less', 'And', 'Mul', 'Where']
    """
    y = node.output[0]
    alpha = ctx.scalar_like(node_attribute(node, "alpha", 0.2), y)
    ramp = ctx.op("And", [_positive(ctx, y), ctx.op("Less", [y, ctx.scalar_like(1, y)])])
    return [_where(ctx, ramp, _times(ctx, dy[0], alpha), 0, y)]


@gradient("HardSwish")
def hard_swish_grad(node, dy, ctx):
    """``(x / 3 + 1/2) dy`` for ``-3 < x < 3``, 0 below, ``dy`` above (torch's ends).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("HardSwish", ["x"], ["y"]), {"x": [1.0]})
    ['Div', 'Add', 'Greater', 'Less', 'Where', 'Where', 'Mul']
    """
    x = node.input[0]
    ramp = ctx.op("Add", [ctx.op("Div", [x, ctx.scalar_like(3, x)]), ctx.scalar_like(0.5, x)])
    above_low = ctx.op("Greater", [x, ctx.scalar_like(-3, x)])
    below_high = ctx.op("Less", [x, ctx.scalar_like(3, x)])
    slope = _where(ctx, below_high, _where(ctx, above_low, ramp, 0, x), 1, x)
    return [_times(ctx, dy[0], slope)]


@gradient("ThresholdedRelu")
def thresholded_relu_grad(node, dy, ctx):
    """``dy`` where ``x > alpha``, else 0.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("ThresholdedRelu", ["x"], ["y"]), {"x": [1.0]})
    ['Greater', 'Where']
    """
    x = node.input[0]
    above = ctx.op("Greater", [x, ctx.scalar_like(node_attribute(node, "alpha", 1.0), x)])
    return [_where(ctx, above, dy[0], 0, x)]


@gradient("Shrink")
def shrink_grad(node, dy, ctx):
    """``dy`` where ``|x| > lambd`` (``x > lambd`` or ``x < -lambd``), else 0.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Shrink", ["x"], ["y"], lambd=0.3), {"x": [1.0]})
    ['Greater', 'Less', 'Or', 'Where']
    """
    x = node.input[0]
    lambd = node_attribute(node, "lambd", 0.5)
    outside = ctx.op(
        "Or",
        [
            ctx.op("Greater", [x, ctx.scalar_like(lambd, x)]),
            ctx.op("Less", [x, ctx.scalar_like(-lambd, x)]),
        ],
    )
    return [_where(ctx, outside, dy[0], 0, x)]


@gradient("Sigmoid")
def sigmoid_grad(node, dy, ctx):
    """``y (1 - y) dy``: ``SigmoidGrad``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Sigmoid", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Sub', 'Mul']
    """
    y = node.output[0]
    return [lowered(ctx, "SigmoidGrad", [dy[0], y], like=y)]


@gradient("Tanh")
def tanh_grad(node, dy, ctx):
    """``(1 - y**2) dy``: ``TanhGrad``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Tanh", ["x"], ["y"]), {"x": [1.0]})
    ['Mul', 'Sub', 'Mul']
    """
    y = node.output[0]
    return [lowered(ctx, "TanhGrad", [dy[0], y], like=y)]


@gradient("Gelu")
def gelu_grad(node, dy, ctx):
    """Opset 20's ``Gelu``: ``(Phi(x) + x phi(x)) dy`` (``GeluGrad``), or with
    ``approximate="tanh"`` the derivative of ``x (1 + tanh(k (x + c x**3))) / 2``, as torch's
    ``gelu_backward`` writes it (``k = sqrt(2 / pi)``, ``c = 0.044715``).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> operators = written_operators(make_node("Gelu", ["x"], ["y"]), {"x": [1.0]}, opset=20)
    >>> "Erf" in operators, "Tanh" in operators  # GeluGrad, lowered
    (True, False)
    >>> node = make_node("Gelu", ["x"], ["y"], approximate="tanh")
    >>> "Tanh" in written_operators(node, {"x": [1.0]}, opset=20)
    True
    """
    x = node.input[0]
    if node_attribute(node, "approximate", "none") == "none":
        return [lowered(ctx, "GeluGrad", [dy[0], x], like=x)]
    k, c = math.sqrt(2 / math.pi), 0.044715
    square = ctx.op("Mul", [x, x])
    cube = ctx.op("Mul", [square, x])
    inner = ctx.op("Add", [x, ctx.op("Mul", [cube, ctx.scalar_like(c, x)])])
    tangent = ctx.op("Tanh", [ctx.op("Mul", [inner, ctx.scalar_like(k, x)])])
    one, half = ctx.scalar_like(1, x), ctx.scalar_like(0.5, x)
    left = ctx.op("Mul", [ctx.op("Add", [tangent, one]), half])
    sech2 = ctx.op("Sub", [one, ctx.op("Mul", [tangent, tangent])])
    growth = ctx.op("Add", [one, ctx.op("Mul", [square, ctx.scalar_like(3 * c, x)])])
    right = ctx.op("Mul", [ctx.op("Mul", [ctx.op("Mul", [x, half]), sech2]), growth])
    right = ctx.op("Mul", [right, ctx.scalar_like(k, x)])
    return [_times(ctx, dy[0], ctx.op("Add", [left, right]))]


@gradient("Mish")
def mish_grad(node, dy, ctx):
    """Opset 18's ``Mish``, ``x tanh(softplus(x))``: ``(t + x sigmoid(x) (1 - t**2)) dy`` with
    ``t = tanh(softplus(x))`` (torch's ``mish_backward``).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Mish", ["x"], ["y"]), {"x": [1.0]}, opset=18)[:3]
    ['Softplus', 'Tanh', 'Mul']
    """
    x = node.input[0]
    t = ctx.op("Tanh", [ctx.op("Softplus", [x])])
    sech2 = ctx.op("Sub", [ctx.scalar_like(1, x), ctx.op("Mul", [t, t])])
    inner = ctx.op("Mul", [ctx.op("Mul", [x, ctx.op("Sigmoid", [x])]), sech2])
    return [_times(ctx, dy[0], ctx.op("Add", [t, inner]))]
