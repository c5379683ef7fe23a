"""torch's activations train in onnxruntime as they train in torch.

Those onnxruntime 1.19.2 cannot differentiate are written in the training
graph with operators it can (:mod:`helpers.core.layers.activations`); the others
are checked as they are. Values and gradients are compared with torch's
autograd in float64 over a grid of inputs holding the kinks and large values
of both signs; then a network with each activation trains as in torch, step
by step, in both APIs and in OrtTorchModule.
"""

import copy

import numpy as np
import pytest
import torch
from conftest import make_seeded_optimizer
from torch import nn

from helpers import (
    OrtGradientForwardBackward,
    OrtTorchModule,
    export_for_training,
)
from helpers.core.machine.sessions import make_session
from helpers.core.model_graphs.training_graph import training_graph
from helpers.teaching.torch_reference import torch_fit


class _Functional(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


#: Activations and their options; the float options are float32 numbers, as ONNX attributes are.
ACTIVATIONS = {
    "elu": lambda: nn.ELU(),
    "elu_alpha": lambda: nn.ELU(alpha=0.5),
    "celu": lambda: nn.CELU(),
    "celu_alpha": lambda: nn.CELU(alpha=1.25),
    "selu": lambda: nn.SELU(),
    "softplus": lambda: nn.Softplus(),
    "softplus_beta": lambda: nn.Softplus(beta=2.0),
    "softplus_threshold": lambda: nn.Softplus(beta=2.0, threshold=5.0),
    "softplus_small_threshold": lambda: nn.Softplus(threshold=1.0),
    "mish": lambda: nn.Mish(),
    "hardswish": lambda: nn.Hardswish(),
    "hardsigmoid": lambda: nn.Hardsigmoid(),
    "relu6": lambda: nn.ReLU6(),
    "hardtanh": lambda: nn.Hardtanh(-0.5, 2.0),
    "relu6_functional": lambda: _Functional(nn.functional.relu6),
    "clamp": lambda: _Functional(lambda x: torch.clamp(x, -0.5, 2.0)),
    "leaky_relu": lambda: nn.LeakyReLU(0.125),
    "prelu": lambda: nn.PReLU(),
    "softsign": lambda: nn.Softsign(),
    "logsigmoid": lambda: nn.LogSigmoid(),
    "softmax": lambda: nn.Softmax(dim=1),
    "logsoftmax": lambda: nn.LogSoftmax(dim=1),
    "tanhshrink": lambda: nn.Tanhshrink(),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
}

#: Inputs: large values of both signs, the kinks (0, -3 and 3, 6, -0.5 and 2, 2.5 and 1 where the
#: thresholds are met).
GRID = np.array(
    [
        -1000,
        -100,
        -30,
        -20,
        -5,
        -3,
        -2.5,
        -1,
        -0.5,
        -1e-3,
        0,
        1e-3,
        0.5,
        1,
        2,
        2.5,
        3,
        5,
        6,
        20,
        30,
        100,
        1000,
    ],
    dtype=np.float64,
)


#: Activations whose gradient kernels onnxruntime 1.19.2 has in float32 only (checked in float32).
FLOAT32_ONLY = {"leaky_relu", "softmax", "logsoftmax"}

#: Absolute errors allowed in float64 besides the relative 1e-7: ONNX defines Celu for float32
#: only (the export casts around it), and HardSigmoid's slope is a float32 attribute, 1/6 rounded.
ABSOLUTE_ERROR = {"celu": 1e-7, "celu_alpha": 1e-7, "hardsigmoid": 3e-8}

#: Tolerances of float32 against torch's float64 (rtol, atol).
FLOAT32_TOLERANCE = (2e-6, 1e-6)


class _Shifted(nn.Module):
    """``activation(x + bias)``, or its weighted sum (a vector-Jacobian product), as float32."""

    def __init__(self, activation, summed, dtype):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(len(GRID), dtype=dtype))
        self.activation, self.summed = activation.to(dtype), summed
        weights = torch.linspace(-1.5, 2.0, len(GRID), dtype=dtype)
        self.register_buffer("weights", weights, persistent=False)

    def forward(self, x):
        y = self.activation(x + self.bias)
        return (y * self.weights).sum(dim=1).float() if self.summed else y


