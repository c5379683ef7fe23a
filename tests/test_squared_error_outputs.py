"""The squared error of a regression with k outputs is torch's MSELoss: the mean over every element.

It was the sum over the outputs of a sample, then the mean over the batch:
k times torch's ``MSELoss`` (and 2k times scikit-learn's squared loss). With
one output nothing changes; with three, both APIs and their losses and
gradients equal torch's ``mse_loss`` step by step.
"""

import copy

import numpy as np
import pytest
import torch
from conftest import APIS, make_seeded_optimizer
from onnx import TensorProto, helper
from torch import nn

from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import your_model as ym
from helpers import SquareLearningLoss, add_loss_output, export_for_training
from helpers.core.machine.devices import Device
from helpers.core.machine.sessions import make_session
from helpers.teaching.torch_reference import torch_fit

LEARNING_RATE = 0.05


def _data(k):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 5)).astype(np.float32)
    y = np.tanh(X[:, :k] + X[:, k : k + 1]).astype(np.float32)
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, k)), X, y


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_loss_and_gradient_equal_torch_mse_loss(k, weighted):
    rng = np.random.default_rng(1)
    y, p = rng.standard_normal((2, 8, k)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, 8).astype(np.float32) if weighted else np.ones(8, dtype=np.float32)
    pt = torch.from_numpy(p.astype(np.float64)).requires_grad_(True)
    yt = torch.from_numpy(y.astype(np.float64))
    per_element = nn.functional.mse_loss(pt, yt, reduction="none")
    expected = (per_element * torch.from_numpy(w.astype(np.float64))[:, None]).mean()
    expected.backward()

    loss = SquareLearningLoss()
    value, gradient = loss.loss_gradient(Device("cpu"), y, p, w if weighted else None)
    np.testing.assert_allclose(value.numpy(), expected.item(), rtol=1e-6)
    np.testing.assert_allclose(gradient.numpy(), pt.grad.numpy(), rtol=1e-6, atol=1e-8)

    # the whole-training loss graph of a model whose prediction is its input
    identity = helper.make_model(
        helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "identity",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, k])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    onx_loss = add_loss_output(identity, weight_name="w" if weighted else None)
    feeds = {"x": p, "label": y, **({"w": w} if weighted else {})}
    (whole,) = make_session(onx_loss).run(["loss"], feeds)
    np.testing.assert_allclose(whole, expected.item(), rtol=1e-6)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("k", [1, 3])
def test_training_with_k_outputs_matches_torch_mse_loss(k, api):
    module, X, y = _data(k)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", len(X), 4, LEARNING_RATE)
    opt = make_seeded_optimizer(api, onx, 4, len(X), LEARNING_RATE).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, torch_losses, rtol=1e-4)
    expected = dict(trained.named_parameters())
    for name, value in opt.get_state().items():
        np.testing.assert_allclose(value, expected[name].detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k", [1, 3])
def test_the_benchmarks_torch_fit_is_the_reference_loop_and_the_onnx_loss(k):
    """The benchmarks time the teaching loop; with k outputs its loss is both APIs' loss."""
    module, X, y = _data(k)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    common = dict(learning_rate=LEARNING_RATE, batch_size=8, random_state=0)
    benchmark = ym.torch_fit(lambda: copy.deepcopy(module), X, y, "regression", **common)(3)
    reference, _ = torch_fit(copy.deepcopy(module), X, y, "squared_error", 8, 3, LEARNING_RATE)
    assert benchmark == reference[-1]
    for name, make in fw.ort_makers(onx, "squared_error", **common).items():
        np.testing.assert_allclose(ym.ort_fit(make, X, y)(3), benchmark, rtol=1e-4, err_msg=name)
