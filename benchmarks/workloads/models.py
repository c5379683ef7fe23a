"""What the benchmark notebooks share: data, models, and one training step per framework.

The benchmarks compare like with like, so every framework starts from the
same weights and runs the same update on the same batches. This module holds
the pieces that make that true once, for every notebook:

* :func:`make_data`: a standardized float32 regression problem, split into a
  training and a validation part;
* :func:`sgd_mlp_regressor`, :func:`initial_mlp`, :func:`zero_linear_onnx`:
  the scikit-learn models and the ONNX graphs every framework starts from;
* :func:`mlp_layers`, :func:`numpy_predict`, :func:`torch_mlp`: the weights of
  such a graph as ``(W, b)`` pairs, predictions in numpy, the same network
  in torch;
* :func:`interleaved_measure`, :func:`interleaved_fit_times`,
  :func:`marginal_step_cost`, :func:`is_comparable`: timing, and the check
  that compared runs reached comparable losses.

One training step per framework is in :mod:`benchmarks.workloads.trainers`.

The loss is torch's ``MSELoss``, the ``squared_error`` of
:func:`helpers.add_loss_output`: twice scikit-learn's, whose squared error
carries a factor 1/2. The same updates as scikit-learn's therefore need half
its learning rate (:func:`ort_learning_rate`).
"""

import copy

import numpy as np
from sklearn.neural_network import MLPRegressor
from sklearn.utils import Bunch

from helpers.measure.timing import (  # noqa: F401 (the benchmarks' notebooks use them as bm.*)
    fit_times,
    interleaved_fit_times,
    interleaved_measure,
    marginal_step_cost,
    timing_note,
)
from helpers.teaching.datasets import random_regression, split_standardized  # noqa: F401 (re-exported)
from helpers.teaching.sklearn_training import fit_first_epoch

#: The columns every benchmark row has (see :mod:`benchmarks.report.aggregate`).
ROW_KEYS = (
    "benchmark",
    "model",
    "framework",
    "optimizer",
    "n_samples",
    "n_features",
    "hidden",
    "batch_size",
    "epochs",
    "updates",
    "varied",
    "fit_time_s",
    "time_per_update_s",
    "time_per_sample_s",
    "samples_per_s",
    "train_loss",
    "val_loss",
    "comparable",
    "note",
    "error",
)

#: Operators a converted MLP or linear model may contain.
_ALLOWED_OPS = {"Cast", "MatMul", "Add", "Relu", "Reshape"}


def make_row(**values):
    """Return a benchmark row with every key of :data:`ROW_KEYS` (None when unset).

    Keys outside :data:`ROW_KEYS` are kept (``setup_time_s``...).
    Numpy numbers become Python numbers, so that the row serializes to JSON.
    """
    row = {key: None for key in ROW_KEYS}
    for key, value in values.items():
        if isinstance(value, np.generic):
            value = value.item()
        row[key] = value
    return row


def ort_learning_rate(sklearn_learning_rate):
    """The learning rate giving scikit-learn's updates with our squared error.

    scikit-learn minimizes ``mean((p - y) ** 2) / 2``, the ONNX losses and torch
    ``mean((p - y) ** 2)``: the gradient is twice as large, so the learning
    rate is halved.
    """
    return sklearn_learning_rate / 2


# -- data -------------------------------------------------------------------------------
def make_data(n_samples, n_features, val_fraction=0.2, noise=0.3, random_state=0):
    """A standardized float32 regression problem with a validation part.

    The features come from :func:`sklearn.datasets.make_regression` (standard
    normal, every feature informative); the target is standardized, then
    Gaussian noise of standard deviation ``noise`` is added, so that the
    best reachable mean squared error is about ``noise ** 2`` and losses can
    be compared in relative terms. The features are standardized with the
    training part's mean and deviation.

    Parameters
    ----------
    n_samples : int
        Rows in total, training and validation.
    n_features : int
    val_fraction : float
        Fraction of the rows kept for validation.
    noise : float
        Standard deviation of the noise added to the standardized target.
    random_state : int

    Returns
    -------
    sklearn.utils.Bunch
        ``X_train``, ``X_val`` (float32, 2D), ``y_train``, ``y_val`` (float32,
        1D), ``noise``.
    """
    from sklearn.datasets import make_regression  # noqa: PLC0415

    X, y = make_regression(
        n_samples=n_samples,
        n_features=n_features,
        n_informative=n_features,
        random_state=random_state,
    )
    rng = np.random.default_rng(random_state)
    y = (y - y.mean()) / (y.std() or 1.0) + noise * rng.standard_normal(n_samples)
    split = split_standardized(X, y, val_fraction, random_state)
    return Bunch(
        X_train=split.X_train,
        X_val=split.X_test,
        y_train=split.y_train,
        y_val=split.y_test,
        noise=noise,
    )


