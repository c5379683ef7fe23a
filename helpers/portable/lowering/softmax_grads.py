"""Lowerings of the gradients of ``Softmax`` and ``LogSoftmax`` (opset 13: one axis).

The cross-entropy of a classifier is ``LogSoftmax`` then ``NegativeLogLikelihoodLoss``: its
gradient holds a ``LogSoftmaxGrad_13``; a ``Softmax`` on a hidden layer gives ``SoftmaxGrad_13``.
"""

import numpy as np
from onnx import helper

from .registry import register


def _axis_sum(node, ctx, value, tag):
    """Nodes and name of ``ReduceSum(value, [axis], keepdims=1)``, ``axis`` the node's."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
    total = ctx.name(tag)
    axes = ctx.constant(np.array([axis], np.int64), "axes")
    return helper.make_node("ReduceSum", [value, axes], [total], keepdims=1), total


@register("SoftmaxGrad_13")
def lower_softmax_grad_13(node, ctx):
    """``SoftmaxGrad_13(dY, Y) = (dY - ReduceSum(Y * dY, axis)) * Y`` (``Y`` the softmax).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("SoftmaxGrad_13", ["dy", "y"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_softmax_grad_13(node, LoweringContext(17))]
    ['Mul', 'ReduceSum', 'Sub', 'Mul']
    """
    d_y, y = node.input
    product, centered = ctx.name("y_dy"), ctx.name("centered")
    reduce, total = _axis_sum(node, ctx, product, "dot")
    return [
        helper.make_node("Mul", [y, d_y], [product]),
        reduce,
        helper.make_node("Sub", [d_y, total], [centered]),
        helper.make_node("Mul", [centered, y], [node.output[0]]),
    ]


@register("LogSoftmaxGrad_13")
def lower_log_softmax_grad_13(node, ctx):
    """``LogSoftmaxGrad_13(dY, Y) = dY - Exp(Y) * ReduceSum(dY, axis)`` (``Y`` the log-softmax).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("LogSoftmaxGrad_13", ["dy", "y"], ["dx"], domain="com.microsoft")
    >>> [n.op_type for n in lower_log_softmax_grad_13(node, LoweringContext(17))]
    ['ReduceSum', 'Exp', 'Mul', 'Sub']
    """
    d_y, y = node.input
    probabilities, weighted = ctx.name("exp_y"), ctx.name("weighted")
    reduce, total = _axis_sum(node, ctx, d_y, "sum_dy")
    return [
        reduce,
        helper.make_node("Exp", [y], [probabilities]),
        helper.make_node("Mul", [probabilities, total], [weighted]),
        helper.make_node("Sub", [d_y, weighted], [node.output[0]]),
    ]
