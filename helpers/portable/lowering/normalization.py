"""``LayerNormalizationGrad`` and ``SimplifiedLayerNormalizationGrad`` (com.microsoft), written
with standard operators.

The forward ``LayerNormalization`` (standard from opset 17) returns the mean and the inverse
standard deviation of each row as its optional outputs; the gradient reads them. With the input
flattened to rows ``(N, M)`` at ``axis`` (``M`` the normalized size), 1.19.2's CPU kernel
(``orttraining/training_ops/cpu/nn/layer_norm.cc``) computes, per row::

    xhat = (X - mean) * inv_std        (X * inv_std for the simplified form)
    B = dY * scale * inv_std
    dX = B - mean(B) - xhat * mean(B * xhat)     (no mean(B) for the simplified form)
    dscale = sum over rows of dY * xhat
    dbias = sum over rows of dY

The lowering writes the same formulas on ``Flatten``-ed tensors (``ReduceMean`` along a row,
``ReduceSum`` across rows) and reshapes back. The kernel stops on ``M == 1`` (a ``LayerNorm``
of one feature, ``layer_norm.cc: M != 1``); the lowering computes the formula there too (``dX``
is zero, as torch's). Float32 rounding apart, the kernel's values.
"""

import numpy as np
from onnx import helper

from .registry import register
from .spatial import attribute, reduce


def _rows(value, axis, ctx, tag):
    """``value`` flattened to 2-D at ``axis``; returns ``(node, name)``."""
    name = ctx.name(tag)
    return helper.make_node("Flatten", [value], [name], axis=axis), name


def _layer_norm_grad(node, ctx, simplified):
    axis = attribute(node, "axis", -1)
    if simplified:
        d_y, x, scale, inv_std = node.input[:4]
    else:
        d_y, x, scale, mean, inv_std = node.input[:5]
    outputs = list(node.output) + [""] * (3 - len(node.output))
    d_x, d_scale, d_bias = outputs[:3]
    nodes = []
    flat = {}
    for tag, value in [("dy", d_y), ("x", x), ("inv_std", inv_std)] + (
        [] if simplified else [("mean", mean)]
    ):
        node_, flat[tag] = _rows(value, axis, ctx, tag + "_rows")
        nodes.append(node_)
    centred, xhat = ctx.name("centred"), ctx.name("xhat")
    if simplified:
        nodes.append(helper.make_node("Mul", [flat["x"], flat["inv_std"]], [xhat]))
    else:
        nodes += [
            helper.make_node("Sub", [flat["x"], flat["mean"]], [centred]),
            helper.make_node("Mul", [centred, flat["inv_std"]], [xhat]),
        ]
    if d_x:
        scale_row, scaled, b, c, mean_c, xhat_c, d_x2 = (
            ctx.name(t) for t in ("scale_row", "scaled", "b", "c", "mean_c", "xhat_c", "dx_rows")
        )
        row_shape = ctx.constant(np.array([1, -1], np.int64), "row")
        x_shape = ctx.name("x_shape")
        nodes += [
            helper.make_node("Reshape", [scale, row_shape], [scale_row]),
            helper.make_node("Mul", [flat["dy"], scale_row], [scaled]),
            helper.make_node("Mul", [scaled, flat["inv_std"]], [b]),
            helper.make_node("Mul", [b, xhat], [c]),
            *reduce("ReduceMean", c, mean_c, [1], ctx, keepdims=1),
            helper.make_node("Mul", [xhat, mean_c], [xhat_c]),
        ]
        if simplified:
            nodes.append(helper.make_node("Sub", [b, xhat_c], [d_x2]))
        else:
            mean_b, b_centred = ctx.name("mean_b"), ctx.name("b_centred")
            nodes += [
                *reduce("ReduceMean", b, mean_b, [1], ctx, keepdims=1),
                helper.make_node("Sub", [b, mean_b], [b_centred]),
                helper.make_node("Sub", [b_centred, xhat_c], [d_x2]),
            ]
        nodes += [
            helper.make_node("Shape", [x], [x_shape]),
            helper.make_node("Reshape", [d_x2, x_shape], [d_x]),
        ]
    for output, factor in ((d_scale, xhat), (d_bias, None)):
        if not output:
            continue
        terms, summed, scale_shape = ctx.name("terms"), ctx.name("summed"), ctx.name("shape")
        if factor is None:
            terms = flat["dy"]
        else:
            nodes.append(helper.make_node("Mul", [flat["dy"], factor], [terms]))
        nodes += [
            *reduce("ReduceSum", terms, summed, [0], ctx),
            helper.make_node("Shape", [scale], [scale_shape]),
            helper.make_node("Reshape", [summed, scale_shape], [output]),
        ]
    return nodes


@register("LayerNormalizationGrad")
def lower_layer_norm_grad(node, ctx):
    """``LayerNormalizationGrad(dY, X, scale, mean, inv_std)`` -> ``dX, dscale, dbias``.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> node = helper.make_node("LayerNormalizationGrad", ["dy", "x", "s", "m", "i"],
    ...                         ["", "", "db"], domain="com.microsoft", axis=-1)
    >>> [n.op_type for n in lower_layer_norm_grad(node, LoweringContext(17))][-3:]
    ['ReduceSum', 'Shape', 'Reshape']
    """
    return _layer_norm_grad(node, ctx, simplified=False)


@register("SimplifiedLayerNormalizationGrad")
def lower_simplified_layer_norm_grad(node, ctx):
    """``SimplifiedLayerNormalizationGrad(dY, X, scale, inv_std)`` -> ``dX, dscale``.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> node = helper.make_node("SimplifiedLayerNormalizationGrad", ["dy", "x", "s", "i"],
    ...                         ["dx", ""], domain="com.microsoft", axis=-1)
    >>> [n.op_type for n in lower_simplified_layer_norm_grad(node, LoweringContext(17))][-2:]
    ['Shape', 'Reshape']
    """
    return _layer_norm_grad(node, ctx, simplified=True)
