"""Lowering of ``DropoutGrad``, the gradient of a standard ``Dropout`` in training mode.

The forward ``Dropout`` stays a standard node (its random mask is the runtime's own); its
gradient reads the mask the forward node returned.
"""

import numpy as np
from onnx import TensorProto, helper

from .registry import register


@register("DropoutGrad")
def lower_dropout_grad(node, ctx):
    """``DropoutGrad(dY, mask[, ratio]) = (mask * dY) / (1 - ratio)``, ``dY`` itself if
    ``ratio == 0``.

    The kernel's formula, in float32: the ratio (0.5 when absent) cast to float, the mask to
    ``dY``'s type; ``training_mode`` does not change the gradient.

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("DropoutGrad", ["dy", "mask", "ratio"], ["dx"],
    ...                         domain="com.microsoft")
    >>> [n.op_type for n in lower_dropout_grad(node, LoweringContext(17))][-3:]
    ['Div', 'Equal', 'Where']
    """
    d_y, mask = node.input[:2]
    ratio = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    names = [ctx.name(t) for t in ("ratio", "ratio_scalar", "keep", "keep_like", "mask_like",
                                   "kept", "scaled", "no_drop")]  # fmt: skip
    ratio_float, scalar, keep, keep_like, mask_like, kept, scaled, no_drop = names
    if ratio:
        nodes = [helper.make_node("Cast", [ratio], [ratio_float], to=TensorProto.FLOAT)]
    else:
        nodes, ratio_float = [], ctx.constant(np.array(0.5, np.float32), "default_ratio")
    one = ctx.constant(np.array(1.0, np.float32), "one")
    scalar_shape = ctx.constant(np.zeros(0, np.int64), "scalar")
    return nodes + [
        helper.make_node("Reshape", [ratio_float, scalar_shape], [scalar]),
        helper.make_node("Sub", [one, scalar], [keep]),
        ctx.cast_like(keep, d_y, keep_like),
        ctx.cast_like(mask, d_y, mask_like),
        helper.make_node("Mul", [mask_like, d_y], [kept]),
        helper.make_node("Div", [kept, keep_like], [scaled]),
        helper.make_node(
            "Equal", [scalar, ctx.constant(np.array(0.0, np.float32), "zero")], [no_drop]
        ),
        helper.make_node("Where", [no_drop, d_y, scaled], [node.output[0]]),
    ]
