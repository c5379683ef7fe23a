"""Both backends side by side: the training package's and this package's gradients in standard
ONNX train to the same numbers, and each reads the other's checkpoints and pickles.

Both run in the training package's environment (its inference session runs the backend
``"onnx"`` too); ``make test``'s maintained run trains the backend ``"onnx"`` on onnxruntime 1.31.1
with every other test.
"""

import copy
import os
import pickle

import numpy as np
import pytest
import torch
from conftest import make_seeded_optimizer
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor
from test_layer_families import FAMILIES
from test_layer_families import _data as family_data

from benchmarks import example_models
from helpers import (
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    OrtTorchModule,
    add_loss_output,
    export_for_training,
)
from helpers.core.machine import backends
from helpers.core.machine.backends import BackendUnavailableError, resolve_backend
from helpers.core.machine.runtime import has_training_package

pytestmark = pytest.mark.skipif(
    not has_training_package(),
    reason="compares with the training package's backend, which needs onnxruntime-training",
)

BOTH = ("onnxruntime-training", "onnx")
APIS = ("whole", "forward_backward")
#: float32 rounding, accumulated over a few steps of different kernels (AdamW's, a fused MatMul)
RTOL = 2e-5


def _fits(api, onx, X, y, loss="squared_error", **params):
    """The fitted optimizers of both backends, same settings."""
    return [
        make_seeded_optimizer(api, onx, loss=loss, backend=backend, **params).fit(X, y)
        for backend in BOTH
    ]


def _assert_same(first, second, rtol=RTOL, atol=1e-6):
    assert first.backend_ == "onnxruntime-training" and second.backend_ == "onnx"
    np.testing.assert_allclose(second.train_losses_, first.train_losses_, rtol=rtol)
    for name, value in first.get_state().items():
        np.testing.assert_allclose(second.get_state()[name], value, rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 4)).astype(np.float32)
    y = (X @ np.array([1.5, -2.0, 0.5, 3.0]) + 0.7).astype(np.float32)
    return X, y


def test_the_seeds_call_forms_train_a_linear_regression_to_the_same_coefficients(regression):
    X, y = regression
    onx = to_onnx(LinearRegression().fit(X[:5], y[:5]), X[:1], black_op={"LinearRegressor"})
    whole = [
        OrtGradientOptimizer(
            add_loss_output(onx), max_iter=20, learning_rate=1e-2, random_state=0, backend=b
        ).fit(X, y)
        for b in BOTH
    ]
    forward_backward = [
        OrtGradientForwardBackwardOptimizer(
            onx,
            learning_loss="elastic",
            learning_penalty="elastic",
            max_iter=20,
            learning_rate=1e-2,
            random_state=0,
            backend=b,
        ).fit(X, y)
        for b in BOTH
    ]
    for first, second in (whole, forward_backward):
        _assert_same(first, second)
    # it learned the coefficients
    coef = whole[1].get_state()["coef"].ravel()
    np.testing.assert_allclose(coef, [1.5, -2.0, 0.5, 3.0], atol=0.05)


def test_the_seeds_call_forms_train_an_mlp_to_the_same_coefficients(regression):
    X, y = regression
    mlp = MLPRegressor(hidden_layer_sizes=(10,), max_iter=5, random_state=0).fit(X, y)
    onx = to_onnx(mlp, X[:1])
    first, second = (
        OrtGradientOptimizer(
            add_loss_output(onx), max_iter=10, learning_rate=1e-3, random_state=0, backend=b
        ).fit(X, y)
        for b in BOTH
    )
    _assert_same(first, second)
    first, second = (
        OrtGradientForwardBackwardOptimizer(
            onx, learning_loss="squared_error", max_iter=10, random_state=0, backend=b
        ).fit(X, y)
        for b in BOTH
    )
    _assert_same(first, second)


@pytest.mark.parametrize("solver", ["sgd", "momentum", "nesterov", "adamw"])
@pytest.mark.parametrize("api", APIS)
def test_every_update_rule_gives_the_same_steps(api, solver, regression):
    X, y = regression
    mlp = MLPRegressor(hidden_layer_sizes=(6,), max_iter=2, random_state=0).fit(X, y)
    onx = to_onnx(mlp, X[:1])
    settings = dict(epochs=3, batch_size=len(X), learning_rate=0.01, solver=solver)
    first, second = _fits(api, onx, X, y, **settings)
    _assert_same(first, second)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_layer_family_gives_the_same_steps(family, api):
    """One full batch an epoch: every step's loss compared."""
    module, X, y, n_classes = family_data(family)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    loss = "cross_entropy" if n_classes else "squared_error"
    first, second = _fits(api, onx, X, y, loss, epochs=4, batch_size=len(X), learning_rate=0.05)
    _assert_same(first, second)


