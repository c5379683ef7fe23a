"""What ``bench_your_model.ipynb`` runs: a fit per framework of one torch model.

Every fit starts from the same weights and draws the same batches (one
permutation per epoch from ``numpy.random.RandomState(random_state)``, as the
onnxruntime optimizers do), with the same loss and update rule:

* :func:`torch_fit`: torch eager, or ``torch.compile`` of the same module;
* :func:`ort_fits`: the whole-training API (the loss added to the graph by
  :func:`helpers.add_loss_output`) and the forward/backward API;
* :func:`first_fits`: one epoch of each, keeping the frameworks that ran and
  the reason of those that failed (any exception: an operator without a
  gradient, a compiler that does not work, a training that diverged...);
* :func:`final_losses`: the loss of each after the timed epochs, or why it failed there
  (a training that diverged later);
* :func:`compile_seconds`: what ``torch.compile`` took, its first fit less a compiled one.

What the notebook says of them and the rows of its record:
:mod:`benchmarks.workloads.your_model_record`.
"""

import math
import time

import numpy as np  # noqa: F401  (the examples use it)
import torch  # noqa: F401  (the examples call it)

from benchmarks.workloads import frameworks as fw
from helpers import TrainingDivergedError
from helpers.teaching.torch_reference import torch_fit as reference_fit


def torch_fit(
    make_module,
    X,
    y,
    task,
    optimizer="sgd",
    learning_rate=0.05,
    batch_size=64,
    random_state=0,
    compiled=False,
):
    """``fit(epochs)``: train a fresh module in torch; returns the mean loss of the last epoch.

    The loop and its losses are :func:`helpers.teaching.torch_reference.torch_fit`'s,
    the batches and updates the onnxruntime optimizers compare with.

    Parameters
    ----------
    make_module : callable
        Returns a new module with the initial weights.
    X, y : numpy.ndarray
        Samples; class indices (int64) or targets of shape ``(n, outputs)``.
    task : {'classification', 'regression'}
        Softmax cross-entropy, or the squared error averaged over every element (``MSELoss``).
    optimizer : {'sgd', 'adamw'}
    compiled : bool
        Run the module through ``torch.compile`` (compiled at the first fit,
        reused by the next ones).

    Examples
    --------
    >>> X, y = np.ones((8, 2), np.float32), np.zeros((8, 1), np.float32)
    >>> fit = torch_fit(lambda: torch.nn.Linear(2, 1), X, y, "regression", batch_size=4)
    >>> fit(2) >= 0
    True
    """
    loss = fw.LOSSES[task][0]

    def fit(epochs):
        module = make_module()
        epoch_losses, _ = reference_fit(
            module, X, y, loss, batch_size, epochs, learning_rate, optimizer, random_state, compiled
        )
        return epoch_losses[-1]

    return fit


def ort_fit(make, X, y, fresh=False):
    """``fit(epochs)`` of an onnxruntime optimizer made by ``make()``; returns the last epoch's
    loss.

    With ``fresh``, the training caches are emptied first, so that every fit
    pays the set-up a first fit pays (artifacts, gradient graph, sessions):
    for a time to a loss. Without, refits reuse them, and timing a step by the
    difference of two fits is not blurred by the set-up's own noise.

    Examples
    --------
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx = mlp_onnx(2, hidden=(3,))
    >>> X, y = np.ones((8, 2), np.float32), np.zeros((8, 1), np.float32)
    >>> make = lambda: OrtGradientOptimizer(add_loss_output(onx), batch_size=4)
    >>> ort_fit(make, X, y, fresh=True)(2) >= 0
    True
    """
    from helpers.core.machine.training_cache import clear_training_caches  # noqa: PLC0415

    def fit(epochs):
        if fresh:
            clear_training_caches()
        return make().set_params(max_iter=epochs, validation_every=0).fit(X, y).train_losses_[-1]

    return fit


def ort_fits(
    onx,
    X,
    y,
    task,
    optimizer="sgd",
    learning_rate=0.05,
    batch_size=64,
    n_threads=None,
    random_state=0,
    fresh=False,
    backend="auto",
):
    """``fit(epochs)`` of both onnxruntime APIs on the forward-only model ``onx``, by framework
    name.

    The optimizers of :func:`benchmarks.workloads.frameworks.ort_makers`, trained by ``backend``
    (:mod:`helpers.core.machine.backends`): a model the runtime cannot train fails at its first
    fit, in :func:`first_fits`. ``fresh``: see :func:`ort_fit`.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> sorted(
    ...     ort_fits(
    ...         mlp_onnx(2, hidden=(3,)),
    ...         np.ones((8, 2), np.float32),
    ...         np.zeros(8, np.int64),
    ...         "regression",
    ...     )
    ... )
    ['ort forward-backward', 'ort whole-training']
    """
    makers = fw.ort_makers(
        onx,
        fw.LOSSES[task][0],
        optimizer,
        learning_rate,
        batch_size,
        n_threads,
        random_state,
        backend=backend,
    )
    return {name: ort_fit(make, X, y, fresh) for name, make in makers.items()}


