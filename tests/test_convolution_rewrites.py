"""Convolutions as windows and products: values and gradients against torch (float64), by option."""

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from helpers import (
    OrtGradientForwardBackward,
    OrtGradientOptimizer,
    add_loss_output,
    export_for_training,
    get_train_initializer,
)
from helpers.core.model_graphs.training_graph import training_graph
from helpers.core.rewrites import gradient_rewrites
from helpers.core.rewrites.convolution_rewrites import (
    CONV_PREFIX,
    LAYOUTS,
    convolutions_as_products,
    everywhere,
)


class _Net(nn.Module):
    """A convolution between two others, so that its input needs a gradient."""

    def __init__(self, dims, in_channels, out_channels, **options):
        super().__init__()
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        self.before = conv(3, in_channels, 1)
        self.conv = conv(in_channels, out_channels, **options)
        self.after = conv(out_channels, 2, 1, bias=False)

    def forward(self, x):
        return self.after(torch.tanh(self.conv(torch.tanh(self.before(x)))))


def _ops(model):
    return [n.op_type for n in model.graph.node]


def _check_against_torch(net, x, input_grad=False, fast=True, variant=""):
    """Output and gradients of the training graph (rewritten when ``fast``) vs float64 torch."""
    model = export_for_training(net, torch.tensor(x[:1]))
    model.doc_string = variant  # sessions are cached by the model's content: one entry per variant
    fb = OrtGradientForwardBackward(
        model, fast_gradients=fast, input_names_require_grad=["x"] if input_grad else None
    )
    weights = get_train_initializer(model)
    names = fb.weights_to_train
    fn = fb.new_instance()
    y = fn.forward([x, *[weights[n] for n in names]], training=True)[0].numpy().copy()
    grad_out = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    grads = [g.numpy() for g in fn.backward([grad_out])]
    double = net.double()
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    expected = double(xt)
    expected.backward(torch.tensor(grad_out, dtype=torch.float64))
    np.testing.assert_allclose(y, expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    params = dict(double.named_parameters())
    torch_grads = [params[n].grad.numpy() for n in names]
    torch_grads += [xt.grad.numpy()] if input_grad else []
    assert len(grads) == len(torch_grads)
    for got, want in zip(grads, torch_grads):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return training_graph(model, ["x"], fast).model


OPTIONS = [
    # dims, in, out, size, conv options
    (1, 4, 6, 11, {"kernel_size": 5, "padding": 2}),
    (1, 3, 5, 9, {"kernel_size": 3, "stride": 2, "padding": 0}),
    (1, 3, 4, 10, {"kernel_size": 3, "dilation": 2, "padding": 1, "bias": False}),
    (1, 4, 4, 8, {"kernel_size": 3, "padding": "same"}),
    (1, 5, 5, 12, {"kernel_size": 3, "padding": 1, "groups": 5}),
    (1, 3, 2, 7, {"kernel_size": 1}),
    (2, 3, 5, 9, {"kernel_size": 3, "padding": 1}),
    (2, 3, 4, 8, {"kernel_size": (3, 5), "stride": (2, 1), "padding": (1, 2), "bias": False}),
    (2, 4, 3, 7, {"kernel_size": 3, "dilation": 2, "padding": 2}),
    (2, 4, 4, 9, {"kernel_size": 3, "stride": 2, "padding": 1, "groups": 4}),
    (2, 4, 4, 8, {"kernel_size": 3, "stride": 1, "padding": 1, "groups": 4, "bias": False}),
    (2, 6, 6, 7, {"kernel_size": 5, "padding": "same", "groups": 6, "dilation": 2}),
    (2, 3, 6, 6, {"kernel_size": 1, "stride": 2}),
    (2, 2, 3, 5, {"kernel_size": 3}),
]


@pytest.fixture
def rewrite_everywhere(monkeypatch):
    """Make ``fast_gradients`` rewrite every convolution it handles, in the layout given."""

    def rewrite(layout="last"):
        monkeypatch.setattr(
            gradient_rewrites,
            "convolutions_as_products",
            lambda model: convolutions_as_products(model, layout, everywhere),
        )

    return rewrite


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("dims", "cin", "cout", "size", "options"), OPTIONS)
def test_rewritten_convolution_matches_torch(
    dims, cin, cout, size, options, layout, rewrite_everywhere
):
    rewrite_everywhere(layout)
    torch.manual_seed(0)
    net = _Net(dims, cin, cout, **options)
    x = np.random.default_rng(0).standard_normal((3, 3, *[size] * dims)).astype(np.float32)
    x[..., 1] += 3.0  # odd values at one spatial position, where a window off by one would show
    graph = _check_against_torch(net, x, input_grad=dims == 1, variant=layout)
    assert "Conv" not in _ops(graph)
    assert any(n.name.startswith(CONV_PREFIX) for n in graph.graph.node)


