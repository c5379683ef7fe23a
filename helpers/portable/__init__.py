"""One training step as a standard ONNX model, trained by any onnxruntime from 1.19.2 to 1.31.1.

This package imports numpy, onnx and onnxruntime only: no torch, no scikit-learn, no
``onnxruntime.training``. It runs on the maintained ``onnxruntime`` (Python 3.13, CUDA 12 and 13).

* :mod:`~helpers.portable.gradients`: the backward graph of a model written in standard ONNX,
  one gradient function per operator (what :func:`helpers.build_training_step` makes a step
  with, no training package needed);
* :mod:`~helpers.portable.lowering`: the operators outside the standard ONNX domain that
  onnxruntime-training's gradient builder writes, each rewritten with standard operators;
* :mod:`~helpers.portable.step_format`: what a step model takes and returns, and the record it
  carries;
* :mod:`~helpers.portable.trainer`: :class:`PortableTrainer`, which trains a step model (and
  saves the step that resumes the training);
* :mod:`~helpers.portable.step_session`: a step model's session, its state kept in the runtime;
* :mod:`~helpers.portable.epoch_loop`: the step inside an ONNX ``Scan``, one call per epoch;
* :mod:`~helpers.portable.batch_order`: the rows of each epoch and its batches, as the
  optimizers draw them too (the same seed gives the same batches);
* ``python -m helpers.portable fit``: the same from the command line.

Its public names load on first use, as :mod:`helpers`' do
(``from helpers.portable import PortableTrainer, initial_state``): importing the package imports
none of its modules.

The step model itself is written by :func:`helpers.build_training_step` (anywhere), or by
``export_training_step`` of :class:`helpers.OrtGradientOptimizer` and
:class:`helpers.OrtGradientForwardBackwardOptimizer` (their gradients from onnxruntime-training
1.19.2's builder, or with ``gradient_builder="onnx"`` from this package's).
"""

from .module_names import lazy_names

#: Each public name and the module that defines it.
_PUBLIC = {
    "PortableTrainer": ".trainer",
    "TrainingDivergedError": ".divergence",
    "StepRecord": ".step_format",
    "read_model": ".step_format",
    "read_record": ".step_format",
    "initial_state": ".step_format",
    "inference_model": ".step_format",
    "StepModel": ".step_model",
    "load_step": ".step_model",
    "epoch_model": ".epoch_loop",
    "lean_step": ".lean_step",
    "loop_names": ".epoch_loop",
    "epoch_order": ".batch_order",
    "batch_bounds": ".batch_order",
    "RuntimeSupportError": ".runtime_support",
    "LOWERINGS": ".lowering",
    "UnsupportedOperatorError": ".lowering",
    "lower_model": ".lowering",
    "single_node_model": ".lowering.single_node",
    "GRADIENTS": ".gradients",
    "BuiltGradients": ".gradients",
    "GradientContext": ".gradients",
    "NoGradientError": ".gradients",
    "build_gradients": ".gradients",
    "gradient": ".gradients",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())