def _export(name, summed, dtype):
    torch.manual_seed(0)
    module = _Shifted(ACTIVATIONS[name](), summed, dtype)
    return module, export_for_training(module, torch.zeros(1, len(GRID), dtype=dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_values_and_gradients_match_torch(name, dtype):
    """onnxruntime in float32 and float64 against torch's autograd in float64."""
    if dtype == np.float64 and name in FLOAT32_ONLY:
        pytest.skip("onnxruntime 1.19.2 has no float64 kernel of this activation's gradient")
    grid = GRID.astype(dtype)[None]
    reference, _ = _export(name, summed=False, dtype=torch.float64)
    x = torch.from_numpy(grid.astype(np.float64)).requires_grad_(True)
    expected = reference(x)
    (expected * reference.weights).sum().backward()
    if dtype == np.float32:
        rtol, atol = FLOAT32_TOLERANCE
    else:
        rtol, atol = 1e-7, ABSOLUTE_ERROR.get(name, 1e-12)

    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    _, model = _export(name, summed=False, dtype=torch_dtype)
    # the training graph, and in float32 the exported model as onnxruntime runs it for inference
    for graph in [training_graph(model).model] + ([model] if dtype == np.float32 else []):
        (value,) = make_session(graph).run(["y"], {"x": grid})
        np.testing.assert_allclose(value, expected.detach().numpy(), rtol=rtol, atol=atol)

    _, summed = _export(name, summed=True, dtype=torch_dtype)
    if dtype == np.float64:  # onnxruntime runs Elu, Softplus... in float32 only: no inference
        summed = training_graph(summed).model
    fn = OrtGradientForwardBackward(summed, weights_to_train=["bias"]).new_instance()
    fn.forward([grid, np.zeros(len(GRID), dtype=dtype)], training=True)
    (gradient,) = fn.backward([np.ones(1, dtype=np.float32)])
    assert np.isfinite(gradient.numpy()).all()
    np.testing.assert_allclose(gradient.numpy(), x.grad.numpy()[0], rtol=rtol, atol=atol)


#: At 0.1, torch's own training of the Softplus and LogSoftmax networks rose or diverged.
N_SAMPLES, LEARNING_RATE = 24, 0.01


def _data(name):
    rng = np.random.default_rng(0)
    X = (3 * rng.standard_normal((N_SAMPLES, 6))).astype(np.float32)
    y = np.tanh(X[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(6, 8), ACTIVATIONS[name](), nn.Linear(8, 1))
    return module, X, y


def _optimizer(api, onx, batch_size, epochs, learning_rate):
    return make_seeded_optimizer(api, onx, epochs, batch_size, learning_rate)


def _assert_trains_as_torch(module, X, y, api, learning_rate=LEARNING_RATE):
    """Per-step losses and trained weights of ``api`` against torch.

    Full batches, or batches of 10 for OrtTorchModule.
    """
    trained = copy.deepcopy(module)
    batch_size, epochs = (10, 2) if api == "torch_module" else (len(X), 4)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", batch_size, epochs, learning_rate)
    if api == "torch_module":
        ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
        _, losses = torch_fit(ort_module, X, y, "squared_error", batch_size, epochs, learning_rate)
        state = {n: value.detach().numpy() for n, value in ort_module.module.named_parameters()}
    else:
        onx = export_for_training(module, torch.from_numpy(X[:2]))
        opt = _optimizer(api, onx, batch_size, epochs, learning_rate).fit(X, y)
        losses, state = opt.train_losses_, opt.get_state()
        with torch.no_grad():
            expected = trained(torch.from_numpy(X)).numpy()
        np.testing.assert_allclose(opt.predict(X).reshape(-1, 1), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-4, atol=1e-7)
    expected = dict(trained.named_parameters())
    assert sorted(state) == sorted(expected)
    for name, value in state.items():
        np.testing.assert_allclose(
            value, expected[name].detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name
        )


APIS = ["whole", "forward_backward", "torch_module"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_training_matches_torch(name, api):
    module, X, y = _data(name)
    _assert_trains_as_torch(module, X, y, api)
    _, torch_losses = torch_fit(
        copy.deepcopy(module), X, y, "squared_error", len(X), 4, LEARNING_RATE
    )
    assert torch_losses[-1] < torch_losses[0]  # it trained: agreeing on a divergence proves little


#: Activations and an input where their gradient has a kink (or a threshold).
KINKS = [
    ("elu_alpha", 0.0),
    ("celu_alpha", 0.0),
    ("selu", 0.0),
    ("prelu", 0.0),
    ("softplus", 0.0),
    ("softplus_threshold", 2.5),
    ("hardswish", -3.0),
    ("hardswish", 3.0),
    ("hardsigmoid", 3.0),
    ("relu6", 0.0),
    ("relu6", 6.0),
    ("relu6_functional", 6.0),
    ("hardtanh", 2.0),
    ("clamp", -0.5),
]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name, kink", KINKS)
def test_training_from_a_kink_matches_torch(name, kink, api):
    """The first layer starts with zero weights and a bias at the kink: every input is on it."""
    module, X, y = _data(name)
    with torch.no_grad():
        module[0].weight.zero_()
        module[0].bias.fill_(kink)
    # activations of 6 and more: small steps
    _assert_trains_as_torch(module, X, y, api, learning_rate=0.01)


def test_the_inference_model_keeps_the_original_operators():
    net = nn.Sequential(
        nn.Linear(3, 4), nn.ELU(), nn.Hardswish(), nn.PReLU(), nn.Softplus(), nn.Linear(4, 1)
    )
    model = export_for_training(net, torch.zeros(2, 3))
    X = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    opt = _optimizer("forward_backward", model, 4, 1, LEARNING_RATE).fit(X, X[:, :1])
    ops = {n.op_type for n in opt.get_trained_onnx().graph.node}
    assert {"Elu", "HardSwish", "PRelu", "Softplus"} <= ops


@pytest.mark.parametrize("api", APIS)
def test_channel_activations_after_a_convolution_train_as_torch(api):
    """PReLU with a slope per channel (shape (C, 1, 1) in ONNX), ELU, Hardswish, ReLU6 on images."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_SAMPLES, 1, 6, 6)).astype(np.float32)
    y = np.tanh(X[:, 0, :2, :2].sum(axis=(1, 2))[:, None]).astype(np.float32)
    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv2d(1, 3, 3),
        nn.PReLU(3),
        nn.Conv2d(3, 3, 1),
        nn.ELU(0.5),
        nn.Hardswish(),
        nn.ReLU6(),
        nn.Flatten(),
        nn.Linear(48, 1),
    )
    _assert_trains_as_torch(module, X, y, api)


#: Inputs on, near and past the bounds of ReLU6 and Hardtanh(-0.5, 2).
EDGES = np.array(
    [-1e30, -3.0, -0.5, -0.25, 0.0, 1e-30, 1.0, 2.0, 2.5, 5.999, 6.0, 6.5, 1e30, np.inf]
)


@pytest.mark.parametrize("name", ["relu6", "hardtanh"])
@pytest.mark.parametrize("fast_gradients", [True, False])
def test_hardtanh_forms_compute_torch_values(name, fast_gradients):
    """Both forms of the training graph: ``Clip`` inside the bounds (fast) and two ``Where``.

    The fast form's saturated values are one float32 unit inside the bound;
    everything else is torch's value exactly (-inf is left out: the ReLU
    rewrite gives NaN there, as its documentation says; NaN too: the
    ``Where`` form gives a bound, and inputs are checked for NaN before).
    """
    module = ACTIVATIONS[name]()
    x = torch.tensor(EDGES, dtype=torch.float32).reshape(-1, 1)
    model = training_graph(export_for_training(module, x), fast_gradients=fast_gradients).model
    ops = [n.op_type for n in model.graph.node]
    assert ("Clip" in ops) == fast_gradients
    session = make_session(model.SerializeToString())
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    expected = module(x).detach().numpy()
    ulp = np.spacing(np.abs(expected).astype(np.float32))
    assert np.all(np.abs(got - expected) <= (ulp if fast_gradients else 0))
    assert fast_gradients == (not np.array_equal(got, expected))  # the fast form is a ulp inside