def test_grouped_convolution_is_kept_and_right(rewrite_everywhere):
    rewrite_everywhere()
    torch.manual_seed(0)
    net = _Net(2, 4, 6, kernel_size=3, padding=1, groups=2)
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    graph = _check_against_torch(net, x)
    assert _ops(graph).count("Conv") == 1  # the grouped one: the 1x1 ones are products


def test_fast_gradients_false_keeps_every_conv():
    torch.manual_seed(0)
    net = _Net(1, 4, 6, kernel_size=3, padding=1)
    x = np.random.default_rng(0).standard_normal((2, 3, 10)).astype(np.float32)
    graph = _check_against_torch(net, x, fast=False)
    assert _ops(graph).count("Conv") == 3
    assert not any(n.name.startswith(CONV_PREFIX) for n in graph.graph.node)


def test_convolution_of_unknown_spatial_size_is_kept():
    net = nn.Conv1d(2, 3, 3)
    model = export_for_training(net, torch.zeros(1, 2, 8))
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "length"
    assert _ops(convolutions_as_products(model)).count("Conv") == 1
    exported = export_for_training(net, torch.zeros(1, 2, 8))
    assert "Conv" not in _ops(convolutions_as_products(exported))


def test_by_default_only_one_dimensional_dense_convolutions_are_rewritten():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Tanh(), nn.Conv2d(4, 4, 3, groups=4, stride=2))
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    graph = _check_against_torch(net, x, input_grad=True, variant="default")
    assert [n.name for n in graph.graph.node if n.op_type == "Conv"] == ["/0/Conv", "/2/Conv"]
    net = _Net(1, 4, 6, kernel_size=3, padding=1)
    x = np.random.default_rng(0).standard_normal((2, 3, 10)).astype(np.float32)
    graph = _check_against_torch(net, x, variant="default")
    assert "Conv" not in _ops(graph)


def test_whole_training_trains_the_rewritten_graph_and_exports_the_convolutions(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv1d(3, 5, 3, padding=1), nn.Tanh(), nn.Conv1d(5, 1, 3, stride=2), nn.Flatten()
    )
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 3, 10)).astype(np.float32)
    y = rng.standard_normal((32, 4)).astype(np.float32)
    model = add_loss_output(export_for_training(net, torch.from_numpy(X[:1])))
    fits = {
        fast: OrtGradientOptimizer(
            model,
            learning_rate=0.05,
            max_iter=20,
            batch_size=len(X),
            fast_gradients=fast,
            artifact_dir=str(tmp_path / f"fast_{fast}"),
        ).fit(X, y)
        for fast in (False, True)
    }
    plain, fast = fits[False].get_state(), fits[True].get_state()
    for name in plain:
        np.testing.assert_allclose(fast[name], plain[name], rtol=1e-4, atol=1e-5)
    assert fits[True].train_losses_[-1] < fits[True].train_losses_[0]
    assert _ops(fits[True].get_trained_onnx()).count("Conv") == 2
    training = onnx.load(str(tmp_path / "fast_True" / "training_model.onnx"))
    assert "Conv" not in _ops(training) and "ConvGrad" not in _ops(training)
