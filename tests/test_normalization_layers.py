"""Layer, group and instance normalization train in both APIs and in OrtTorchModule as in torch.

onnxruntime-training 1.19.2 stops on the gradient of ``LayerNorm([1])``,
has no gradient for ``InstanceNormalization`` (torch's ``GroupNorm`` and
``InstanceNorm``), and its inference sessions fuse a residual sum and a
``LayerNorm`` over two axes into a node that fails. Each model here is
compared with torch: the gradients of one batch, the loss of every step, the
trained weights and the predictions, with the options of each layer.
"""

import copy
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import make_seeded_optimizer
from onnx import TensorProto, helper
from torch import nn

from helpers import OrtTorchModule, export_for_training
from helpers.core.layers.normalization import layer_norms_of_one_value_written_out
from helpers.core.machine.sessions import make_session
from helpers.teaching.torch_reference import torch_fit

N_SAMPLES = 24
LEARNING_RATE = 0.05


class Normalized(nn.Module):
    """``norm`` between a linear map of the last axis (whose input has a gradient), a regression."""

    def __init__(self, norm, shape):
        super().__init__()
        self.inner, self.norm = nn.Linear(shape[-1], shape[-1]), norm
        self.outer = nn.Linear(int(np.prod(shape)), 1)

    def forward(self, x):
        return self.outer(self.norm(self.inner(x)).flatten(1))


class Residual(nn.Module):
    """``x + tanh(x)``, then a ``LayerNorm`` over two axes (SkipLayerNormalization's pattern)."""

    def __init__(self, **options):
        super().__init__()
        self.norm, self.outer = nn.LayerNorm([2, 8], **options), nn.Linear(16, 1)

    def forward(self, x):
        return self.outer(self.norm(x + torch.tanh(x)).flatten(1))


#: case -> (builder, sample shape)
CASES = {
    "layernorm1_3d": (lambda: nn.LayerNorm([1]), (3, 1)),
    "layernorm1_3d_no_bias": (lambda: nn.LayerNorm([1], bias=False), (3, 1)),
    "layernorm1_3d_no_affine": (lambda: nn.LayerNorm([1], elementwise_affine=False), (3, 1)),
    "layernorm1_2d": (lambda: nn.LayerNorm(1), (1,)),
    "layernorm1_4d": (lambda: nn.LayerNorm([1]), (2, 3, 1)),
    "groupnorm1_3d": (lambda: nn.GroupNorm(1, 4), (4, 5)),
    "groupnorm2_3d": (lambda: nn.GroupNorm(2, 4), (4, 5)),
    "groupnorm4_3d": (lambda: nn.GroupNorm(4, 4), (4, 5)),
    "groupnorm2_3d_no_affine": (lambda: nn.GroupNorm(2, 4, affine=False), (4, 5)),
    "groupnorm4_3d_no_affine": (lambda: nn.GroupNorm(4, 4, affine=False), (4, 5)),
    "groupnorm2_2d": (lambda: nn.GroupNorm(2, 4), (4,)),
    "groupnorm4_2d": (lambda: nn.GroupNorm(4, 4), (4,)),
    "groupnorm2_4d": (lambda: nn.GroupNorm(2, 4), (4, 3, 3)),
    "instancenorm1d": (lambda: nn.InstanceNorm1d(4), (4, 5)),
    "instancenorm1d_affine": (lambda: nn.InstanceNorm1d(4, affine=True), (4, 5)),
    "instancenorm2d": (lambda: nn.InstanceNorm2d(4), (4, 3, 3)),
    "instancenorm2d_affine": (lambda: nn.InstanceNorm2d(4, affine=True), (4, 3, 3)),
    "residual_layernorm": (lambda: None, (2, 8)),
    "residual_layernorm_no_affine": (lambda: None, (2, 8)),
}


