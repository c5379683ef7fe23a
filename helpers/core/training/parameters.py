"""The parameters both optimizers share, documented and checked once.

:func:`document_parameters` puts :data:`SHARED_PARAMETERS` and
:data:`SHARED_ATTRIBUTES` into an optimizer's docstring where it says
``{shared_parameters}`` and ``{shared_attributes}``, so that one idea has
one description in both APIs; :func:`check_shared_parameters` checks them
with one error message each (the learning-rate parameters are checked by
:func:`helpers.core.updates.learning_rates.resolve_learning_rate`).
"""

import numbers
import re

import onnx

from ..inputs.validation import check_finite_number, check_positive_int
from ..machine.threads import check_n_threads

#: What ``fit`` does when the loss becomes NaN or infinite: raise
#: :class:`~helpers.portable.divergence.TrainingDivergedError`, or warn, put
#: back the weights of the start of the epoch and stop.
ON_DIVERGENCE = ("raise", "stop")

SHARED_PARAMETERS = """\
    weights_to_train : list of str, optional
        Float initializers to train; None means all of them but the running
        statistics of batch normalization, which are updated, not trained
        (:meth:`get_running_statistics`).
    max_iter : int
        Number of epochs.
    batch_size : int
        Rows per minibatch; the last batch of an epoch may be smaller.
    learning_rate : float, str or LearningRateSGD
        A float is the initial learning rate ``eta0`` of
        ``learning_rate_schedule``, for the update rule ``solver``. The
        learning-rate objects (:class:`helpers.LearningRateSGD`,
        :class:`helpers.LearningRateSGDNesterov`, or their names ``'SGD'``
        and ``'Nesterov'``) bring their own schedule and update rule.
    learning_rate_schedule : {'constant', 'invscaling', 'optimal'}
        scikit-learn's schedules (:mod:`helpers.core.updates.learning_rates`):
        ``eta0``, ``eta0 / t ** power_t``, or ``1 / (alpha * (t0 + t - 1))``
        at update ``t``.
    power_t : float
        Exponent of ``'invscaling'``.
    alpha : float
        The regularization strength ``'optimal'`` derives its rate from.
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The update rule, with torch's formulas
        (:mod:`helpers.core.updates.update_rules`): ``torch.optim.SGD`` without and
        with (Nesterov's) momentum, ``torch.optim.AdamW``.
    momentum : float
        Momentum of ``'momentum'`` and ``'nesterov'``, in (0, 1).
    betas : tuple of float
        AdamW's moment decay rates.
    eps : float
        AdamW's denominator term.
    weight_decay : float
        AdamW's decoupled weight decay.
    device : str
        ``'cpu'``, ``'cuda'``, ``'cuda:N'`` or ``'auto'`` (a GPU when one
        really works, else the CPU). On a GPU the data is copied there once
        per ``fit``, the batches are gathered there and the weights stay there.
    warm_start : bool
        When True, ``fit`` continues from the current weights, update-rule
        state and shuffling instead of starting again.
    verbose : int
        Shows a progress bar with the epoch and the loss when > 0.
    validation_every : float or int
        Epochs between two validation losses: a value below 1 is a fraction
        of ``max_iter`` (0.1: every tenth of the training), a value from 1 on
        a number of epochs (1: every epoch); 0 never computes them.
    random_state : int, RandomState or None
        Seeds the shuffling of the minibatches.
    n_threads : int, optional
        Threads of the model's onnxruntime session (intra-op); None lets
        onnxruntime choose (one per core), or takes
        :func:`helpers.set_num_threads`. The loss, penalty and update graphs
        run on one thread: they are elementwise, and a second thread pool
        spinning beside the model's would slow it down.
    fast_gradients : bool
        Train a copy of the graph where each ``Relu`` is rewritten into an
        exact equivalent whose gradient runs faster and the batch dimension
        of the per-row inputs is named (:mod:`helpers.core.rewrites.gradient_rewrites`).
        The gradient graph is smaller and fuses ``MatMul`` with ``Add``, so
        the trained weights equal those without it up to float32 rounding
        (about 1e-7 relative); the exported model keeps its ``Relu``. False
        trains the graph as given.
    on_divergence : {'raise', 'stop'}
        When the loss becomes NaN or infinite: ``'raise'`` raises
        :class:`helpers.TrainingDivergedError`; ``'stop'`` warns, puts back
        the weights of the start of the epoch and stops.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        Who writes the gradients and runs the training
        (:mod:`helpers.core.machine.backends`): ``'onnxruntime-training'``,
        the training package 1.19.2 (Python 3.11 and 3.12); ``'onnx'``, this
        package's gradients in standard ONNX, run by the installed
        onnxruntime (the maintained 1.31.1 on Python 3.13); ``'auto'``, the
        former where it is installed. Both give the same losses up to
        float32 rounding, and read each other's checkpoints and pickles."""

