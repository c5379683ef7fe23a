"""Train ONNX models with onnxruntime-training, from notebooks.

The public names and call forms are those of onnxcustom's training helpers,
which this project rebuilds on the APIs onnxruntime-training 1.19.2 still has. The
code is organised in these packages:

* :mod:`helpers.core`: what both APIs share (sessions, devices, batches,
  graph editing, learning rates, update rules, penalties, loss formulas,
  the scikit-learn estimator base);
* :mod:`helpers.whole_training`: the API where the loss is in the graph and
  onnxruntime updates the weights (:class:`OrtGradientOptimizer`);
* :mod:`helpers.forward_backward`: the API where onnxruntime computes a
  layer's forward and backward passes and the caller does the rest
  (:class:`OrtGradientForwardBackwardOptimizer`);
* :mod:`helpers.portable`: one training step as a standard ONNX model, trained
  by any maintained onnxruntime (numpy, onnx and onnxruntime only);
* :mod:`helpers.teaching` and :mod:`helpers.measure`: data sets, models,
  plots and comparisons for the notebooks; timing and profiling.

The public names below are loaded on first use (PEP 562), so that
``import helpers.portable`` does not import the training package, torch or
scikit-learn; ``from helpers import OrtGradientOptimizer`` works as before.
Besides the seeds' names they include what a notebook calls from
:mod:`helpers.core` (``export_for_training``, ``training_graph``, ``Device``...):
nothing a user calls needs an import from the core, whose modules may move.
"""

from .portable.module_names import lazy_names

#: Each public name and the module that defines it.
_PUBLIC = {
    "BackendUnavailableError": ".core.machine.backends",
    "default_backend": ".core.machine.backends",
    "resolve_backend": ".core.machine.backends",
    "Device": ".core.machine.devices",
    "DeviceError": ".core.machine.devices",
    "DiskFullError": ".core.machine.disk_space",
    "RuntimeCompatibilityError": ".core.machine.runtime",
    "UntrainableModelError": ".core.machine.runtime",
    "check_onnx_compatible": ".core.machine.runtime",
    "main_opset": ".core.machine.runtime",
    "max_ir_version": ".core.machine.runtime",
    "native_stderr_captured": ".core.machine.runtime_output",
    "set_num_threads": ".core.machine.threads",
    "clear_training_caches": ".core.machine.training_cache",
    "to_ortvalue": ".core.graphs.onnx_function",
    "count_rewrites": ".core.rewrites.gradient_rewrites",
    "rewrite_for_training": ".core.rewrites.gradient_rewrites",
    "export_for_training": ".core.model_graphs.from_torch",
    "get_train_initializer": ".core.model_graphs.onnx_graph",
    "onnx_rename_weights": ".core.model_graphs.onnx_graph",
    "replace_initializers": ".core.model_graphs.onnx_graph",
    "select_outputs": ".core.model_graphs.onnx_graph",
    "training_graph": ".core.model_graphs.training_graph",
    "TrainingDivergedError": ".portable.divergence",
    "LearningRateSGD": ".core.updates.learning_rates",
    "LearningRateSGDNesterov": ".core.updates.learning_rates",
    "ElasticLearningPenalty": ".core.updates.penalties",
    "NoLearningPenalty": ".core.updates.penalties",
    "make_update_rule": ".core.updates.update_rules",
    "WeightUpdater": ".core.updates.weight_updater",
    "build_update_graph": ".core.updates.weight_updater",
    "OrtGradientForwardBackward": ".forward_backward.function",
    "AbsoluteLearningLoss": ".forward_backward.losses",
    "CrossEntropyLearningLoss": ".forward_backward.losses",
    "ElasticLearningLoss": ".forward_backward.losses",
    "NegLogLearningLoss": ".forward_backward.losses",
    "SquareLearningLoss": ".forward_backward.losses",
    "OrtGradientForwardBackwardOptimizer": ".forward_backward.optimizer",
    "OrtGradientForwardBackwardFunction": ".forward_backward.passes",
    "OrtTorchModule": ".forward_backward.torch_module",
    "add_loss_output": ".whole_training.loss_output",
    "OrtGradientOptimizer": ".whole_training.optimizer",
    "build_training_step": ".whole_training.training_step",
    "NoGradientError": ".portable.gradients.registry",
    "PortableTrainer": ".portable.trainer",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())
