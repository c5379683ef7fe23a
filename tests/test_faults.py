"""Faults a user runs into: a last update that diverges, Ctrl-C in a warm fit, damaged checkpoints,
pickles."""

import errno
import os
import pickle
import signal

import numpy as np
import pytest
from conftest import APIS, make_seeded_optimizer

from helpers import TrainingDivergedError
from helpers.core.training.training_loop import TrainingState
from helpers.teaching.model_factories import mlp_onnx
from helpers.whole_training.checkpoints import CheckpointError

X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
Y = np.tanh(X[:, :2].sum(axis=1)).astype(np.float32)


def _optimizer(api, hidden=5, max_iter=4, batch_size=8, learning_rate=0.05, **params):
    onx = mlp_onnx(4, hidden=(hidden,))
    return make_seeded_optimizer(api, onx, max_iter, batch_size, learning_rate, **params)


@pytest.mark.parametrize("api", APIS)
def test_the_last_update_of_a_fit_is_checked_for_divergence(api):
    """One batch, one epoch: the update that makes the weights infinite is seen by no loss, yet it
    is caught."""
    huge = X[:8] * 1e9  # a finite loss (about 1e18), then an update of about 1e25 * 1e18
    with pytest.raises(TrainingDivergedError, match="left non-finite values"):
        _optimizer(api, max_iter=1, batch_size=8, learning_rate=1e25).fit(huge, Y[:8])
    opt = _optimizer(api, max_iter=1, batch_size=8, learning_rate=1e25, on_divergence="stop")
    with pytest.warns(RuntimeWarning, match="weights are those of the start of the epoch"):
        opt.fit(huge, Y[:8])
    assert all(np.isfinite(w).all() for w in opt.get_state().values())
    assert opt.t_ == 0 and opt.n_iter_ == 0  # the counters agree with the weights
    assert np.isfinite(opt.predict(X[:3])).all()


def _interrupt_at_step(monkeypatch, opt, step):
    """Send SIGINT to this process during training step ``step`` (counted from the call)."""
    count = {"steps": 0}
    original = type(opt)._train_step

    def train_step(self, batch, t):
        count["steps"] += 1
        if count["steps"] == step:
            os.kill(os.getpid(), signal.SIGINT)  # arrives in the middle of the step
        return original(self, batch, t)

    monkeypatch.setattr(type(opt), "_train_step", train_step)