SHARED_ATTRIBUTES = """\
    train_losses_ : list of float
        Mean loss of each epoch (penalty included), computed while the
        weights change.
    validation_losses_ : list of float
        Loss on the validation set without the penalty, at epochs
        ``validation_epochs_``.
    validation_epochs_ : list of int
        Epochs (counted from 1) of the validation losses.
    n_iter_ : int
        Number of epochs run to their end.
    t_ : int
        Number of weight updates (minibatches) run.
    partial_epoch_rows_ : int
        Rows of an epoch interrupted by Ctrl-C (or an error) already
        trained, 0 when the last epoch ran to its end. The weights are those
        of the updates done (``t_`` counts them); a fit with
        ``warm_start=True`` finishes that epoch first, on the same rows.
    weights_to_train_ : list of str
        The trained weights.
    backend_ : str
        The backend of the last ``fit``: ``'onnxruntime-training'`` or ``'onnx'``.
    learning_rate_ : LearningRateSchedule
        The schedule of the last ``fit`` (a copy of the object given, if any).
    update_rule_ : BaseUpdateRule
        The update rule of the last ``fit``.
    sample_shape_in_ : tuple of int
        The shape of one sample given to ``fit``: ``(n_features,)`` for
        rows of features, ``(C, H, W)`` for images, ``(L,)`` for token ids.
    n_features_in_ : int
        scikit-learn's number of features, for 2-D input only (features or
        ids); a model taking images or sequences does not have it.
    feature_names_in_ : numpy.ndarray
        The column names of a pandas DataFrame given to ``fit``."""


def document_parameters(cls):
    """Class decorator: write the shared parameters and attributes into ``cls.__doc__``.

    Examples
    --------
    >>> @document_parameters
    ... class Example:
    ...     '''Parameters
    ...     ----------
    ...     {shared_parameters}
    ...     '''
    >>> "on_divergence : {'raise', 'stop'}" in Example.__doc__
    True
    """
    doc = cls.__doc__
    for placeholder, text in (
        ("shared_parameters", SHARED_PARAMETERS),
        ("shared_attributes", SHARED_ATTRIBUTES),
    ):
        # the placeholder's own indentation is dropped: the text carries the section's
        doc = re.sub(rf"^[ \t]*\{{{placeholder}\}}", lambda _, text=text: text, doc, flags=re.M)
    cls.__doc__ = doc
    return cls


def check_shared_parameters(optimizer):
    """Raise a clear error on a bad shared parameter of ``optimizer``.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> check_shared_parameters(OrtGradientForwardBackwardOptimizer(mlp_onnx(2), batch_size=0))
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be an integer >= 1, got 0.
    """
    if not isinstance(optimizer.model_onnx, onnx.ModelProto):
        raise TypeError(
            f"model_onnx must be an onnx.ModelProto, got {type(optimizer.model_onnx).__name__}; "
            "load a file with onnx.load(path)."
        )
    check_n_threads(optimizer.n_threads)
    if optimizer.on_divergence not in ON_DIVERGENCE:
        raise ValueError(
            f"on_divergence must be one of {ON_DIVERGENCE}, got {optimizer.on_divergence!r}."
        )
    if not isinstance(optimizer.fast_gradients, bool):
        raise TypeError(f"fast_gradients must be True or False, got {optimizer.fast_gradients!r}.")
    check_positive_int("max_iter", optimizer.max_iter)
    check_positive_int("batch_size", optimizer.batch_size)
    _check_finite_parameters(optimizer)
    every = optimizer.validation_every
    if every is not None and not (
        isinstance(every, numbers.Real) and not isinstance(every, bool) and every >= 0
    ):
        raise ValueError(
            "validation_every must be a fraction of max_iter below 1, a number "
            f"of epochs >= 1, or 0 for never; got {every!r}."
        )


def _check_finite_parameters(optimizer):
    """Refuse a NaN or infinite float parameter, by its name: training would diverge."""
    names = ("power_t", "alpha", "momentum", "eps", "weight_decay")
    floats = {name: getattr(optimizer, name) for name in names}
    floats.update((f"betas[{i}]", beta) for i, beta in enumerate(optimizer.betas))
    for name in ("learning_rate", "validation_every"):  # also a learning-rate object, or None
        value = getattr(optimizer, name)
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            floats[name] = value
    for name, value in floats.items():
        check_finite_number(name, value)


def validation_period(validation_every, max_iter):
    """Epochs between validation losses: 0 never; below 1, a fraction of ``max_iter``.

    Examples
    --------
    >>> (
    ...     validation_period(0.1, max_iter=50),
    ...     validation_period(2, max_iter=50),
    ...     validation_period(0, 50),
    ... )
    (5, 2, 0)
    """
    every = validation_every or 0
    if every <= 0:
        return 0
    if every < 1:
        return max(1, int(round(every * max_iter)))
    return int(round(every))


def training_settings(optimizer):
    """What a training is built with and ``warm_start`` must find unchanged, by parameter.

    The update rule, the trained weights, the device, the threads and the
    gradient rewrite are fixed when a training starts; a new learning rate
    or schedule applies from the next update on.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> opt = OrtGradientForwardBackwardOptimizer(mlp_onnx(2), solver="adamw", learning_rate=0.1)
    >>> opt._prepare()
    >>> training_settings(opt)["update rule"]
    'AdamWRule(betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0)'
    """
    return {
        "update rule": repr(optimizer.update_rule_),
        "weights_to_train": list(optimizer.weights_to_train_),
        "device": str(optimizer.device_),
        "n_threads": optimizer.n_threads,
        "fast_gradients": optimizer.fast_gradients,
    }


def check_warm_start(before, now):
    """Raise a clear error when ``warm_start`` would continue a training built otherwise.

    Examples
    --------
    >>> before, now = {"update rule": "SGDRule()"}, {"update rule": "AdamWRule()"}
    >>> check_warm_start(before, now)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: warm_start=True continues the training already started, but update rule changed
    from SGDRule() to AdamWRule(). Set warm_start=False to train anew with the new settings, or set
    them back.
    """
    changed = [
        f"{key} changed from {before[key]} to {now[key]}"
        for key in now
        if before.get(key) != now[key]
    ]
    if changed:
        raise ValueError(
            f"warm_start=True continues the training already started, but {'; '.join(changed)}. "
            "Set warm_start=False to train anew with the new settings, or set them back."
        )
