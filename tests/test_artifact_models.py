"""Exporting forward-only models from torch, loading training artifacts, one step."""

import logging
import os

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnxruntime.training import artifacts

from helpers import export_for_training
from helpers.core.machine.runtime import max_ir_version
from helpers.core.machine.runtime_output import native_stderr_captured
from helpers.whole_training.artifacts import (
    artifact_paths,
    converter_output_captured,
    list_artifacts,
    load_training_artifacts,
    train_step,
)

#: On the training package's backend, whatever HELPERS_BACKEND says (tests/conftest.py leaves
#: the module out where the package is missing).
pytestmark = pytest.mark.training_package


class _TransposedLinear(torch.nn.Module):
    """``x @ w.T + b``: the transpose of a weight is what constant folding would fold."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(2, 3, generator=gen))
        self.b = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x @ self.w.t() + self.b


class _WithDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))


def _ops(model):
    return [node.op_type for node in model.graph.node]


def test_export_keeps_weights_as_named_initializers():
    net = _TransposedLinear()
    model = export_for_training(net, torch.zeros(4, 3))
    assert [i.name for i in model.graph.initializer] == ["w", "b"]
    assert "Transpose" in _ops(model)  # not folded into a new, unnamed weight
    assert [i.name for i in model.graph.input] == ["x"]
    assert model.ir_version <= max_ir_version()
    # any batch size, same values as torch
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = sess.run(None, {"x": x})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, net(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_export_options_can_be_overridden():
    with pytest.warns(UserWarning, match="constant folding"):  # torch warns against it too
        folded = export_for_training(
            _TransposedLinear(), torch.zeros(4, 3), do_constant_folding=True
        )
    assert "w" not in [i.name for i in folded.graph.initializer]
    no_params = export_for_training(_TransposedLinear(), torch.zeros(4, 3), export_params=False)
    assert len(no_params.graph.initializer) == 0
    assert [i.name for i in no_params.graph.input] == ["x", "w", "b"]


def test_export_in_training_mode_keeps_dropout():
    assert "Dropout" in _ops(export_for_training(_WithDropout(), torch.zeros(4, 3)))
    evaluated = export_for_training(
        _WithDropout(), torch.zeros(4, 3), training=torch.onnx.TrainingMode.EVAL
    )
    assert "Dropout" not in _ops(evaluated)


def test_export_silences_only_deprecations(recwarn):
    export_for_training(_TransposedLinear(), torch.zeros(4, 3))
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


@pytest.fixture(scope="module")
def regression_artifacts(tmp_path_factory):
    """Artifacts of ``x @ w.T + b`` with an MSE loss and SGD, prefix ``lin_``."""
    folder = tmp_path_factory.mktemp("artifacts")
    model = export_for_training(_TransposedLinear(), torch.zeros(4, 3))
    with native_stderr_captured(), converter_output_captured():
        artifacts.generate_artifacts(
            model,
            requires_grad=["w", "b"],
            loss=artifacts.LossType.MSELoss,
            optimizer=artifacts.OptimType.SGD,
            artifact_directory=str(folder),
            prefix="lin_",
            ort_format=True,
        )
    return str(folder)


def _data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    target = (x @ np.array([[1.0, -1.0], [0.5, 2.0], [0.0, 1.0]]) + 0.3).astype(np.float32)
    return x, target


def test_artifact_paths_and_listing(regression_artifacts):
    paths = artifact_paths(regression_artifacts, prefix="lin_")
    for kind in ("training_model", "eval_model", "optimizer_model", "checkpoint"):
        assert os.path.exists(paths[kind]), kind
    assert paths["training_model"].endswith("lin_training_model.onnx")
    assert artifact_paths(regression_artifacts, "lin_", ort_format=True)["eval_model"].endswith(
        ".ort"
    )
    table = list_artifacts(regression_artifacts)
    assert list(table["file"]) == sorted(table["file"])
    assert "lin_training_model.ort" in set(table["file"])
    assert (table["bytes"] > 0).all()


@pytest.mark.parametrize("ort_format", [False, True])
def test_train_step_decreases_the_loss(regression_artifacts, ort_format):
    state, module, optimizer = load_training_artifacts(
        regression_artifacts, "lin_", ort_format=ort_format
    )
    optimizer.set_learning_rate(0.1)
    x, target = _data()
    losses = [train_step(module, optimizer, x, target) for _ in range(20)]
    assert losses[-1] < losses[0] / 4
    # the gradient was reset: one more forward gives the gradient of one step only
    module(x, target)
    once = state.parameters["w"].grad.copy()
    module.lazy_reset_grad()
    module(x, target)
    np.testing.assert_allclose(state.parameters["w"].grad, once, rtol=1e-6)


def test_train_step_loss_is_the_loss_before_the_update(regression_artifacts):
    state, module, optimizer = load_training_artifacts(regression_artifacts, "lin_")
    x, target = _data()
    w, b = state.parameters["w"].data.copy(), state.parameters["b"].data.copy()
    loss = train_step(module, optimizer, x, target)
    np.testing.assert_allclose(loss, np.mean((x @ w.T + b - target) ** 2), rtol=1e-5)
    assert not np.array_equal(state.parameters["w"].data, w)


def test_load_from_another_checkpoint(regression_artifacts, tmp_path):
    from onnxruntime.training.api import CheckpointState  # noqa: PLC0415

    state, module, optimizer = load_training_artifacts(regression_artifacts, "lin_")
    x, target = _data()
    train_step(module, optimizer, x, target)
    path = str(tmp_path / "after_one_step")
    CheckpointState.save_checkpoint(state, path)
    reloaded = load_training_artifacts(regression_artifacts, "lin_", checkpoint=path)
    np.testing.assert_array_equal(reloaded.state.parameters["w"].data, state.parameters["w"].data)


def test_missing_artifacts_say_what_to_check(regression_artifacts):
    with pytest.raises(FileNotFoundError, match="prefix \\(''\\)"):
        load_training_artifacts(regression_artifacts)  # written with prefix lin_


def test_no_optimizer_model_gives_none(tmp_path):
    model = export_for_training(_TransposedLinear(), torch.zeros(4, 3))
    with native_stderr_captured():
        artifacts.generate_artifacts(
            model,
            requires_grad=["w", "b"],
            loss=artifacts.LossType.L1Loss,
            artifact_directory=str(tmp_path),
        )
    loaded = load_training_artifacts(str(tmp_path))
    assert loaded.optimizer is None
    x, target = _data()
    assert np.isfinite(loaded.module(x, target)).all()
    assert isinstance(onnx.load(artifact_paths(str(tmp_path))["eval_model"]), onnx.ModelProto)


def test_converter_output_captured(tmp_path, capfd):
    model = export_for_training(_TransposedLinear(), torch.zeros(4, 3))
    logger = logging.getLogger("ort_format_model.utils")
    handlers, propagate = list(logger.handlers), logger.propagate
    capfd.readouterr()
    with native_stderr_captured(), converter_output_captured() as captured:
        artifacts.generate_artifacts(
            model,
            requires_grad=["w", "b"],
            loss=artifacts.LossType.MSELoss,
            optimizer=artifacts.OptimType.SGD,
            artifact_directory=str(tmp_path),
            ort_format=True,
        )
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "Converted 1/1 models successfully" in captured[0]  # printed on stdout
    assert "required_operators.config" in captured[0]  # logged at INFO level
    assert logger.handlers == handlers and logger.propagate == propagate
