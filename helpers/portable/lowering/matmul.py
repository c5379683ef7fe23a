"""Lowering of ``FusedMatMul``: a matrix product with transposed operands and a factor.

The graph transformers of the training session fuse a ``Transpose`` (and a scalar ``Mul``)
into the ``MatMul`` after it; the gradient of a ``MatMul`` is written with them.
"""

import numpy as np
from onnx import helper

from ..node_attributes import node_attribute
from .registry import register


def _permutation(rank, transpose, batch):
    """The axes of one operand after ``transBatch`` then ``trans``."""
    axes = list(range(rank))
    if batch:
        axes = axes[1 : rank - 1] + [0, rank - 1]
    if transpose:
        axes[-2], axes[-1] = axes[-1], axes[-2]
    return axes


def _einsum_term(transpose, batch, rows, columns):
    """The operand's Einsum subscripts, its batch axes an ellipsis."""
    first, last = (columns, rows) if transpose else (rows, columns)
    return f"{first}...{last}" if batch else f"...{first}{last}"


@register("FusedMatMul")
def lower_fused_matmul(node, ctx):
    """``FusedMatMul(A, B) = alpha * op(A) @ op(B)``.

    ``op`` swaps the last two axes (``transA``, ``transB``) and, with ``transBatchA`` or
    ``transBatchB``, first moves the first axis of its operand just before the last one
    (``[1, ..., r-2, 0, r-1]``). With both ranks known from the model: one ``Gemm`` with the
    same attributes for two matrices, else a ``Transpose`` of each transposed operand, a
    ``MatMul`` and a ``Mul`` by ``alpha`` (unless 1). With a rank unknown: an ``Einsum`` whose
    ellipsis stands for the batch axes (``'...ji,...jk->...ik'`` for ``transA``,
    ``'i...j'`` for a batch transposition; the operands need the same rank), then the ``Mul``.
    The products and their sums are the kernel's (MLAS's sgemm in all three).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft",
    ...                         transA=1, alpha=0.5)
    >>> [n.op_type for n in lower_fused_matmul(node, LoweringContext(17))]
    ['Einsum', 'Mul']
    >>> [n.op_type for n in lower_fused_matmul(node, LoweringContext(17, ranks={"a": 2, "b": 2}))]
    ['Gemm']
    >>> [n.op_type for n in lower_fused_matmul(node, LoweringContext(17, ranks={"a": 3, "b": 3}))]
    ['Transpose', 'MatMul', 'Mul']
    """
    alpha = float(node_attribute(node, "alpha", 1.0))
    trans_a, trans_b, batch_a, batch_b = (
        bool(node_attribute(node, name, 0))
        for name in ("transA", "transB", "transBatchA", "transBatchB")
    )
    a, b = node.input
    out = node.output[0]
    ranks = ctx.rank(a), ctx.rank(b)
    if ranks == (2, 2) and not (batch_a or batch_b):
        attributes = dict(alpha=alpha, transA=int(trans_a), transB=int(trans_b))
        return [helper.make_node("Gemm", [a, b], [out], **attributes)]
    product = out if alpha == 1.0 else ctx.name("product")
    if None in ranks:
        left = _einsum_term(trans_a, batch_a, "i", "j")
        right = _einsum_term(trans_b, batch_b, "j", "k")
        nodes = [helper.make_node("Einsum", [a, b], [product], equation=f"{left},{right}->...ik")]
    else:
        nodes, operands = [], []
        for x, rank, transpose, batch in (
            (a, ranks[0], trans_a, batch_a),
            (b, ranks[1], trans_b, batch_b),
        ):
            perm = _permutation(rank, transpose, batch)
            if perm != sorted(perm):
                moved = ctx.name("transposed")
                nodes.append(helper.make_node("Transpose", [x], [moved], perm=perm))
                x = moved
            operands.append(x)
        nodes.append(helper.make_node("MatMul", operands, [product]))
    if alpha != 1.0:
        factor = ctx.constant(np.array(alpha, np.float32), "alpha")
        nodes.append(helper.make_node("Mul", [product, factor], [out]))
    return nodes
