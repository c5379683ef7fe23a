"""Gradients of ``Softmax``, ``LogSoftmax`` and the classification losses built on them:
``SoftmaxCrossEntropyLoss`` and ``NegativeLogLikelihoodLoss`` (what ``torch.nn.functional.
cross_entropy`` and ``nll_loss`` export).

``Softmax`` and ``LogSoftmax`` normalize along one axis from opset 13, their ``SoftmaxGrad_13``
and ``LogSoftmaxGrad_13`` lowerings. Below opset 13 they flattened the input to 2-D from the
axis on: refused (the model would need to be exported at opset 13 or later).

A loss of scores ``x`` (``[N, C, d1...]``, classes on axis 1) and labels ``t`` weighs element
``i`` by ``w_i = weight[t_i]`` (1 without weights, 0 where ``t_i == ignore_index``); its
gradient is ``c_i * (softmax(x)_i - onehot(t_i))`` (cross-entropy) or ``-c_i * onehot(t_i)``
(negative log-likelihood of log-probabilities ``x``), where ``c_i = dy_i w_i`` for
``reduction='none'``, ``dy w_i`` for ``'sum'`` and ``dy w_i / sum(w)`` for ``'mean'``.
"""

import numpy as np

from ..node_attributes import node_attribute
from .indexing import as_int64
from .registry import gradient
from .via_lowering import lowered


def _one_axis(node, ctx):
    """The axis of a ``Softmax``/``LogSoftmax`` of opset 13 or later (refused before)."""
    if ctx.opset < 13:
        ctx.refuse(
            "Below opset 13 it flattens its input to 2-D from the axis on; export the model at "
            "opset 13 or later."
        )
    return node_attribute(node, "axis", -1)


@gradient("Softmax")
def softmax_grad(node, dy, ctx):
    """``(dy - sum(dy * y, axis)) * y``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Softmax", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['Mul', 'ReduceSum', 'Sub', 'Mul']
    """
    return [lowered(ctx, "SoftmaxGrad_13", [dy[0], node.output[0]], axis=_one_axis(node, ctx))]


@gradient("LogSoftmax")
def log_softmax_grad(node, dy, ctx):
    """``dy - exp(y) * sum(dy, axis)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("LogSoftmax", ["x"], ["y"]), {"x": [[1.0, 2.0]]})
    ['ReduceSum', 'Exp', 'Mul', 'Sub']
    """
    axis = _one_axis(node, ctx)
    return [lowered(ctx, "LogSoftmaxGrad_13", [dy[0], node.output[0]], axis=axis)]


def _loss_terms(node, dy, ctx):
    """``(c, onehot)``: the coefficient of each element (shaped to broadcast along the classes'
    axis) and the one-hot matrix of the labels, both of the scores' element type."""
    scores, labels = node.input[:2]
    weights = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    if weights and ctx.needs(weights):
        ctx.refuse("Its class weights have no gradient here: freeze them.")
    rank = ctx.known_rank(scores, "its scores")
    reduction = node_attribute(node, "reduction", "mean")
    ignore = node_attribute(node, "ignore_index")
    labels64 = as_int64(ctx, labels)
    count = ctx.op("Gather", [ctx.op("Shape", [scores]), ctx.constant(np.array(1, np.int64))])
    classes = ctx.op(
        "Range",
        [ctx.constant(np.array(0, np.int64)), count, ctx.constant(np.array(1, np.int64))],
    )
    classes = ctx.op("Reshape", [classes, ctx.constant(np.array([1, -1] + [1] * (rank - 2)))])
    labels_axis = ctx.op("Unsqueeze", [labels64, ctx.axes([1])])
    onehot = ctx.cast_like(ctx.op("Equal", [labels_axis, classes]), scores)
    weight, safe = None, labels64
    if ignore is not None:
        kept = ctx.op("Not", [ctx.op("Equal", [labels64, ctx.constant(np.array(ignore))])])
        weight = ctx.cast_like(kept, scores)
        safe = ctx.op("Where", [kept, labels64, ctx.constant(np.array(0, np.int64))])
    if weights:
        chosen = ctx.op("Gather", [weights, safe])
        weight = chosen if weight is None else ctx.op("Mul", [chosen, weight])
    coefficient = dy[0] if weight is None else ctx.op("Mul", [dy[0], weight])
    if reduction == "mean":
        if weight is None:
            total = ctx.cast_like(ctx.op("Size", [labels]), scores)
        else:
            total = ctx.op("ReduceSum", [weight], keepdims=0)
        coefficient = ctx.op("Div", [coefficient, total])
    if reduction == "none" or weight is not None:
        coefficient = ctx.op("Unsqueeze", [coefficient, ctx.axes([1])])
    return coefficient, onehot


@gradient("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_grad(node, dy, ctx):
    """``c * (softmax(x) - onehot(t))``, the softmax taken from the log-probabilities output
    when the node has it; plus the ``LogSoftmax`` gradient of that output's own gradient.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "log_prob"])
    >>> inputs = {"x": np.ones((4, 3), "f"), "t": np.array([0, 2, 1, 1])}
    >>> operators = written_operators(node, inputs)
    >>> "Softmax" in operators, operators[-1]  # the probabilities from log_prob; two gradients
    (False, 'Sum')
    """
    scores = node.input[0]
    log_prob = node.output[1] if len(node.output) > 1 else ""
    grads = [None] * len(node.input)
    parts = []
    if dy[0] is not None:
        coefficient, onehot = _loss_terms(node, dy, ctx)
        if log_prob:
            probabilities = ctx.op("Exp", [log_prob])
        else:
            probabilities = ctx.op("Softmax", [scores], axis=1)
        residual = ctx.op("Sub", [probabilities, onehot])
        parts.append(ctx.op("Mul", [coefficient, residual]))
    if len(dy) > 1 and dy[1] is not None:
        parts.append(lowered(ctx, "LogSoftmaxGrad_13", [dy[1], log_prob], axis=1))
    grads[0] = parts[0] if len(parts) == 1 else ctx.op("Sum", parts)
    return grads


@gradient("NegativeLogLikelihoodLoss")
def negative_log_likelihood_grad(node, dy, ctx):
    """``-c * onehot(t)``.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["loss"])
    >>> written_operators(node, {"x": np.ones((2, 3), "f"), "t": np.array([0, 2])})[-3:]
    ['Div', 'Neg', 'Mul']
    """
    coefficient, onehot = _loss_terms(node, dy, ctx)
    grads = [None] * len(node.input)
    grads[0] = ctx.op("Mul", [ctx.op("Neg", [coefficient]), onehot])
    return grads
