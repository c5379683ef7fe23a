"""OrtGradientOptimizer refuses bad input by name: data, weight names, parameters, a model without
a loss or without trainable weights, an onnx newer than the runtime, predicting before fit."""

import numpy as np
import onnx
import pytest
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from helpers import OrtGradientOptimizer, add_loss_output
from helpers.core.machine import runtime


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda X, y: (X.astype(str), y), TypeError, "X has dtype <U.*numeric"),
        (lambda X, y: (X, y[:-1]), ValueError, "X has 300 rows but y has 299 rows"),
        (lambda X, y: (X[:, :3], y), ValueError, "X has 3 features, but the model expects 4"),
        (lambda X, y: (X[:, 0], y), ValueError, "2D array"),
        (lambda X, y: (np.where(X > 2, np.nan, X), y), ValueError, "X contains NaN or infinite"),
        (lambda X, y: (X, np.where(y > 3, np.inf, y)), ValueError, "y contains NaN or infinite"),
    ],
)
def test_bad_data(onx_loss, linear_data, change, error, match):
    X, y = change(*linear_data)
    with pytest.raises(error, match=match):
        OrtGradientOptimizer(onx_loss, max_iter=1).fit(X, y)


def test_model_without_trainable_weights(linear_data):
    X, y = linear_data
    onx = to_onnx(LinearRegression().fit(X, y), X[:1])  # one ai.onnx.ml node
    with pytest.raises(
        ValueError, match="no trainable float initializer.*LinearRegressor.*black_op"
    ):
        OrtGradientOptimizer(add_loss_output(onx), max_iter=1).fit(X, y)


@pytest.mark.parametrize(
    "weights, match",
    [(["nope"], "'nope' is not an initializer"), (["shape_tensor"], "INT64.*only float")],
)
def test_bad_weight_names(onx_loss, linear_data, weights, match):
    X, y = linear_data
    with pytest.raises(ValueError, match=match):
        OrtGradientOptimizer(onx_loss, weights, max_iter=1).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"solver": "lbfgs"}, "Unknown solver"),
        ({"learning_rate": -1.0}, "learning rate must be a float > 0"),
        ({"learning_rate_schedule": "adaptive"}, "Unknown learning-rate schedule"),
        ({"learning_rate_schedule": "optimal", "alpha": 0}, "needs alpha > 0"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1"),
        ({"max_iter": 2.5}, "max_iter must be an integer >= 1"),
        ({"solver": "momentum", "momentum": 1.5}, r"momentum must be in \(0, 1\)"),
        ({"device": "tpu"}, "Unknown device 'tpu'"),
    ],
)
def test_bad_parameters(onx_loss, linear_data, params, match):
    X, y = linear_data
    with pytest.raises(ValueError, match=match):
        OrtGradientOptimizer(onx_loss, **params).fit(X, y)


def test_model_without_loss(linear_onnx, linear_data):
    X, y = linear_data
    with pytest.raises(ValueError, match="not made by helpers.add_loss_output"):
        OrtGradientOptimizer(linear_onnx, max_iter=1).fit(X, y)


def test_not_fitted(onx_loss, linear_data):
    X, _ = linear_data
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="call fit"):
        OrtGradientOptimizer(onx_loss).predict(X)


@pytest.mark.training_package
def test_onnx_newer_than_runtime(onx_loss, linear_data, monkeypatch):
    """onnx 1.18+ stamps IR version 11, which onnxruntime 1.19.2 refuses."""
    X, y = linear_data
    runtime.max_ir_version.cache_clear()
    monkeypatch.setattr(onnx, "IR_VERSION", 11)
    try:
        with pytest.raises(runtime.RuntimeCompatibilityError, match="onnx==1.17.0"):
            OrtGradientOptimizer(onx_loss, max_iter=1).fit(X, y)
    finally:
        runtime.max_ir_version.cache_clear()


def test_model_ir_version_too_new(onx_loss, linear_data):
    X, y = linear_data
    model = onnx.ModelProto()
    model.CopyFrom(onx_loss)
    model.ir_version = runtime.max_ir_version() + 1
    with pytest.raises(runtime.RuntimeCompatibilityError, match="IR version"):
        OrtGradientOptimizer(model, max_iter=1).fit(X, y)