def failure_reason(exc, limit=300):
    """An exception as one line: its type and message, at most ``limit`` characters.

    Examples
    --------
    >>> failure_reason(RuntimeError("no gradient\\nfor Round"))
    'RuntimeError: no gradient for Round'
    """
    text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def checked_loss(fit, epochs):
    """``fit(epochs)``, a training that must end with a finite loss.

    The onnxruntime optimizers raise :class:`helpers.TrainingDivergedError` themselves when
    a training diverges; torch goes on with NaN, which this raises the same error for.

    Examples
    --------
    >>> checked_loss(lambda epochs: 0.5, 2)
    0.5
    >>> try:
    ...     checked_loss(lambda epochs: float("nan"), 2)
    ... except TrainingDivergedError as error:
    ...     print(error)
    The mean loss of epoch 2 is nan: training diverged. Try a smaller learning rate.
    """
    loss = fit(epochs)
    if not math.isfinite(loss):
        raise TrainingDivergedError(
            f"The mean loss of epoch {epochs} is {loss}: training diverged. "
            "Try a smaller learning rate."
        )
    return loss


def attempt_fit(fit, epochs):
    """``(loss, None)``, or ``(None, reason)`` when ``fit(epochs)`` raised or lost finiteness.

    Examples
    --------
    >>> attempt_fit(lambda epochs: 2.0, 1)
    (2.0, None)
    >>> attempt_fit(lambda epochs: 1 / 0, 1)
    (None, 'ZeroDivisionError: division by zero')
    """
    try:
        return checked_loss(fit, epochs), None
    except Exception as exc:  # noqa: BLE001  (a framework that fails is a row, not the end)
        return None, failure_reason(exc)


def is_divergence(reason):
    """Whether the reason a framework failed (:func:`failure_reason`) is a training that diverged.

    Examples
    --------
    >>> is_divergence("TrainingDivergedError: The mean loss of epoch 2 is nan")
    True
    >>> is_divergence("UntrainableModelError: Round")
    False
    """
    return reason.startswith(TrainingDivergedError.__name__)


def final_losses(fits, epochs):
    """The mean loss of the last epoch of each fit of ``epochs`` epochs, and why the others failed.

    A fit that raises (a :class:`helpers.TrainingDivergedError`, any exception) or ends
    with a non-finite loss is a failure of that framework alone: the others still run.

    Returns
    -------
    final : dict
        Name to the loss, for the fits that trained.
    failed : dict
        Name to the reason (:func:`failure_reason`; :func:`is_divergence` tells a divergence).

    Examples
    --------
    >>> final_losses({"a": lambda epochs: 1.0 / epochs, "b": lambda epochs: float("inf")}, 4)
    ({'a': 0.25}, {'b': 'TrainingDivergedError: The mean loss of epoch 4 is inf: training \
diverged. Try a smaller learning rate.'})
    """
    final, failed = {}, {}
    for name, fit in fits.items():
        loss, reason = attempt_fit(fit, epochs)
        if reason is None:
            final[name] = loss
        else:
            failed[name] = reason
    return final, failed


def first_fits(fits, clock=time.perf_counter):
    """Fit each framework for one epoch: those that ran, why the others failed, how long each first
    fit took.

    Any exception, or a loss that is not finite, is a failure of that framework alone: the
    others still run.

    Returns
    -------
    ran : dict
        Name to ``fit``, the frameworks whose first fit worked.
    failed : dict
        Name to the reason (:func:`failure_reason`).
    first_s : dict
        Name to the seconds of its first fit (``torch.compile`` compiles there).

    Examples
    --------
    >>> def broken(epochs):
    ...     raise ValueError("no")
    >>> ran, failed, _ = first_fits({"a": lambda epochs: 1.0, "b": broken})
    >>> list(ran), failed
    (['a'], {'b': 'ValueError: no'})
    """
    ran, failed, first_s = {}, {}, {}
    for name, fit in fits.items():
        start = clock()
        _, reason = attempt_fit(fit, 1)
        if reason is not None:
            failed[name] = reason
            continue
        first_s[name] = clock() - start
        ran[name] = fit
    return ran, failed, first_s


def compile_seconds(fit, first_s, clock=time.perf_counter):
    """What ``torch.compile`` took: its first fit of one epoch (``first_s``) minus a fit of one
    epoch once compiled.

    NaN when the compiled fit was not faster than the first one (the machine's noise was larger).

    Examples
    --------
    >>> compile_seconds(lambda epochs: 0.0, 12.5, clock=iter([1.0, 1.5]).__next__)
    12.0
    >>> compile_seconds(lambda epochs: 0.0, 0.25, clock=iter([1.0, 1.5]).__next__)
    nan
    """
    start = clock()
    fit(1)
    compiled = first_s - (clock() - start)
    return compiled if compiled > 0 else float("nan")
