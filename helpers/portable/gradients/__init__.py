"""The backward graph of an ONNX model, written in standard ONNX by this project.

:func:`build_gradients` differentiates a model's loss with respect to the values it is given
(weights, inputs) by reverse-mode differentiation: each operator's gradient is a function of
:data:`~helpers.portable.gradients.registry.GRADIENTS` that writes standard operators, and the
gradients a value receives from several nodes are summed. No training package is involved: the
result runs on any onnxruntime (or any runtime of standard ONNX). An operator without a gradient
raises :class:`~helpers.portable.gradients.registry.NoGradientError`, which names it and its
layer. The gradients live in modules by family; importing this package registers all of them.
"""

import importlib
import pkgutil

from .builder import BuiltGradients, build_gradients
from .registry import GRADIENTS, GradientContext, NoGradientError, gradient

for _module in pkgutil.iter_modules(__path__):  # each module of a family registers its gradients
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "GRADIENTS",
    "BuiltGradients",
    "GradientContext",
    "NoGradientError",
    "build_gradients",
    "gradient",
]
