"""Padding and pooling options of torch's convolutions and poolings train and predict as in torch.

Each layer follows a trained 1 x 1 convolution, so that the gradient goes
through its padding. The runtime's gradients (forward/backward API and
OrtTorchModule) are compared with torch's autograd in float64; training in
the three paths with torch's SGD on the same batches, step by step; the
exported model and ``predict`` with torch's output.
"""
import copy

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnx import TensorProto, helper
from torch import nn

from helpers import (
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    OrtTorchModule,
    UntrainableModelError,
    add_loss_output,
)
from helpers.core.padding import explicit_pads, non_constant_pads_as_gathers
from helpers.core.pooling import average_pools_as_convolutions, pools_as_torch_computes_them
from helpers.core.torch_export import export_for_training
from helpers.core.training_graph import training_graph
from helpers.teaching.torch_reference import torch_fit

N_SAMPLES = 10
LEARNING_RATE = 0.01

#: name -> (layer after a 1 x 1 convolution of 2 channels, spatial shape of the input)
LAYERS = {
    # padding of a convolution: int, tuple, 'same' (odd, even, dilated kernels), 'valid', with stride and dilation
    "conv2d_int": (lambda: nn.Conv2d(2, 3, 3, padding=1), (6, 7)),
    "conv2d_tuple_stride": (lambda: nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2)), (7, 6)),
    "conv2d_int_dilation": (lambda: nn.Conv2d(2, 3, 3, padding=2, dilation=2, stride=2), (7, 8)),
    "conv2d_same_odd": (lambda: nn.Conv2d(2, 7, 5, padding="same"), (6, 8)),
    "conv2d_same_even": (lambda: nn.Conv2d(2, 3, (4, 2), padding="same"), (6, 7)),
    "conv2d_same_dilation": (lambda: nn.Conv2d(2, 3, (2, 3), padding="same", dilation=(3, 2)), (7, 8)),
    "conv2d_valid": (lambda: nn.Conv2d(2, 3, 3, padding="valid", stride=2), (7, 8)),
    "conv1d_same_even": (lambda: nn.Conv1d(2, 3, 4, padding="same"), (9,)),
    "conv1d_same_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="same", dilation=3), (9,)),
    "conv1d_valid_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="valid", dilation=2), (9,)),
    "conv1d_depthwise_same": (lambda: nn.Conv1d(2, 2, 4, padding="same", groups=2), (9,)),
    # padding modes
    "conv2d_reflect": (lambda: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (5, 6)),
    "conv2d_replicate_stride": (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=2, padding_mode="replicate"), (5, 6)),
    "conv2d_circular": (lambda: nn.Conv2d(2, 3, 3, padding=(2, 1), padding_mode="circular"), (5, 6)),
    "conv2d_reflect_same": (lambda: nn.Conv2d(2, 3, 4, padding="same", padding_mode="reflect"), (5, 6)),
    "conv1d_reflect": (lambda: nn.Conv1d(2, 3, 5, padding=3, padding_mode="reflect"), (8,)),
    "conv1d_replicate_same": (lambda: nn.Conv1d(2, 3, 4, padding="same", padding_mode="replicate"), (8,)),
    "conv1d_circular": (lambda: nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"), (8,)),
    "reflection_pad2d": (lambda: nn.ReflectionPad2d((1, 2, 0, 3)), (5, 6)),
    "replication_pad1d": (lambda: nn.ReplicationPad1d((3, 1)), (6,)),
    # poolings: ceil_mode, count_include_pad, padding, stride, dilation
    "maxpool2d_ceil_short_kernel": (lambda: nn.MaxPool2d(1, stride=2, ceil_mode=True), (6, 8)),
    "maxpool2d_ceil_padding": (lambda: nn.MaxPool2d(2, stride=3, padding=1, ceil_mode=True), (7, 9)),
    "maxpool2d_ceil_dilation": (lambda: nn.MaxPool2d(2, stride=2, dilation=2, ceil_mode=True), (7, 8)),
    "maxpool1d_ceil": (lambda: nn.MaxPool1d(2, stride=3, ceil_mode=True), (8,)),
    "avgpool2d_ceil": (lambda: nn.AvgPool2d(2, stride=2, ceil_mode=True), (7, 9)),
    "avgpool2d_ceil_padding": (lambda: nn.AvgPool2d(3, stride=3, padding=1, ceil_mode=True), (7, 9)),
    "avgpool2d_ceil_padding_excluded": (
        lambda: nn.AvgPool2d((3, 2), stride=(2, 3), padding=1, ceil_mode=True, count_include_pad=False), (7, 9),
    ),
    "avgpool2d_padding_excluded": (lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (6, 7)),
    "avgpool2d_short_kernel_ceil": (lambda: nn.AvgPool2d(1, stride=3, ceil_mode=True), (7, 8)),
    "avgpool1d_ceil_padding": (lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True), (9,)),
    "avgpool1d_ceil_padding_excluded": (
        lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False), (9,),
    ),
    "avgpool1d_padding_excluded": (lambda: nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False), (8,)),
}

