"""Loss values against numpy, loss gradients against finite differences."""

import os
import tempfile

import numpy as np
import onnx
import onnxruntime
import pytest
from onnxruntime.training.api import CheckpointState, Module

from helpers import add_loss_output, get_train_initializer
from helpers.core.model_graphs.onnx_graph import replace_initializers
from helpers.whole_training.artifacts import generate_training_artifacts
from helpers.whole_training.loss_output import loss_metadata, remove_loss_output

#: On the training package's backend, whatever HELPERS_BACKEND says (tests/conftest.py leaves
#: the module out where the package is missing).
pytestmark = pytest.mark.training_package


def _loss(model, feeds):
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return float(sess.run(None, feeds)[0])


def _ort_gradient(onx_loss, feeds):
    """Gradient of the loss with respect to every float weight, from onnxruntime."""
    names = list(get_train_initializer(onx_loss))
    with tempfile.TemporaryDirectory() as folder:
        generate_training_artifacts(onx_loss, names, folder)
        state = CheckpointState.load_checkpoint(os.path.join(folder, "checkpoint"))
        module = Module(os.path.join(folder, "training_model.onnx"), state)
        module.train()
        module(*[feeds[n] for n in module.input_names()])
        return {n: state.parameters[n].grad for n in names}


def _numeric_gradient(onx_loss, feeds, eps=1e-3):
    """Central finite differences of the loss computed by onnxruntime.

    ``eps`` is below the smallest residual of the test batch, so that no
    difference crosses a kink of the absolute value.
    """
    weights = get_train_initializer(onx_loss)
    grads = {}
    for name, value in weights.items():
        grad = np.zeros(value.shape, dtype=np.float64)
        for idx in np.ndindex(value.shape):
            shifted = []
            for sign in (1, -1):
                w = value.astype(np.float64).copy()
                w[idx] += sign * eps
                shifted.append(_loss(replace_initializers(onx_loss, {name: w}), feeds))
            grad[idx] = (shifted[0] - shifted[1]) / (2 * eps)
        grads[name] = grad
    return grads


@pytest.fixture(scope="module")
def batch(linear_data):
    X, y = linear_data
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, 30).astype(np.float32)
    # rows 5+ : the model was fitted on the first 5, whose residuals are 0,
    # a kink of the absolute value
    return X[100:130], y[100:130].reshape(-1, 1), w


def _numpy_prediction(onx, X):
    inits = get_train_initializer(onx)
    return (X @ inits["coef"].reshape(-1, 1) + inits["intercept"]).astype(np.float64)


CASES = [
    ("squared_error", {}, lambda d: d**2),
    ("absolute_error", {}, np.abs),
    ("elastic", {"l1_weight": 0.1, "l2_weight": 0.9}, lambda d: 0.1 * np.abs(d) + 0.9 * d**2),
]


@pytest.mark.parametrize("score_name, kwargs, per_sample", CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_regression_loss_value(linear_onnx, batch, score_name, kwargs, per_sample, weighted):
    X, y, w = batch
    onx_loss = add_loss_output(
        linear_onnx, score_name=score_name, weight_name="weight" if weighted else None, **kwargs
    )
    onnx.checker.check_model(onx_loss)
    feeds = {"X": X, "label": y}
    losses = per_sample(_numpy_prediction(linear_onnx, X) - y).sum(axis=1)
    if weighted:
        feeds["weight"] = w
        losses = losses * w
    np.testing.assert_allclose(_loss(onx_loss, feeds), losses.mean(), rtol=1e-5)


def test_penalty_value_and_seed_call(linear_onnx, batch):
    X, y, w = batch
    # The call of the seeds, as written.
    onx_loss = add_loss_output(
        linear_onnx,
        weight_name="weight",
        score_name="elastic",
        l1_weight=0.1,
        l2_weight=0.9,
        penalty={"coef": {"l2": 0.01}},
    )
    d = _numpy_prediction(linear_onnx, X) - y
    coef = get_train_initializer(linear_onnx)["coef"].astype(np.float64)
    expected = ((0.1 * np.abs(d) + 0.9 * d**2).sum(axis=1) * w).mean() + 0.01 * (coef**2).sum()
    got = _loss(onx_loss, {"X": X, "label": y, "weight": w})
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_penalty_forms(linear_onnx, batch):
    X, y, _ = batch
    inits = {k: v.astype(np.float64) for k, v in get_train_initializer(linear_onnx).items()}
    base = _loss(add_loss_output(linear_onnx), {"X": X, "label": y})
    both = add_loss_output(linear_onnx, penalty={"coef": {"l1": 0.3, "l2": 0.2}, "intercept": 0.5})
    expected = (
        base
        + 0.3 * np.abs(inits["coef"]).sum()
        + 0.2 * (inits["coef"] ** 2).sum()
        + 0.5 * (inits["intercept"] ** 2).sum()
    )
    np.testing.assert_allclose(_loss(both, {"X": X, "label": y}), expected, rtol=1e-5)


def test_log_loss_value(make_logistic_onnx):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 3)).astype(np.float32)
    y = (rng.uniform(size=(40, 1)) > 0.5).astype(np.float32)
    onx = make_logistic_onnx(3)
    onx_loss = add_loss_output(onx, score_name="log", eps=1e-6)
    inits = get_train_initializer(onx)
    p = 1 / (1 + np.exp(-(X.astype(np.float64) @ inits["coef"] + inits["intercept"])))
    expected = -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()
    np.testing.assert_allclose(_loss(onx_loss, {"X": X, "label": y}), expected, rtol=1e-5)


