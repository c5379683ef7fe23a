"""Move weights between scikit-learn's multi-layer perceptrons and their ONNX graphs.

skl2onnx converts an ``MLPRegressor`` or ``MLPClassifier`` into ``MatMul``,
``Add`` and activation nodes. The weights of layer ``i`` become the float
initializers ``coefficient<i>`` (shape ``(fan_in, fan_out)``) and
``intercepts<i>`` (shape ``(1, fan_out)``), with an empty suffix for the first
layer: ``coefficient``, ``intercepts``, ``coefficient1``, ``intercepts1``...
The functions below rely on that naming and check it against the graph.

To compare a training in onnxruntime with scikit-learn's own, both must start
from the same weights. scikit-learn draws its initial weights inside ``fit``;
the simplest way to share them is to fit one epoch (``max_iter=1``), convert
that model, and continue both trainings from there:
:func:`continue_mlp_training` continues scikit-learn's, and
:func:`mlp_update_parameters` gives the parameters that make our optimizers
take the same steps.
"""

import copy
import warnings

import numpy as np
from onnx import numpy_helper
from sklearn.base import clone, is_regressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted


def _suffix(i):
    return "" if i == 0 else str(i)


def mlp_weight_names(mlp):
    """Names of the ONNX initializers holding the weights of a fitted MLP.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        A fitted network.

    Returns
    -------
    list of str
        ``coefficient``, ``intercepts``, ``coefficient1``, ``intercepts1``...:
        for each layer, its coefficient matrix then its intercepts, the order
        of the converted graph.

    Examples
    --------
    >>> import warnings; warnings.simplefilter("ignore")
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> mlp = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5, random_state=0).fit(
    ...     X, X.sum(axis=1)
    ... )
    >>> mlp_weight_names(mlp)
    ['coefficient', 'intercepts', 'coefficient1', 'intercepts1']
    """
    check_is_fitted(mlp, "coefs_")
    names = []
    for i in range(len(mlp.coefs_)):
        names += [f"coefficient{_suffix(i)}", f"intercepts{_suffix(i)}"]
    return names


def mlp_coefficient_names(mlp):
    """Names of the coefficient matrices only, the weights ``alpha`` penalizes.

    scikit-learn's L2 penalty ``alpha`` applies to ``coefs_``, not to
    ``intercepts_``: pass these names to
    :class:`helpers.ElasticLearningPenalty` (``weights=...``) or to the
    ``penalty`` of :func:`helpers.add_loss_output` to penalize the same weights.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        A fitted network.

    Returns
    -------
    list of str

    Examples
    --------
    >>> import warnings; warnings.simplefilter("ignore")
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> mlp = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5, random_state=0).fit(
    ...     X, X.sum(axis=1)
    ... )
    >>> mlp_coefficient_names(mlp)
    ['coefficient', 'coefficient1']
    """
    return mlp_weight_names(mlp)[::2]


def mlp_onnx_weights(mlp, onx=None):
    """The weights of a fitted MLP, named and shaped as in its ONNX graph.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        A fitted network.
    onx : onnx.ModelProto, optional
        The converted model; when given, every name must be one of its
        initializers, with the same shape.

    Returns
    -------
    dict
        Initializer name to float32 :class:`numpy.ndarray` (copies); the
        intercepts have shape ``(1, fan_out)``.

    Raises
    ------
    ValueError
        When ``onx`` lacks an initializer or holds it with another shape.

    Examples
    --------
    >>> import warnings; warnings.simplefilter("ignore")
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> mlp = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5, random_state=0).fit(
    ...     X, X.sum(axis=1)
    ... )
    >>> from skl2onnx import to_onnx
    >>> weights = mlp_onnx_weights(mlp, to_onnx(mlp, X[:1]))  # checked against the graph
    >>> {name: value.shape for name, value in weights.items()}
    {'coefficient': (2, 3), 'intercepts': (1, 3), 'coefficient1': (3, 1), 'intercepts1': (1, 1)}
    """
    names = mlp_weight_names(mlp)
    values = []
    for coef, intercept in zip(mlp.coefs_, mlp.intercepts_):
        values += [
            np.array(coef, dtype=np.float32),
            np.array(intercept, dtype=np.float32).reshape(1, -1),
        ]
    weights = dict(zip(names, values))
    if onx is not None:
        inits = {init.name: tuple(init.dims) for init in onx.graph.initializer}
        for name, value in weights.items():
            if name not in inits:
                raise ValueError(
                    f"The ONNX model has no initializer {name!r} (it has {sorted(inits)}): "
                    "was it converted from this network with skl2onnx?"
                )
            if inits[name] != value.shape:
                raise ValueError(
                    f"Initializer {name!r} has shape {inits[name]} in the ONNX model but "
                    f"{value.shape} in the network: they are different networks."
                )
    return weights


