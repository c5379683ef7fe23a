"""Gradients of the operators that move values without computing them: reshapes, transposes,
broadcasts and copies, concatenations and splits, ``Dropout``; ``Shape`` and ``Size`` pass none.

Each gradient puts the output gradient back where the forward node took its values: a
``Reshape`` to the input's shape, the inverse permutation, a sum over the copies (``Expand``,
``Tile``), a ``Split`` of a concatenation and a ``Concat`` of a split. The second inputs (shapes,
axes, repeats, lengths) are integers: they receive no gradient.
"""

import numpy as np
from onnx import numpy_helper

from ..node_attributes import node_attribute
from .registry import gradient
from .via_lowering import lowered


def _rest(node):
    """``None`` for each input after the first (shapes, axes: integers)."""
    return [None] * (len(node.input) - 1)


def zeros_like(ctx, name, like=None):
    """Zeros of the shape of ``name`` and the element type of ``like`` (``name``'s when not
    given): a constant when the shape is static.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"y": ["N", 3]}, {"y": TensorProto.DOUBLE}, set(), 17)
    >>> zeros_like(ctx, "y"), [n.op_type for n in ctx.nodes]
    ('grad_2_ConstantOfShape', ['Shape', 'ConstantOfShape'])
    """
    dtype = ctx.numpy_type(like or name)
    static = ctx.static_shape(name)
    if static is not None:
        return ctx.constant(np.zeros(static, dtype=dtype))
    value = numpy_helper.from_array(np.zeros(1, dtype=dtype))
    return ctx.op("ConstantOfShape", [ctx.op("Shape", [name])], value=value)


def _reshape_back(node, dy, ctx):
    """The output gradient reshaped to the input's shape."""
    return [ctx.op("Reshape", [dy[0], ctx.shape_of(node.input[0])])] + _rest(node)


gradient("Reshape")(_reshape_back)
gradient("Flatten")(_reshape_back)


@gradient("Squeeze")
def squeeze_grad(node, dy, ctx):
    """``Unsqueeze`` at the squeezed axes; a ``Reshape`` back when the axes are not given.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Squeeze", ["x", "axes"], ["y"])
    >>> written_operators(node, {"x": [[1.0]], "axes": np.array([0])})
    ['Unsqueeze']
    """
    if len(node.input) > 1 and node.input[1]:
        return [ctx.op("Unsqueeze", [dy[0], node.input[1]]), None]
    return _reshape_back(node, dy, ctx)


@gradient("Unsqueeze")
def unsqueeze_grad(node, dy, ctx):
    """``Squeeze`` of the inserted axes.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Unsqueeze", ["x", "axes"], ["y"])
    >>> written_operators(node, {"x": [1.0], "axes": np.array([0])})
    ['Squeeze']
    """
    return [ctx.op("Squeeze", [dy[0], node.input[1]]), None]


@gradient("Transpose")
def transpose_grad(node, dy, ctx):
    """The inverse permutation (a ``Transpose`` without ``perm`` reverses: its own inverse).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> written_operators(make_node("Transpose", ["x"], ["y"], perm=[1, 0]), {"x": [[1.0, 2.0]]})
    ['Transpose']
    """
    perm = node_attribute(node, "perm")
    if perm is None:
        return [ctx.op("Transpose", [dy[0]])]
    return [ctx.op("Transpose", [dy[0]], perm=[int(i) for i in np.argsort(perm)])]


@gradient("Expand")
def expand_grad(node, dy, ctx):
    """Summed over the axes the input was broadcast along.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Expand", ["x", "shape"], ["y"])
    >>> written_operators(node, {"x": [[1.0, 2.0]], "shape": np.array([3, 2])})
    ['ReduceSum']
    """
    return [ctx.reduce_to(dy[0], node.input[0], node.output[0]), None]


@gradient("Tile")
def tile_grad(node, dy, ctx):
    """The gradient viewed as ``[r0, d0, r1, d1, ...]`` (repeats ``r``, input shape ``d``) and
    summed over the repeats' axes.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Tile", ["x", "repeats"], ["y"])
    >>> written_operators(node, {"x": [[1.0, 2.0]], "repeats": np.array([2, 3])})
    ['Reshape', 'ReduceSum']
    """
    x, repeats = node.input
    rank = ctx.known_rank(x)
    static, counts = ctx.static_shape(x), ctx.constant_value(repeats)
    if static is not None and counts is not None:
        grouped = ctx.constant(
            np.stack([np.ravel(counts), static], axis=1).ravel().astype(np.int64)
        )
    else:
        column = ctx.axes([1])
        pairs = ctx.op(
            "Concat",
            [
                ctx.op("Unsqueeze", [repeats, column]),
                ctx.op("Unsqueeze", [ctx.shape_of(x), column]),
            ],
            axis=1,
        )
        grouped = ctx.op("Reshape", [pairs, ctx.constant(np.array([-1], np.int64))])
    viewed = ctx.op("Reshape", [dy[0], grouped])
    return [ctx.op("ReduceSum", [viewed, ctx.axes(range(0, 2 * rank, 2))], keepdims=0), None]