def _module(case):
    build, shape = CASES[case]
    torch.manual_seed(0)
    if case.startswith("residual"):
        module = Residual(elementwise_affine="no_affine" not in case)
    else:
        module = Normalized(build(), shape)
    with torch.no_grad():  # weights and biases away from their initial ones and zeros
        for name, parameter in module.norm.named_parameters():
            values = torch.linspace(0.5, 1.5, parameter.numel()).reshape(parameter.shape)
            parameter.copy_(values - 1.0 if name == "bias" else values)
    return module, shape


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_SAMPLES, *shape)).astype(np.float32)
    y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    return X, y


def _optimizer(api, onx, batch_size, epochs, **options):
    return make_seeded_optimizer(api, onx, epochs, batch_size, LEARNING_RATE, **options)


def _eval_outputs(module, X):
    """The outputs of ``module`` in eval mode, computed by torch in float64.

    torch's float32 kernels round too: its ``GroupNorm`` of groups of one
    value gives ``x * s - mean * s`` with ``s = 1 / sqrt(epsilon)``, not 0.
    """
    module = copy.deepcopy(module).double().eval()
    with torch.no_grad():
        return module(torch.from_numpy(X.astype(np.float64))).numpy()


def _parameters(net):
    """Name to parameter as a numpy array, without OrtTorchModule's ``module.`` prefix."""
    return {name.removeprefix("module."): p.detach().numpy() for name, p in net.named_parameters()}


