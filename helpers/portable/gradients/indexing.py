"""Gradients of the indexing operators: ``Gather``, ``GatherElements``, ``GatherND`` and
``Slice`` (``Pad``'s is in :mod:`~helpers.portable.gradients.padding`).

Each gradient adds the output gradient into zeros of the input's shape at the positions the
forward node read, summing where a position was read more than once (an embedding's repeated
ids, the edge of a padding). The indices receive no gradient.

``Gather`` (an embedding's weight gradient): three formulations were timed on onnxruntime
1.31.1 (CPU, one thread, median of 7 x 50 runs) for a 1000 x 64 table read by 32 x 32 ids:
``ScatterND(reduction='add')`` 49 us, ``ScatterElements(reduction='add')`` 684 us, a one-hot
``MatMul`` 2,527 us (2 threads: 37, 398 and 4,283 us). From opset 16 the gradient is therefore
a ``ScatterND`` add (the ``GatherGrad`` lowering); below, where scatters cannot add, the
one-hot ``MatMul``. ``GatherND`` is the same ``Gather`` of its table flattened over the
indexed axes; ``GatherElements`` a ``ScatterElements`` add from opset 16, a one-hot sum below.
"""

import numpy as np
from onnx import TensorProto

from ..node_attributes import node_attribute
from .registry import END, gradient
from .shapes import zeros_like
from .via_lowering import lowered


def as_int64(ctx, ids):
    """``ids`` as int64 (``Gather`` also takes int32).

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {"i": TensorProto.INT32, "j": TensorProto.INT64}, set(), 17)
    >>> as_int64(ctx, "j"), as_int64(ctx, "i"), [n.op_type for n in ctx.nodes]
    ('j', 'grad_0_Cast', ['Cast'])
    """
    if ctx.types.get(ids, TensorProto.INT64) == TensorProto.INT64:
        return ids
    return ctx.op("Cast", [ids], to=TensorProto.INT64)


def _wrapped(ctx, ids, size):
    """``ids`` with the negative ones counted from the end of ``size``."""
    ids = as_int64(ctx, ids)
    negative = ctx.op("Less", [ids, ctx.constant(np.array(0, np.int64))])
    return ctx.op("Where", [negative, ctx.op("Add", [ids, size]), ids])


def _product(ctx, vector):
    """The product of an int64 vector's values as a 1-element value (1 if it is empty)."""
    padded = ctx.op("Concat", [ctx.axes([1]), vector], axis=0)
    return ctx.op("ReduceProd", [padded], keepdims=1)


def _one_hot(ctx, a, b, like):
    """``Cast(Equal(a, b))`` to the element type of ``like``."""
    return ctx.cast_like(ctx.op("Equal", [a, b]), like)


def _one_hot_rows(ctx, table_shape, rank, ids, grad, axis, like):
    """``Gather``'s gradient without a scatter: ``grad`` viewed as ``outer + [count] + inner``
    and contracted along ``axis`` with the one-hot matrix of the ids (a ``MatMul``)."""
    size = ctx.op("Gather", [table_shape, ctx.constant(np.array(axis, np.int64))])
    ids = ctx.op("Reshape", [_wrapped(ctx, ids, size), ctx.constant(np.array([-1], np.int64))])
    inner = ctx.op("Slice", [table_shape, ctx.axes([axis + 1]), ctx.axes([END])])
    view = ctx.op("Concat", [ctx.constant(np.array([0] * axis + [-1], np.int64)), inner], axis=0)
    grad = ctx.op("Reshape", [grad, view])
    classes = ctx.op(
        "Range",
        [ctx.constant(np.array(0, np.int64)), size, ctx.constant(np.array(1, np.int64))],
    )
    if axis == rank - 1:
        column = ctx.op("Unsqueeze", [ids, ctx.axes([1])])
        return ctx.op("MatMul", [grad, _one_hot(ctx, column, classes, like)])
    rows = _one_hot(ctx, ctx.op("Unsqueeze", [classes, ctx.axes([1])]), ids, like)
    if axis == rank - 2:
        return ctx.op("MatMul", [rows, grad])
    perm = [a for a in range(rank) if a != axis]
    perm.insert(rank - 2, axis)
    moved = ctx.op("MatMul", [rows, ctx.op("Transpose", [grad], perm=perm)])
    return ctx.op("Transpose", [moved], perm=[int(i) for i in np.argsort(perm)])


def _scatter_rows(ctx, table_shape, rank, ids, grad, axis, like):
    """The gradient of ``Gather(table, ids, axis)``: ``grad`` added into zeros of
    ``table_shape`` at ``ids`` along ``axis`` (a ``ScatterND`` add from opset 16, the one-hot
    ``MatMul`` below). ``like`` gives the element type."""
    if ctx.opset >= 16:
        return lowered(ctx, "GatherGrad", [table_shape, ids, grad], like=like, axis=axis)
    return _one_hot_rows(ctx, table_shape, rank, ids, grad, axis, like)


