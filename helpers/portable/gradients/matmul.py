"""Gradients of the matrix products: ``MatMul`` and ``Gemm``.

``Y = A B``: ``dA = dY B^T`` and ``dB = A^T dY``, each summed over the batch axes its operand
was broadcast along. A weight of rank 2 multiplied by a batch of any rank gets its gradient
from one ``Gemm`` of the batch flattened to rows (the fastest form measured: one kernel call,
no reduction).
"""

import numpy as np

from ..node_attributes import node_attribute
from .registry import gradient


def _swap_last(ctx, name, rank):
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ctx.op("Transpose", [name], perm=perm)


def _as_rows(ctx, name, columns):
    """``name`` reshaped to a matrix of ``columns`` columns (its last axis)."""
    return ctx.op("Reshape", [name, ctx.constant(np.array([-1, columns], np.int64))])


def _matrix_form(ctx, y, rank_a, rank_b):
    """Where ``MatMul`` turned a vector operand into a matrix: the axes its output gradient
    gets back (of length 1), and the output's shape with them (None if unknown)."""
    shape = ctx.shape(y)
    if rank_a == rank_b == 1:
        return [0, 1], [1, 1]
    if rank_a == 1:
        return [-2], None if shape is None else [*shape[:-1], 1, shape[-1]]
    if rank_b == 1:
        return [-1], None if shape is None else [*shape, 1]
    return [], shape


@gradient("MatMul")
def matmul_grad(node, dy, ctx):
    """``dA = dY B^T``, ``dB = A^T dY``, vectors and broadcast batch axes included: a vector
    operand is the matrix ``MatMul`` makes of it (a row for ``A``, a column for ``B``) and its
    gradient is summed over every other axis.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": np.ones((5, 2, 3), "f"), "b": np.ones((3, 4), "f")}
    >>> written_operators(make_node("MatMul", ["a", "b"], ["y"]), inputs)  # dB: one Gemm
    ['Transpose', 'MatMul', 'Reshape', 'Reshape', 'Gemm']
    """
    a, b = node.input
    rank_a, rank_b = ctx.known_rank(a, "both operands"), ctx.known_rank(b, "both operands")
    new_axes, y_shape = _matrix_form(ctx, node.output[0], rank_a, rank_b)
    g = ctx.op("Unsqueeze", [dy[0], ctx.axes(new_axes)]) if new_axes else dy[0]
    a_m = ctx.op("Unsqueeze", [a, ctx.axes([0])]) if rank_a == 1 else a
    b_m = ctx.op("Unsqueeze", [b, ctx.axes([1])]) if rank_b == 1 else b
    rank_am, rank_bm = max(rank_a, 2), max(rank_b, 2)
    grads = [None, None]
    if ctx.needs(a):
        grad = ctx.op("MatMul", [g, _swap_last(ctx, b_m, rank_bm)])
        if rank_a == 1:  # [..., 1, K]
            grads[0] = ctx.op("ReduceSum", [grad, ctx.axes(range(rank_bm - 1))], keepdims=0)
        else:
            grads[0] = _back_to(ctx, grad, a, y_shape)
    if ctx.needs(b):
        columns = (ctx.static_shape(b) or [None, None])[-1] if rank_b == 2 else None
        rows = (ctx.shape(a) or [None])[-1]
        if rank_b == 2 and isinstance(columns, int) and isinstance(rows, int) and rank_a >= 2:
            flat_a, flat_g = _as_rows(ctx, a, rows), _as_rows(ctx, g, columns)
            grads[1] = ctx.op("Gemm", [flat_a, flat_g], transA=1)
        else:
            grad = ctx.op("MatMul", [_swap_last(ctx, a_m, rank_am), g])
            if rank_b == 1:  # [..., K, 1]
                others = [k for k in range(rank_am) if k != rank_am - 2]
                grads[1] = ctx.op("ReduceSum", [grad, ctx.axes(others)], keepdims=0)
            else:
                grads[1] = _back_to(ctx, grad, b, y_shape)
    return grads


def _back_to(ctx, grad, operand, y_shape):
    """A gradient computed at the broadcast batch axes of ``y_shape`` (the output's shape in
    matrix form), summed back to ``operand``'s shape (found at run time where unknown)."""
    shape = ctx.shape(operand)
    if shape is not None and y_shape is not None:
        ctx.shapes[grad] = list(y_shape[:-2]) + list(shape[-2:])
    return ctx.reduce_to(grad, operand, grad)


@gradient("Gemm")
def gemm_grad(node, dy, ctx):
    """``Y = alpha op(A) op(B) + beta C``: each gradient one ``Gemm`` with the transposes
    swapped, ``C``'s summed over the rows it was broadcast to.

    Examples
    --------
    >>> from onnx.helper import make_node
    >>> from helpers.portable.gradients.registry import written_operators
    >>> inputs = {"a": np.ones((2, 3), "f"), "b": np.ones((4, 3), "f"), "c": np.ones(4, "f")}
    >>> written_operators(make_node("Gemm", ["a", "b", "c"], ["y"], transB=1), inputs)
    ['Gemm', 'Gemm', 'ReduceSum', 'Reshape']
    """
    a, b = node.input[:2]
    c = node.input[2] if len(node.input) > 2 else ""
    alpha, beta = node_attribute(node, "alpha", 1.0), node_attribute(node, "beta", 1.0)
    trans_a, trans_b = node_attribute(node, "transA", 0), node_attribute(node, "transB", 0)
    g = dy[0]
    grads = [None, None, None][: len(node.input)]
    if ctx.needs(a):
        if trans_a:  # A^T stored: dA = op(B) dY^T
            grads[0] = ctx.op("Gemm", [b, g], alpha=alpha, transA=trans_b, transB=1)
        else:  # dA = dY op(B)^T
            grads[0] = ctx.op("Gemm", [g, b], alpha=alpha, transB=1 - trans_b)
    if ctx.needs(b):
        if trans_b:  # dB = dY^T op(A)
            grads[1] = ctx.op("Gemm", [g, a], alpha=alpha, transA=1, transB=trans_a)
        else:  # dB = op(A)^T dY
            grads[1] = ctx.op("Gemm", [a, g], alpha=alpha, transA=1 - trans_a)
    if c and ctx.needs(c):
        grad = g if beta == 1.0 else ctx.op("Mul", [g, ctx.scalar_like(beta, g)])
        grads[2] = ctx.reduce_to(grad, c, node.output[0])
    return grads