def draw_batches(X, y, batch_size, n_batches, random_state=0):
    """Draw ``n_batches`` batches of ``batch_size`` distinct rows, once for all frameworks.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d), float32
    y : numpy.ndarray of shape (n,), float32
    batch_size, n_batches : int
    random_state : int

    Returns
    -------
    list of tuple
        ``(X_batch, y_batch)`` with ``y_batch`` of shape ``(batch_size, 1)``,
        contiguous float32 arrays.
    """
    rng = np.random.default_rng(random_state)
    n = X.shape[0]
    if batch_size > n:
        raise ValueError(f"batch_size={batch_size} is larger than the {n} rows.")
    batches = []
    for _ in range(n_batches):
        rows = rng.choice(n, size=batch_size, replace=False)
        batches.append(
            (np.ascontiguousarray(X[rows]), np.ascontiguousarray(y[rows].reshape(-1, 1)))
        )
    return batches


# -- models -------------------------------------------------------------------------------
def sgd_mlp_regressor(
    hidden, batch_size, learning_rate, max_iter, random_state=0, warm_start=False
):
    """An ``MLPRegressor`` doing plain SGD: the update rule the ONNX runs reproduce.

    ReLU, one hidden layer, ``solver='sgd'`` without momentum, no L2 penalty
    (``alpha=0``), a constant learning rate, shuffled minibatches, no early
    stopping and no stop on a plateau: it runs exactly ``max_iter`` epochs.
    """
    return MLPRegressor(
        hidden_layer_sizes=(hidden,),
        activation="relu",
        solver="sgd",
        alpha=0.0,
        batch_size=batch_size,
        learning_rate="constant",
        learning_rate_init=learning_rate,
        max_iter=max_iter,
        shuffle=True,
        random_state=random_state,
        tol=0.0,
        momentum=0.0,
        nesterovs_momentum=False,
        early_stopping=False,
        n_iter_no_change=10**9,
        warm_start=warm_start,
    )


def initial_mlp(X, y, hidden, batch_size, learning_rate, random_state=0):
    """The MLP every framework starts from, and its ONNX graph.

    scikit-learn draws its initial weights inside ``fit`` and cannot fit
    zero rows, so the common start is an ``MLPRegressor`` after one epoch:
    its weights are converted to ONNX (and from there to torch), and the
    timed scikit-learn fit continues from them with ``warm_start=True``.

    Parameters
    ----------
    X, y : numpy.ndarray
        Training data (``y`` 1D).
    hidden, batch_size : int
    learning_rate : float
        scikit-learn's learning rate.
    random_state : int

    Returns
    -------
    mlp : MLPRegressor
        Fitted for one epoch, ``warm_start=True``.
    onx : onnx.ModelProto
        The same network in ONNX (float32), ready for both ONNX APIs.
    """
    from skl2onnx import to_onnx  # noqa: PLC0415

    mlp = fit_first_epoch(
        sgd_mlp_regressor(hidden, batch_size, learning_rate, 1, random_state, warm_start=True), X, y
    )
    onx = to_onnx(mlp, X[:1].astype(np.float32))
    return mlp, onx


def random_mlp_onnx(n_features, hidden, random_state=0):
    """An MLP graph ``n_features -> hidden -> 1`` with scikit-learn's initialization.

    For the benchmarks that time steps, not fits: the network comes from an
    ``MLPRegressor`` fitted for one epoch on 4 random rows, which leaves its
    Glorot-uniform initial weights almost unchanged and costs nothing even
    for large layers.
    """
    rng = np.random.default_rng(random_state)
    X = rng.standard_normal((4, n_features)).astype(np.float32)
    y = rng.standard_normal(4).astype(np.float32)
    return initial_mlp(X, y, hidden, 4, 1e-6, random_state)[1]


def zero_linear_onnx(n_features):
    """A linear regression graph ``X @ coef + intercept`` whose weights are zero.

    ``SGDRegressor`` starts from zero coefficients and a zero intercept; so do
    the ONNX runs compared with it. The graph is a converted
    ``LinearRegression`` with ``black_op={'LinearRegressor'}`` (MatMul + Add,
    trainable initializers ``coef`` and ``intercept``).
    """
    from skl2onnx import to_onnx  # noqa: PLC0415
    from sklearn.linear_model import LinearRegression  # noqa: PLC0415

    from helpers.core.model_graphs.onnx_graph import get_train_initializer, replace_initializers  # noqa: PLC0415

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_features + 2, n_features)).astype(np.float32)
    onx = to_onnx(LinearRegression().fit(X, X.sum(axis=1)), X[:1], black_op={"LinearRegressor"})
    zeros = {k: np.zeros_like(v) for k, v in get_train_initializer(onx).items()}
    return replace_initializers(onx, zeros)


