"""Gradients of the elementwise activations, each from the forward node's input or output."""

from .registry import gradient


@gradient("Relu")
def relu_grad(node, dy, ctx):
    """``dy`` where ``y > 0``, else 0 (torch's rule: 0 at 0)."""
    y = node.output[0]
    positive = ctx.op("Greater", [y, ctx.scalar_like(0, y)])
    return [ctx.op("Where", [positive, dy[0], ctx.scalar_like(0, y)])]


@gradient("Sigmoid")
def sigmoid_grad(node, dy, ctx):
    """``y (1 - y) dy``."""
    y = node.output[0]
    slope = ctx.op("Mul", [y, ctx.op("Sub", [ctx.scalar_like(1, y), y])])
    return [ctx.op("Mul", [dy[0], slope])]


@gradient("Tanh")
def tanh_grad(node, dy, ctx):
    """``(1 - y**2) dy``."""
    y = node.output[0]
    slope = ctx.op("Sub", [ctx.scalar_like(1, y), ctx.op("Mul", [y, y])])
    return [ctx.op("Mul", [dy[0], slope])]
