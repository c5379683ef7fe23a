"""Gradients of the normalizations: batch, layer, instance, group, Lp and mean-variance.

Each standardizes ``x`` over some axes, ``xhat = (x - mean) * inv_std`` with ``inv_std = 1 /
sqrt(var + epsilon)`` (the biased variance), then scales and shifts it. Where the statistics
come from ``x`` itself, the gradient goes through them too: with ``b = d_xhat * inv_std``,
``dx = b - mean(b) - xhat * mean(b * xhat)``, the formula of 1.19.2's ``LayerNormalizationGrad``
kernel, shared with its lowering
(:func:`~helpers.portable.lowering.normalization.standardized_input_gradient`). The scale's
gradient is the sum of ``dy * xhat``, the bias's the sum of ``dy``, over the axes they are
broadcast along.

The training graph (:func:`helpers.core.model_graphs.training_graph.training_graph`) gives the
builder a torch export's ``BatchNormalization`` decomposed into primitives (``ReduceMean``,
``Sub``, ``Mul``, ``Add``, ``Sqrt``, ``Div``, ``Reshape``), ``InstanceNormalization`` (torch's
``InstanceNorm`` and ``GroupNorm``) written out the same way, a ``LayerNormalization`` of one
value written out, and every other ``LayerNormalization`` as a node with its three outputs.
The nodes' gradients here serve the models that keep them: ``BatchNormalization`` in inference
mode (the statistics are inputs: their gradients are given too) and in training mode (opset 14
and later: the batch statistics, and the running statistics it returns), ``GroupNormalization``
(a scale per group at opset 18, per channel from 21; torch never exports it),
``LpNormalization`` and ``MeanVarianceNormalization``. The channel normalizations work on a
``(N, C, -1)`` view of their input (``(N, groups, -1)`` for the statistics of groups): the rank
stays free.

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> from onnx.reference import ReferenceEvaluator
>>> from helpers.portable.gradients import build_gradients
>>> graph = helper.make_graph(
...     [helper.make_node("LayerNormalization", ["x", "s"], ["y"]),
...      helper.make_node("Mul", ["y", "r"], ["p"]),
...      helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0)], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
...     [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
...     [numpy_helper.from_array(np.ones(3, np.float32), "s"),
...      numpy_helper.from_array(np.array([1, 2, 4], np.float32), "r")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> built = build_gradients(model, ["x", "s"])
>>> x = np.array([[1, 2, 3], [0, 0, 5]], np.float32)
>>> dx, ds = ReferenceEvaluator(built.model).run(["x_grad", "s_grad"], {"x": x})
>>> bool(np.abs(dx.sum(axis=1)).max() < 1e-6), ds.shape  # shifting a row changes nothing
(True, (3,))
"""

import numpy as np

from ..lowering.normalization import standardized_input_gradient
from ..node_attributes import node_attribute
from .registry import gradient


def _reduce(ctx, op_type, value, axes, keepdims=1):
    """``op_type`` of ``value`` over ``axes``: the axes an input from opset 13 for
    ``ReduceSum``, from 18 for the other reductions, an attribute before."""
    if op_type == "ReduceSum" or ctx.opset >= 18:
        return ctx.op(op_type, [value, ctx.axes(axes)], keepdims=keepdims)
    return ctx.op(op_type, [value], axes=list(axes), keepdims=keepdims)


def _mean_over(ctx, axes):
    """The function writing the mean of a value over ``axes``, kept."""
    return lambda value: _reduce(ctx, "ReduceMean", value, axes)


def _inverse_std(ctx, var, epsilon, like):
    """``1 / sqrt(var + epsilon)``, ``epsilon`` of the element type of ``like``."""
    shifted = ctx.op("Add", [var, ctx.scalar_like(epsilon, like)])
    return ctx.op("Reciprocal", [ctx.op("Sqrt", [shifted])])


def _standardized(ctx, x, axes, epsilon):
    """``(xhat, inv_std, centred)`` of ``x`` over ``axes``, the statistics with these axes kept."""
    mean = _mean_over(ctx, axes)
    centred = ctx.op("Sub", [x, mean(x)])
    inv_std = _inverse_std(ctx, mean(ctx.op("Mul", [centred, centred])), epsilon, x)
    return ctx.op("Mul", [centred, inv_std]), inv_std, centred


