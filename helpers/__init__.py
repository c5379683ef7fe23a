"""Train ONNX models with onnxruntime-training, from notebooks.

The public names follow the seeds of this project (onnxcustom's training
helpers), rebuilt on the APIs onnxruntime-training 1.19.2 still has.
"""
from .base_optimizer import TrainingDivergedError
from .devices import DeviceError
from .forward_backward import OrtGradientForwardBackward, OrtGradientForwardBackwardFunction
from .forward_backward_optimizer import OrtGradientForwardBackwardOptimizer
from .learning_loss import (
    AbsoluteLearningLoss,
    ElasticLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from .learning_penalty import ElasticLearningPenalty, NoLearningPenalty
from .learning_rate import LearningRateSGD, LearningRateSGDNesterov
from .onnx_graph import get_train_initializer, onnx_rename_weights
from .onnx_loss import add_loss_output
from .runtime import RuntimeCompatibilityError, UntrainableModelError, check_onnx_compatible
from .whole_training import OrtGradientOptimizer

__all__ = [
    "AbsoluteLearningLoss",
    "DeviceError",
    "ElasticLearningLoss",
    "ElasticLearningPenalty",
    "LearningRateSGD",
    "LearningRateSGDNesterov",
    "NegLogLearningLoss",
    "NoLearningPenalty",
    "OrtGradientForwardBackward",
    "OrtGradientForwardBackwardFunction",
    "OrtGradientForwardBackwardOptimizer",
    "SquareLearningLoss",
    "OrtGradientOptimizer",
    "RuntimeCompatibilityError",
    "TrainingDivergedError",
    "UntrainableModelError",
    "add_loss_output",
    "check_onnx_compatible",
    "get_train_initializer",
    "onnx_rename_weights",
]
