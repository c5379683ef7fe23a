"""Lowering of ``DivGrad``: the gradients of both operands of a broadcast division.

Normalizations written by the training graph (``x / std``) and ``Softmax`` rewrites divide; the
gradient builder writes their gradient as one ``DivGrad``.
"""

from onnx import helper

from .gradient_plumbing import lower_broadcast_gradient_args
from .registry import register


def reduce_to_shape(ctx, gradient, axes, shape, output):
    """Nodes summing ``gradient`` over ``axes`` (kept), then reshaped to ``shape``: the gradient
    of an operand that was broadcast.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> nodes = reduce_to_shape(LoweringContext(17), "g", "axes", "shape", "out")
    >>> [n.op_type for n in nodes], nodes[-1].output[0]
    (['ReduceSum', 'Reshape'], 'out')
    """
    total = ctx.name("summed")
    return [
        helper.make_node(
            "ReduceSum", [gradient, axes], [total], keepdims=1, noop_with_empty_axes=1
        ),
        helper.make_node("Reshape", [total, shape], [output]),
    ]


@register("DivGrad")
def lower_div_grad(node, ctx):
    """``DivGrad(dY, A, B)``: ``dA = sum(dY / B)``, ``dB = sum(-(dY * A) / (B * B))``.

    Each sum runs over the axes along which its operand was broadcast (the lowering of
    ``BroadcastGradientArgs`` on the operands' shapes), and is reshaped to the operand's shape.
    Either output may be absent.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("DivGrad", ["dy", "a", "b"], ["", "db"], domain="com.microsoft")
    >>> ops = [n.op_type for n in lower_div_grad(node, LoweringContext(17))]
    >>> ops[:2], ops[-6:]
    (['Shape', 'Shape'], ['Mul', 'Mul', 'Div', 'Neg', 'ReduceSum', 'Reshape'])
    """
    d_y, a, b = node.input
    d_a = node.output[0] if node.output else ""
    d_b = node.output[1] if len(node.output) > 1 else ""
    shapes = [ctx.name("shape_a"), ctx.name("shape_b")]
    axes = [ctx.name("axes_a") if d_a else "", ctx.name("axes_b") if d_b else ""]
    broadcast = helper.make_node("BroadcastGradientArgs", shapes, axes, domain=node.domain)
    nodes = [helper.make_node("Shape", [x], [s]) for x, s in zip((a, b), shapes)]
    nodes += lower_broadcast_gradient_args(broadcast, ctx)
    if d_a:
        quotient = ctx.name("dy_over_b")
        nodes.append(helper.make_node("Div", [d_y, b], [quotient]))
        nodes += reduce_to_shape(ctx, quotient, axes[0], shapes[0], d_a)
    if d_b:
        names = [ctx.name(t) for t in ("dy_a", "b_b", "ratio", "negated")]
        product, square, ratio, negated = names
        nodes += [
            helper.make_node("Mul", [d_y, a], [product]),
            helper.make_node("Mul", [b, b], [square]),
            helper.make_node("Div", [product, square], [ratio]),
            helper.make_node("Neg", [ratio], [negated]),
        ]
        nodes += reduce_to_shape(ctx, negated, axes[1], shapes[1], d_b)
    return nodes