def _input_gradient(ctx, d_xhat, xhat, inv_std, axes):
    """The gradient of the standardized input, through its statistics."""
    return standardized_input_gradient(ctx.op, _mean_over(ctx, axes), d_xhat, xhat, inv_std)


def _inverse_count(ctx, x, statistic, axes, like):
    """``1 / n`` in the element type of ``like``, ``n`` the number of values of ``x`` a
    statistic (``x`` reduced over ``axes``, kept) is the mean of: a constant where ``x``'s
    shape fixes them."""
    shape = ctx.shape(x)
    if shape is not None and all(isinstance(shape[a], int) for a in axes):
        return ctx.scalar_like(1.0 / int(np.prod([shape[a] for a in axes])), like)
    return ctx.op("Div", [ctx.cast_like(ctx.op("Size", [v]), like) for v in (statistic, x)])


def _through_statistics(ctx, x, statistic, axes, centred, mean_grad, spread_grad, like):
    """The gradient of ``x`` through statistics read on their own, as ``(full-size terms,
    kept-dimension terms)``: ``mean_grad`` is the gradient of ``mean(x)``, ``spread_grad``
    twice that of the variance ``mean(centred**2)`` (``d var = 2 mean(centred dx)``), either
    None; ``statistic`` is one of the kept-dimension statistics (for the count at run time);
    ``like`` has the element type."""
    if mean_grad is None and spread_grad is None:
        return [], []
    per_value = _inverse_count(ctx, x, statistic, axes, like)
    full, kept = [], []
    if mean_grad is not None:
        kept.append(ctx.op("Mul", [mean_grad, per_value]))
    if spread_grad is not None:
        full.append(ctx.op("Mul", [centred, ctx.op("Mul", [spread_grad, per_value])]))
    return full, kept


def _sum_of(ctx, full, kept, full_size):
    """The sum of the gradient terms, expanded to the shape of ``full_size`` where none has it."""
    parts = full + kept
    total = parts[0] if len(parts) == 1 else ctx.op("Sum", parts)
    return total if full else ctx.op("Expand", [total, ctx.op("Shape", [full_size])])


def _in_type_of(ctx, name, x):
    """``name`` in ``x``'s element type (a statistic of another ``stash_type``); None stays."""
    if name is None or ctx.types.get(name, ctx.types.get(x)) == ctx.types.get(x):
        return name
    return ctx.cast_like(name, x)


@gradient("LayerNormalization")
def layer_normalization_grad(node, dy, ctx):
    """``Y = xhat * scale + B`` over the axes from ``axis`` on, and its ``Mean`` and
    ``InvStdDev`` outputs (read from the node where it writes both, recomputed otherwise).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 4]}, {"x": TensorProto.FLOAT}, {"x", "s"}, 17)
    >>> node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m", "i"])
    >>> [g is not None for g in layer_normalization_grad(node, ["dy", None, None], ctx)]
    [True, True, False]
    """
    x, scale = node.input[:2]
    bias = node.input[2] if len(node.input) > 2 else ""
    y = node.output[0]
    grads = [None] * len(node.input)
    scaled = dy[0] is not None and ctx.needs(scale)
    if dy[0] is not None and bias and ctx.needs(bias):
        grads[2] = ctx.reduce_to(dy[0], bias, y)
    if not (ctx.needs(x) or scaled):
        return grads
    axis, rank = node_attribute(node, "axis", -1), ctx.rank(x)
    if axis >= 0 and rank is None:
        ctx.refuse("Its axis is positive and the rank of its input is unknown.")
    axes = list(range(axis, 0)) if rank is None else list(range(axis % rank, rank))
    statistics = list(node.output[1:3])
    if len(statistics) == 2 and all(statistics):
        mean, inv_std = (_in_type_of(ctx, name, x) for name in statistics)
        centred = ctx.op("Sub", [x, mean])
        xhat = ctx.op("Mul", [centred, inv_std])
    else:
        xhat, inv_std, centred = _standardized(ctx, x, axes, node_attribute(node, "epsilon", 1e-5))
    if scaled:
        grads[1] = ctx.reduce_to(ctx.op("Mul", [dy[0], xhat]), scale, y)
    if not ctx.needs(x):
        return grads
    d_mean, d_inv_std = (_in_type_of(ctx, g, x) for g in (list(dy[1:]) + [None, None])[:2])
    spread_grad = None
    if d_inv_std is not None:  # d inv_std / d var = -inv_std**3 / 2
        cubed = ctx.op("Mul", [inv_std, ctx.op("Mul", [inv_std, inv_std])])
        spread_grad = ctx.op("Neg", [ctx.op("Mul", [d_inv_std, cubed])])
    full, kept = _through_statistics(ctx, x, inv_std, axes, centred, d_mean, spread_grad, x)
    if dy[0] is not None:
        d_xhat = ctx.op("Mul", [dy[0], scale])
        full.insert(0, _input_gradient(ctx, d_xhat, xhat, inv_std, axes))
    if full or kept:
        grads[0] = _sum_of(ctx, full, kept, x)
    return grads


