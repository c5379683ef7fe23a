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
"""
