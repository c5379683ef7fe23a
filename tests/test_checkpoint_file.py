"""The checkpoint file read and written with flatbuffers alone: onnxruntime-training 1.19.2 agrees.

Checkpoints saved by 1.19.2's ``CheckpointState`` read back with the same bytes, files written
here load in 1.19.2 with the same parameters and properties, and an optimizer built on a
written AdamW checkpoint continues with exactly the losses of one built on 1.19.2's.
"""

import os

import numpy as np
import pytest
import torch
from onnxruntime.capi import _pybind_state as C
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import Checkpoint
from onnxruntime.training.api import CheckpointState, Module
from torch import nn

from helpers import OrtGradientOptimizer, add_loss_output, export_for_training
from helpers.core.machine.sessions import session_options
from helpers.teaching.model_factories import mlp_onnx
from helpers.whole_training import checkpoint_file
from helpers.whole_training.adamw_state import adamw_moments
from helpers.whole_training.checkpoint_file import (
    CHECKPOINT_VERSION,
    FILE_IDENTIFIER,
    checkpoint_bytes,
    read_checkpoint_file,
    write_checkpoint_file,
)
from helpers.whole_training.checkpoints import (
    CHECKPOINT_KEY,
    CheckpointError,
    append_checksum,
    read_checkpoint,
)

#: On the training package's backend, whatever HELPERS_BACKEND says (tests/conftest.py leaves
#: the module out where the package is missing).
pytestmark = pytest.mark.training_package