@gradient("Gather")
def gather_grad(node, dy, ctx):
    """Rows read more than once receive the sum of their gradients; negative ids count from
    the end.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = helper.make_node("Gather", ["w", "ids"], ["y"])
    >>> inputs = {"w": np.ones((10, 4), "f"), "ids": np.array([1, 1, 3])}
    >>> "ScatterND" in written_operators(node, inputs, opset=16)
    True
    >>> written_operators(node, inputs, opset=13)[-3:]
    ['Equal', 'Cast', 'MatMul']
    """
    x, ids = node.input
    rank = ctx.known_rank(x)
    axis = node_attribute(node, "axis", 0) % rank
    return [_scatter_rows(ctx, ctx.shape_of(x), rank, ids, dy[0], axis, x), None]


@gradient("GatherElements")
def gather_elements_grad(node, dy, ctx):
    """A ``ScatterElements`` add into zeros (opset 16); below, the gradient times the one-hot
    of the indices along a new axis, summed over the indices' axis and padded to the input's
    shape where the indices are shorter on another axis.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("GatherElements", ["x", "ids"], ["y"], axis=1)
    >>> inputs = {"x": np.ones((2, 3), "f"), "ids": np.array([[0, 0], [1, 2]])}
    >>> written_operators(node, inputs, opset=16)
    ['ScatterElements']
    >>> written_operators(node, inputs, opset=13)[-4:]
    ['Cast', 'Unsqueeze', 'Mul', 'ReduceSum']
    """
    x, ids = node.input
    axis = node_attribute(node, "axis", 0)
    if ctx.opset >= 16:
        zeros = zeros_like(ctx, x)
        return [ctx.op("ScatterElements", [zeros, ids, dy[0]], axis=axis, reduction="add"), None]
    rank = ctx.known_rank(x)
    axis %= rank
    size = ctx.op("Reshape", [ctx.vector(ctx.length(x, axis)), ctx.constant(np.zeros(0, np.int64))])
    one = ctx.constant(np.array(1, np.int64))
    classes = ctx.op("Range", [ctx.constant(np.array(0, np.int64)), size, one])
    shape = np.ones(rank + 1, np.int64)
    shape[axis + 1] = -1
    classes = ctx.op("Reshape", [classes, ctx.constant(shape)])
    new_axis = ctx.axes([axis + 1])
    chosen = _one_hot(ctx, ctx.op("Unsqueeze", [_wrapped(ctx, ids, size), new_axis]), classes, x)
    spread = ctx.op("Mul", [chosen, ctx.op("Unsqueeze", [dy[0], new_axis])])
    grad = ctx.op("ReduceSum", [spread, ctx.axes([axis])], keepdims=0)
    x_shape, ids_shape = ctx.shape(x), ctx.shape(ids)
    if x_shape is not None and ids_shape is not None:
        if all(
            a == b and a is not None
            for k, (a, b) in enumerate(zip(x_shape, ids_shape))
            if k != axis
        ):
            return [grad, None]
    missing = ctx.op("Sub", [ctx.op("Shape", [x]), ctx.op("Shape", [grad])])
    pads = ctx.op("Concat", [ctx.constant(np.zeros(rank, np.int64)), missing], axis=0)
    return [ctx.op("Pad", [grad, pads]), None]