@pytest.mark.parametrize("solver", ["sgd", "momentum", "adamw"])
@pytest.mark.parametrize("api", APIS)
def test_ctrl_c_in_a_warm_fit_records_how_far_it_went_and_resumes_exactly(api, solver, monkeypatch):
    straight = _optimizer(api, solver=solver, max_iter=4).fit(X, Y)
    opt = _optimizer(api, solver=solver, max_iter=2, warm_start=True).fit(X, Y)
    _interrupt_at_step(monkeypatch, opt, step=3)  # epoch 3 of 5 batches: stops after its third step
    with pytest.raises(KeyboardInterrupt):
        opt.fit(X, Y)
    monkeypatch.undo()
    assert opt.n_iter_ == 2 and opt.partial_epoch_rows_ == 24 and opt.t_ == 2 * 5 + 3
    assert len(opt.train_losses_) == 2
    resumed = pickle.loads(pickle.dumps(opt))  # the record travels with the estimator
    resumed.set_params(max_iter=2).fit(X, Y)  # finishes epoch 3, then epoch 4
    assert resumed.n_iter_ == 4 and resumed.partial_epoch_rows_ == 0 and resumed.t_ == straight.t_
    np.testing.assert_allclose(resumed.train_losses_, straight.train_losses_, rtol=1e-5)
    for name, value in straight.get_state().items():
        np.testing.assert_allclose(resumed.get_state()[name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", APIS)
def test_a_resumed_epoch_that_diverges_keeps_the_record_it_resumed(api, monkeypatch):
    """Divergence puts the epoch's start back, the interrupted epoch's record included: a later fit
    still resumes it."""
    from helpers.core.training import estimator

    straight = _optimizer(api, max_iter=4).fit(X, Y)
    opt = _optimizer(api, max_iter=2, warm_start=True, on_divergence="stop").fit(X, Y)
    _interrupt_at_step(monkeypatch, opt, step=3)
    with pytest.raises(KeyboardInterrupt):
        opt.fit(X, Y)
    monkeypatch.undo()

    def diverged(weights, statistics, epoch):
        raise TrainingDivergedError(f"Epoch {epoch} left non-finite values (simulated).")

    monkeypatch.setattr(estimator, "check_finite_state", diverged)
    with pytest.warns(RuntimeWarning, match="weights are those of the start of the epoch"):
        opt.fit(X, Y)
    monkeypatch.undo()
    assert opt.n_iter_ == 2 and opt.partial_epoch_rows_ == 24 and opt.t_ == 2 * 5 + 3
    opt.fit(X, Y)  # finishes epoch 3, then epoch 4
    assert opt.n_iter_ == 4 and opt.partial_epoch_rows_ == 0 and opt.t_ == straight.t_
    for name, value in straight.get_state().items():
        np.testing.assert_allclose(opt.get_state()[name], value, rtol=1e-5, atol=1e-6)


def test_ctrl_c_in_a_fresh_fit_leaves_it_unfitted(monkeypatch):
    opt = _optimizer("whole")
    _interrupt_at_step(monkeypatch, opt, step=2)
    with pytest.raises(KeyboardInterrupt):
        opt.fit(X, Y)
    with pytest.raises(Exception, match="not fitted"):
        opt.predict(X)


@pytest.mark.parametrize("api", APIS)
def test_unpickled_adamw_continues_as_the_uninterrupted_training(api):
    straight = _optimizer(api, solver="adamw", max_iter=4).fit(X, Y)
    half = _optimizer(api, solver="adamw", max_iter=2, warm_start=True).fit(X, Y)
    resumed = pickle.loads(pickle.dumps(half)).fit(X, Y)
    np.testing.assert_allclose(resumed.train_losses_, straight.train_losses_, rtol=1e-5)
    for name, value in straight.get_state().items():
        np.testing.assert_allclose(resumed.get_state()[name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", ["sgd", "adamw"])
@pytest.mark.parametrize("api", APIS)
def test_a_pickle_keeps_the_training_state_an_epoch_start_restores(api, solver):
    """One snapshot of a session: a pickle carries its TrainingState, which a rebuild restores."""
    opt = _optimizer(api, solver=solver, max_iter=2).fit(X, Y)
    now = TrainingState.of(opt._runtime)
    restored = pickle.loads(pickle.dumps(opt))
    saved = restored.__dict__["_saved_state"]
    assert type(saved) is TrainingState
    for name, value in now.weights.items():
        np.testing.assert_array_equal(saved.weights[name], value)
    # the training package's whole-training API runs SGD and AdamW in its optimizer (a checkpoint
    # keeps the moments); the backend 'onnx' runs every rule as an update graph
    in_the_runtime = api == "whole" and opt.backend_ == "onnxruntime-training"
    assert (saved.update_state is None) == in_the_runtime
    np.testing.assert_array_equal(restored.predict(X), opt.predict(X))  # rebuilt from the state


@pytest.fixture()
def checkpoint(tmp_path):
    path = str(tmp_path / "train.ckpt")
    opt = _optimizer("whole", solver="adamw", max_iter=2, checkpoint_path=path).fit(X, Y)
    return path, opt


def test_a_damaged_checkpoint_is_named_and_leaves_the_estimator_alone(checkpoint, tmp_path):
    """Any byte changed, in the weights, AdamW's moments or the training state, is refused by
    name."""
    path, _ = checkpoint
    content = open(path, "rb").read()
    target = tmp_path / "damaged.ckpt"
    for position in np.random.default_rng(0).choice(len(content), 60, replace=False):
        damaged = bytearray(content)
        damaged[position] ^= 0x5A
        target.write_bytes(bytes(damaged))
        opt = _optimizer("whole", solver="adamw", max_iter=1, warm_start=True)
        with pytest.raises(CheckpointError, match=f"{target} is damaged or foreign"):
            opt.load_checkpoint(str(target))
        assert not hasattr(opt, "n_iter_")  # nothing half-loaded
    target.write_bytes(content[: len(content) // 2])  # cut short
    with pytest.raises(CheckpointError, match="it has no checksum"):
        _optimizer("whole", solver="adamw", warm_start=True).load_checkpoint(str(target))


def test_a_foreign_or_missing_checkpoint_is_refused_before_loading(checkpoint, tmp_path):
    path, _ = checkpoint
    wider = _optimizer("whole", hidden=8, solver="adamw", max_iter=1, warm_start=True)
    with pytest.raises(
        CheckpointError,
        match=r"saved from another model: it has weight 'coefficient0' of shape \(4, 5\), this "
        r"model's is \(4, 8\)",
    ):
        wider.load_checkpoint(path)
    assert not hasattr(wider, "n_iter_")
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        wider.load_checkpoint(str(tmp_path / "missing.ckpt"))


def test_a_checkpoint_that_cannot_be_written_keeps_the_previous_one_and_training_goes_on(
    tmp_path, monkeypatch
):
    path = str(tmp_path / "train.ckpt")
    opt = _optimizer("whole", max_iter=1, checkpoint_path=path, warm_start=True).fit(X, Y)
    saved = open(path, "rb").read()

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if opt.backend_ == "onnxruntime-training":  # where each backend writes the file
        from onnxruntime.training.api import CheckpointState

        monkeypatch.setattr(CheckpointState, "save_checkpoint", disk_full)
    else:
        from helpers.portable import atomic_files

        monkeypatch.setattr(atomic_files.os, "fsync", disk_full)
    with pytest.warns(
        RuntimeWarning, match="Could not write the checkpoint .* No space left on device"
    ):
        opt.set_params(max_iter=2).fit(X, Y)
    assert opt.n_iter_ == 3  # the epochs trained since are kept in the estimator
    assert open(path, "rb").read() == saved
    assert [
        name for name in os.listdir(tmp_path) if name != "train.ckpt"
    ] == []  # no temporary file left


def test_the_training_layers_raise_the_portable_divergence_error():
    """One class: what fit raises is helpers.portable's, the PortableTrainer's error."""
    from helpers.core.training.epoch_losses import EpochLosses
    from helpers.portable.divergence import TrainingDivergedError as portable_error

    assert TrainingDivergedError is portable_error
    losses = EpochLosses(float, epoch=2)
    losses.add(float("inf"), 0, 8)
    with pytest.raises(portable_error, match="epoch 2, rows 0:8.*Try a smaller learning rate"):
        losses.total()