#: ``Reshape`` targets: ``(N, C, everything else)``; a vector of channels as a column.
_CHANNEL_VIEW, _COLUMN = [0, 0, -1], [-1, 1]


def _view(ctx, value, dims):
    """``value`` reshaped to ``dims`` (0 copies a dimension, -1 takes the rest)."""
    view = ctx.op("Reshape", [value, ctx.constant(np.array(dims, np.int64))])
    if value in ctx.types:
        ctx.types[view] = ctx.types[value]
    return view


def _channel_sum(ctx, value):
    """``value``, a ``(N, C, -1)`` view, summed to one value per channel."""
    return _reduce(ctx, "ReduceSum", value, [0, 2], keepdims=0)


@gradient("BatchNormalization")
def batch_normalization_grad(node, dy, ctx):
    """Per channel, ``Y = xhat * scale + B``: in inference mode ``xhat`` standardizes with the
    statistics given as inputs (their gradients too), in training mode with the batch's (the
    gradient goes through them), whose running averages the node returns (``running =
    momentum * input + (1 - momentum) * batch``, the batch variance biased).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"x": ["N", 3]}, {"x": TensorProto.FLOAT}, {"x", "s", "b"}, 15)
    >>> node = helper.make_node("BatchNormalization", list("xsbmv"), ["y"])
    >>> [g is not None for g in batch_normalization_grad(node, ["dy"], ctx)]
    [True, True, True, False, False]
    >>> "ReduceMean" in {n.op_type for n in ctx.nodes}  # inference mode: no batch statistics
    False
    """
    if ctx.opset < 14 and len([o for o in node.output if o]) > 1:
        ctx.refuse(
            "Its training mode below opset 14 (five outputs, saved statistics) has no gradient "
            "here: export the model with opset 14 or later."
        )
    bias = node.input[2]
    g = None if dy[0] is None else _view(ctx, dy[0], _CHANNEL_VIEW)
    grads = [None] * len(node.input)
    if g is not None and ctx.needs(bias):
        grads[2] = _channel_sum(ctx, g)
    if ctx.opset >= 14 and node_attribute(node, "training_mode", 0):
        _batch_norm_training_grads(node, dy, ctx, g, grads)
    elif g is not None:
        _batch_norm_inference_grads(node, ctx, g, grads)
    return grads