def _zoo_data(name):
    _, shape, task = example_models.ZOO[name]
    torch.manual_seed(0)
    module = getattr(example_models, name)()
    rng = np.random.RandomState(0)
    if "token" in name:
        X = rng.randint(0, module.embedding.num_embeddings, size=[32, *shape]).astype(np.int64)
    else:
        X = rng.randn(32, *shape).astype(np.float32)
    with torch.no_grad():
        width = module(torch.from_numpy(X[:2])).shape[1]
    if task == "classification":
        return module, X, rng.randint(0, width, 32).astype(np.int64), "cross_entropy"
    return module, X, rng.randn(32, width).astype(np.float32), "squared_error"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", sorted(n for n in example_models.ZOO if n.endswith("_small")))
def test_every_zoo_model_gives_the_same_steps(name, api):
    module, X, y, loss = _zoo_data(name)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    first, second = _fits(api, onx, X, y, loss, epochs=3, batch_size=16, learning_rate=0.01)
    _assert_same(first, second, rtol=1e-4, atol=1e-5)


def test_ort_torch_module_gives_the_same_gradients_on_both_backends():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
    )
    x = torch.randn(16, 5)
    results = []
    for backend in BOTH:
        module = OrtTorchModule(copy.deepcopy(net), torch.zeros(2, 5), backend=backend)
        assert module.backend == backend
        inputs = x.clone().requires_grad_(True)
        module(inputs).square().mean().backward()
        results.append([inputs.grad, *(p.grad for p in module.parameters())])
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", ["sgd", "momentum", "adamw"])
@pytest.mark.parametrize("order", [BOTH, BOTH[::-1]])
def test_a_checkpoint_of_one_backend_continues_in_the_other(order, solver, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
    )
    onx = add_loss_output(export_for_training(net, torch.zeros(2, 5)))
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 5)).astype(np.float32)
    y = X.sum(axis=1).astype(np.float32)

    def make(backend, **params):
        settings = dict(max_iter=2, batch_size=16, learning_rate=0.01, solver=solver)
        settings.update(random_state=0, validation_every=0, backend=backend, **params)
        return OrtGradientOptimizer(onx, **settings)

    uninterrupted = make(order[0], max_iter=4).fit(X, y)
    path = os.fspath(tmp_path / "train.ckpt")
    make(order[0]).fit(X, y).save_checkpoint(path)
    resumed = make(order[1], warm_start=True).load_checkpoint(path).fit(X, y)
    np.testing.assert_allclose(resumed.train_losses_, uninterrupted.train_losses_, rtol=RTOL)
    unpickled = pickle.loads(pickle.dumps(make(order[0]).fit(X, y)))
    unpickled.set_params(backend=order[1], warm_start=True).fit(X, y)
    assert unpickled.backend_ == order[1]
    np.testing.assert_allclose(unpickled.train_losses_, uninterrupted.train_losses_, rtol=RTOL)


def test_a_backend_that_cannot_run_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(backends, "has_training_package", lambda: False)
    assert resolve_backend("auto") == "onnx"
    with pytest.raises(BackendUnavailableError, match="backend='onnx'.*make setup PYTHON"):
        resolve_backend("onnxruntime-training")
    with pytest.raises(ValueError, match="backend must be one of"):
        OrtGradientOptimizer(None, backend="torch")._prepare()


def test_the_environment_variable_chooses_what_auto_picks(monkeypatch):
    monkeypatch.setenv(backends.BACKEND_VARIABLE, "onnx")
    assert resolve_backend("auto") == "onnx"
    assert resolve_backend("onnxruntime-training") == "onnxruntime-training"  # asked by name
    monkeypatch.setenv(backends.BACKEND_VARIABLE, "tvm")
    with pytest.raises(ValueError, match="HELPERS_BACKEND='tvm' names no backend"):
        resolve_backend("auto")


class _AfterUnflattens(torch.nn.Module):
    """A batch normalization, a MatMul and a reduction over a negative axis after reshapes to
    computed shapes: their gradients need ranks that only a run on zeros finds (the fuzzer's
    seeds 116 and 165)."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(5)
        self.hidden = torch.nn.Linear(5, 6)
        self.head = torch.nn.Linear(6, 1)

    def forward(self, x):
        x = self.norm(x.unflatten(1, (5, 1, 1))).sum(dim=(2, 3))
        x = self.hidden(x).unflatten(1, (3, 2))
        return self.head((x - x.sum(dim=-1, keepdim=True)).flatten(1))


@pytest.mark.parametrize("api", APIS)
def test_values_whose_rank_only_a_run_finds_train_on_both_backends(api):
    """The forward/backward API's graphs take the weights as inputs: the run that finds the
    missing ranks gave them the batch's sizes, failed, and ``"onnx"`` refused the model."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 5)).astype(np.float32)
    y = rng.standard_normal((24, 1)).astype(np.float32)
    onx = export_for_training(_AfterUnflattens(), torch.from_numpy(X[:2]))
    first, second = _fits(api, onx, X, y, epochs=3, batch_size=len(X), learning_rate=0.05)
    _assert_same(first, second)
