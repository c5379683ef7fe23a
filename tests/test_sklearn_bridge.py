"""helpers.teaching.sklearn_bridge and sklearn_training: weights move between scikit-learn's MLPs
and ONNX unchanged, and the documented learning-rate and penalty mappings give scikit-learn's
updates."""

import warnings

import numpy as np
import onnxruntime
import pytest
from skl2onnx import to_onnx
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor

from helpers import (
    ElasticLearningPenalty,
    LearningRateSGDNesterov,
    NegLogLearningLoss,
    OrtGradientForwardBackwardOptimizer,
    get_train_initializer,
)
from helpers.core.model_graphs.onnx_graph import replace_initializers, select_outputs
from helpers.teaching.datasets import one_hot
from helpers.teaching.sklearn_bridge import (
    mlp_coefficient_names,
    mlp_onnx_weights,
    mlp_weight_names,
    mlp_with_weights,
    onnx_weights_of,
)
from helpers.teaching.sklearn_training import continue_mlp_training, fit_first_epoch


@pytest.fixture(scope="module")
def regression_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5)).astype(np.float32)
    y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float32)
    return X, y


def _mlp(**kw):
    params = dict(hidden_layer_sizes=(7, 4), solver="sgd", learning_rate_init=0.05, random_state=0)
    params.update(kw)
    return MLPRegressor(**params)


def test_names_follow_the_converted_graph(regression_data):
    X, y = regression_data
    mlp = fit_first_epoch(_mlp(), X, y)
    onx = to_onnx(mlp, X[:1])
    assert mlp_weight_names(mlp) == list(get_train_initializer(onx))
    assert mlp_weight_names(mlp) == [
        "coefficient",
        "intercepts",
        "coefficient1",
        "intercepts1",
        "coefficient2",
        "intercepts2",
    ]
    assert mlp_coefficient_names(mlp) == ["coefficient", "coefficient1", "coefficient2"]


def test_onnx_weights_equal_the_converted_initializers(regression_data):
    X, y = regression_data
    mlp = fit_first_epoch(_mlp(), X, y)
    onx = to_onnx(mlp, X[:1])
    weights = mlp_onnx_weights(mlp, onx)
    stored = get_train_initializer(onx)
    assert list(weights) == list(stored)
    for name, value in weights.items():
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, stored[name])


def test_onnx_weights_refuse_another_architecture(regression_data):
    X, y = regression_data
    small = fit_first_epoch(_mlp(hidden_layer_sizes=(3,)), X, y)
    big = fit_first_epoch(_mlp(hidden_layer_sizes=(5,)), X, y)
    with pytest.raises(ValueError, match="shape"):
        mlp_onnx_weights(small, to_onnx(big, X[:1]))
    # same first layers, one more: the first missing name is reported
    deep = fit_first_epoch(_mlp(hidden_layer_sizes=(3, 1)), X, y)
    with pytest.raises(ValueError, match="no initializer 'coefficient2'"):
        mlp_onnx_weights(deep, to_onnx(small, X[:1]))


