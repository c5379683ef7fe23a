"""Lowerings of the activations the training graphs fuse, and of the activations' gradients.

The gradient builder writes ``ReluGrad``, ``LeakyReluGrad``, ``SigmoidGrad``, ``TanhGrad``,
``GeluGrad`` and ``QuickGeluGrad``; its graph transformers fuse the exported ``Erf`` form of GELU
into ``Gelu`` and ``x * Sigmoid(a * x)`` (SiLU) into ``QuickGelu``. Each lowering follows the
kernel's order of operations, so that the float32 results round the same way.
"""

import math

import numpy as np
from onnx import helper

from ..node_attributes import node_attribute
from .registry import register


def _float(ctx, value, tag):
    return ctx.constant(np.array(value, np.float32), tag)


@register("ReluGrad")
def lower_relu_grad(node, ctx):
    """``ReluGrad(dY, X) = Where(X > 0, dY, 0)``.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("ReluGrad", ["dy", "x"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_relu_grad(node, LoweringContext(17))]
    ['Greater', 'Where']
    """
    d_y, x = node.input
    zero, positive = _float(ctx, 0.0, "zero"), ctx.name("positive")
    return [
        helper.make_node("Greater", [x, zero], [positive]),
        helper.make_node("Where", [positive, d_y, zero], [node.output[0]]),
    ]


@register("LeakyReluGrad")
def lower_leaky_relu_grad(node, ctx):
    """``LeakyReluGrad(dY, Y) = Where(Y > 0, dY, alpha * dY)`` (``Y`` the forward's output).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("LeakyReluGrad", ["dy", "y"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_leaky_relu_grad(node, LoweringContext(17))]
    ['Greater', 'Mul', 'Where']
    """
    d_y, y = node.input
    alpha = _float(ctx, node_attribute(node, "alpha", 0.01), "alpha")
    positive, scaled = ctx.name("positive"), ctx.name("scaled")
    return [
        helper.make_node("Greater", [y, _float(ctx, 0.0, "zero")], [positive]),
        helper.make_node("Mul", [d_y, alpha], [scaled]),
        helper.make_node("Where", [positive, d_y, scaled], [node.output[0]]),
    ]


@register("SigmoidGrad")
def lower_sigmoid_grad(node, ctx):
    """``SigmoidGrad(dY, Y) = (dY * Y) * (1 - Y)`` (``Y`` the forward's output).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("SigmoidGrad", ["dy", "y"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_sigmoid_grad(node, LoweringContext(17))]
    ['Mul', 'Sub', 'Mul']
    """
    d_y, y = node.input
    product, complement = ctx.name("dy_y"), ctx.name("one_minus_y")
    return [
        helper.make_node("Mul", [d_y, y], [product]),
        helper.make_node("Sub", [_float(ctx, 1.0, "one"), y], [complement]),
        helper.make_node("Mul", [product, complement], [node.output[0]]),
    ]


@register("TanhGrad")
def lower_tanh_grad(node, ctx):
    """``TanhGrad(dY, Y) = dY * (1 - Y * Y)`` (``Y`` the forward's output).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("TanhGrad", ["dy", "y"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_tanh_grad(node, LoweringContext(17))]
    ['Mul', 'Sub', 'Mul']
    """
    d_y, y = node.input
    square, complement = ctx.name("y_y"), ctx.name("one_minus_y_y")
    return [
        helper.make_node("Mul", [y, y], [square]),
        helper.make_node("Sub", [_float(ctx, 1.0, "one"), square], [complement]),
        helper.make_node("Mul", [d_y, complement], [node.output[0]]),
    ]


@register("QuickGelu")
def lower_quick_gelu(node, ctx):
    """``QuickGelu(X) = X * Sigmoid(alpha * X)`` (SiLU when ``alpha = 1``).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=1.0)
    >>> [n.op_type for n in lower_quick_gelu(node, LoweringContext(17))]
    ['Mul', 'Sigmoid', 'Mul']
    """
    x = node.input[0]
    alpha = _float(ctx, node_attribute(node, "alpha", 1.702), "alpha")
    scaled, gate = ctx.name("alpha_x"), ctx.name("sigmoid")
    return [
        helper.make_node("Mul", [x, alpha], [scaled]),
        helper.make_node("Sigmoid", [scaled], [gate]),
        helper.make_node("Mul", [x, gate], [node.output[0]]),
    ]


