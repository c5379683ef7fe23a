"""Checkpoints: a resumed training continues exactly; the LinearLRScheduler workaround."""

import os

import numpy as np
import pytest

from helpers import OrtGradientOptimizer


def _optimizer(onx_loss, solver, **kwargs):
    params = dict(solver=solver, learning_rate=0.01, batch_size=32, random_state=3)
    params.update(kwargs)
    return OrtGradientOptimizer(onx_loss, **params)


@pytest.mark.parametrize("solver", ["sgd", "nesterov", "adamw"])
def test_resume_equals_uninterrupted(onx_loss, linear_data, tmp_path, solver):
    X, y = linear_data
    uninterrupted = _optimizer(onx_loss, solver, max_iter=6).fit(X, y)

    path = str(tmp_path / "train.ckpt")
    first = _optimizer(onx_loss, solver, max_iter=4, checkpoint_path=path, checkpoint_every=2)
    first.fit(X, y)  # "interrupted" after 4 epochs: the last checkpoint is epoch 4
    del first
    resumed = _optimizer(onx_loss, solver, max_iter=2, warm_start=True).load_checkpoint(path)
    assert resumed.n_iter_ == 4
    resumed.fit(X, y)
    assert resumed.n_iter_ == 6
    np.testing.assert_allclose(resumed.train_losses_, uninterrupted.train_losses_, rtol=1e-6)
    for name, value in uninterrupted.get_state().items():
        np.testing.assert_allclose(resumed.get_state()[name], value, rtol=1e-6)


def test_checkpoint_written_atomically_every_n_epochs(onx_loss, linear_data, tmp_path):
    X, y = linear_data
    path = tmp_path / "ckpt"
    seen = []

    class Spy(OrtGradientOptimizer):
        def save_checkpoint(self, p):
            super().save_checkpoint(p)
            seen.append(self.n_iter_)

    Spy(onx_loss, max_iter=5, checkpoint_path=str(path), checkpoint_every=2).fit(X, y)
    assert seen == [2, 4]
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no temporary file left


def test_load_checkpoint_checks_the_training(onx_loss, linear_data, tmp_path):
    X, y = linear_data
    path = str(tmp_path / "c")
    _optimizer(onx_loss, "sgd", max_iter=1, checkpoint_path=path).fit(X, y)
    with pytest.raises(ValueError, match=r"SGDRule\(\).*AdamWRule"):
        _optimizer(onx_loss, "adamw", warm_start=True).load_checkpoint(path)


def test_artifact_dir_keeps_the_artifacts(onx_loss, linear_data, tmp_path):
    X, y = linear_data
    folder = tmp_path / "artifacts"
    _optimizer(onx_loss, "sgd", max_iter=1, artifact_dir=str(folder)).fit(X, y)
    assert sorted(os.listdir(folder)) == [
        "checkpoint",
        "eval_model.onnx",
        "optimizer_model.onnx",
        "training_model.onnx",
    ]


def _module_and_optimizer(onx_loss, folder):
    from onnxruntime.training.api import CheckpointState, Module, Optimizer  # noqa: PLC0415

    from helpers.whole_training.artifacts import generate_training_artifacts  # noqa: PLC0415

    folder.mkdir()
    generate_training_artifacts(onx_loss, ["coef", "intercept"], str(folder))
    state = CheckpointState.load_checkpoint(str(folder / "checkpoint"))
    module = Module(str(folder / "training_model.onnx"), state)
    return module, Optimizer(str(folder / "optimizer_model.onnx"), module)


def _learning_rates(module, optimizer, scheduler, X, y, steps):
    rates = []
    for _ in range(steps):
        rates.append(optimizer.get_learning_rate())
        module(X, y)
        optimizer.step()
        module.lazy_reset_grad()
        scheduler.step()
    return rates


@pytest.mark.training_package
def test_linear_lr_scheduler_workaround(onx_loss, linear_data, tmp_path):
    from onnxruntime.training.api import LinearLRScheduler  # noqa: PLC0415

    from helpers.whole_training.schedulers import linear_learning_rate, linear_lr_scheduler  # noqa: PLC0415

    X, y = linear_data[0][:20], linear_data[1][:20].reshape(-1, 1)
    expected = [linear_learning_rate(s, 2, 10, 0.1) for s in range(12)]
    assert expected[:4] == pytest.approx([0.0, 0.05, 0.1, 0.0875])
    assert expected[10:] == [0.0, 0.0]

    module, optimizer = _module_and_optimizer(onx_loss, tmp_path / "a")
    fixed = linear_lr_scheduler(optimizer, 2, 10, 0.1)
    np.testing.assert_allclose(
        _learning_rates(module, optimizer, fixed, X, y, 12), expected, atol=1e-7
    )

    # the bug itself, as 1.19.2 has it: the counts come out swapped
    module, optimizer = _module_and_optimizer(onx_loss, tmp_path / "b")
    raw = LinearLRScheduler(optimizer, 2, 10, 0.1)
    swapped = [linear_learning_rate(s, 10, 2, 0.1) for s in range(12)]
    np.testing.assert_allclose(
        _learning_rates(module, optimizer, raw, X, y, 12), swapped, atol=1e-7
    )
    with pytest.raises(ValueError, match="warmup_step_count <= total_step_count"):
        linear_lr_scheduler(optimizer, 5, 2, 0.1)
