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
is zero, as torch's). Float32 rounding apart, the kernel's values. The formula of ``dX``,
:func:`standardized_input_gradient`, is shared with the gradients of
:mod:`helpers.portable.gradients.normalization`.
"""

import numpy as np
from onnx import helper

from ..node_attributes import node_attribute
from .registry import register
from .spatial import reduce


def standardized_input_gradient(op, mean, d_xhat, xhat, inv_std, centred=True):
    """The gradient of ``x`` from that of ``xhat = (x - mean(x)) * inv_std``.

    ``inv_std = 1 / sqrt(mean((x - mean(x))**2) + epsilon)``, the means taken over the
    normalized axes, is a function of ``x`` too; the gradient through it and through the mean
    is, with ``b = d_xhat * inv_std``::

        dx = b - mean(b) - xhat * mean(b * xhat)

    (no ``mean(b)`` for an input that is not centred: ``xhat = x * inv_std``, the root mean
    square normalization). This is the formula of 1.19.2's ``LayerNormalizationGrad`` kernels;
    the gradients of :mod:`helpers.portable.gradients.normalization` use it for the batch,
    layer, instance and group normalizations.

    Parameters
    ----------
    op : callable
        ``op(op_type, inputs)`` adds a node and returns its output's name.
    mean : callable
        ``mean(value)`` adds the mean of ``value`` over the normalized axes, kept, and returns
        its name.
    d_xhat, xhat, inv_std : str
        The values (``inv_std`` with the normalized axes kept, of size 1).
    centred : bool
        Whether ``x``'s mean was subtracted.

    Returns
    -------
    str
        The name of the gradient of ``x``.

    Examples
    --------
    >>> nodes = []
    >>> def op(op_type, inputs):
    ...     nodes.append(op_type)
    ...     return f"v{len(nodes)}"
    >>> standardized_input_gradient(op, lambda v: op("ReduceMean", [v]), "g", "xhat", "inv")
    'v7'
    >>> nodes
    ['Mul', 'Mul', 'ReduceMean', 'Mul', 'ReduceMean', 'Sub', 'Sub']
    """
    b = op("Mul", [d_xhat, inv_std])
    xhat_c = op("Mul", [xhat, mean(op("Mul", [b, xhat]))])
    if not centred:
        return op("Sub", [b, xhat_c])
    return op("Sub", [op("Sub", [b, mean(b)]), xhat_c])


def _rows(value, axis, ctx, tag):
    """``value`` flattened to 2-D at ``axis``; returns ``(node, name)``."""
    name = ctx.name(tag)
    return helper.make_node("Flatten", [value], [name], axis=axis), name


def _layer_norm_grad(node, ctx, simplified):
    axis = node_attribute(node, "axis", -1)
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
        scale_row, scaled, x_shape = ctx.name("scale_row"), ctx.name("scaled"), ctx.name("x_shape")
        row_shape = ctx.constant(np.array([1, -1], np.int64), "row")
        nodes += [
            helper.make_node("Reshape", [scale, row_shape], [scale_row]),
            helper.make_node("Mul", [flat["dy"], scale_row], [scaled]),
        ]

        def op(op_type, inputs):
            nodes.append(helper.make_node(op_type, inputs, [ctx.name(op_type.lower())]))
            return nodes[-1].output[0]

        def row_mean(value):
            name = ctx.name("row_mean")
            nodes.extend(reduce("ReduceMean", value, name, [1], ctx, keepdims=1))
            return name

        d_x2 = standardized_input_gradient(
            op, row_mean, scaled, xhat, flat["inv_std"], centred=not simplified
        )
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