@register("QuickGeluGrad")
def lower_quick_gelu_grad(node, ctx):
    """``QuickGeluGrad(dY, X) = (dY * s) * (1 + (alpha * X) * (1 - s))``.

    ``s = Sigmoid(alpha * X)``, computed once, as the kernel does.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("QuickGeluGrad", ["dy", "x"], ["dx"], domain="com.microsoft")
    >>> len(lower_quick_gelu_grad(node, LoweringContext(17)))
    7
    """
    d_y, x = node.input
    alpha = _float(ctx, node_attribute(node, "alpha", 1.702), "alpha")
    one = _float(ctx, 1.0, "one")
    names = [ctx.name(t) for t in ("alpha_x", "s", "one_minus_s", "slope", "factor", "dy_s")]
    scaled, gate, complement, slope, factor, d_y_gate = names
    return [
        helper.make_node("Mul", [x, alpha], [scaled]),
        helper.make_node("Sigmoid", [scaled], [gate]),
        helper.make_node("Sub", [one, gate], [complement]),
        helper.make_node("Mul", [scaled, complement], [slope]),
        helper.make_node("Add", [one, slope], [factor]),
        helper.make_node("Mul", [d_y, gate], [d_y_gate]),
        helper.make_node("Mul", [d_y_gate, factor], [node.output[0]]),
    ]


def _erf_term(ctx, x):
    """Nodes and name of ``0.5 * (Erf(X / sqrt(2)) + 1)``, the normal distribution function."""
    names = [ctx.name(t) for t in ("x_sqrt1_2", "erf", "erf_1", "cdf")]
    scaled, erf, shifted, cdf = names
    nodes = [
        helper.make_node("Mul", [x, _float(ctx, math.sqrt(0.5), "sqrt1_2")], [scaled]),
        helper.make_node("Erf", [scaled], [erf]),
        helper.make_node("Add", [erf, _float(ctx, 1.0, "one")], [shifted]),
        helper.make_node("Mul", [shifted, _float(ctx, 0.5, "half")], [cdf]),
    ]
    return nodes, cdf


@register("Gelu")
def lower_gelu(node, ctx):
    """``Gelu(X) = X * (0.5 * (Erf(X / sqrt(2)) + 1))`` (exact GELU, not the tanh approximation).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")
    >>> [n.op_type for n in lower_gelu(node, LoweringContext(17))]
    ['Mul', 'Erf', 'Add', 'Mul', 'Mul']
    """
    nodes, cdf = _erf_term(ctx, node.input[0])
    return nodes + [helper.make_node("Mul", [node.input[0], cdf], [node.output[0]])]


@register("GeluGrad")
def lower_gelu_grad(node, ctx):
    """``GeluGrad(dY, X) = dY * (Phi(X) + (X / sqrt(2 pi)) * Exp((-0.5 * X) * X))``.

    ``Phi(X) = 0.5 * (Erf(X / sqrt(2)) + 1)``, the normal distribution function, as in
    :func:`lower_gelu`; the kernel's order of operations.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("GeluGrad", ["dy", "x"], ["dx"], domain="com.microsoft")
    >>> len(lower_gelu_grad(node, LoweringContext(17)))
    11
    """
    d_y, x = node.input
    nodes, cdf = _erf_term(ctx, x)
    names = [ctx.name(t) for t in ("x_alpha", "half_x", "half_x_x", "exp", "pdf", "slope")]
    scaled, half, exponent, exp, pdf, slope = names
    return nodes + [
        helper.make_node("Mul", [x, _float(ctx, 1 / math.sqrt(2 * math.pi), "alpha")], [scaled]),
        helper.make_node("Mul", [x, _float(ctx, -0.5, "minus_half")], [half]),
        helper.make_node("Mul", [half, x], [exponent]),
        helper.make_node("Exp", [exponent], [exp]),
        helper.make_node("Mul", [scaled, exp], [pdf]),
        helper.make_node("Add", [cdf, pdf], [slope]),
        helper.make_node("Mul", [d_y, slope], [node.output[0]]),
    ]
