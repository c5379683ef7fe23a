"""OrtGradientForwardBackwardOptimizer: convergence, update rules, estimator contract."""

import pickle
import warnings

import numpy as np
import pytest
from skl2onnx import to_onnx
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPRegressor

from helpers import (
    Device,
    ElasticLearningLoss,
    ElasticLearningPenalty,
    LearningRateSGD,
    LearningRateSGDNesterov,
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    SquareLearningLoss,
    TrainingDivergedError,
    WeightUpdater,
    add_loss_output,
    get_train_initializer,
    make_update_rule,
    to_ortvalue,
)


def _fit(model, X, y, **kwargs):
    params = dict(
        max_iter=20,
        batch_size=10,
        learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
        random_state=0,
    )
    params.update(kwargs)
    return OrtGradientForwardBackwardOptimizer(model, **params).fit(X, y)


@pytest.mark.parametrize(
    "learning_rate",
    [
        LearningRateSGD(eta0=0.05, learning_rate="constant"),
        LearningRateSGD(eta0=0.05, learning_rate="invscaling"),
        LearningRateSGDNesterov(eta0=0.01),
    ],
    ids=["sgd", "invscaling", "nesterov"],
)
def test_converges_to_linear_regression(linear_onnx, linear_data, learning_rate):
    """Within 0.02 of the least-squares coefficients (noise std 0.1, 300 rows)."""
    X, y = linear_data
    opt = _fit(linear_onnx, X, y, learning_rate=learning_rate, max_iter=40)
    ref = LinearRegression().fit(X, y)
    np.testing.assert_allclose(opt.get_state()["coef"].ravel(), ref.coef_, atol=0.02)
    np.testing.assert_allclose(opt.get_state()["intercept"], [ref.intercept_], atol=0.02)
    np.testing.assert_allclose(opt.predict(X[:5]), ref.predict(X[:5]), atol=0.05)


@pytest.mark.parametrize("nesterov", [False, True])
def test_first_steps_match_numpy(linear_onnx, linear_data, nesterov):
    """Full batches, scikit-learn's MLP update, loss = mean squared error."""
    X, y = linear_data
    X64, y64 = X.astype(np.float64), y.astype(np.float64)
    init = get_train_initializer(linear_onnx)
    params = [init["coef"].ravel().astype(np.float64), init["intercept"].astype(np.float64)]
    vel = [np.zeros_like(p) for p in params]
    lr, mu = 0.02, 0.9
    for _ in range(5):
        d = X64 @ params[0] + params[1] - y64
        grads = [2 * X64.T @ d / len(y), 2 * d.mean(keepdims=True)]
        for k in range(2):
            vel[k] = mu * vel[k] - lr * grads[k]
            params[k] = params[k] + (mu * vel[k] - lr * grads[k] if nesterov else vel[k])
    rate = LearningRateSGDNesterov(eta0=lr, momentum=mu, nesterov=nesterov)
    opt = _fit(linear_onnx, X, y, learning_rate=rate, batch_size=len(y), max_iter=5)
    np.testing.assert_allclose(opt.get_state()["coef"].ravel(), params[0], rtol=1e-4)
    np.testing.assert_allclose(opt.get_state()["intercept"], params[1], rtol=1e-4)


def test_same_objective_as_whole_training(linear_onnx, linear_data):
    """Both APIs minimize the same loss: same first full-batch SGD steps."""
    X, y = linear_data
    penalty = {"coef": {"l1": 0.01, "l2": 0.05}}
    whole = OrtGradientOptimizer(
        add_loss_output(
            linear_onnx, score_name="elastic", l1_weight=0.3, l2_weight=0.7, penalty=penalty
        ),
        max_iter=3,
        batch_size=len(y),
        learning_rate=0.05,
        random_state=0,
    ).fit(X, y)
    fwbw = _fit(
        linear_onnx,
        X,
        y,
        max_iter=3,
        batch_size=len(y),
        learning_loss=ElasticLearningLoss(0.3, 0.7),
        learning_penalty=ElasticLearningPenalty(0.01, 0.05, weights=["coef"]),
    )
    np.testing.assert_allclose(fwbw.train_losses_, whole.train_losses_, rtol=1e-4)
    for name, value in whole.get_state().items():
        np.testing.assert_allclose(fwbw.get_state()[name], value, rtol=1e-4, atol=1e-6)


