"""ConvTranspose and Upsample/interpolate (Resize) train as torch trains them, or are refused.

onnxruntime 1.19.2 has no gradient for either operator; the training graph
writes them with operators that have one (``helpers.core.layers.resampling``).
Values and gradients (weights and input) are compared with torch's autograd
in float64 over the layers' options, then a small decoder is trained in
both APIs and in OrtTorchModule from the same weights on the same batches
as torch.
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
from helpers.core.model_graphs.training_graph import training_graph
from helpers.teaching.torch_reference import torch_fit

LEARNING_RATE = 0.05
CONVOLUTIONS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
TRANSPOSED = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}

#: id -> (rank, ConvTranspose options, input size of each spatial axis)
TRANSPOSED_CASES = {
    "1d_stride2_output_padding": (
        1,
        dict(kernel_size=3, stride=2, padding=1, output_padding=1),
        (7,),
    ),
    "1d_grouped_no_bias_cropped": (
        1,
        dict(kernel_size=3, stride=3, padding=2, output_padding=1, groups=2, bias=False),
        (6,),
    ),
    "1d_padding_wider_than_kernel": (1, dict(kernel_size=2, padding=2), (9,)),  # crops both ends
    "1d_dilated": (1, dict(kernel_size=3, stride=2, dilation=3, padding=2), (5,)),
    "2d_stride2_kernel4": (2, dict(kernel_size=4, stride=2, padding=1), (4, 5)),
    "2d_grouped_dilated": (
        2,
        dict(kernel_size=3, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
        (4, 5),
    ),
    "2d_per_axis_options": (
        2,
        dict(
            kernel_size=(2, 3),
            stride=(2, 1),
            padding=(0, 1),
            output_padding=(1, 0),
            dilation=(1, 2),
            bias=False,
        ),
        (3, 5),
    ),
    "2d_padding_wider_than_kernel_on_one_axis": (
        2,
        dict(kernel_size=(2, 3), stride=(1, 2), padding=(2, 0)),
        (5, 4),
    ),
    "3d_stride2": (3, dict(kernel_size=2, stride=2, padding=1), (3, 4, 2)),
}

#: id -> (Upsample options, input size of each spatial axis)
UPSAMPLE_CASES = {
    "nearest_1d": (dict(scale_factor=2), (5,)),
    "nearest_2d_per_axis": (dict(scale_factor=(2, 3)), (4, 5)),
    "nearest_2d_size": (dict(size=(8, 15)), (4, 5)),
    "nearest_3d": (dict(scale_factor=2), (2, 3, 4)),
    "linear_1d": (dict(scale_factor=3, mode="linear"), (5,)),
    "linear_1d_align_corners": (dict(scale_factor=3, mode="linear", align_corners=True), (5,)),
    "bilinear": (dict(scale_factor=2, mode="bilinear"), (4, 5)),
    "bilinear_align_corners": (dict(scale_factor=2, mode="bilinear", align_corners=True), (4, 5)),
    "bilinear_size": (dict(size=(12, 10), mode="bilinear"), (4, 5)),
    "bilinear_size_align_corners": (
        dict(size=(12, 10), mode="bilinear", align_corners=True),
        (4, 5),
    ),
    "trilinear": (dict(scale_factor=(2, 1, 3), mode="trilinear"), (2, 3, 4)),
}


def _transposed(case):
    rank, options, size = TRANSPOSED_CASES[case]
    torch.manual_seed(0)
    return TRANSPOSED[rank](4, 4, **options), (4, *size)


def _upsampling(case):
    """A 1x1 convolution (weights to train) then the upsampling."""
    options, size = UPSAMPLE_CASES[case]
    torch.manual_seed(0)
    return nn.Sequential(CONVOLUTIONS[len(size)](2, 3, 1), nn.Upsample(**options)), (2, *size)


def _assert_values_and_gradients_match_torch(module, sample_shape):
    """Outputs, input and weight gradients of OrtTorchModule (float32) against torch in float64."""
    reference = copy.deepcopy(module).double()
    ort = OrtTorchModule(copy.deepcopy(module), torch.zeros(2, *sample_shape))
    x = torch.randn(3, *sample_shape)
    x_ort, x_ref = x.clone().requires_grad_(), x.double().requires_grad_()
    y_ort, y_ref = ort(x_ort), reference(x_ref)
    np.testing.assert_allclose(y_ort.detach().numpy(), y_ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    upstream = torch.randn(y_ref.shape, dtype=torch.float64)
    (y_ort * upstream.float()).sum().backward()
    (y_ref * upstream).sum().backward()
    np.testing.assert_allclose(x_ort.grad.numpy(), x_ref.grad.numpy(), rtol=1e-5, atol=1e-5)
    pairs = zip(ort.module.named_parameters(), reference.named_parameters())
    for (name, ours), (_, theirs) in pairs:
        np.testing.assert_allclose(
            ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=name
        )


@pytest.mark.parametrize("case", sorted(TRANSPOSED_CASES))
def test_transposed_convolution_values_and_gradients_match_torch(case):
    _assert_values_and_gradients_match_torch(*_transposed(case))


@pytest.mark.parametrize("case", sorted(UPSAMPLE_CASES))
def test_upsampling_values_and_gradients_match_torch(case):
    _assert_values_and_gradients_match_torch(*_upsampling(case))


def test_the_training_graph_has_neither_operator_and_keeps_torch_weights():
    module, shape = _transposed("2d_grouped_dilated")
    net = nn.Sequential(module, nn.Upsample(scale_factor=2, mode="bilinear"))
    model = export_for_training(net, torch.zeros(2, *shape))
    graph = training_graph(model).model
    operators = {n.op_type for n in graph.graph.node}
    assert not operators & {"ConvTranspose", "Resize"}
    assert [i.name for i in graph.graph.initializer] == [i.name for i in model.graph.initializer]
    assert {"ConvTranspose", "Resize"} <= {n.op_type for n in model.graph.node}  # left alone


class Decoder(nn.Module):
    """Linear, reshape, ConvTranspose (stride 2), Upsample, Conv (1-D or 2-D), then one output.

    The losses of the optimizers sum over the outputs of a row where torch's
    ``mse_loss`` averages: one output keeps them equal.
    """

    def __init__(self, rank):
        super().__init__()
        size = (3,) * rank
        self.linear = nn.Linear(6, 4 * int(np.prod(size)))
        self.unflatten = nn.Unflatten(1, (4, *size))
        self.transposed = TRANSPOSED[rank](4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        mode = {1: "linear", 2: "nearest"}[rank]
        corners = {"align_corners": True} if rank == 1 else {}
        self.upsample = nn.Upsample(scale_factor=2, mode=mode, **corners)
        self.conv = CONVOLUTIONS[rank](4, 1, 3)
        self.head = nn.Linear(10**rank, 1)  # the convolution's output: 10 on each axis

    def forward(self, x):
        h = torch.tanh(self.transposed(self.unflatten(self.linear(x))))
        return self.head(self.conv(self.upsample(h)).flatten(1))


def _decoder_data(rank):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 6)).astype(np.float32)
    torch.manual_seed(0)
    module = Decoder(rank)
    with torch.no_grad():
        y = torch.sin(module(torch.from_numpy(X)) * 3).numpy()  # a target the initial weights miss
    torch.manual_seed(1)
    return Decoder(rank), X, y


def _optimizer(api, onx, epochs, batch_size):
    return make_seeded_optimizer(api, onx, epochs, batch_size, LEARNING_RATE)


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
@pytest.mark.parametrize("rank", [1, 2])
def test_decoder_trains_step_by_step_as_torch(rank, api):
    """Full batches: one step an epoch, every loss compared; then trained weights, predictions."""
    module, X, y = _decoder_data(rank)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", len(X), 4, LEARNING_RATE)
    opt = _optimizer(api, onx, 4, len(X)).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, torch_losses, rtol=1e-4)
    assert torch_losses[-1] < torch_losses[0]
    expected = dict(trained.named_parameters())
    for name, value in opt.get_state().items():
        np.testing.assert_allclose(
            value, expected[name].detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name
        )
    exported = {n.op_type for n in opt.get_trained_onnx().graph.node}
    assert {"ConvTranspose", "Resize"} <= exported
    with torch.no_grad():
        expected = trained(torch.from_numpy(X)).numpy()
    predictions = opt.predict(X).reshape(expected.shape)
    np.testing.assert_allclose(predictions, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rank", [1, 2])
def test_decoder_trains_in_ort_torch_module_as_torch(rank):
    """Minibatches of 10, 10 and 4 rows, two epochs."""
    module, X, y = _decoder_data(rank)
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", 10, 2, LEARNING_RATE)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    _, ort_losses = torch_fit(ort_module, X, y, "squared_error", 10, 2, LEARNING_RATE)
    np.testing.assert_allclose(ort_losses, torch_losses, rtol=1e-4)
    pairs = zip(trained.named_parameters(), ort_module.module.named_parameters())
    for (name, expected), (_, value) in pairs:
        np.testing.assert_allclose(
            value.detach().numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name
        )


@pytest.mark.parametrize(
    "upsample, size, match",
    [
        (
            nn.Upsample(scale_factor=2, mode="bicubic"),
            (4, 5),
            r"mode='cubic' \(torch: mode='bicubic'\)",
        ),
        (nn.Upsample(scale_factor=1.5), (4,), r"scale factors \[1.5\] that are not all integers"),
        (
            nn.Upsample(size=(6, 7), mode="bilinear"),
            (4, 5),
            r"scale factors \[1.5, 1.4\] that are not all integers",
        ),
    ],
    ids=["bicubic", "non_integer_scale", "size_not_a_multiple"],
)
def test_upsampling_without_exact_rewrite_is_refused_by_name(upsample, size, match):
    module = nn.Sequential(CONVOLUTIONS[len(size)](2, 2, 1), upsample)
    X = np.random.default_rng(0).standard_normal((8, 2, *size)).astype(np.float32)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    y = module(torch.from_numpy(X)).detach().numpy()
    for api in ("whole", "forward_backward"):
        with pytest.raises(
            UntrainableModelError, match=rf"no gradient for Resize.*'/1/Resize' with {match}"
        ):
            _optimizer(api, onx, 1, 4).fit(X, y)
    with pytest.raises(UntrainableModelError, match="Replace it: nn.Upsample or F.interpolate"):
        OrtTorchModule(module, torch.from_numpy(X[:2]))(torch.from_numpy(X))


def test_linear_upsampling_of_an_input_of_unknown_size_is_refused_by_name():
    module = nn.Sequential(nn.Conv1d(2, 2, 1), nn.Upsample(scale_factor=2, mode="linear"))
    X = np.random.default_rng(0).standard_normal((8, 2, 5)).astype(np.float32)
    onx = export_for_training(module, torch.from_numpy(X[:2]), dynamic_axes={"x": {0: "N", 2: "L"}})
    with pytest.raises(
        UntrainableModelError,
        match=r"linear., and an input size that is not fixed \(\[None, 2, None",
    ):
        _optimizer("forward_backward", onx, 1, 4).fit(X, X.repeat(2, axis=2))


def test_upsampling_before_every_weight_needs_no_gradient_and_stays():
    module = nn.Sequential(nn.Upsample(scale_factor=1.5), nn.Conv1d(2, 1, 3), nn.Flatten())
    X = np.random.default_rng(0).standard_normal((8, 2, 6)).astype(np.float32)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    assert "Resize" in {n.op_type for n in training_graph(onx).model.graph.node}
    opt = _optimizer("forward_backward", onx, 2, 4).fit(X, np.zeros((8, 7), np.float32))
    assert np.isfinite(opt.train_losses_).all()


def test_grouped_3d_transposed_convolution_is_refused_by_name():
    module = nn.ConvTranspose3d(4, 4, 2, stride=2, groups=2)
    onx = export_for_training(module, torch.zeros(2, 4, 2, 2, 2))
    with pytest.raises(UntrainableModelError, match=r"convolution '/ConvTranspose' \(group=2"):
        training_graph(onx)


@pytest.mark.parametrize(
    "options, attributes, target",
    [
        (
            dict(scale_factor=2),
            dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
            "scales",
        ),
        (
            dict(scale_factor=2, mode="bilinear"),
            dict(mode="linear", coordinate_transformation_mode="half_pixel"),
            "scales",
        ),
        (
            dict(size=(8, 10), mode="bilinear", align_corners=True),
            dict(mode="linear", coordinate_transformation_mode="align_corners"),
            "sizes",
        ),
    ],
    ids=["nearest", "bilinear", "bilinear_size_align_corners"],
)
def test_torch_writes_the_resize_attributes_the_rewrite_reads(options, attributes, target):
    """torch 2.13's TorchScript exporter, opset 17: the combinations the rewrite reproduces."""
    model = export_for_training(nn.Upsample(**options), torch.zeros(2, 3, 4, 5))
    (node,) = [n for n in model.graph.node if n.op_type == "Resize"]
    written = {a.name: a.s.decode() for a in node.attribute if a.s}
    assert {name: written.get(name) for name in attributes} == attributes
    expected = [True] if target == "scales" else [False, True]  # scales, or no scales and sizes
    assert [bool(name) for name in node.input[2:]] == expected


