"""The whole-training API: the loss is part of the graph, onnxruntime updates the weights.

* :mod:`~helpers.whole_training.loss_output`: append a loss to a model
  (:func:`helpers.add_loss_output`) and take it off again;
* :mod:`~helpers.whole_training.artifacts`: the files ``generate_artifacts``
  writes, loaded back into onnxruntime's training API;
* :mod:`~helpers.whole_training.fit_artifacts`: the artifacts one fit of
  :class:`helpers.OrtGradientOptimizer` trains with;
* :mod:`~helpers.whole_training.session`: the ``Module`` and ``Optimizer``
  of one fit;
* :mod:`~helpers.whole_training.checkpoints`: the training state a
  checkpoint carries, and the checks before loading one;
* :mod:`~helpers.whole_training.optimizer`: :class:`helpers.OrtGradientOptimizer`;
* :mod:`~helpers.whole_training.schedulers`: onnxruntime's linear scheduler,
  fixed.

What a notebook calls on the artifacts is importable from the package itself:
``from helpers.whole_training import generate_training_artifacts, train_step``.
"""

from ..portable.module_names import lazy_names

#: The functions a notebook calls on the artifacts, loaded on first use (the package's
#: modules import onnxruntime.training, hence torch): each name and its module.
_PUBLIC = {
    "artifact_paths": ".artifacts",
    "converter_output_captured": ".artifacts",
    "generate_training_artifacts": ".artifacts",
    "list_artifacts": ".artifacts",
    "load_training_artifacts": ".artifacts",
    "train_step": ".artifacts",
    "loss_metadata": ".loss_output",
    "remove_loss_output": ".loss_output",
    "linear_learning_rate": ".schedulers",
    "linear_lr_scheduler": ".schedulers",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())
