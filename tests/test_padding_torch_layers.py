"""Padding and pooling options of torch's convolutions and poolings train and predict as in torch.

Each layer follows a trained 1 x 1 convolution, so that the gradient goes
through its padding. The runtime's gradients (forward/backward API and
OrtTorchModule) are compared with torch's autograd in float64; training in
the three paths with torch's SGD on the same batches, step by step; the
exported model and ``predict`` with torch's output. Models written with onnx
(``auto_pad``, ``Pad`` with ``axes``) are in ``test_padding_onnx_models.py``.
"""

import copy

import numpy as np
import onnxruntime
import pytest
import torch
from conftest import APIS, make_seeded_optimizer
from torch import nn

from helpers import OrtGradientForwardBackward, OrtTorchModule, export_for_training
from helpers.teaching.torch_reference import torch_fit

pytestmark = pytest.mark.filterwarnings(
    "ignore:Constant folding:UserWarning", "ignore:Using padding='same':UserWarning"
)

N_SAMPLES = 10
LEARNING_RATE = 0.01

#: name -> (layer after a 1 x 1 convolution of 2 channels, spatial shape of the input)
LAYERS = {
    # padding of a convolution: int, tuple, 'same' (odd, even, dilated kernels), 'valid'
    "conv2d_int": (lambda: nn.Conv2d(2, 3, 3, padding=1), (6, 7)),
    "conv2d_tuple_stride": (lambda: nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2)), (7, 6)),
    "conv2d_int_dilation": (lambda: nn.Conv2d(2, 3, 3, padding=2, dilation=2, stride=2), (7, 8)),
    "conv2d_same_odd": (lambda: nn.Conv2d(2, 7, 5, padding="same"), (6, 8)),
    "conv2d_same_even": (lambda: nn.Conv2d(2, 3, (4, 2), padding="same"), (6, 7)),
    "conv2d_same_dilation": (
        lambda: nn.Conv2d(2, 3, (2, 3), padding="same", dilation=(3, 2)),
        (7, 8),
    ),
    "conv2d_valid": (lambda: nn.Conv2d(2, 3, 3, padding="valid", stride=2), (7, 8)),
    "conv1d_same_even": (lambda: nn.Conv1d(2, 3, 4, padding="same"), (9,)),
    "conv1d_same_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="same", dilation=3), (9,)),
    "conv1d_valid_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="valid", dilation=2), (9,)),
    "conv1d_depthwise_same": (lambda: nn.Conv1d(2, 2, 4, padding="same", groups=2), (9,)),
    # padding modes
    "conv2d_reflect": (lambda: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (5, 6)),
    "conv2d_replicate_stride": (
        lambda: nn.Conv2d(2, 3, 3, stride=2, padding=2, padding_mode="replicate"),
        (5, 6),
    ),
    "conv2d_circular": (
        lambda: nn.Conv2d(2, 3, 3, padding=(2, 1), padding_mode="circular"),
        (5, 6),
    ),
    "conv2d_reflect_same": (
        lambda: nn.Conv2d(2, 3, 4, padding="same", padding_mode="reflect"),
        (5, 6),
    ),
    "conv1d_reflect": (lambda: nn.Conv1d(2, 3, 5, padding=3, padding_mode="reflect"), (8,)),
    "conv1d_replicate_same": (
        lambda: nn.Conv1d(2, 3, 4, padding="same", padding_mode="replicate"),
        (8,),
    ),
    "conv1d_circular": (lambda: nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"), (8,)),
    "reflection_pad2d": (lambda: nn.ReflectionPad2d((1, 2, 0, 3)), (5, 6)),
    "replication_pad1d": (lambda: nn.ReplicationPad1d((3, 1)), (6,)),
    # poolings: ceil_mode, count_include_pad, padding, stride, dilation
    "maxpool2d_ceil_short_kernel": (lambda: nn.MaxPool2d(1, stride=2, ceil_mode=True), (6, 8)),
    "maxpool2d_ceil_padding": (
        lambda: nn.MaxPool2d(2, stride=3, padding=1, ceil_mode=True),
        (7, 9),
    ),
    "maxpool2d_ceil_dilation": (
        lambda: nn.MaxPool2d(2, stride=4, padding=1, dilation=2, ceil_mode=True),
        (6, 7),
    ),
    # torch's last window needs an end pad as large as the kernel, which onnxruntime refuses
    "maxpool2d_ceil_end_pad_past_kernel": (
        lambda: nn.MaxPool2d(2, stride=3, padding=1, dilation=2, ceil_mode=True),
        (8, 9),
    ),
    "maxpool2d_ceil_unchanged": (
        lambda: nn.MaxPool2d(2, stride=2, dilation=2, ceil_mode=True),
        (7, 8),
    ),
    "maxpool1d_ceil": (lambda: nn.MaxPool1d(1, stride=3, ceil_mode=True), (8,)),
    # sizes shape inference loses (pads computed by nodes, GroupNorm's reshape): found by a run
    "maxpool2d_ceil_after_reflect": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 4, 3, padding="same", padding_mode="reflect"),
            nn.GroupNorm(2, 4),
            nn.MaxPool2d(2, ceil_mode=True),
        ),
        (7, 9),
    ),
    "avgpool2d_ceil": (lambda: nn.AvgPool2d(2, stride=2, ceil_mode=True), (7, 9)),
    "avgpool2d_ceil_padding": (
        lambda: nn.AvgPool2d(3, stride=3, padding=1, ceil_mode=True),
        (7, 9),
    ),
    "avgpool2d_ceil_padding_excluded": (
        lambda: nn.AvgPool2d((3, 2), (2, 3), 1, ceil_mode=True, count_include_pad=False),
        (7, 9),
    ),
    "avgpool2d_padding_excluded": (
        lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (6, 7),
    ),
    "avgpool2d_short_kernel_ceil": (lambda: nn.AvgPool2d(1, stride=3, ceil_mode=True), (7, 8)),
    "avgpool1d_ceil_padding": (
        lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True),
        (9,),
    ),
    "avgpool1d_ceil_padding_excluded": (
        lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
        (9,),
    ),
    "avgpool1d_padding_excluded": (
        lambda: nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False),
        (8,),
    ),
}