@pytest.mark.parametrize(
    "module",
    [nn.ConvTranspose2d(2, 2, 3, stride=2), nn.Upsample(scale_factor=2)],
    ids=["transposed", "upsample"],
)
def test_models_of_opset_12_are_refused_by_name(module):
    onx = export_for_training(
        nn.Sequential(nn.Conv2d(2, 2, 1), module), torch.zeros(2, 2, 4, 4), opset_version=12
    )
    with pytest.raises(UntrainableModelError, match=r"opset 12 \(export with opset_version=13"):
        training_graph(onx)


def test_nearest_upsampling_and_transposed_convolution_need_no_fixed_size():
    """Repeats and the spread input are shaped at run time: a free length trains as torch."""
    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv1d(2, 3, 1),
        nn.Upsample(scale_factor=2),
        nn.ConvTranspose1d(3, 2, 3, stride=2),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(2, 1),
    )
    X = np.random.default_rng(0).standard_normal((12, 2, 5)).astype(np.float32)
    y = X[:, :1, 0] ** 2
    onx = export_for_training(module, torch.from_numpy(X[:2]), dynamic_axes={"x": {0: "N", 2: "L"}})
    _, torch_losses = torch_fit(
        copy.deepcopy(module), X, y, "squared_error", len(X), 3, LEARNING_RATE
    )
    opt = _optimizer("forward_backward", onx, 3, len(X)).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, torch_losses, rtol=1e-4)