def _batch_norm_training_grads(node, dy, ctx, g, grads):
    """Fill ``grads`` but the bias's: through the batch statistics and the running ones."""
    x, scale = node.input[:2]
    momentum = node_attribute(node, "momentum", 0.9)
    running = (list(dy[1:]) + [None, None])[:2]
    for index, d in zip((3, 4), running):
        if d is not None and ctx.needs(node.input[index]):
            grads[index] = ctx.op("Mul", [d, ctx.scalar_like(momentum, x)])
    scaled = g is not None and ctx.needs(scale)
    if not (ctx.needs(x) or scaled):
        return
    view = _view(ctx, x, _CHANNEL_VIEW)
    xhat, inv_std, centred = _standardized(ctx, view, [0, 2], node_attribute(node, "epsilon", 1e-5))
    if scaled:
        grads[1] = _channel_sum(ctx, ctx.op("Mul", [g, xhat]))
    if not ctx.needs(x):
        return
    mean_grad, spread_grad = (  # d running / d batch statistic: (1 - momentum)
        None if d is None else ctx.op("Mul", [_view(ctx, d, _COLUMN), ctx.scalar_like(w, x)])
        for d, w in zip(running, (1 - momentum, 2 * (1 - momentum)))
    )
    full, kept = _through_statistics(ctx, view, inv_std, [0, 2], centred, mean_grad, spread_grad, x)
    if g is not None:
        d_xhat = ctx.op("Mul", [g, _view(ctx, scale, _COLUMN)])
        full.insert(0, _input_gradient(ctx, d_xhat, xhat, inv_std, [0, 2]))
    if full or kept:
        grads[0] = ctx.op("Reshape", [_sum_of(ctx, full, kept, view), ctx.op("Shape", [x])])


def _batch_norm_inference_grads(node, ctx, g, grads):
    """Fill ``grads`` but the bias's: the statistics are inputs, ``dY / dx = scale * inv_std``
    per channel."""
    x, scale, _, mean, var = node.input[:5]
    inv_std = _inverse_std(ctx, var, node_attribute(node, "epsilon", 1e-5), x)
    slope = ctx.op("Mul", [scale, inv_std])
    if ctx.needs(x):
        grads[0] = ctx.op(
            "Reshape", [ctx.op("Mul", [g, _view(ctx, slope, _COLUMN)]), ctx.op("Shape", [x])]
        )
    if ctx.needs(mean):  # dY / dmean = -slope
        d_bias = grads[2] or _channel_sum(ctx, g)
        grads[3] = ctx.op("Neg", [ctx.op("Mul", [d_bias, slope])])
    if ctx.needs(scale) or ctx.needs(var):
        centred = ctx.op("Sub", [_view(ctx, x, _CHANNEL_VIEW), _view(ctx, mean, _COLUMN)])
        xhat = ctx.op("Mul", [centred, _view(ctx, inv_std, _COLUMN)])
        d_scale = _channel_sum(ctx, ctx.op("Mul", [g, xhat]))
        grads[1] = d_scale if ctx.needs(scale) else None
        if ctx.needs(var):  # dY / dvar = -xhat * slope * inv_std / 2
            half = ctx.op("Mul", [slope, ctx.op("Mul", [inv_std, ctx.scalar_like(-0.5, x)])])
            grads[4] = ctx.op("Mul", [d_scale, half])


def _grouped_grad(node, dy, ctx, groups, scale_per_group):
    """``InstanceNormalization`` and ``GroupNormalization``: each sample standardized over each
    group of ``groups`` channels (0: every channel its own group), then scaled and shifted per
    group or per channel."""
    x, scale, bias = node.input[:3]
    grads = [None] * len(node.input)
    if dy[0] is None:
        return grads
    per_group = [0, groups, -1]
    g = _view(ctx, dy[0], per_group if scale_per_group else _CHANNEL_VIEW)
    if ctx.needs(bias):
        grads[2] = _channel_sum(ctx, g)
    if not (ctx.needs(x) or ctx.needs(scale)):
        return grads
    epsilon = node_attribute(node, "epsilon", 1e-5)
    xhat, inv_std, _ = _standardized(ctx, _view(ctx, x, per_group), [2], epsilon)
    if ctx.needs(scale):
        xhat_scaled = xhat if scale_per_group else ctx.op("Reshape", [xhat, ctx.op("Shape", [g])])
        grads[1] = _channel_sum(ctx, ctx.op("Mul", [g, xhat_scaled]))
    if ctx.needs(x):
        d_xhat = ctx.op("Mul", [g, _view(ctx, scale, _COLUMN)])
        if not scale_per_group:
            d_xhat = _view(ctx, d_xhat, per_group)  # a group's channels are consecutive
        d_x = _input_gradient(ctx, d_xhat, xhat, inv_std, [2])
        grads[0] = ctx.op("Reshape", [d_x, ctx.op("Shape", [x])])
    return grads