GRADIENT_CASES = [
    ("squared_error", {}, None),
    ("absolute_error", {}, None),
    ("elastic", {"l1_weight": 0.3, "l2_weight": 0.7}, None),
    ("squared_error", {}, {"coef": {"l1": 0.2, "l2": 0.1}, "intercept": 0.3}),
    ("elastic", {"l1_weight": 0.1, "l2_weight": 0.9}, {"coef": {"l1": 0.05}}),
]


@pytest.mark.parametrize("score_name, kwargs, penalty", GRADIENT_CASES)
def test_gradient_matches_finite_differences(linear_onnx, batch, score_name, kwargs, penalty):
    """Catches a wrong sign in the L1 gradient (the seeds' bug), among others."""
    X, y, w = batch
    onx_loss = add_loss_output(
        linear_onnx, score_name=score_name, weight_name="weight", penalty=penalty, **kwargs
    )
    feeds = {"X": X, "label": y, "weight": w}
    ort_grad = _ort_gradient(onx_loss, feeds)
    num_grad = _numeric_gradient(onx_loss, feeds)
    for name in ort_grad:
        np.testing.assert_allclose(
            ort_grad[name].ravel(), num_grad[name].ravel(), rtol=2e-3, atol=2e-3, err_msg=name
        )


def test_log_loss_gradient_matches_finite_differences(make_logistic_onnx):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((25, 3)).astype(np.float32)
    y = (rng.uniform(size=(25, 1)) > 0.5).astype(np.float32)
    onx_loss = add_loss_output(make_logistic_onnx(3), score_name="log", penalty={"coef": 0.1})
    feeds = {"X": X, "label": y}
    ort_grad = _ort_gradient(onx_loss, feeds)
    num_grad = _numeric_gradient(onx_loss, feeds, eps=1e-3)
    for name in ort_grad:
        np.testing.assert_allclose(
            ort_grad[name].ravel(), num_grad[name].ravel(), rtol=5e-3, atol=1e-4
        )


def test_metadata_and_remove_loss_output(linear_onnx, batch):
    X, _, _ = batch
    onx_loss = add_loss_output(linear_onnx, weight_name="w", penalty={"coef": 0.1})
    record = loss_metadata(onx_loss)
    assert record["score_name"] == "squared_error"
    assert record["weight_name"] == "w"
    assert [o.name for o in onx_loss.graph.output] == ["loss"]
    restored = remove_loss_output(onx_loss)
    assert [i.name for i in restored.graph.input] == [i.name for i in linear_onnx.graph.input]
    assert [o.name for o in restored.graph.output] == ["variable"]
    assert len(restored.graph.node) == len(linear_onnx.graph.node)
    onnx.checker.check_model(restored)
    sess = onnxruntime.InferenceSession(
        restored.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(
        sess.run(None, {"X": X})[0], _numpy_prediction(linear_onnx, X), rtol=1e-5
    )
    with pytest.raises(ValueError, match="not made by add_loss_output"):
        remove_loss_output(linear_onnx)


def test_add_loss_output_errors(linear_onnx):
    with pytest.raises(ValueError, match="Unknown loss 'hinge'"):
        add_loss_output(linear_onnx, score_name="hinge")
    with pytest.raises(TypeError, match="l1_weight"):
        add_loss_output(linear_onnx, l1_weight=0.5)
    with pytest.raises(ValueError, match="'nope', which is not a float initializer"):
        add_loss_output(linear_onnx, penalty={"nope": 0.1})
    with pytest.raises(ValueError, match="'shape_tensor', which is not a float"):
        add_loss_output(linear_onnx, penalty={"shape_tensor": 0.1})
    with pytest.raises(ValueError, match="'l1' or 'l2'"):
        add_loss_output(linear_onnx, penalty={"coef": {"l3": 0.1}})
    with pytest.raises(ValueError, match="already used"):
        add_loss_output(linear_onnx, label_name="X")
    with pytest.raises(ValueError, match="output_index=3"):
        add_loss_output(linear_onnx, output_index=3)


def test_input_model_is_not_modified(linear_onnx):
    before = linear_onnx.SerializeToString()
    add_loss_output(linear_onnx, weight_name="weight", penalty={"coef": 0.1})
    assert linear_onnx.SerializeToString() == before
