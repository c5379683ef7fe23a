"""Every layer family a user brings trains in both APIs and in OrtTorchModule as it trains in torch.

Each model is written here, trained from the same initial weights on the
same batches with SGD in torch, in both optimizers and in OrtTorchModule:
the losses of every step agree within 1e-4 (relative), and so do the trained
weights and batch normalization's running statistics.
"""

import copy

import numpy as np
import pytest
import torch
from conftest import make_seeded_optimizer
from torch import nn

from helpers import (
    OrtTorchModule,
    UntrainableModelError,
    export_for_training,
)
from helpers.teaching.torch_reference import torch_fit

N_SAMPLES = 24
LEARNING_RATE = 0.05


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.outer = nn.Linear(6, 6), nn.Linear(6, 1)

    def forward(self, x):
        return self.outer(x + torch.tanh(self.inner(x)))


#: family -> (builder, sample shape, integer input, number of classes or None for a regression)
FAMILIES = {
    "linear_relu": (
        lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1)),
        (6,),
        False,
        None,
    ),
    "conv2d_maxpool": (
        lambda: nn.Sequential(
            nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(27, 1)
        ),
        (1, 8, 8),
        False,
        None,
    ),
    "conv2d_avgpool_adaptive": (
        lambda: nn.Sequential(
            nn.Conv2d(1, 3, 3),
            nn.AvgPool2d(2),
            nn.Tanh(),
            nn.Conv2d(3, 4, 1),
            nn.AdaptiveAvgPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, 1),
        ),
        (1, 10, 10),
        False,
        None,
    ),
    "conv1d_silu": (
        lambda: nn.Sequential(
            nn.Conv1d(4, 6, 3),
            nn.SiLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(6, 6, 3),
            nn.AvgPool1d(2),
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
            nn.Linear(6, 1),
        ),
        (4, 16),
        False,
        None,
    ),
    "conv1d_depthwise": (
        lambda: nn.Sequential(
            nn.Conv1d(4, 8, 1),
            nn.Conv1d(8, 8, 3, padding=1, groups=8),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(8 * 12, 1),
        ),
        (4, 12),
        False,
        None,
    ),
    "layernorm_gelu": (
        lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 1)),
        (6,),
        False,
        None,
    ),
    "batchnorm1d_sigmoid": (
        lambda: nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Sigmoid(), nn.Linear(8, 1)),
        (6,),
        False,
        None,
    ),
    "batchnorm2d_conv": (
        lambda: nn.Sequential(
            nn.Conv2d(1, 3, 3),
            nn.BatchNorm2d(3, momentum=0.2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3 * 36, 1),
        ),
        (1, 8, 8),
        False,
        None,
    ),
    "residual_tanh": (Residual, (6,), False, None),
    "embedding_classifier": (
        lambda: nn.Sequential(nn.Embedding(20, 4), nn.Flatten(), nn.Linear(20, 7)),
        (5,),
        True,
        7,
    ),
}


def _data(family):
    build, shape, ids, n_classes = FAMILIES[family]
    rng = np.random.default_rng(0)
    if ids:
        X = rng.integers(0, 20, (N_SAMPLES, *shape)).astype(np.int64)
    else:
        X = rng.standard_normal((N_SAMPLES, *shape)).astype(np.float32)
    if n_classes:
        y = rng.integers(0, n_classes, N_SAMPLES)
    else:
        y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    torch.manual_seed(0)
    module = build()
    return module, X, y, n_classes


def _torch_training(module, X, y, n_classes, batch_size, epochs):
    """SGD in torch on the batches the optimizers draw; per-step losses and the trained module."""
    loss = "cross_entropy" if n_classes else "squared_error"
    _, steps = torch_fit(module, X, y, loss, batch_size, epochs, LEARNING_RATE)
    return steps, module


def _optimizer(api, onx, n_classes, batch_size, epochs):
    loss = "cross_entropy" if n_classes else "squared_error"
    return make_seeded_optimizer(api, onx, epochs, batch_size, LEARNING_RATE, loss)