@gradient("InstanceNormalization")
def instance_normalization_grad(node, dy, ctx):
    """Each sample and channel standardized over the other axes, then scaled per channel.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {"x": TensorProto.FLOAT}, {"b"}, 17)
    >>> node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])
    >>> grads = instance_normalization_grad(node, ["dy"], ctx)
    >>> [g is not None for g in grads], [n.op_type for n in ctx.nodes]  # the bias's only
    ([False, False, True], ['Reshape', 'ReduceSum'])
    """
    return _grouped_grad(node, dy, ctx, 0, scale_per_group=True)


@gradient("GroupNormalization")
def group_normalization_grad(node, dy, ctx):
    """Each sample standardized over groups of ``num_groups`` channels, then scaled per group
    (opset 18) or per channel (opset 21).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {"x": TensorProto.FLOAT}, {"x", "s", "b"}, 21)
    >>> node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    >>> [g is not None for g in group_normalization_grad(node, ["dy"], ctx)]
    [True, True, True]
    """
    groups = node_attribute(node, "num_groups")
    return _grouped_grad(node, dy, ctx, groups, scale_per_group=ctx.opset < 21)


@gradient("LpNormalization")
def lp_normalization_grad(node, dy, ctx):
    """``y = x / norm``: ``dx = (dy - d * sum(dy * y)) / norm``, ``d`` being ``y`` for the L2
    norm and ``sign(x)`` for the L1 norm, the sum along ``axis``.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {"x": TensorProto.FLOAT}, {"x"}, 17)
    >>> ctx.node = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    >>> try:
    ...     lp_normalization_grad(ctx.node, ["dy"], ctx)
    ... except ValueError as error:  # NoGradientError
    ...     print(str(error).split(". ")[1])
    Its norm p=3 is neither 1 nor 2
    """
    x, y = node.input[0], node.output[0]
    axis, p = node_attribute(node, "axis", -1), node_attribute(node, "p", 2)
    if p not in (1, 2):
        ctx.refuse(f"Its norm p={p} is neither 1 nor 2.")
    norm = _reduce(ctx, "ReduceL2" if p == 2 else "ReduceL1", x, [axis])
    direction = y if p == 2 else ctx.op("Sign", [x])
    along = _reduce(ctx, "ReduceSum", ctx.op("Mul", [dy[0], y]), [axis])
    return [ctx.op("Div", [ctx.op("Sub", [dy[0], ctx.op("Mul", [direction, along])]), norm])]


@gradient("MeanVarianceNormalization")
def mean_variance_normalization_grad(node, dy, ctx):
    """``y = c / (s + 1e-9)``, ``c = x - mean(x)``, ``s = sqrt(mean(c**2))`` over ``axes``: with
    ``b = dy / (s + 1e-9)``, ``dx = b - mean(b) - c * mean(b * c) / (s (s + 1e-9))`` (the epsilon
    of the operator's definition is outside the root: not the standardization above).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {"x": TensorProto.FLOAT}, {"x"}, 13)
    >>> node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    >>> grads = mean_variance_normalization_grad(node, ["dy"], ctx)
    >>> grads == [ctx.nodes[-1].output[0]], ctx.nodes[-1].op_type
    (True, 'Sub')
    >>> ctx.nodes[0].attribute[0].ints  # below opset 18, the axes are an attribute
    [0, 2, 3]
    """
    x = node.input[0]
    mean = _mean_over(ctx, node_attribute(node, "axes", [0, 2, 3]))
    centred = ctx.op("Sub", [x, mean(x)])
    std = ctx.op("Sqrt", [mean(ctx.op("Mul", [centred, centred]))])
    inv = ctx.op("Reciprocal", [ctx.op("Add", [std, ctx.scalar_like(1e-9, x)])])
    b = ctx.op("Mul", [dy[0], inv])
    along = ctx.op("Div", [ctx.op("Mul", [mean(ctx.op("Mul", [b, centred])), inv]), std])
    return [ctx.op("Sub", [ctx.op("Sub", [b, mean(b)]), ctx.op("Mul", [centred, along])])]