#: The layers trained in the three paths (the others: gradients of the forward/backward API and OrtTorchModule).
TRAINED = [
    "conv2d_same_odd", "conv1d_same_dilation", "conv2d_reflect", "conv1d_replicate_same", "conv2d_circular",
    "maxpool2d_ceil_short_kernel", "avgpool2d_ceil_padding", "avgpool1d_ceil_padding_excluded",
]


def _network(name):
    """The layer after a trained 1 x 1 convolution, then a linear layer to one output."""
    build, spatial = LAYERS[name]
    torch.manual_seed(0)
    conv = nn.Conv1d(1, 2, 1) if len(spatial) == 1 else nn.Conv2d(1, 2, 1)
    features = nn.Sequential(conv, build())
    with torch.no_grad():
        size = features(torch.zeros(1, 1, *spatial)).numel()
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(size, 1)), (1, *spatial)


def _data(shape):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_SAMPLES, *shape)).astype(np.float32)
    y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    return X, y


def _torch_gradients(module, X, grad_out):
    """torch's gradients of ``sum(module(X) * grad_out)`` in float64, by parameter name."""
    module = copy.deepcopy(module).double()
    module(torch.from_numpy(X).double()).backward(torch.from_numpy(grad_out).double())
    return {name: p.grad.numpy() for name, p in module.named_parameters()}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradients_equal_torch(name):
    """The gradients of the forward/backward API and of OrtTorchModule are torch's (float64)."""
    module, shape = _network(name)
    X, _ = _data(shape)
    grad_out = np.random.default_rng(1).standard_normal((N_SAMPLES, 1)).astype(np.float32)
    expected = _torch_gradients(module, X, grad_out)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    function = OrtGradientForwardBackward(onx).new_instance()
    names = function.parent.weights_to_train
    parameters = dict(module.named_parameters())
    function.forward([X, *[parameters[n].detach().numpy() for n in names]], training=True)
    for weight, gradient in zip(names, function.backward([grad_out])):
        np.testing.assert_allclose(gradient.numpy(), expected[weight], rtol=1e-4, atol=1e-5, err_msg=weight)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    ort_module(torch.from_numpy(X)).backward(torch.from_numpy(grad_out))
    for weight, parameter in ort_module.module.named_parameters():
        np.testing.assert_allclose(parameter.grad.numpy(), expected[weight], rtol=1e-4, atol=1e-5, err_msg=weight)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_exported_model_computes_what_torch_computes(name):
    module, shape = _network(name)
    X, _ = _data(shape)
    layers = module[:2]  # the output of the layer itself, before the linear layer
    onx = export_for_training(layers, torch.from_numpy(X[:2]))
    session = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = layers(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(session.run(None, {"x": X})[0], expected, rtol=1e-5, atol=1e-6)


def _optimizer(api, onx, batch_size, epochs):
    common = dict(
        max_iter=epochs, batch_size=batch_size, learning_rate=LEARNING_RATE, solver="sgd", random_state=0,
        validation_every=0,
    )
    if api == "whole":
        return OrtGradientOptimizer(add_loss_output(onx, score_name="squared_error"), **common)
    return OrtGradientForwardBackwardOptimizer(
        onx, learning_loss="squared_error", learning_rate_schedule="constant", **common
    )


@pytest.mark.parametrize("api", ["whole", "forward_backward", "torch_module"])
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
        weights = dict(ort_module.module.named_parameters())
        weights = {k: v.detach().numpy() for k, v in weights.items()}
        predicted = ort_module(torch.from_numpy(X)).detach().numpy()
    else:
        opt = _optimizer(api, export_for_training(module, torch.from_numpy(X[:2])), N_SAMPLES, 3).fit(X, y)
        losses, weights, predicted = opt.train_losses_, opt.get_state(), opt.predict(X)
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-4, atol=1e-7)
    assert torch_losses[-1] < torch_losses[0]  # it trained
    for weight, value in trained.named_parameters():
        np.testing.assert_allclose(weights[weight], value.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=weight)
    np.testing.assert_allclose(np.reshape(predicted, expected.shape), expected, rtol=1e-4, atol=1e-5)
