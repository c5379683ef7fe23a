"""Train ONNX models with onnxruntime-training, from notebooks.

The public names and call forms are those of onnxcustom's training helpers,
which this project rebuilds on the APIs onnxruntime-training 1.19.2 still has. The
code is organised in four packages:

* :mod:`helpers.core`: what both APIs share (sessions, devices, batches,
  graph editing, learning rates, update rules, penalties, loss formulas,
  the scikit-learn estimator base);
* :mod:`helpers.whole_training`: the API where the loss is in the graph and
  onnxruntime updates the weights (:class:`OrtGradientOptimizer`);
* :mod:`helpers.forward_backward`: the API where onnxruntime computes a
  layer's forward and backward passes and the caller does the rest
  (:class:`OrtGradientForwardBackwardOptimizer`);
* :mod:`helpers.teaching` and :mod:`helpers.measure`: data sets, models,
  plots and comparisons for the notebooks; timing and profiling.
"""

from .core.machine.devices import DeviceError
from .core.machine.disk_space import DiskFullError
from .core.machine.runtime import (
    RuntimeCompatibilityError,
    UntrainableModelError,
    check_onnx_compatible,
)
from .core.machine.sessions import set_num_threads
from .core.model_graphs.onnx_graph import get_train_initializer, onnx_rename_weights
from .core.training.epoch_losses import TrainingDivergedError
from .core.updates.learning_rates import LearningRateSGD, LearningRateSGDNesterov
from .core.updates.penalties import ElasticLearningPenalty, NoLearningPenalty
from .forward_backward.function import OrtGradientForwardBackward
from .forward_backward.losses import (
    AbsoluteLearningLoss,
    CrossEntropyLearningLoss,
    ElasticLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from .forward_backward.optimizer import OrtGradientForwardBackwardOptimizer
from .forward_backward.passes import OrtGradientForwardBackwardFunction
from .forward_backward.torch_module import OrtTorchModule
from .whole_training.loss_output import add_loss_output
from .whole_training.optimizer import OrtGradientOptimizer

__all__ = [
    "AbsoluteLearningLoss",
    "CrossEntropyLearningLoss",
    "DeviceError",
    "DiskFullError",
    "ElasticLearningLoss",
    "ElasticLearningPenalty",
    "LearningRateSGD",
    "LearningRateSGDNesterov",
    "NegLogLearningLoss",
    "NoLearningPenalty",
    "OrtGradientForwardBackward",
    "OrtGradientForwardBackwardFunction",
    "OrtGradientForwardBackwardOptimizer",
    "OrtGradientOptimizer",
    "OrtTorchModule",
    "RuntimeCompatibilityError",
    "SquareLearningLoss",
    "TrainingDivergedError",
    "UntrainableModelError",
    "add_loss_output",
    "check_onnx_compatible",
    "get_train_initializer",
    "onnx_rename_weights",
    "set_num_threads",
]