def mlp_layers(onx, weights=None):
    """Return the layers of a converted MLP or linear model as ``(W, b)`` pairs.

    Parameters
    ----------
    onx : onnx.ModelProto
        A chain ``MatMul -> Add [-> Relu] -> MatMul -> Add ...`` as skl2onnx
        writes it for ``MLPRegressor(activation='relu')`` or a linear model.
    weights : dict, optional
        Initializer name to array, replacing the graph's values (the weights
        a trainer returns).

    Returns
    -------
    list of tuple
        ``(W, b)`` per layer in graph order, ``W`` of shape (inputs, outputs)
        and ``b`` of shape (outputs,), float32. A ReLU follows every layer
        but the last.

    Raises
    ------
    ValueError
        When the graph holds another operator (another activation...).
    """
    from helpers.core.model_graphs.onnx_graph import get_train_initializer  # noqa: PLC0415

    ops = {node.op_type for node in onx.graph.node}
    if ops - _ALLOWED_OPS:
        raise ValueError(
            "Only ReLU networks (MatMul, Add, Relu) are supported, the graph has "
            f"{sorted(ops - _ALLOWED_OPS)}."
        )
    values = dict(get_train_initializer(onx))
    if weights:
        values.update(weights)
    layers, pending = [], None
    for node in onx.graph.node:
        if node.op_type == "MatMul":
            pending = np.asarray(values[node.input[1]], dtype=np.float32)
        elif node.op_type == "Add" and pending is not None:
            bias = np.asarray(values[node.input[1]], dtype=np.float32).reshape(-1)
            layers.append((pending, bias))
            pending = None
    n_relu = sum(node.op_type == "Relu" for node in onx.graph.node)
    if n_relu != len(layers) - 1:
        raise ValueError(
            f"Expected a ReLU between consecutive layers: {len(layers)} layers, {n_relu} ReLU."
        )
    return layers


def numpy_predict(layers, X):
    """Predictions of the network ``layers`` (see :func:`mlp_layers`), shape (n, outputs)."""
    h = np.asarray(X, dtype=np.float32)
    for i, (W, b) in enumerate(layers):
        h = h @ W + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0)
    return h


def mean_squared_error(prediction, y):
    """``mean((prediction - y) ** 2)`` in float64, whatever the shapes (n,) or (n, 1)."""
    p = np.asarray(prediction, dtype=np.float64).reshape(-1)
    return float(np.mean((p - np.asarray(y, dtype=np.float64).reshape(-1)) ** 2))


def torch_mlp(onx):
    """The network of ``onx`` as a ``torch.nn.Sequential`` of ``Linear`` and ``ReLU``.

    ``Linear`` stores ``W.T``: its weight has shape (outputs, inputs).
    """
    import torch  # noqa: PLC0415

    modules = []
    layers = mlp_layers(onx)
    for i, (W, b) in enumerate(layers):
        linear = torch.nn.Linear(W.shape[0], W.shape[1])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(np.array(W.T, order="C")))
            linear.bias.copy_(
                torch.from_numpy(np.array(b))
            )  # a copy: initializers may be read-only
        modules.append(linear)
        if i < len(layers) - 1:
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)


def torch_layers(model):
    """The ``(W, b)`` layers of a :func:`torch_mlp` network, as numpy arrays."""
    import torch  # noqa: PLC0415

    return [
        (m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
    ]


def max_weight_difference(layers, reference):
    """Largest absolute difference between two lists of ``(W, b)`` layers."""
    return max(
        float(np.max(np.abs(a - b))) for la, lb in zip(layers, reference) for a, b in zip(la, lb)
    )


def is_comparable(value, reference, tolerance=0.1):
    """Whether ``value`` is within ``tolerance`` (relative) of ``reference``.

    False when either is missing or not finite.
    """
    if value is None or reference is None or not np.isfinite(value) or not np.isfinite(reference):
        return False
    return bool(abs(value - reference) <= tolerance * abs(reference))


def copy_estimator(estimator):
    """A deep copy: the starting point of one timed scikit-learn fit."""
    return copy.deepcopy(estimator)
