"""The frameworks a benchmark compares: their names as the records spell them, each task's loss,
and the optimizers of both onnxruntime APIs.

Light on purpose: its imports are the standard library's alone (:func:`ort_makers` imports
:mod:`helpers` when called), so that a process measuring one framework's memory
(:mod:`benchmarks.studies.peak_memory_process`) can name the frameworks and build its
optimizer without loading scikit-learn's or torch's modules.
"""

#: Framework names, exactly as :mod:`benchmarks.report.aggregate` expects them.
SKLEARN = "scikit-learn"
TORCH = "torch eager"
TORCH_COMPILE = "torch.compile"
ORT_WHOLE = "ort whole-training"
ORT_FORWARD_BACKWARD = "ort forward-backward"
ORT_TORCH_MODULE = "ort torch module"
#: A step model (``export_training_step``) trained on the maintained onnxruntime: a call per step,
#: or an epoch per call (an ONNX ``Scan``).
PORTABLE_STEP = "portable step"
PORTABLE_EPOCH_LOOP = "portable epoch loop"
NUMPY_MATMUL = "numpy matmul"
ORT_BOUND = "onnxruntime matmul bound"

#: The two references: the step's matrix products alone, not frameworks.
BOUNDS = (NUMPY_MATMUL, ORT_BOUND)

#: The loss of each task: its name in both onnxruntime APIs, and in words (plots, tables).
LOSSES = {
    "classification": ("cross_entropy", "cross-entropy"),
    "regression": ("squared_error", "mean squared error"),
}


def ort_makers(
    onx,
    loss,
    optimizer="sgd",
    learning_rate=0.05,
    batch_size=64,
    n_threads=None,
    random_state=0,
    backend="auto",
    **params,
):
    """``make()``: a new optimizer of each onnxruntime API for the forward-only model ``onx``, by
    name.

    The whole-training API trains ``add_loss_output(onx, score_name=loss)``,
    the forward/backward API ``onx`` with ``learning_loss=loss``. Nothing is
    built before a fit.

    Parameters
    ----------
    onx : onnx.ModelProto
        The forward-only model.
    loss : str
        The loss's name in both APIs: a task's is ``LOSSES[task][0]`` (:data:`LOSSES`).
    optimizer : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The optimizers' ``solver``.
    learning_rate, batch_size, n_threads, random_state
        Passed to both optimizers.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        Who trains (:mod:`helpers.core.machine.backends`): the training package 1.19.2, or this
        project's gradients in standard ONNX on the installed onnxruntime.
    **params
        Any other parameter of both optimizers, passed to both (``validation_every=0``: no
        validation loss, ``max_iter``...).

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> makers = ort_makers(mlp_onnx(2, hidden=(3,)), "squared_error", batch_size=4, max_iter=2)
    >>> [type(make()).__name__ for name, make in sorted(makers.items())]
    ['OrtGradientForwardBackwardOptimizer', 'OrtGradientOptimizer']
    >>> makers[ORT_WHOLE]().max_iter
    2
    >>> ort_makers(mlp_onnx(2, hidden=(3,)), "squared_error", backend="onnx")[ORT_WHOLE]().backend
    'onnx'
    """
    from helpers import (  # noqa: PLC0415
        OrtGradientForwardBackwardOptimizer,
        OrtGradientOptimizer,
        add_loss_output,
    )

    common = dict(
        learning_rate=learning_rate,
        solver=optimizer,
        batch_size=batch_size,
        n_threads=n_threads,
        random_state=random_state,
        backend=backend,
        **params,
    )
    return {
        ORT_WHOLE: lambda: OrtGradientOptimizer(add_loss_output(onx, score_name=loss), **common),
        ORT_FORWARD_BACKWARD: lambda: OrtGradientForwardBackwardOptimizer(
            onx, learning_loss=loss, **common
        ),
    }