@gradient("GatherND")
def gather_nd_grad(node, dy, ctx):
    """With ``batch_dims`` 0 from opset 16, a ``ScatterND`` add (the ``GatherNDGrad``
    lowering). Otherwise the ``Gather`` gradient of the input flattened over its batch and
    indexed axes, read at each index tuple's linear position (``batch * count + sum(index *
    stride)``). Needs the length of the index tuples (the indices' last dimension).

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = make_node("GatherND", ["x", "ids"], ["y"])
    >>> inputs = {"x": np.ones((2, 3), "f"), "ids": np.array([[0, 1], [1, 2]])}
    >>> written_operators(node, inputs, opset=16)
    ['ConstantOfShape', 'ScatterND']
    """
    x, ids = node.input
    batch = node_attribute(node, "batch_dims", 0)
    if batch == 0 and ctx.opset >= 16:
        return [lowered(ctx, "GatherNDGrad", [ctx.shape_of(x), ids, dy[0]], like=x), None]
    rank, ids_shape = ctx.known_rank(x), ctx.shape(ids)
    depth = ids_shape[-1] if ids_shape else None
    if not isinstance(depth, int):
        ctx.refuse("Its gradient needs the length of the index tuples (the indices' last axis).")
    shape = ctx.shape_of(x)
    indexed = ctx.op("Slice", [shape, ctx.axes([batch]), ctx.axes([batch + depth])])
    strides = [
        _product(ctx, ctx.op("Slice", [indexed, ctx.axes([k + 1]), ctx.axes([depth])]))
        for k in range(depth)
    ]
    strides = ctx.op("Concat", strides, axis=0) if depth > 1 else strides[0]
    tuples = ctx.op("Mul", [_wrapped(ctx, ids, indexed), strides])
    position = ctx.op("ReduceSum", [tuples, ctx.axes([-1])], keepdims=0)
    if batch:
        batches = ctx.op("Slice", [shape, ctx.axes([0]), ctx.axes([batch])])
        count = ctx.op("Reshape", [_product(ctx, batches), ctx.constant(np.zeros(0, np.int64))])
        grid = ctx.op(
            "Range",
            [ctx.constant(np.array(0, np.int64)), count, ctx.constant(np.array(1, np.int64))],
        )
        ones = ctx.constant(np.ones(len(ids_shape) - 1 - batch, np.int64))
        grid = ctx.op("Reshape", [grid, ctx.op("Concat", [batches, ones], axis=0)])
        position = ctx.op("Add", [position, ctx.op("Mul", [grid, _product(ctx, indexed)])])
    rows = _product(ctx, ctx.op("Slice", [shape, ctx.axes([0]), ctx.axes([batch + depth])]))
    rest = ctx.op("Slice", [shape, ctx.axes([batch + depth]), ctx.axes([END])])
    table = ctx.op("Concat", [rows, rest], axis=0)
    flat = _scatter_rows(ctx, table, rank - batch - depth + 1, position, dy[0], 0, x)
    return [ctx.op("Reshape", [flat, shape]), None]


def _static_slice(node, ctx):
    """``[(axis, start, stop, step, length)]`` of a ``Slice`` whose bounds are constants and
    whose sliced axes have known lengths (normalized as the operator reads them), else None."""
    x, starts, ends, *rest = node.input
    axes = rest[0] if rest and rest[0] else ""
    steps = rest[1] if len(rest) > 1 and rest[1] else ""
    values = [ctx.constant_value(n) if n else None for n in (starts, ends, axes, steps)]
    if values[0] is None or values[1] is None or (axes and values[2] is None):
        return None
    if steps and values[3] is None:
        return None
    shape = ctx.shape(x)
    count = np.size(values[0])
    axes = values[2] if axes else range(count)
    steps = values[3] if steps else [1] * count
    if shape is None:
        return None
    sliced = []
    for axis, start, stop, step in zip(axes, np.ravel(values[0]), np.ravel(values[1]), steps):
        axis = int(axis) % len(shape)
        if not isinstance(shape[axis], int):
            return None
        bounds = slice(int(start), int(stop), int(step)).indices(shape[axis])
        sliced.append((axis, *bounds, shape[axis]))
    return sliced


@gradient("Slice")
def slice_grad(node, dy, ctx):
    """The gradient written back where the slice read, zeros elsewhere. With constant bounds
    and known lengths: one ``Pad`` for the unit steps; for another step (negative included),
    the gradient padded by one zero and read back by a ``Gather`` of constant positions. Bounds
    computed at run time: the ``SliceGrad`` lowering. Each value is copied once: exact.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.gradients.registry import written_operators
    >>> node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    >>> bounds = {"starts": np.array([5]), "ends": np.array([0]), "axes": np.array([1])}
    >>> x = np.ones((4, 6), "f")
    >>> written_operators(node, {"x": x, **bounds, "steps": np.array([1])})
    ['Pad']
    >>> written_operators(node, {"x": x, **bounds, "steps": np.array([-2])})
    ['Pad', 'Gather']
    """
    x = node.input[0]
    grads = [None] * len(node.input)
    sliced = _static_slice(node, ctx)
    if sliced is None:
        grads[0] = lowered(ctx, "SliceGrad", [dy[0], ctx.shape_of(x), *node.input[1:]], like=x)
        return grads
    rank, grad = ctx.rank(x), dy[0]
    pads = np.zeros(2 * rank, np.int64)
    for axis, start, stop, step, length in sliced:
        read = range(start, stop, step)
        if step == 1:
            pads[axis], pads[rank + axis] = start, length - start - len(read)
            continue
        one_more = np.zeros(2 * rank, np.int64)
        one_more[rank + axis] = 1
        positions = np.full(length, len(read), np.int64)
        positions[list(read)] = np.arange(len(read))
        padded = ctx.op("Pad", [grad, ctx.constant(one_more)])
        grad = ctx.op("Gather", [padded, ctx.constant(positions)], axis=axis)
    grads[0] = ctx.op("Pad", [grad, ctx.constant(pads)]) if pads.any() else grad
    return grads