def test_mlp_nesterov_elastic_penalty():
    """The issue's goal: a converted MLPRegressor, Nesterov momentum, elastic penalty."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 5)).astype(np.float32)
    y = (np.sin(X[:, 0]) + X[:, 1] ** 2 - X[:, 2]).astype(np.float32)
    mlp = MLPRegressor(hidden_layer_sizes=(20,), max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(X, y)
    onx = to_onnx(mlp, X[:1])
    opt = _fit(
        onx,
        X,
        y,
        max_iter=60,
        batch_size=20,
        learning_rate=LearningRateSGDNesterov(eta0=0.005),
        learning_penalty=ElasticLearningPenalty(
            l1=1e-5, l2=1e-4, weights=["coefficient", "coefficient1"]
        ),
    )
    assert opt.train_losses_[-1] < opt.train_losses_[0] / 5
    baseline = float(np.var(y))
    assert -opt.score(X, y) < baseline / 5


def test_losses_and_score(linear_onnx, linear_data):
    X, y = linear_data
    opt = _fit(linear_onnx, X, y, max_iter=3, learning_loss="absolute_error")
    per_sample = opt.losses(X, y)
    assert per_sample.shape == (len(y),)
    np.testing.assert_allclose(per_sample, np.abs(opt.predict(X) - y), rtol=1e-4, atol=1e-6)
    assert opt.score(X, y) == pytest.approx(-per_sample.mean(), rel=1e-5)
    w = np.arange(len(y), dtype=np.float32)
    np.testing.assert_allclose(opt.losses(X, y, w), per_sample * w, rtol=1e-5)


def test_aliases(linear_onnx, linear_data):
    X, y = linear_data
    opt = _fit(
        linear_onnx,
        X[:50],
        y[:50],
        max_iter=1,
        learning_rate="Nesterov",
        learning_loss="elastic",
        learning_penalty="elastic",
    )
    assert type(opt.learning_rate_).__name__ == "LearningRateSGDNesterov"
    assert type(opt.learning_loss_).__name__ == "ElasticLearningLoss"
    assert type(opt.learning_penalty_).__name__ == "ElasticLearningPenalty"
    opt = _fit(linear_onnx, X[:50], y[:50], max_iter=1, learning_loss=SquareLearningLoss())
    assert opt.learning_loss_ is not opt.learning_loss  # a fresh copy per fit


def test_warm_start_and_pickle(linear_onnx, linear_data):
    X, y = linear_data
    rate = LearningRateSGDNesterov(eta0=0.005)
    one = _fit(linear_onnx, X, y, max_iter=4, learning_rate=rate)
    two = _fit(linear_onnx, X, y, max_iter=2, learning_rate=rate, warm_start=True)
    restored = pickle.loads(pickle.dumps(two))
    np.testing.assert_allclose(restored.predict(X[:4]), two.predict(X[:4]))
    two.fit(X, y)
    restored.fit(X, y)
    np.testing.assert_allclose(two.train_losses_, one.train_losses_, rtol=1e-5)
    np.testing.assert_allclose(restored.train_losses_, one.train_losses_, rtol=1e-5)


def test_clone_and_grid_search(linear_onnx, linear_data):
    X, y = linear_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=5, random_state=0)
    assert clone(opt).get_params()["learning_rate"] == "SGD"
    search = GridSearchCV(
        opt,
        {
            "learning_rate": [
                LearningRateSGD(eta0=1e-5, learning_rate="constant"),
                LearningRateSGD(eta0=0.05, learning_rate="constant"),
            ],
            "learning_loss": ["square_error", "absolute_error"],
        },
        cv=2,
    ).fit(X, y)
    assert search.best_params_["learning_rate"].eta0 == 0.05


def test_divergence(linear_onnx, linear_data):
    X, y = linear_data
    big = LearningRateSGD(eta0=10.0, learning_rate="constant")
    with pytest.raises(TrainingDivergedError, match="smaller learning rate"):
        _fit(linear_onnx, X * 100, y, learning_rate=big)
    with pytest.warns(RuntimeWarning, match="Training stopped"):
        opt = _fit(linear_onnx, X * 100, y, learning_rate=big, on_divergence="stop")
    assert all(np.isfinite(v).all() for v in opt.get_state().values())
    assert opt.n_iter_ < 20


def test_bad_input(linear_onnx, linear_data):
    X, y = linear_data
    with pytest.raises(ValueError, match="X has 300 rows but y has 10 rows"):
        _fit(linear_onnx, X, y[:10])
    with pytest.raises(ValueError, match="X contains NaN"):
        _fit(linear_onnx, np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="expects 4"):
        _fit(linear_onnx, X[:, :2], y)
    with pytest.raises(ValueError, match="Unknown learning_rate"):
        _fit(linear_onnx, X, y, learning_rate="adam")


def test_optimizer_is_the_loop_of_its_parts():
    """Forward, loss gradient, backward and update, written out, give the fit's weights."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3)).astype(np.float32)
    y = (np.sin(X[:, 0]) + X[:, 1]).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPRegressor(hidden_layer_sizes=(5,), activation="tanh", max_iter=1).fit(X, y)
    onx = to_onnx(mlp, X[:1])
    epochs, batch, lr, momentum = 3, 20, 0.01, 0.9
    fitted = OrtGradientForwardBackwardOptimizer(
        onx,
        max_iter=epochs,
        batch_size=batch,
        learning_rate=lr,
        solver="nesterov",
        momentum=momentum,
        learning_loss="squared_error",
        random_state=0,
    ).fit(X, y)

    device, loss = Device("cpu"), SquareLearningLoss()
    fb = OrtGradientForwardBackward(onx)
    weights = get_train_initializer(onx)
    values = [weights[name].copy() for name in fb.weights_to_train]
    updater = WeightUpdater(
        make_update_rule("nesterov", momentum=momentum), [v.shape for v in values], device
    )
    ort_weights = [to_ortvalue(v, device) for v in values]
    fn, shuffler, t, epoch_losses = fb.new_instance(), np.random.RandomState(0), 0, []
    for _ in range(epochs):
        order, total = shuffler.permutation(len(X)), 0.0
        for first in range(0, len(X), batch):
            rows = order[first : first + batch]
            prediction = fn.forward([X[rows], *ort_weights], training=True)[0]
            value, gradient = loss.loss_gradient(device, y[rows].reshape(-1, 1), prediction)
            t += 1
            updater.update(ort_weights, fn.backward([gradient]), lr, t)
            total += float(value.numpy()) * len(rows)
        epoch_losses.append(total / len(X))
    np.testing.assert_allclose(fitted.train_losses_, epoch_losses, rtol=1e-6)
    state = fitted.get_state()
    for name, value in zip(fb.weights_to_train, ort_weights):
        np.testing.assert_allclose(state[name], value.numpy(), rtol=1e-6, atol=1e-7)