def test_mlp_with_weights_predicts_like_the_onnx_graph(regression_data):
    X, y = regression_data
    mlp = fit_first_epoch(_mlp(), X, y)
    onx = to_onnx(mlp, X[:1])
    rng = np.random.default_rng(1)
    new_weights = {
        k: rng.standard_normal(v.shape).astype(np.float32) for k, v in mlp_onnx_weights(mlp).items()
    }
    session = onnxruntime.InferenceSession(
        replace_initializers(onx, new_weights).SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    expected = session.run(None, {"X": X})[0].ravel()
    copy = mlp_with_weights(mlp, new_weights)
    np.testing.assert_allclose(copy.predict(X), expected, rtol=1e-5, atol=1e-5)
    # the original keeps its weights
    np.testing.assert_array_equal(
        mlp.coefs_[0], onnx_weights_of(onx, ["coefficient"])["coefficient"]
    )
    with pytest.raises(ValueError, match="lacks"):
        mlp_with_weights(mlp, {"coefficient": new_weights["coefficient"]})


def test_fit_first_epoch_is_silent_and_leaves_the_model_unfitted(regression_data):
    X, y = regression_data
    template = _mlp(max_iter=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        mlp = fit_first_epoch(template, X, y)
    assert mlp.n_iter_ == 1
    assert not hasattr(template, "coefs_")


def _manual_gradient(mlp, X, y):
    """Gradient of scikit-learn's loss 0.5 * mean((p - y)**2), one relu layer, alpha=0."""
    W0, W1 = (c.astype(np.float64) for c in mlp.coefs_)
    b0, b1 = (b.astype(np.float64) for b in mlp.intercepts_)
    h = np.maximum(X @ W0 + b0, 0)
    delta = (h @ W1 + b1) - y.reshape(-1, 1)
    n = X.shape[0]
    gW1, gb1 = h.T @ delta / n, delta.mean(axis=0)
    dh = (delta @ W1.T) * (h > 0)
    return [X.T @ dh / n, gW1], [dh.mean(axis=0), gb1]


def test_continue_restarts_the_optimizer_and_runs_every_epoch(regression_data):
    X, y = regression_data
    lr, mu = 0.05, 0.9
    mlp = fit_first_epoch(
        _mlp(
            hidden_layer_sizes=(6,),
            momentum=mu,
            nesterovs_momentum=True,
            batch_size=X.shape[0],
            alpha=0.0,
        ),
        X,
        y,
    )
    before = [c.copy() for c in mlp.coefs_]
    one = continue_mlp_training(mlp, X, y, max_iter=1)
    # a fresh velocity: the first Nesterov step is -(1 + mu) * lr * gradient
    coef_grads, _ = _manual_gradient(mlp, X.astype(np.float64), y)
    for i in range(2):
        np.testing.assert_allclose(
            one.coefs_[i], before[i] - (1 + mu) * lr * coef_grads[i], rtol=1e-4, atol=1e-6
        )
        np.testing.assert_array_equal(mlp.coefs_[i], before[i])  # original untouched
    # a huge tol would stop scikit-learn after n_iter_no_change + 1 epochs
    many = continue_mlp_training(mlp, X, y, max_iter=15, tol=1e9)
    assert many.n_iter_ == 15 and len(many.loss_curve_) == 15


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_continue_refuses_lbfgs(regression_data):
    X, y = regression_data
    mlp = MLPRegressor(hidden_layer_sizes=(3,), solver="lbfgs", max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match="stochastic"):
        continue_mlp_training(mlp, X, y, max_iter=1)


def test_regression_mapping_eta_half_and_l2_alpha_over_batch(regression_data):
    """eta0 = lr / 2 and l2 = alpha / batch_size give MLPRegressor's updates (batches dividing
    n)."""
    X, y = regression_data
    lr, alpha, batch, epochs = 0.02, 0.5, X.shape[0], 8
    mlp = fit_first_epoch(
        _mlp(
            hidden_layer_sizes=(6,),
            learning_rate_init=lr,
            momentum=0.9,
            batch_size=batch,
            alpha=alpha,
        ),
        X,
        y,
    )
    onx = to_onnx(mlp, X[:1])
    skl = continue_mlp_training(mlp, X, y, max_iter=epochs)
    ort = OrtGradientForwardBackwardOptimizer(
        onx,
        mlp_weight_names(mlp),
        learning_rate=LearningRateSGDNesterov(eta0=lr / 2, momentum=0.9, nesterov=True),
        learning_penalty=ElasticLearningPenalty(
            l1=0, l2=alpha / batch, weights=mlp_coefficient_names(mlp)
        ),
        batch_size=batch,
        max_iter=epochs,
        random_state=0,
    ).fit(X, y)
    for name, value in mlp_onnx_weights(skl).items():
        np.testing.assert_allclose(ort.get_state()[name], value, rtol=1e-4, atol=1e-5)
    # our loss is twice scikit-learn's, penalty included
    np.testing.assert_allclose(ort.train_losses_, 2 * np.array(skl.loss_curve_), rtol=1e-4)


def test_classification_mapping_same_eta_and_l2_alpha_over_twice_batch():
    """For the log loss, eta0 = lr and l2 = alpha / (2 batch_size) give MLPClassifier's updates."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((90, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(np.int64) + (X[:, 2] > 0.5)
    lr, alpha, batch, epochs = 0.1, 0.3, X.shape[0], 6
    mlp = fit_first_epoch(
        MLPClassifier(
            hidden_layer_sizes=(5,),
            solver="sgd",
            learning_rate_init=lr,
            momentum=0.9,
            batch_size=batch,
            alpha=alpha,
            random_state=0,
        ),
        X,
        y,
    )
    raw = select_outputs(to_onnx(mlp, X[:1], options={"zipmap": False}), ["add_result1"])
    skl = continue_mlp_training(mlp, X, y, max_iter=epochs)
    ort = OrtGradientForwardBackwardOptimizer(
        raw,
        mlp_weight_names(mlp),
        learning_rate=LearningRateSGDNesterov(eta0=lr, momentum=0.9, nesterov=True),
        learning_loss=NegLogLearningLoss(probability_function="softmax"),
        learning_penalty=ElasticLearningPenalty(
            l1=0, l2=alpha / (2 * batch), weights=mlp_coefficient_names(mlp)
        ),
        batch_size=batch,
        max_iter=epochs,
        random_state=0,
    ).fit(X, one_hot(y, 3))
    for name, value in mlp_onnx_weights(skl).items():
        np.testing.assert_allclose(ort.get_state()[name], value, rtol=1e-4, atol=1e-5)
