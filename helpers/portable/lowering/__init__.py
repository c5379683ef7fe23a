"""Operators outside the standard ONNX domain, rewritten with standard operators, exactly.

:func:`lower_model` rewrites every node of a model whose operator has a lowering in
:data:`~helpers.portable.lowering.registry.LOWERINGS`; a node without one raises
:class:`~helpers.portable.lowering.registry.UnsupportedOperatorError`, which names the operator
and the layer it comes from. The lowerings live in modules by family; importing this package
registers all of them.
"""

from . import (  # noqa: F401  (each module registers its lowerings)
    activations,
    concat_split,
    convolution,
    division_grad,
    dropout_grad,
    gradient_plumbing,
    matmul,
    normalization,
    pooling,
    scatter_grads,
    softmax_grads,
)
from .registry import LOWERINGS, LoweringContext, UnsupportedOperatorError, lower_model

__all__ = ["LOWERINGS", "LoweringContext", "UnsupportedOperatorError", "lower_model"]
