"""The forward/backward API: onnxruntime runs a layer's forward and backward passes, the caller the
rest.

* :mod:`~helpers.forward_backward.function`: the gradient graph and the
  ``TrainingAgent`` that runs it (:class:`helpers.OrtGradientForwardBackward`);
* :mod:`~helpers.forward_backward.passes`: its forward and backward passes
  (:class:`helpers.OrtGradientForwardBackwardFunction`);
* :mod:`~helpers.forward_backward.base_loss` and
  :mod:`~helpers.forward_backward.losses`: what every loss shares (a graph
  compiled per device, rank and weighting), and the losses with their
  gradients;
* :mod:`~helpers.forward_backward.session`: the function, weights and
  update of one fit;
* :mod:`~helpers.forward_backward.optimizer`:
  :class:`helpers.OrtGradientForwardBackwardOptimizer`;
* :mod:`~helpers.forward_backward.torch_function` and
  :mod:`~helpers.forward_backward.torch_module`: the function inside torch's
  autograd, and :class:`helpers.OrtTorchModule`, a torch module that runs in
  onnxruntime.
"""
