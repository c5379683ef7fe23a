"""Whole models: the step whose gradients this project writes (``gradient_builder="onnx"``) gives
the losses of the step whose gradients onnxruntime-training 1.19.2 writes, step by step, on
every small model of the zoo and on scikit-learn models converted by skl2onnx (both run on
1.19.2's ``InferenceSession``, same weights, same batches)."""

import numpy as np
import onnxruntime
import pytest
import torch
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPClassifier, MLPRegressor
from test_portable_zoo import SMALL, _data

from benchmarks import example_models
from benchmarks.workloads import frameworks
from helpers import (
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
    export_for_training,
    select_outputs,
)
from helpers.portable.step_format import initial_state, read_record

BUILDERS = ("onnxruntime-training", "onnx")
STEPS, BATCH = 4, 16
#: float32 rounding of a few steps: both graphs sum the same products in other orders
RTOL = 2e-5


def _losses(step, batches):
    """The loss of each step of ``step`` (a model) over ``batches`` (feeds), from its state."""
    record = read_record(step)
    session = onnxruntime.InferenceSession(
        step.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    state, losses = initial_state(step), []
    for number, feeds in enumerate(batches, start=1):
        loss, *after = session.run(None, {**feeds, "step": np.array(number), **state})
        state = dict(zip(record.state, after))
        losses.append(float(loss))
    return np.array(losses), state


def _both(make_optimizer, batches):
    """Each builder's losses and final state for the optimizer ``make_optimizer()`` makes."""
    return {
        builder: _losses(make_optimizer().export_training_step(gradient_builder=builder), batches)
        for builder in BUILDERS
    }


def _assert_same(results):
    (a, state_a), (b, state_b) = results.values()
    np.testing.assert_allclose(b, a, rtol=RTOL)
    for name, value in state_a.items():
        # 1e-6: a bias before a batch normalization has a true gradient of 0, its buffer holds
        # rounding noise of the two graphs (about 1e-8)
        bound = 1e-4 * float(np.abs(value).max()) + 1e-6
        assert float(np.abs(state_b[name] - value).max()) <= bound, name


@pytest.mark.training_package
@pytest.mark.parametrize("name", SMALL)
def test_the_zoo_steps_of_both_builders_agree(name):
    torch.manual_seed(0)
    module = getattr(example_models, name)()
    X, y, task = _data(name, module)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    loss = frameworks.LOSSES[task][0]
    if task == "classification":
        y = np.eye(int(module(torch.from_numpy(X[:1])).shape[1]), dtype=np.float32)[y]
    batches = [{"x": X[s : s + BATCH], "label": y[s : s + BATCH]} for s in range(0, 48, BATCH)]
    inputs = [i.name for i in onx.graph.input]
    batches = [{inputs[0]: b["x"], "label": b["label"]} for b in batches][:STEPS]

    def make():
        return OrtGradientOptimizer(
            add_loss_output(onx, score_name=loss),
            learning_rate=0.01,
            solver="momentum",
            random_state=0,
            validation_every=0,
        )

    _assert_same(_both(make, batches))


def _regression(rows=48, features=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features)).astype(np.float32)
    return X, (X @ rng.standard_normal((features, 1))).astype(np.float32)


def _sklearn_model(kind, X, y):
    if kind == "linear":
        fitted = LinearRegression().fit(X, y.ravel())
        return to_onnx(fitted, X[:1], black_op={"LinearRegressor"}, target_opset=17)
    if kind == "mlp_regressor":
        fitted = MLPRegressor(hidden_layer_sizes=(6,), max_iter=5, random_state=0).fit(X, y.ravel())
        return to_onnx(fitted, X[:1], target_opset=17)
    fitted = MLPClassifier(hidden_layer_sizes=(6,), max_iter=5, random_state=0).fit(
        X, (y.ravel() > 0).astype(int)
    )
    onx = to_onnx(fitted, X[:1], target_opset=17, options={"zipmap": False})
    raw = [n.input[0] for n in onx.graph.node if n.op_type in ("Softmax", "Sigmoid")][-1]
    return select_outputs(onx, [raw])


@pytest.mark.training_package
@pytest.mark.parametrize("kind", ["linear", "mlp_regressor", "mlp_classifier"])
@pytest.mark.parametrize("api", ["whole", "forward_backward"])
def test_converted_scikit_learn_models_agree(kind, api):
    X, y = _regression()
    onx = _sklearn_model(kind, X, y)
    label = y
    if kind == "mlp_classifier":
        label = (y > 0).astype(np.float32)
    feeds = [{"X": X[s : s + BATCH], "label": label[s : s + BATCH]} for s in range(0, 48, BATCH)]
    if api == "forward_backward":
        feeds = [{**f, "sample_weight": np.ones(len(f["X"]), np.float32)} for f in feeds]

    def make():
        common = dict(learning_rate=0.05, solver="nesterov", random_state=0, validation_every=0)
        if api == "whole":
            return OrtGradientOptimizer(add_loss_output(onx), **common)
        return OrtGradientForwardBackwardOptimizer(onx, learning_loss="squared_error", **common)

    _assert_same(_both(make, feeds))