PROPERTIES = {"epoch": 3, "big": 2**62, "negative": -7, "rate": 0.25, "text": 'héllo {"a": 1}'}


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 3)).astype(np.float32)
    return X, (2 * X[:, :1] + 1).astype(np.float32)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The artifacts of an AdamW fit and the checkpoint 1.19.2 saves of it (with properties)."""
    folder = tmp_path_factory.mktemp("adamw")
    X, y = _data()
    opt = OrtGradientOptimizer(
        add_loss_output(mlp_onnx(3, hidden=(4,))),
        solver="adamw",
        max_iter=3,
        batch_size=8,
        learning_rate=0.01,
        artifact_dir=str(folder / "artifacts"),
    ).fit(X, y)
    for name, value in PROPERTIES.items():
        opt._runtime.state.properties[name] = value
    path = str(folder / "saved")
    CheckpointState.save_checkpoint(opt._runtime.state, path, include_optimizer_state=True)
    return path, str(folder / "artifacts")


def _same(a, b):
    """Equal dictionaries (nested) of arrays, byte for byte, dtype and shape."""
    assert list(a) == list(b)
    for name, value in a.items():
        if isinstance(value, dict):
            _same(value, b[name])
        else:
            assert value.dtype == b[name].dtype and value.shape == b[name].shape, name
            assert value.tobytes() == b[name].tobytes(), name


def _runtime_view(path):
    """What 1.19.2 loads: trained and frozen parameters (sorted by name), properties."""
    state = CheckpointState.load_checkpoint(path)
    parameters = sorted((name, p) for name, p in state.parameters)
    trained = {name: p.data.copy() for name, p in parameters if p.requires_grad}
    frozen = {name: p.data.copy() for name, p in parameters if not p.requires_grad}
    return trained, frozen, dict(state.properties)


def _sorted(arrays):
    return dict(sorted(arrays.items()))


def test_reads_what_1_19_2_saves(saved):
    path, _ = saved
    content = read_checkpoint_file(path)
    trained, frozen, properties = _runtime_view(path)
    _same(_sorted(content.trained), trained)
    _same(_sorted(content.frozen), frozen)
    assert content.properties == properties
    assert content.properties == {**PROPERTIES, "big": 2**62}  # int64 and str come back as set
    assert content.step == 6  # 3 epochs of 2 batches
    assert sorted(content.moments) == sorted(content.trained)
    for name, moments in content.moments.items():
        assert sorted(moments) == ["momentum0", "momentum1"]
        assert all(m.shape == content.trained[name].shape for m in moments.values())
    with open(path, "rb") as f:
        data = f.read()
    assert data[4:8] == FILE_IDENTIFIER
    assert Checkpoint.Checkpoint.GetRootAs(data, 0).Version() == CHECKPOINT_VERSION == 2
    assert Checkpoint.Checkpoint.GetRootAs(data, 0).OptimizerGroups(0).GroupName() == b"group0"
    again = read_checkpoint_file(data + b"\nhelpers-sha256:" + b"0" * 64)  # trailing bytes
    _same(again.moments, content.moments)
    moments = adamw_moments(data, ["intercept0"])
    _same(dict(zip("ab", moments)), dict(zip("ab", content.moments["intercept0"].values())))


def test_1_19_2_loads_what_is_written(saved, tmp_path):
    """write(read(x)) loads in 1.19.2 with x's parameters and properties, and 1.19.2 saves it
    back with the same moments and step."""
    path, _ = saved
    content = read_checkpoint_file(path)
    written = str(tmp_path / "written")
    write_checkpoint_file(written, *content)
    (trained, frozen, properties), theirs = _runtime_view(written), _runtime_view(path)
    _same(trained, theirs[0])
    _same(frozen, theirs[1])
    assert properties == theirs[2]
    resaved = str(tmp_path / "resaved")
    CheckpointState.save_checkpoint(CheckpointState.load_checkpoint(written), resaved, True)
    back = read_checkpoint_file(resaved)
    _same(back.trained, content.trained)
    _same(back.moments, content.moments)
    assert (back.properties, back.step) == (content.properties, content.step)


def test_frozen_parameters_and_properties_round_trip(tmp_path):
    """Types 1.19.2 keeps: frozen parameters of any number type and shape, int64 bounds, float32
    and str properties (an empty one too)."""
    trained = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.float32([0.5])}
    frozen = {
        "mean": np.linspace(0, 1, 4, dtype=np.float32),
        "count": np.array(7, dtype=np.int64),
        "table": np.arange(4, dtype=np.int32).reshape(2, 1, 2),
    }
    properties = {"low": -(2**63), "high": 2**63 - 1, "x": 0.1, "s": "ü", "empty": ""}
    moments = {n: {"momentum0": -v, "momentum1": v * v} for n, v in trained.items()}
    path = str(tmp_path / "c")
    write_checkpoint_file(path, trained, frozen, properties, moments, step=11, learning_rate=0.5)
    loaded_trained, loaded_frozen, loaded_properties = _runtime_view(path)
    _same(loaded_trained, _sorted(trained))
    _same(loaded_frozen, _sorted(frozen))
    assert loaded_properties == {**properties, "x": float(np.float32(0.1))}
    resaved = str(tmp_path / "resaved")
    CheckpointState.save_checkpoint(CheckpointState.load_checkpoint(path), resaved, True)
    content = read_checkpoint_file(resaved)
    _same(_sorted(content.frozen), _sorted(frozen))
    _same(_sorted(content.moments), _sorted(moments))
    assert content.step == 11 and content.properties == loaded_properties
    # without optimizer state or properties, the bytes 1.19.2 writes
    write_checkpoint_file(path, trained, frozen)
    CheckpointState.save_checkpoint(CheckpointState.load_checkpoint(path), resaved, False)
    with open(resaved, "rb") as f:
        plain = f.read()
    assert read_checkpoint_file(plain)[3:] == ({}, 0)
    assert checkpoint_bytes(content.trained, content.frozen) == plain


def _continue(path, artifacts, steps=5):
    """Losses and weights of ``steps`` AdamW steps from checkpoint ``path``, built as the project
    builds them (:meth:`helpers.whole_training.session.WholeTrainingSession._load`)."""
    X, y = _data()
    state = CheckpointState.load_checkpoint(path)
    module = Module(
        os.path.join(artifacts, "training_model.onnx"),
        state,
        None,
        device="cpu",
        session_options=session_options(1, "model"),
    )
    optimizer = C.Optimizer(
        os.path.join(artifacts, "optimizer_model.onnx"),
        state._state,
        module._device,
        session_options(1, "update"),
    )
    module.train()
    losses = []
    for i in range(steps):
        rows = slice(8 * (i % 2), 8 * (i % 2) + 8)
        losses.append(float(module(X[rows], y[rows])))
        optimizer.set_learning_rate(0.01)
        optimizer.optimizer_step()
        module.lazy_reset_grad()
    return losses, {name: p.data.copy() for name, p in state.parameters}


def test_adamw_continues_exactly_from_a_written_checkpoint(saved, tmp_path, monkeypatch):
    path, artifacts = saved
    content = read_checkpoint_file(path)
    written = str(tmp_path / "written")
    write_checkpoint_file(written, *content)
    losses, weights = _continue(path, artifacts)
    written_losses, written_weights = _continue(written, artifacts)
    assert written_losses == losses
    _same(_sorted(written_weights), _sorted(weights))
    # the comparison has teeth: without the moments, or their step, the losses differ
    zeros = {w: {k: np.zeros_like(v) for k, v in m.items()} for w, m in content.moments.items()}
    write_checkpoint_file(written, content.trained, moments=zeros, step=content.step)
    assert _continue(written, artifacts)[0][1:] != losses[1:]
    write_checkpoint_file(written, content.trained, moments=content.moments, step=1)
    assert _continue(written, artifacts)[0][1:] != losses[1:]
    # and 1.19.2's optimizer takes the moments of its group 'group0' only
    monkeypatch.setattr(checkpoint_file, "GROUP_NAME", "group1")
    write_checkpoint_file(written, *content)
    assert _continue(written, artifacts)[0][1:] != losses[1:]


def test_resume_from_a_rewritten_checkpoint_with_statistics(tmp_path):
    """A batch normalization's statistics are frozen parameters, its batch counter an int
    property: a training resumed from the checkpoint rewritten here continues exactly."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 2, 5)).astype(np.float32)
    y = np.tanh(X[:, 0, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv1d(2, 3, 1), nn.BatchNorm1d(3, momentum=None), nn.Flatten(), nn.Linear(15, 1)
    )
    onx = add_loss_output(export_for_training(net, torch.from_numpy(X[:2])))
    options = dict(
        solver="adamw", batch_size=10, learning_rate=0.05, random_state=0, validation_every=0
    )
    path = str(tmp_path / "ckpt")
    OrtGradientOptimizer(onx, max_iter=2, checkpoint_path=path, **options).fit(X, y)
    content = read_checkpoint_file(path)  # the checksum at its end is ignored
    assert content.frozen and CHECKPOINT_KEY in content.properties
    assert any(isinstance(v, int) for v in content.properties.values())
    state, shapes = read_checkpoint(path)
    assert shapes == {n: v.shape for n, v in {**content.trained, **content.frozen}.items()}
    rewritten = str(tmp_path / "rewritten")
    write_checkpoint_file(rewritten, *content)
    append_checksum(rewritten)
    assert read_checkpoint(rewritten)[0] == state
    results = []
    for source in (path, rewritten):
        resumed = OrtGradientOptimizer(onx, max_iter=1, warm_start=True, **options)
        resumed.load_checkpoint(source).fit(X, y)
        results.append((resumed.train_losses_, resumed.get_state()))
    assert results[0][0] == results[1][0]
    _same(_sorted(results[0][1]), _sorted(results[1][1]))


def test_damaged_checkpoints_give_a_clear_value_error(saved, tmp_path, monkeypatch):
    path, _ = saved
    with open(path, "rb") as f:
        data = f.read()
    content = read_checkpoint_file(data)
    with pytest.raises(ValueError, match="damaged or truncated"):
        read_checkpoint_file(data[: len(data) // 2])
    failures = 0
    for size in range(len(data)):  # cut anywhere: a ValueError, or (padding cut) the same content
        try:
            cut = read_checkpoint_file(data[:size])
        except ValueError:
            failures += 1
            continue
        _same(cut.trained, content.trained)
        _same(cut.moments, content.moments)
        assert cut.properties == content.properties
    assert failures >= len(data) - 8
    rng = np.random.default_rng(0)
    for _ in range(300):  # flipped bytes: a ValueError or values read, never another exception
        damaged = np.frombuffer(data, np.uint8).copy()
        damaged[rng.integers(8, len(data), 3)] = rng.integers(0, 256, 3)
        try:
            read_checkpoint_file(damaged.tobytes())
        except ValueError:
            pass
    with pytest.raises(ValueError, match="lacks the file identifier"):
        read_checkpoint_file(data[:4] + b"ONNX" + data[8:])
    # a version 1.19.2 refuses is refused here too
    monkeypatch.setattr(checkpoint_file, "CHECKPOINT_VERSION", CHECKPOINT_VERSION + 1)
    newer = str(tmp_path / "newer")
    write_checkpoint_file(newer, content.trained)
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="version 3 is not supported"):
        CheckpointState.load_checkpoint(newer)
    with pytest.raises(ValueError, match="its version is 3"):
        read_checkpoint_file(newer)
    # the project's checks name the file
    cut = str(tmp_path / "cut")
    with open(cut, "wb") as f:
        f.write(data[:200])
    append_checksum(cut)
    with pytest.raises(CheckpointError, match="cut is damaged or not a checkpoint"):
        read_checkpoint(cut)
    with pytest.raises(ValueError, match="no AdamW moments for 'w'"):
        adamw_moments(checkpoint_bytes({"w": [1.0]}), ["w"])


def test_write_refuses_what_a_checkpoint_cannot_hold():
    with pytest.raises(TypeError, match="property 'flag'"):
        checkpoint_bytes({"w": [1.0]}, properties={"flag": True})
    with pytest.raises(ValueError, match="does not fit in an int64"):
        checkpoint_bytes({"w": [1.0]}, properties={"n": 2**63})
    with pytest.raises(TypeError, match="tensor 'names'"):
        checkpoint_bytes({"w": [1.0]}, frozen={"names": np.array(["a", "b"])})
