"""Train scikit-learn's multi-layer perceptrons beside our optimizers, from the same weights.

To compare a training in onnxruntime with scikit-learn's own, both must start
from the same weights. scikit-learn draws its initial weights inside ``fit``;
the simplest way to share them is to fit one epoch (:func:`fit_first_epoch`),
convert that model, and continue both trainings from there:
:func:`continue_mlp_training` continues scikit-learn's, and
:func:`mlp_update_parameters` gives the parameters that make our optimizers
take the same steps. The weights move between the two with
:mod:`helpers.teaching.sklearn_bridge`.
"""

import copy
import warnings

import numpy as np
from sklearn.base import clone, is_regressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted


def fit_first_epoch(mlp, X, y):
    """Fit a clone of an unfitted MLP for one epoch: a starting point to share.

    scikit-learn draws the initial weights (seeded by ``random_state``) and
    trains one epoch. Convert the result to ONNX and continue both trainings
    from it (:func:`continue_mlp_training` for scikit-learn's), so that they
    start from the same weights.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        The network's parameters; ``max_iter`` is ignored.
    X, y : array-like
        Training data.

    Returns
    -------
    MLPRegressor or MLPClassifier
        A fitted clone, ``n_iter_ == 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> start = fit_first_epoch(MLPRegressor(hidden_layer_sizes=(3,), solver="sgd", random_state=0),
    ...                         X, X.sum(axis=1))
    >>> start.n_iter_, len(start.loss_curve_), [c.shape for c in start.coefs_]
    (1, 1, [(2, 3), (3, 1)])
    """
    new = clone(mlp).set_params(max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        new.fit(X, y)
    return new


def continue_mlp_training(mlp, X, y, max_iter, random_state=None, **params):
    """Train a copy of a fitted MLP for exactly ``max_iter`` more epochs.

    The copy starts from ``mlp``'s current weights with a fresh optimizer
    (zero velocities for ``solver='sgd'``, zero moments for ``'adam'``), as an
    onnxruntime optimizer started from the same weights does. Every epoch
    runs: the stop on a stalled training loss (``n_iter_no_change``) is
    disabled and the warning about reaching ``max_iter`` is silenced.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        A fitted network, with ``solver`` 'sgd' or 'adam'.
    X, y : array-like
        Training data.
    max_iter : int
        Epochs to run.
    random_state : int or None
        Seeds the shuffling of the minibatches; None keeps ``mlp``'s.
    **params
        Other parameters to change first (``learning_rate_init``,
        ``alpha``...).

    Returns
    -------
    MLPRegressor or MLPClassifier
        The trained copy; its ``loss_curve_`` holds the ``max_iter`` epochs
        of this training only, and ``n_iter_ == max_iter``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> start = fit_first_epoch(MLPRegressor(hidden_layer_sizes=(3,), solver="sgd", random_state=0),
    ...                         X, X.sum(axis=1))
    >>> more = continue_mlp_training(start, X, X.sum(axis=1), max_iter=3, random_state=1)
    >>> more.n_iter_, len(more.loss_curve_), start.n_iter_
    (3, 3, 1)
    """
    check_is_fitted(mlp, "coefs_")
    if mlp.solver not in ("sgd", "adam"):
        raise ValueError(
            f"Only the stochastic solvers 'sgd' and 'adam' train by epochs, got {mlp.solver!r}."
        )
    new = copy.deepcopy(mlp)
    settings = dict(
        warm_start=True,
        max_iter=max_iter,
        n_iter_no_change=max_iter,
        early_stopping=False,
        **params,
    )
    if random_state is not None:
        settings["random_state"] = random_state
    new.set_params(**settings)
    # scikit-learn appends to these across warm starts: start them again
    new.loss_curve_ = []
    new.best_loss_ = np.inf
    new._no_improvement_count = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        new.fit(X, y)
    return new


def mlp_update_parameters(mlp, **sklearn_params):
    """The parameters of our optimizers that take the steps scikit-learn's MLP takes.

    scikit-learn's ``MLPRegressor`` minimizes half the mean squared error,
    ours the mean squared error: its gradients are half ours, so the same
    SGD steps need half its learning rate. ``MLPClassifier``'s log loss has
    no such factor. Its ``solver='sgd'`` with momentum is torch's momentum
    with a constant rate (see :mod:`helpers.core.updates.update_rules`). Its
    ``'adam'`` is AdamW without weight decay: Adam divides by the root of
    the gradients' second moment, so doubled gradients take the same steps
    with the same rate, and only ``epsilon`` doubles (it then differs only
    where it enters, after the bias correction in torch's formula, before it
    in scikit-learn's).

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        The network whose training parameters are read.
    **sklearn_params
        Parameters overriding ``mlp``'s, as :func:`continue_mlp_training`
        takes them (``learning_rate_init``, ``momentum``, ``batch_size``...).

    Returns
    -------
    dict
        ``learning_rate``, ``solver``, ``momentum``, ``betas``, ``eps`` and,
        when ``batch_size`` is a number, ``batch_size``: keyword arguments of
        :class:`helpers.OrtGradientOptimizer` and
        :class:`helpers.OrtGradientForwardBackwardOptimizer`.

    Examples
    --------
    >>> from sklearn.neural_network import MLPRegressor
    >>> params = mlp_update_parameters(
    ...     MLPRegressor(solver="sgd", learning_rate_init=0.01, batch_size=32)
    ... )
    >>> params["learning_rate"], params["solver"], params["batch_size"]
    (0.005, 'nesterov', 32)
    """
    params = {**mlp.get_params(), **sklearn_params}
    if params["learning_rate"] != "constant":
        raise ValueError(
            f"learning_rate={params['learning_rate']!r}: scikit-learn's MLP changes its rate once "
            "per epoch, our optimizers once per step; only 'constant' has an equivalent."
        )
    # ours / scikit-learn's gradients: 2 for the halved squared error, 1 for the log loss
    gradient_ratio = 2.0 if is_regressor(mlp) else 1.0
    adam = params["solver"] == "adam"
    result = {
        "learning_rate": params["learning_rate_init"] / (1.0 if adam else gradient_ratio),
        "momentum": params["momentum"] if 0 < params["momentum"] < 1 else 0.9,
        "betas": (params["beta_1"], params["beta_2"]),
        "eps": params["epsilon"] * gradient_ratio,
    }
    if adam:
        result["solver"] = "adamw"
    elif params["solver"] == "sgd":
        plain = params["momentum"] == 0
        result["solver"] = (
            "sgd" if plain else ("nesterov" if params["nesterovs_momentum"] else "momentum")
        )
    else:
        raise ValueError(
            f"solver={params['solver']!r} has no minibatch equivalent: use 'sgd' or 'adam'."
        )
    if not isinstance(params["batch_size"], str):
        result["batch_size"] = params["batch_size"]
    return result
