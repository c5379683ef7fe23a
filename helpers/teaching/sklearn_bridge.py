"""Move weights between scikit-learn's multi-layer perceptrons and their ONNX graphs.

skl2onnx converts an ``MLPRegressor`` or ``MLPClassifier`` into ``MatMul``,
``Add`` and activation nodes. The weights of layer ``i`` become the float
initializers ``coefficient<i>`` (shape ``(fan_in, fan_out)``) and
``intercepts<i>`` (shape ``(1, fan_out)``), with an empty suffix for the first
layer: ``coefficient``, ``intercepts``, ``coefficient1``, ``intercepts1``...
The functions below rely on that naming and check it against the graph.
Training both networks from the same weights, with the same steps, is
:mod:`helpers.teaching.sklearn_training`'s part.
"""

import copy

import numpy as np
from onnx import numpy_helper
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