def _assert_same_weights(weights, expected):
    assert sorted(weights) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradients_match_torch_autograd(case):
    """One batch through OrtTorchModule: the output, the input's gradient, every weight's gradient.

    torch computes them in float64, onnxruntime in float32: they agree to a
    ten-thousandth of the largest gradient, as torch's own float32 gradients
    do (normalizing a few values divides by their small deviation, which
    magnifies rounding).
    """
    module, shape = _module(case)
    X, _ = _data(shape)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    direction = np.random.default_rng(1).standard_normal((N_SAMPLES, 1))
    results = []
    for net, dtype in ((module.double(), np.float64), (ort_module, np.float32)):
        x = torch.from_numpy(X.astype(dtype)).requires_grad_(True)
        output = net(x)
        (output * torch.from_numpy(direction.astype(dtype))).sum().backward()
        grads = {name.removeprefix("module."): p.grad.numpy() for name, p in net.named_parameters()}
        results.append((output.detach().numpy(), {"x": x.grad.numpy(), **grads}))
    (expected, expected_grads), (output, grads) = results
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
    assert sorted(grads) == sorted(expected_grads)
    for name, value in expected_grads.items():
        scale = np.abs(value).max() + 1e-5
        np.testing.assert_allclose(grads[name], value, rtol=1e-4, atol=1e-4 * scale, err_msg=name)


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_step_weights_and_predictions_match_torch(case, api):
    """Full batches, three epochs: each step's loss, the trained weights, ``predict``."""
    module, shape = _module(case)
    X, y = _data(shape)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", len(X), 3, LEARNING_RATE)
    opt = _optimizer(api, onx, len(X), 3).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, torch_losses, rtol=1e-4, atol=1e-7)
    _assert_same_weights(opt.get_state(), _parameters(trained))
    expected = _eval_outputs(trained, X)
    predictions = opt.predict(X).reshape(expected.shape)
    np.testing.assert_allclose(predictions, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_ort_torch_module_trains_as_torch(case):
    """Batches of 10, 10 and 4 rows, two epochs: each step's loss, the weights, the eval forward."""
    module, shape = _module(case)
    X, y = _data(shape)
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", 10, 2, LEARNING_RATE)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    _, ort_losses = torch_fit(ort_module, X, y, "squared_error", 10, 2, LEARNING_RATE)
    np.testing.assert_allclose(ort_losses, torch_losses, rtol=1e-4, atol=1e-7)
    _assert_same_weights(_parameters(ort_module), _parameters(trained))
    ort_module.eval()
    with torch.no_grad():
        outputs = ort_module(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(outputs, _eval_outputs(trained, X), rtol=1e-4, atol=1e-5)


@pytest.mark.training_package
def test_whole_training_eval_model_runs_as_torch(tmp_path):
    """The artifacts' evaluation model, run by onnxruntime's ``Module``, gives torch's loss."""
    from helpers.whole_training.artifacts import load_training_artifacts  # noqa: PLC0415

    module, shape = _module("residual_layernorm")
    X, y = _data(shape)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    _optimizer("whole", onx, len(X), 1, artifact_dir=str(tmp_path)).fit(X, y)
    _, ort_module, _ = load_training_artifacts(str(tmp_path))  # its checkpoint: the initial weights
    ort_module.eval()
    loss = ort_module(X, y)
    expected = np.mean((_eval_outputs(module, X) - y) ** 2)
    np.testing.assert_allclose(float(np.asarray(loss)), expected, rtol=1e-5)


RESIDUAL_FITS = """
import sys
import numpy as np, torch
from helpers import OrtGradientForwardBackwardOptimizer, OrtGradientOptimizer, OrtTorchModule
from helpers import add_loss_output
from helpers import export_for_training

class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.outer = torch.nn.LayerNorm([2, 8]), torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.outer(self.norm(x + torch.tanh(x)).flatten(1))

X = np.random.default_rng(0).standard_normal((16, 2, 8)).astype(np.float32)
net = Residual()
onx = export_for_training(net, torch.from_numpy(X[:2]))
sys.stderr.write('-- fits start --\\n')
sys.stderr.flush()
OrtGradientOptimizer(add_loss_output(onx), max_iter=1).fit(X, X[:, 0, :1]).predict(X)
OrtGradientForwardBackwardOptimizer(onx, max_iter=1).fit(X, X[:, 0, :1]).predict(X)
ort_net = OrtTorchModule(net, torch.from_numpy(X[:2])).eval()
with torch.no_grad():
    ort_net(torch.from_numpy(X))
"""


def test_residual_layer_norm_fits_and_predicts_without_writing_on_stderr(tmp_path):
    """No session fuses the sum and the LayerNorm into a SkipLayerNormalization that fails."""
    script = tmp_path / "fit.py"
    script.write_text(RESIDUAL_FITS)
    root = str(pathlib.Path(__file__).resolve().parents[1])  # these helpers, not an installed copy
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert done.returncode == 0, done.stderr
    _, marker, during_fits = done.stderr.partition("-- fits start --\n")
    assert marker, done.stderr
    assert during_fits == ""


def test_instance_norm_with_running_statistics_is_refused_by_name():
    """torch does not export it with a free batch size: the export and OrtTorchModule say so, naming
    it."""
    module = Normalized(nn.InstanceNorm1d(4, affine=True, track_running_stats=True), (4, 5))
    X, _ = _data((4, 5))
    refusal = r"module 'norm' \(InstanceNorm1d\) .*track_running_stats=True.*GroupNorm\(C, C\)"
    with pytest.raises(ValueError, match=refusal):
        export_for_training(module, torch.from_numpy(X[:2]))
    with pytest.raises(ValueError, match=refusal):
        OrtTorchModule(module, torch.from_numpy(X[:2]))


@pytest.mark.parametrize("size", [1, None])
def test_written_out_layer_norm_gives_every_output_of_the_node(size):
    """Its three outputs (y, mean, 1 / std), over one value or a size inference cannot tell."""
    normalized = [size or "D"]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, *normalized]),
        helper.make_tensor_value_info("scale", TensorProto.FLOAT, normalized),
        helper.make_tensor_value_info("bias", TensorProto.FLOAT, normalized),
    ]
    names = ["y", "mean", "inv"]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names]
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], names, axis=-1)
    graph = helper.make_graph([node], "layer_norm", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    written = layer_norms_of_one_value_written_out(model)
    assert "LayerNormalization" not in {n.op_type for n in written.graph.node}
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 3, size or 5)).astype(np.float32)}
    for name in ("scale", "bias"):
        feeds[name] = rng.standard_normal(size or 5).astype(np.float32)
    expected = make_session(model).run(None, feeds)
    for value, reference in zip(make_session(written).run(None, feeds), expected):
        np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6)