@gradient("Concat")
def concat_grad(node, dy, ctx):
    """``Split`` of the gradient by the inputs' lengths along the axis.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Concat", ["a", "b"], ["y"], axis=1)
    >>> written_operators(node, {"a": [[1.0]], "b": [[1.0, 2.0]]})
    ['Split']
    """
    axis = node_attribute(node, "axis")
    if len(node.input) == 1:
        return [dy[0]]
    lengths = [ctx.length(x, axis) for x in node.input]
    if all(isinstance(n, int) for n in lengths):
        split = ctx.constant(np.array(lengths, np.int64))
    else:
        split = ctx.op(
            "Concat",
            [n if isinstance(n, str) else ctx.axes([n]) for n in lengths],
            axis=0,
        )
    parts = ctx.op(
        "Split", [dy[0], split], outputs=[ctx.name("part") for _ in node.input], axis=axis
    )
    return [part if ctx.needs(x) else None for part, x in zip(parts, node.input)]


@gradient("Split")
def split_grad(node, dy, ctx):
    """``Concat`` of the outputs' gradients (zeros for an output none reaches), whether the
    lengths come as an input, as ``num_outputs`` (opset 18) or as equal parts.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Split", ["x"], ["p", "q", "r"], axis=1, num_outputs=3)
    >>> written_operators(node, {"x": [[1.0, 2.0, 3.0]]}, opset=18)
    ['Concat']
    """
    parts = [g if g is not None else zeros_like(ctx, y) for g, y in zip(dy, node.output)]
    return [ctx.op("Concat", parts, axis=node_attribute(node, "axis", 0))] + _rest(node)


def _space_to_depth_channels(ctx, block, channels):
    """The permutation of ``SpaceToDepth``'s channels (ordered ``(row, column, channel)``) into
    ``DepthToSpace``'s CRD order ``(channel, row, column)``."""
    depth = channels // (block * block)
    order = np.arange(channels).reshape(block, block, depth).transpose(2, 0, 1)
    return ctx.constant(order.ravel().astype(np.int64))


@gradient("DepthToSpace")
def depth_to_space_grad(node, dy, ctx):
    """``SpaceToDepth`` of the gradient (DCR mode: its exact inverse); in CRD mode, its channels
    then permuted to the CRD order (needs the number of channels).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")
    >>> written_operators(node, {"x": np.ones((1, 8, 2, 2))})
    ['SpaceToDepth', 'Gather']
    """
    block = node_attribute(node, "blocksize")
    grad = ctx.op("SpaceToDepth", [dy[0]], blocksize=block)
    if node_attribute(node, "mode", "DCR") == "DCR":
        return [grad]
    channels = (ctx.shape(node.input[0]) or [None, None])[1]
    if not isinstance(channels, int):
        ctx.refuse("Its gradient in CRD mode needs the number of channels of its input.")
    return [ctx.op("Gather", [grad, _space_to_depth_channels(ctx, block, channels)], axis=1)]


@gradient("SpaceToDepth")
def space_to_depth_grad(node, dy, ctx):
    """``DepthToSpace`` in DCR mode, its inverse.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)
    >>> written_operators(node, {"x": np.ones((1, 2, 4, 4))})
    ['DepthToSpace']
    """
    return [
        ctx.op("DepthToSpace", [dy[0]], blocksize=node_attribute(node, "blocksize"), mode="DCR")
    ]


@gradient("Dropout")
def dropout_grad(node, dy, ctx):
    """In inference mode (no ``training_mode``, or a constant false one) the identity; in
    training mode ``dy * mask / (1 - ratio)`` (the ``DropoutGrad`` lowering), which needs the
    node's mask output; with a ``training_mode`` computed at run time, a ``Where`` of the two.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"])
    >>> inputs = {"x": [1.0], "ratio": np.array(0.5, "f"), "training": np.array(False)}
    >>> written_operators(node, inputs)  # inference: the identity
    []
    >>> inputs["training"] = np.array(True)
    >>> written_operators(node, inputs)[-4:]  # the DropoutGrad lowering
    ['Mul', 'Div', 'Equal', 'Where']
    """
    x = node.input[0]
    training = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    mode = ctx.constant_value(training) if training else np.array(False)
    if mode is not None and not bool(np.ravel(mode)[0]):
        return [dy[0]] + _rest(node)
    mask = node.output[1] if len(node.output) > 1 else ""
    if not mask:
        ctx.refuse("In training mode its gradient needs the mask: add the mask output.")
    ratio = node.input[1] if len(node.input) > 1 else ""
    grad = lowered(ctx, "DropoutGrad", [dy[0], mask] + ([ratio] if ratio else []), like=x)
    if mode is None:
        grad = ctx.op("Where", [training, grad, dy[0]])
    return [grad] + _rest(node)


def _no_gradient(node, dy, ctx):
    """An integer output: no gradient flows back to the input."""
    return [None] * len(node.input)


gradient("Shape")(_no_gradient)
gradient("Size")(_no_gradient)