def _epoch_means(step_losses, n, batch_size):
    sizes = [min(batch_size, n - start) for start in range(0, n, batch_size)]
    steps = len(sizes)
    return [
        sum(loss * size for loss, size in zip(step_losses[e * steps : (e + 1) * steps], sizes)) / n
        for e in range(len(step_losses) // steps)
    ]


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_step_matches_torch(family, api):
    """Full batches: one step an epoch, so every step's loss is compared."""
    module, X, y, n_classes = _data(family)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    torch_losses, trained = _torch_training(copy.deepcopy(module), X, y, n_classes, len(X), 4)
    opt = _optimizer(api, onx, n_classes, len(X), 4).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, torch_losses, rtol=1e-4, atol=1e-7)
    assert torch_losses[-1] < torch_losses[0]  # it trained
    expected = dict(trained.named_parameters())
    for name, value in opt.get_state().items():
        np.testing.assert_allclose(value, expected[name].detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
@pytest.mark.parametrize(
    "family", ["batchnorm1d_sigmoid", "batchnorm2d_conv", "conv2d_avgpool_adaptive"]
)
def test_minibatches_and_running_statistics_match_torch(family, api):
    """Minibatches of 10, 10 and 4 rows, three epochs: losses, weights, running statistics,
    predictions."""
    module, X, y, n_classes = _data(family)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    torch_losses, trained = _torch_training(copy.deepcopy(module), X, y, n_classes, 10, 3)
    opt = _optimizer(api, onx, n_classes, 10, 3).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, _epoch_means(torch_losses, len(X), 10), rtol=1e-4)
    buffers = dict(trained.named_buffers())
    statistics = opt.get_running_statistics()
    assert sorted(statistics) == sorted(n for n in buffers if "running" in n)
    for name, value in statistics.items():
        np.testing.assert_allclose(value, buffers[name].numpy(), rtol=1e-5, atol=1e-6)
    trained.eval()
    with torch.no_grad():
        expected = trained(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(
        opt.predict(X).reshape(expected.shape), expected, rtol=1e-4, atol=1e-5
    )
    exported = opt.get_trained_onnx()
    assert (
        "BatchNormalization" in {n.op_type for n in exported.graph.node}
        or "batchnorm" not in family
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ort_torch_module_trains_as_torch(family):
    module, X, y, n_classes = _data(family)
    torch_losses, trained = _torch_training(copy.deepcopy(module), X, y, n_classes, 10, 2)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    ort_losses, _ = _torch_training(ort_module, X, y, n_classes, 10, 2)
    np.testing.assert_allclose(ort_losses, torch_losses, rtol=1e-4, atol=1e-7)
    for (name, expected), (_, value) in zip(
        trained.named_buffers(), ort_module.module.named_buffers()
    ):
        np.testing.assert_allclose(
            value.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )
    trained.eval()
    ort_module.eval()
    with torch.no_grad():
        np.testing.assert_allclose(
            ort_module(torch.from_numpy(X)).numpy(),
            trained(torch.from_numpy(X)).numpy(),
            rtol=1e-4,
            atol=1e-5,
        )


def test_dropout_trains_and_predicts_without_dropping():
    """Random masks differ between torch and onnxruntime: dropout is checked by what it does, not
    step by step."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    y = np.tanh(X[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    for api in ("whole", "forward_backward"):
        opt = _optimizer(api, onx, None, 16, 20).fit(X, y)
        assert opt.train_losses_[-1] < 0.7 * opt.train_losses_[0]
        np.testing.assert_array_equal(opt.predict(X), opt.predict(X))  # no random mask at inference
        ops = {n.op_type for n in opt.get_trained_onnx().graph.node}
        assert "Dropout" not in ops


class _Rounding(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.last = nn.Linear(6, 4), nn.Linear(4, 1)

    def forward(self, x):
        return self.last(torch.round(self.first(x)))


@pytest.mark.training_package
def test_an_operator_without_gradient_is_named_everywhere():
    X = np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32)
    y = X[:, :1]
    module = _Rounding()
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    for api in ("whole", "forward_backward"):
        with pytest.raises(UntrainableModelError, match=r"no gradient for Round .*node '/Round'"):
            _optimizer(api, onx, None, 4, 1).fit(X, y)
    ort_module = OrtTorchModule(module, torch.from_numpy(X[:2]))
    with pytest.raises(UntrainableModelError, match="no gradient for Round"):
        ort_module(torch.from_numpy(X)).sum().backward()


class _CumulativeSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.last = nn.Linear(6, 4), nn.Linear(4, 1)

    def forward(self, x):
        return self.last(torch.cumsum(self.first(x), dim=1))


def test_an_operator_without_gradient_in_standard_onnx_is_named_by_every_api():
    """The backend 'onnx' refuses an operator its gradient builder lacks with the error type of
    the training package's, naming the operator, its layer and the fix."""
    X = np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32)
    module = _CumulativeSum()
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    expected = r"backend='onnx' cannot train this model: CumSum \(from the layer .*weights_to_train"
    for api in ("whole", "forward_backward"):
        optimizer = _optimizer(api, onx, None, 4, 1).set_params(backend="onnx")
        with pytest.raises(UntrainableModelError, match=expected):
            optimizer.fit(X, X[:, :1])
    ort_module = OrtTorchModule(module, torch.from_numpy(X[:2]), backend="onnx")
    with pytest.raises(UntrainableModelError, match=expected):
        ort_module(torch.from_numpy(X)).sum().backward()


def test_running_statistics_are_not_weights():
    from helpers import get_train_initializer

    module = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    onx = export_for_training(module, torch.zeros(2, 3))
    assert "1.running_mean" not in get_train_initializer(onx)
    with pytest.raises(ValueError, match="running statistic of a BatchNormalization node"):
        _optimizer("forward_backward", onx, None, 4, 1).set_params(
            weights_to_train=["1.running_mean"]
        ).fit(np.ones((4, 3), dtype=np.float32), np.ones((4, 4), dtype=np.float32))