#: The layers trained in the three paths (all have their gradients checked).
TRAINED = [
    "conv2d_same_odd",
    "conv1d_same_dilation",
    "conv2d_reflect",
    "conv1d_replicate_same",
    "conv2d_circular",
    "maxpool2d_ceil_short_kernel",
    "avgpool2d_ceil_padding",
    "avgpool1d_ceil_padding_excluded",
    "maxpool2d_ceil_after_reflect",
]


def _network(name, first=False):
    """The layer (after a trained 1 x 1 convolution unless ``first``), then a linear layer."""
    build, spatial = LAYERS[name]
    torch.manual_seed(0)
    conv = nn.Conv1d(1, 2, 1) if len(spatial) == 1 else nn.Conv2d(1, 2, 1)
    features = nn.Sequential(build()) if first else nn.Sequential(conv, build())
    shape = (2 if first else 1, *spatial)
    with torch.no_grad():
        size = features(torch.zeros(1, *shape)).numel()
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(size, 1)), shape


def _data(shape):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_SAMPLES, *shape)).astype(np.float32)
    y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    return X, y


def _close(got, expected, name, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradients_equal_torch(name):
    """The gradients of the forward/backward API and of OrtTorchModule are torch's (float64)."""
    module, shape = _network(name)
    X, _ = _data(shape)
    grad_out = np.random.default_rng(1).standard_normal((N_SAMPLES, 1)).astype(np.float32)
    reference = copy.deepcopy(module).double()
    reference(torch.from_numpy(X).double()).backward(torch.from_numpy(grad_out).double())
    expected = {weight: p.grad.numpy() for weight, p in reference.named_parameters()}
    function = OrtGradientForwardBackward(export_for_training(module, torch.from_numpy(X[:2])))
    function = function.new_instance()
    names = function.parent.weights_to_train
    parameters = dict(module.named_parameters())
    function.forward([X, *[parameters[n].detach().numpy() for n in names]], training=True)
    for weight, gradient in zip(names, function.backward([grad_out])):
        _close(gradient.numpy(), expected[weight], weight)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    ort_module(torch.from_numpy(X)).backward(torch.from_numpy(grad_out))
    for weight, parameter in ort_module.module.named_parameters():
        _close(parameter.grad.numpy(), expected[weight], weight)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_exported_model_computes_what_torch_computes(name):
    module, shape = _network(name)
    X, _ = _data(shape)
    layers = module[:2]  # the output of the layer itself, before the linear layer
    onx = export_for_training(layers, torch.from_numpy(X[:2]))
    session = onnxruntime.InferenceSession(
        onx.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    with torch.no_grad():
        expected = layers(torch.from_numpy(X)).numpy()
    _close(session.run(None, {"x": X})[0], expected, name, rtol=1e-5, atol=1e-6)


def _optimizer(api, onx, batch_size, epochs):
    return make_seeded_optimizer(api, onx, epochs, batch_size, LEARNING_RATE)


@pytest.mark.parametrize("api", [*APIS, "torch_module"])
@pytest.mark.parametrize("name", TRAINED)
def test_training_steps_weights_and_predictions_match_torch(name, api):
    """Full batches, three epochs: every step's loss, the trained weights and the predictions."""
    module, shape = _network(name)
    X, y = _data(shape)
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", N_SAMPLES, 3, LEARNING_RATE)
    with torch.no_grad():
        expected = trained(torch.from_numpy(X)).numpy()
    if api == "torch_module":
        ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
        _, losses = torch_fit(ort_module, X, y, "squared_error", N_SAMPLES, 3, LEARNING_RATE)
        weights = {k: v.detach().numpy() for k, v in ort_module.module.named_parameters()}
        predicted = ort_module(torch.from_numpy(X)).detach().numpy()
    else:
        onx = export_for_training(module, torch.from_numpy(X[:2]))
        opt = _optimizer(api, onx, N_SAMPLES, 3).fit(X, y)
        losses, weights, predicted = opt.train_losses_, opt.get_state(), opt.predict(X)
    _close(losses, torch_losses, "losses", atol=1e-7)
    assert torch_losses[-1] < torch_losses[0]  # it trained
    for weight, value in trained.named_parameters():
        _close(weights[weight], value.detach().numpy(), weight)
    _close(np.reshape(predicted, expected.shape), expected, "predictions")


@pytest.mark.parametrize(
    "name", ["conv2d_reflect", "conv1d_replicate_same", "avgpool2d_ceil_padding_excluded"]
)
def test_input_gradients_of_ort_torch_module_equal_torch(name):
    """The layer first: OrtTorchModule's gradient of an input that requires one is torch's."""
    module, shape = _network(name, first=True)
    X, _ = _data(shape)
    grad_out = np.random.default_rng(1).standard_normal((N_SAMPLES, 1)).astype(np.float32)
    reference = torch.from_numpy(X).double().requires_grad_(True)
    copy.deepcopy(module).double()(reference).backward(torch.from_numpy(grad_out).double())
    x = torch.from_numpy(X).requires_grad_(True)
    OrtTorchModule(module, torch.from_numpy(X[:2]))(x).backward(torch.from_numpy(grad_out))
    _close(x.grad.numpy(), reference.grad.numpy(), "x")
