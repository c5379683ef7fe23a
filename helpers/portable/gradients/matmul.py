"""Gradients of the matrix products: ``MatMul`` and ``Gemm``.

``Y = A B``: ``dA = dY B^T`` and ``dB = A^T dY``, each summed over the batch axes its operand
was broadcast along. A weight of rank 2 multiplied by a batch of any rank gets its gradient
from one ``Gemm`` of the batch flattened to rows (the fastest form measured: one kernel call,
no reduction).
"""

import numpy as np

from .registry import attribute, gradient


def _swap_last(ctx, name, rank):
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ctx.op("Transpose", [name], perm=perm)


def _as_rows(ctx, name, columns):
    """``name`` reshaped to a matrix of ``columns`` columns (its last axis)."""
    return ctx.op("Reshape", [name, ctx.constant(np.array([-1, columns], np.int64))])


def _vector_operand(ctx, name, axis):
    """A vector operand as the matrix ``MatMul`` makes of it."""
    return ctx.op("Unsqueeze", [name, ctx.axes([axis])])


@gradient("MatMul")
def matmul_grad(node, dy, ctx):
    """``dA = dY B^T``, ``dB = A^T dY``, vectors and broadcast batch axes included."""
    a, b = node.input
    y = node.output[0]
    rank_a, rank_b = ctx.rank(a), ctx.rank(b)
    if rank_a is None or rank_b is None:
        ctx.refuse("Its gradient needs the rank of both operands; shape inference found none.")
    g = dy[0]
    a_m, b_m = a, b
    if rank_a == 1:
        a_m, g = _vector_operand(ctx, a, 0), _vector_operand(ctx, g, -2)
    if rank_b == 1:
        b_m, g = _vector_operand(ctx, b, 1), _vector_operand(ctx, g, -1)
    rank_am, rank_bm = max(rank_a, 2), max(rank_b, 2)
    grads = [None, None]
    if ctx.needs(a):
        grad = ctx.op("MatMul", [g, _swap_last(ctx, b_m, rank_bm)])
        grads[0] = _back_to(ctx, grad, a, rank_a, y)
    if ctx.needs(b):
        columns = (ctx.static_shape(b_m) or [None, None])[-1] if rank_b == 2 else None
        rows = (ctx.shape(a) or [None])[-1]
        if rank_b == 2 and isinstance(columns, int) and isinstance(rows, int) and rank_a >= 2:
            flat_a, flat_g = _as_rows(ctx, a, rows), _as_rows(ctx, g, columns)
            grads[1] = ctx.op("Gemm", [flat_a, flat_g], transA=1)
        else:
            grad = ctx.op("MatMul", [_swap_last(ctx, a_m, rank_am), g])
            grads[1] = _back_to(ctx, grad, b, rank_b, y)
    return grads


def _back_to(ctx, grad, operand, rank, y):
    """A gradient computed at the broadcast rank of ``y``, summed back to ``operand``'s shape."""
    if rank == 1:
        return ctx.op("Reshape", [grad, ctx.shape_of(operand)])
    shape, y_shape = ctx.shape(operand), ctx.shape(y)
    if shape is None or y_shape is None or len(y_shape) < 2:
        return ctx.reduce_to(grad, operand, grad)  # shapes found at run time
    ctx.shapes[grad] = list(y_shape[:-2]) + list(shape[-2:])
    return ctx.reduce_to(grad, operand, grad)


@gradient("Gemm")
def gemm_grad(node, dy, ctx):
    """``Y = alpha op(A) op(B) + beta C``: each gradient one ``Gemm`` with the transposes
    swapped, ``C``'s summed over the rows it was broadcast to."""
    a, b = node.input[:2]
    c = node.input[2] if len(node.input) > 2 else ""
    alpha, beta = attribute(node, "alpha", 1.0), attribute(node, "beta", 1.0)
    trans_a, trans_b = attribute(node, "transA", 0), attribute(node, "transB", 0)
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
