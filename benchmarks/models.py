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
* :class:`TorchTrainer`, :class:`OrtWholeTrainer`,
  :class:`OrtForwardBackwardTrainer`: one training step (forward, loss,
  backward, update) of torch, of the whole-training API and of the
  forward/backward API, all minimizing ``mean((prediction - y) ** 2)``;
* :class:`NumpyMatmul`, :class:`OrtStepProducts`: the matrix products of
  one step alone, in numpy (BLAS) and in onnxruntime's kernels: the
  references of the scaling benchmark, the second the runtime's own bound;
* :func:`run_batches`, :func:`run_epoch`, :func:`interleaved_measure`,
  :func:`interleaved_fit_times`, :func:`marginal_step_cost`,
  :func:`is_comparable`: running, timing and the check that compared runs
  reached comparable losses.

The loss is torch's ``MSELoss``, the ``squared_error`` of
:func:`helpers.add_loss_output`: twice scikit-learn's, whose squared error
carries a factor 1/2. The same updates as scikit-learn's therefore need half
its learning rate (:func:`ort_learning_rate`).
"""
import copy
import time

import numpy as np
from sklearn.neural_network import MLPRegressor
from sklearn.utils import Bunch

from helpers.teaching.datasets import random_regression, split_standardized  # noqa: F401 (re-exported)
from helpers.teaching.sklearn_bridge import fit_first_epoch
from helpers.measure.timing import (  # noqa: F401 (the benchmarks' notebooks use them as bm.*)
    fit_times,
    interleaved_fit_times,
    interleaved_measure,
    marginal_step_cost,
    timing_note,
)

#: Framework names, exactly as :mod:`benchmarks.aggregate` expects them.
SKLEARN = "scikit-learn"
TORCH = "torch eager"
TORCH_COMPILE = "torch.compile"
ORT_WHOLE = "ort whole-training"
ORT_FORWARD_BACKWARD = "ort forward-backward"
NUMPY_MATMUL = "numpy matmul"
ORT_BOUND = "onnxruntime matmul bound"

#: The two references: the step's matrix products alone, not frameworks.
BOUNDS = (NUMPY_MATMUL, ORT_BOUND)

#: The columns every benchmark row has (see :mod:`benchmarks.aggregate`).
ROW_KEYS = (
    "benchmark", "model", "framework", "optimizer", "n_samples", "n_features", "hidden",
    "batch_size", "epochs", "updates", "varied", "fit_time_s", "time_per_update_s",
    "time_per_sample_s", "samples_per_s", "train_loss", "val_loss", "comparable", "note",
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
        n_samples=n_samples, n_features=n_features, n_informative=n_features,
        random_state=random_state,
    )
    rng = np.random.default_rng(random_state)
    y = (y - y.mean()) / (y.std() or 1.0) + noise * rng.standard_normal(n_samples)
    split = split_standardized(X, y, val_fraction, random_state)
    return Bunch(
        X_train=split.X_train, X_val=split.X_test, y_train=split.y_train, y_val=split.y_test,
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
def sgd_mlp_regressor(hidden, batch_size, learning_rate, max_iter, random_state=0, warm_start=False):
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
    from sklearn.linear_model import LinearRegression  # noqa: PLC0415
    from skl2onnx import to_onnx  # noqa: PLC0415

    from helpers.core.onnx_graph import get_train_initializer, replace_initializers  # noqa: PLC0415

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_features + 2, n_features)).astype(np.float32)
    onx = to_onnx(
        LinearRegression().fit(X, X.sum(axis=1)), X[:1], black_op={"LinearRegressor"}
    )
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
    from helpers.core.onnx_graph import get_train_initializer  # noqa: PLC0415

    ops = {node.op_type for node in onx.graph.node}
    if ops - _ALLOWED_OPS:
        raise ValueError(
            f"Only ReLU networks (MatMul, Add, Relu) are supported, the graph has {sorted(ops - _ALLOWED_OPS)}."
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
        raise ValueError(f"Expected a ReLU between consecutive layers: {len(layers)} layers, {n_relu} ReLU.")
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
            linear.bias.copy_(torch.from_numpy(np.array(b)))  # a copy: initializers may be read-only
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


# -- one training step per framework ---------------------------------------------------------
class TorchTrainer:
    """One training step of torch: forward, ``MSELoss``, backward, optimizer step.

    Parameters
    ----------
    onx : onnx.ModelProto
        The network to start from (see :func:`torch_mlp`).
    optimizer : {'sgd', 'adamw'}
        ``torch.optim.SGD`` without momentum, or ``torch.optim.AdamW``.
    lr : float
    betas, eps, weight_decay
        AdamW's settings.
    wrap : {None, 'compile'}
        Run the network through ``torch.compile`` (which may raise when no
        compiler works on the machine).

    Attributes
    ----------
    setup_time_s : float
        Seconds spent wrapping the model (compilation happens at the first
        steps and is measured by the caller).
    """

    def __init__(self, onx, optimizer="sgd", lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, wrap=None):
        import torch  # noqa: PLC0415

        start = time.perf_counter()
        self.torch = torch
        self.model = torch_mlp(onx)
        self.forward = self.model
        if wrap == "compile":
            self.forward = torch.compile(self.model)
        elif wrap is not None:
            raise ValueError(f"Unknown wrap {wrap!r}.")
        if optimizer == "sgd":
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.0)
        elif optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(
                self.model.parameters(), lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay
            )
        else:
            raise ValueError(f"Unknown optimizer {optimizer!r}: 'sgd' or 'adamw'.")
        self.loss_fn = torch.nn.MSELoss()
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: tensors sharing the numpy memory."""
        return self.torch.from_numpy(X), self.torch.from_numpy(y.reshape(-1, 1))

    def step(self, X, y):
        """One training step on a prepared batch; returns the loss before the update."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(X), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        return torch_layers(self.model)


class OrtWholeTrainer:
    """One training step of the whole-training API (``Module`` + ``Optimizer``).

    The same objects :class:`helpers.OrtGradientOptimizer` builds for a fit:
    the loss (``squared_error``) is added to the graph, the training
    artifacts are generated once, then each step runs the training model
    (forward and backward) and the optimizer model.

    Parameters
    ----------
    onx : onnx.ModelProto
        The network without loss.
    optimizer : {'sgd', 'adamw'}
        onnxruntime's SGD or AdamW optimizer model; the AdamW one is switched
        to torch's formula (``adam_mode=0``, see
        :func:`helpers.whole_training.artifacts.generate_training_artifacts`).
    lr : float
    betas, eps, weight_decay
        AdamW's settings.
    n_threads : int, optional
        Intra-op threads of the training session (the optimizer's ``n_threads``);
        None takes :func:`helpers.core.sessions.set_num_threads` or onnxruntime's default.

    Attributes
    ----------
    setup_time_s : float
        Seconds spent generating the artifacts and building the sessions.
    """

    def __init__(
        self, onx, optimizer="sgd", lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, n_threads=None
    ):
        from helpers.core.devices import resolve_device  # noqa: PLC0415
        from helpers.core.onnx_graph import get_train_initializer  # noqa: PLC0415
        from helpers.core.update_rules import make_update_rule  # noqa: PLC0415
        from helpers.whole_training.loss_output import add_loss_output  # noqa: PLC0415
        from helpers.whole_training.session import WholeTrainingSession  # noqa: PLC0415

        if optimizer not in ("sgd", "adamw"):
            raise ValueError(f"Unknown optimizer {optimizer!r}: 'sgd' or 'adamw'.")
        start = time.perf_counter()
        self.onx = onx
        self.lr = lr
        weights = get_train_initializer(onx)
        rule = make_update_rule(optimizer, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.runtime = WholeTrainingSession(
            add_loss_output(onx), weights, rule, resolve_device("cpu"), n_threads=n_threads
        )
        self.t = 0
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: a one-element tuple holding a batch of OrtValues."""
        from helpers.core.batches import Batch  # noqa: PLC0415

        return (Batch(0, len(X), [np.ascontiguousarray(X), np.ascontiguousarray(y.reshape(-1, 1))]),)

    def step(self, batch):
        """One training step; returns the loss before the update."""
        self.t += 1
        return float(self.runtime.train_step(batch.ortvalues(), self.lr, self.t).numpy())

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        return mlp_layers(self.onx, self.runtime.get_weights())


class OrtForwardBackwardTrainer:
    """One training step of the forward/backward API, with SGD or AdamW.

    The step of :class:`helpers.OrtGradientForwardBackwardOptimizer`, built
    from the same public pieces: the gradient graph of
    :class:`helpers.OrtGradientForwardBackward` (``TrainingAgent`` forward),
    the squared error and its gradient (:class:`helpers.SquareLearningLoss`,
    an ONNX graph), the backward pass, the update
    (:class:`helpers.core.update_rules.WeightUpdater`: torch's SGD or AdamW
    as an ONNX graph writing the weights in place).

    Parameters
    ----------
    onx : onnx.ModelProto
        The network without loss.
    lr : float
        Constant learning rate.
    n_threads : int, optional
        Intra-op threads of the model's session; None takes
        :func:`helpers.core.sessions.set_num_threads` or onnxruntime's default.
    optimizer : {'sgd', 'adamw'}
        The update rule, torch's formulas.
    betas, eps, weight_decay
        AdamW's settings.

    Attributes
    ----------
    setup_time_s : float
        Seconds spent building the gradient graph and the sessions.
    """

    def __init__(
        self, onx, lr=1e-3, n_threads=None, optimizer="sgd", betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0
    ):
        import onnxruntime  # noqa: PLC0415

        from helpers import OrtGradientForwardBackward, SquareLearningLoss  # noqa: PLC0415
        from helpers.core.onnx_graph import get_train_initializer  # noqa: PLC0415
        from helpers.core.update_rules import WeightUpdater, make_update_rule  # noqa: PLC0415

        start = time.perf_counter()
        self.onx = onx
        self.gradient = OrtGradientForwardBackward(onx, n_threads=n_threads)
        self.function = self.gradient.new_instance()
        self.device = self.gradient.device
        initial = get_train_initializer(onx)
        self.names = self.gradient.weights_to_train
        self.weights = [
            onnxruntime.OrtValue.ortvalue_from_numpy(initial[name].copy()) for name in self.names
        ]
        self.loss = SquareLearningLoss()
        self.lr = lr
        rule = make_update_rule(optimizer, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.updater = WeightUpdater(rule, [w.shape() for w in self.weights], self.device)
        self.t = 0
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: OrtValues of ``X`` and of ``y`` shaped (n, 1)."""
        import onnxruntime  # noqa: PLC0415

        arrays = [np.ascontiguousarray(X), np.ascontiguousarray(y.reshape(-1, 1))]
        return tuple(onnxruntime.OrtValue.ortvalue_from_numpy(a) for a in arrays)

    def step(self, X, y):
        """One training step; returns the loss before the update."""
        self.t += 1
        prediction = self.function.forward([X, *self.weights], training=True)[0]
        loss, gradient = self.loss.loss_gradient(self.device, y, prediction)
        gradients = self.function.backward([gradient])
        self.updater.update(self.weights, gradients, self.lr, self.t)
        return float(loss.numpy())

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        # copies: OrtValue.numpy() is a view of the buffer the next step updates
        return mlp_layers(self.onx, {n: w.numpy().copy() for n, w in zip(self.names, self.weights)})


class NumpyMatmul:
    """The matrix products of one training step of a one-hidden-layer MLP, in numpy.

    With ``X`` (batch, d), ``W1`` (d, h), ``W2`` (h, 1), ``g`` the gradient
    of the loss with respect to the output (batch, 1), a step computes five
    products (:data:`PRODUCTS`): two forward, ``h = X @ W1`` and
    ``p = h @ W2``; three backward, ``grad_W2 = h.T @ g``,
    ``grad_h = g @ W2.T`` and ``grad_W1 = X.T @ grad_h``. The gradient with
    respect to ``X`` is not needed, so a training step has no sixth product.
    Everything else (bias, ReLU and its mask, the loss, the update) is left
    out: their time over this one is the overhead of a framework.

    Parameters
    ----------
    layers : list of tuple
        Two ``(W, b)`` layers (see :func:`mlp_layers`).
    """

    #: The products of a step, by name, for the record.
    PRODUCTS = ("X @ W1", "h @ W2", "h.T @ g", "g @ W2.T", "X.T @ grad_h")

    def __init__(self, layers):
        if len(layers) != 2:
            raise ValueError(f"NumpyMatmul expects one hidden layer (2 layers), got {len(layers)}.")
        (self.W1, _), (self.W2, _) = layers
        self.W2T = np.ascontiguousarray(self.W2.T)

    def prepare(self, X, y):
        """The batch, and a gradient ``g`` of the output's shape (drawn once per batch)."""
        g = (y.reshape(-1, 1) - 0.5).astype(np.float32)
        h = np.maximum(X @ self.W1, 0)
        return X, g, h

    def step(self, X, g, h):
        """The five products of one step; returns nothing useful (0.0)."""
        hidden = X @ self.W1
        out = h @ self.W2
        grad_W2 = h.T @ g
        grad_h = g @ self.W2T
        grad_W1 = X.T @ grad_h
        del hidden, out, grad_W2, grad_W1
        return 0.0

    def flops(self, batch_size):
        """Floating point operations of the five products (2 per multiply-add)."""
        d, h = self.W1.shape
        o = self.W2.shape[1]
        return 2 * batch_size * (d * h + h * o + h * o + o * h + d * h)


class OrtStepProducts:
    """The matrix products of one training step, run by onnxruntime's kernels: the runtime's bound.

    The five products of :class:`NumpyMatmul` in one ONNX graph
    (:class:`helpers.measure.profiling.StepProducts`: the forward ``MatMul`` nodes,
    the backward ``Gemm`` nodes with the transposes a gradient graph uses),
    run in one session call per step. Both training APIs run these kernels
    and more: no step of theirs can be faster, and their time over this one
    is what the rest of the step (biases, ReLU, loss, update, calls) costs.
    numpy's BLAS may be faster or slower than onnxruntime's own GEMM (MLAS),
    so :class:`NumpyMatmul` is no bound for onnxruntime; this is.

    Parameters
    ----------
    layers : list of tuple
        Two ``(W, b)`` layers (see :func:`mlp_layers`), one output.
    n_threads : int, optional
        Intra-op threads of the session, as for the optimizers.
    """

    #: The products of a step, by name, as :class:`NumpyMatmul`'s.
    PRODUCTS = NumpyMatmul.PRODUCTS

    def __init__(self, layers, n_threads=None):
        from helpers.measure.profiling import StepProducts  # noqa: PLC0415

        if len(layers) != 2:
            raise ValueError(f"OrtStepProducts expects one hidden layer (2 layers), got {len(layers)}.")
        (W1, _), (W2, _) = layers
        if W2.shape[1] != 1:
            raise ValueError(f"OrtStepProducts expects one output, the network has {W2.shape[1]}.")
        self.products = StepProducts(W1.shape[0], W1.shape[1], n_threads=n_threads)
        # the network's own weights: the values change no time, but the step is the step of this network
        self.products.w1 = np.ascontiguousarray(W1, dtype=np.float32)
        self.products.w2 = np.ascontiguousarray(W2, dtype=np.float32)

    def prepare(self, X, y):
        """The batch as the session takes it (the gradient ``g`` is drawn once per batch size)."""
        return (np.ascontiguousarray(X, dtype=np.float32),)

    def step(self, X):
        """The five products of one step, one session call; returns nothing useful (0.0)."""
        self.products.run(X)
        return 0.0

    def flops(self, batch_size):
        """Floating point operations of the five products (2 per multiply-add)."""
        return self.products.flops(batch_size)


# -- running and timing -----------------------------------------------------------------------
def run_batches(trainer, prepared):
    """Run one step per prepared batch; return the losses."""
    return [trainer.step(*batch) for batch in prepared]


def run_epoch(trainer, X, y, batch_size, rng):
    """Run one epoch as a training loop does: shuffle, gather, one step per batch.

    The epoch draws a permutation from ``rng``, gathers the shuffled rows
    (numpy fancy indexing) and cuts consecutive batches: ``ceil(n /
    batch_size)`` steps, the last batch may be smaller. Every framework pays
    the same numpy work; only ``trainer.prepare`` and ``trainer.step``
    differ.

    Parameters
    ----------
    trainer : object
        With ``prepare(X, y)`` and ``step(*prepared)``.
    X, y : numpy.ndarray
        Training data, ``y`` 1D.
    batch_size : int
    rng : numpy.random.Generator
        Give each framework a generator with the same seed.

    Returns
    -------
    int
        The number of steps (updates) run.
    """
    n = X.shape[0]
    order = rng.permutation(n)
    Xs, ys = X[order], y[order]
    steps = 0
    for start in range(0, n, batch_size):
        trainer.step(*trainer.prepare(Xs[start:start + batch_size], ys[start:start + batch_size]))
        steps += 1
    return steps


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
