"""Time to a held-out accuracy: like-for-like fits, the time to a target, the CSV, the command."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks.report import study_sections
from benchmarks.studies import time_to_accuracy as tta
from benchmarks.workloads.frameworks import ORT_FORWARD_BACKWARD, ORT_WHOLE, TORCH
from helpers.teaching.datasets import load_classification_standardized

FRAMEWORKS = {ORT_WHOLE, ORT_FORWARD_BACKWARD, TORCH}


@pytest.mark.parametrize("task", tta.TASKS, ids=[t.name for t in tta.TASKS])
def test_frameworks_train_the_same_model_alike(task):
    digits = load_classification_standardized("digits")
    X = digits.X_train[:300].reshape(-1, *task.sample_shape)
    X_test = digits.X_test.reshape(-1, *task.sample_shape)
    torch.manual_seed(0)
    module = task.build()
    start = {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
    fits = tta.framework_fits(module, X, digits.y_train[:300], n_threads=1)
    trained = {name: fit(1) for name, fit in fits.items()}
    assert set(trained) == FRAMEWORKS
    torch_loss, torch_model = trained[TORCH]
    reference = {k: v.numpy() for k, v in torch_model.state_dict().items()}
    accuracy = {
        name: np.mean(tta.class_scores(model, X_test).argmax(axis=1) == digits.y_test)
        for name, (_, model) in trained.items()
    }
    for name in (ORT_WHOLE, ORT_FORWARD_BACKWARD):
        loss, optimizer = trained[name]
        weights = optimizer.get_state()
        assert weights and set(weights) <= set(start)  # the module's own weight names
        # one epoch (6 steps of the same batches, plain SGD) moved the weights alike: far less
        # apart than they moved (a convolution's bias before a batch normalization does not move)
        moved = {key: np.abs(reference[key] - start[key]).max() for key in weights}
        assert sorted(moved.values())[1] > 1e-3
        for key, value in weights.items():
            np.testing.assert_allclose(
                value, reference[key], atol=1e-3 * moved[key] + 1e-6, err_msg=key
            )
        np.testing.assert_allclose(loss, torch_loss, rtol=1e-4)
        # the same model: the same held-out predictions, up to a near tie
        assert abs(accuracy[name] - accuracy[TORCH]) <= 1 / len(X_test)
    untrained = np.mean(tta.class_scores(module, X_test).argmax(axis=1) == digits.y_test)
    assert accuracy[TORCH] > untrained + 0.05, (untrained, accuracy)


def _curve(framework, values, seconds=None, task="t"):
    seconds = seconds or [0.1 * (k + 1) for k in range(len(values))]
    return pd.DataFrame(
        {
            "task": task,
            "framework": framework,
            "epoch": range(1, len(values) + 1),
            "seconds": seconds,
            "heldout_metric": "accuracy",
            "heldout_value": values,
            "target": 0.9,
            "threads": 2,
        }
    )


def test_time_to_target_is_the_first_epoch_that_reaches_it():
    points = _curve(TORCH, [0.5, 0.9, 0.85, 0.95], seconds=[0.1, 0.25, 0.3, 0.4])

    def reached(points, target):
        row = study_sections.time_to_target(points, target)
        return None if row is None else (row.seconds, int(row.epoch))

    assert reached(points, 0.9) == (0.25, 2)  # reached exactly, then lost: the first
    assert reached(points, 0.92) == (0.4, 4)
    assert reached(points.iloc[::-1], 0.9) == (0.25, 2)  # epochs in any order
    assert reached(points, 0.99) is None


def test_summary_says_who_reaches_the_target_first_and_who_never_does():
    curves = pd.concat(
        [
            _curve(TORCH, [0.5, 0.8, 0.91]),  # 0.3 s
            _curve(ORT_WHOLE, [0.6, 0.92, 0.95]),  # 0.2 s: 1.5x faster
            _curve(ORT_FORWARD_BACKWARD, [0.5, 0.7, 0.8]),  # never
            _curve(TORCH, [0.5, 0.9], task="u"),
            _curve(ORT_WHOLE, [0.5, 0.6], task="u"),
            _curve(ORT_FORWARD_BACKWARD, [0.5, 0.6], task="u"),
        ]
    )
    table = study_sections.target_table(curves).set_index(["task", "framework"])
    assert table.loc[("t", ORT_WHOLE), "ratio_to_torch"] == pytest.approx(2 / 3)
    assert math.isnan(table.loc[("t", ORT_FORWARD_BACKWARD), "ratio_to_torch"])
    assert table.loc[("t", ORT_WHOLE), "final"] == 0.95
    lines = study_sections.time_to_accuracy_lines(curves)
    assert lines[0] == (
        "Time to a held-out target, set-up included (fresh fits, 2 threads): "
        "on the t (90% held-out accuracy), ort whole-training takes 0.20 s against torch eager's "
        "0.30 s: 1.5x faster; on the u (90% held-out accuracy), torch eager takes 0.20 s, "
        "no onnxruntime API reaches it in 2 epochs."
    )
    rows = {line.split(" | ")[1]: line for line in lines[4:] if line.startswith("| t |")}
    assert "| not reached in 3 epochs | - | 80.0% | - |" in rows[ORT_FORWARD_BACKWARD]
    assert "| 0.20 | 2 | 95.0% | 1.5x faster |" in rows[ORT_WHOLE]
    # a target given for each task replaces the CSV's
    assert (
        "on the t (80% held-out accuracy), ort whole-training takes 0.20 s"
        in study_sections.time_to_accuracy_lines(curves, {"t": 0.8, "u": 0.5})[0]
    )


def test_accuracy_curves_have_the_csv_columns():
    curves = tta.accuracy_curves(tasks=tta.TASKS[1:], epochs=2, n_threads=1, repeats=1, n_train=100)
    assert tuple(curves.columns) == tta.COLUMNS
    assert set(curves.framework) == FRAMEWORKS and len(curves) == 3 * 2
    assert (curves.seconds > 0).all() and curves.heldout_value.between(0, 1).all()
    assert set(curves.heldout_metric) == {"accuracy"} and set(curves.target) == {0.95}
    by_epoch = curves.pivot(index="epoch", columns="framework", values="heldout_value")
    assert (by_epoch.max(axis=1) - by_epoch.min(axis=1) <= 1 / 450).all()


def test_quick_command_writes_the_csv_and_the_figure(tmp_path, capsys):
    assert tta.main(["--quick", "--threads", "1", "--out", str(tmp_path)]) == 0
    curves = pd.read_csv(tmp_path / "time_to_accuracy.csv")
    assert list(curves.columns) == list(tta.COLUMNS)
    assert set(curves.task) == {t.name for t in tta.TASKS} and set(curves.framework) == FRAMEWORKS
    assert set(curves.threads) == {1}
    assert (tmp_path / "time_to_accuracy.png").read_bytes().startswith(b"\x89PNG")
    printed = capsys.readouterr().out
    assert printed.startswith("Time to a held-out target, set-up included (fresh fits, 1 thread)")


def test_time_to_target_shows_the_rounds_range_when_recorded():
    torch_curve = _curve(TORCH, [0.5, 0.95]).assign(seconds_slowest=[0.15, 0.45])
    ort_curve = _curve(ORT_WHOLE, [0.95, 0.96]).assign(seconds_slowest=[0.12, 0.3])
    lines = study_sections.time_to_accuracy_lines(pd.concat([torch_curve, ort_curve]))
    rows = {line.split(" | ")[1]: line for line in lines if line.startswith("| t |")}
    assert "| 0.20 (0.20-0.45) | 2 |" in rows[TORCH]
    assert "| 0.10 (0.10-0.12) | 1 |" in rows[ORT_WHOLE]
