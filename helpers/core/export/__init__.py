"""One training step of either optimizer, written as a standard ONNX model.

* :mod:`~helpers.core.export.gradient_model`: the training model of ``generate_artifacts`` for
  a loss model, its gradients read from its accumulators;
* :mod:`~helpers.core.export.graph_inlining`: a small model's nodes copied into a larger graph,
  renamed;
* :mod:`~helpers.core.export.step_scalars`: the learning rate and the update rule's scalars,
  computed in the graph from the step count;
* :mod:`~helpers.core.export.step_model`: the step model assembled (forward, loss, gradients,
  running statistics, update) and lowered to standard operators;
* :mod:`~helpers.core.export.optimizer_step`: what an optimizer, new or fitted, exports.

The layout of the result is :mod:`helpers.portable.step_format`'s.
"""