def onnx_weights_of(onx, names):
    """Read initializers ``names`` of an ONNX model as numpy arrays.

    Parameters
    ----------
    onx : onnx.ModelProto
    names : list of str

    Returns
    -------
    dict
        Name to :class:`numpy.ndarray`.

    Examples
    --------
    >>> import warnings; warnings.simplefilter("ignore")
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> mlp = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5, random_state=0).fit(
    ...     X, X.sum(axis=1)
    ... )
    >>> from skl2onnx import to_onnx
    >>> weights = onnx_weights_of(to_onnx(mlp, X[:1]), ["coefficient", "intercepts"])
    >>> {name: value.shape for name, value in weights.items()}
    {'coefficient': (2, 3), 'intercepts': (1, 3)}
    >>> bool(np.allclose(weights["coefficient"], mlp.coefs_[0]))
    True
    """
    inits = {init.name: init for init in onx.graph.initializer}
    missing = [name for name in names if name not in inits]
    if missing:
        raise ValueError(f"The ONNX model has no initializers {missing}.")
    return {name: numpy_helper.to_array(inits[name]) for name in names}


def mlp_with_weights(mlp, weights):
    """A copy of a fitted MLP carrying weights trained elsewhere.

    Use it to run scikit-learn's ``predict`` or ``score`` on weights trained
    by onnxruntime, or to read them as ``coefs_`` and ``intercepts_``.

    Parameters
    ----------
    mlp : MLPRegressor or MLPClassifier
        A fitted network with the same architecture.
    weights : dict
        Initializer name to array, for every name of :func:`mlp_weight_names`
        (``get_state()`` of an optimizer that trained all of them).

    Returns
    -------
    MLPRegressor or MLPClassifier
        A deep copy of ``mlp``; ``mlp`` itself is left unchanged.

    Examples
    --------
    >>> import warnings; warnings.simplefilter("ignore")
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> mlp = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5, random_state=0).fit(
    ...     X, X.sum(axis=1)
    ... )
    >>> zeros = {name: np.zeros_like(w) for name, w in mlp_onnx_weights(mlp).items()}
    >>> mlp_with_weights(mlp, zeros).predict(X[:3])
    array([0., 0., 0.], dtype=float32)
    >>> bool(mlp.coefs_[0].any())  # the original keeps its weights
    True
    """
    names = mlp_weight_names(mlp)
    missing = [name for name in names if name not in weights]
    if missing:
        raise ValueError(f"weights lacks {missing}; it has {sorted(weights)}.")
    new = copy.deepcopy(mlp)
    dtype = mlp.coefs_[0].dtype
    for i in range(len(mlp.coefs_)):
        coef = np.asarray(weights[names[2 * i]], dtype=dtype)
        intercept = np.asarray(weights[names[2 * i + 1]], dtype=dtype).reshape(-1)
        if coef.shape != mlp.coefs_[i].shape or intercept.shape != mlp.intercepts_[i].shape:
            raise ValueError(
                f"Layer {i}: got shapes {coef.shape} and {intercept.shape}, the network has "
                f"{mlp.coefs_[i].shape} and {mlp.intercepts_[i].shape}."
            )
        new.coefs_[i], new.intercepts_[i] = coef.copy(), intercept.copy()
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
