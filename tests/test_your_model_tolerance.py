"""bench_your_model judges a loss by torch's own spread, and a framework that diverges is a row."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from benchmarks.studies import peak_memory, peak_memory_process
from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import your_model as ym
from benchmarks.workloads import your_model_record as yr
from benchmarks.workloads import your_model_spread as ys
from helpers import TrainingDivergedError


def _rows(final, failed, tolerance, spread):
    costs = {name: {"step_s": 0.001, "fixed_s": 0.01} for name in final}
    curves = pd.DataFrame({"framework": list(final), "seconds": 0.1, "loss": list(final.values())})
    common = {"benchmark": "your_model", "batch_size": 32}
    rows = yr.record_rows(common, costs, final, failed, curves, tolerance=tolerance, spread=spread)
    return {row["framework"]: row for row in rows}


@pytest.mark.parametrize(
    "variants, comparable",
    [
        # torch eager moves its own loss by 0.3%: a framework 0.27% off computes the same training
        ({"1 thread": 1.003, "float64": 0.9995}, True),
        # torch eager agrees with itself to 0.01%: the same gap is the floor's business (0.1%)
        ({"1 thread": 1.0001, "float64": 1.0}, False),
    ],
)
def test_the_tolerance_is_torch_own_spread_times_the_safety_factor(variants, comparable):
    spread = ys.torch_spread(1.0, variants)
    tolerance = ys.loss_tolerance(spread)
    assert tolerance == pytest.approx(max(ys.FLOOR, ys.SAFETY_FACTOR * spread))
    rows = _rows({fw.TORCH: 1.0, fw.ORT_FORWARD_BACKWARD: 1.0027}, {}, tolerance, spread)
    row = rows[fw.ORT_FORWARD_BACKWARD]
    assert row["comparable"] is comparable
    assert row["loss_gap"] == pytest.approx(0.0027)
    assert row["tolerance"] == tolerance and row["torch_spread"] == spread
    sentence = ys.tolerance_sentence(tolerance, spread, variants)
    assert f"within {100 * tolerance:.2g}% of torch eager's" in sentence
    assert ("2 x the largest gap" in sentence) is comparable


def test_the_spread_is_the_widest_gap_between_torch_runs_a_failed_one_left_out():
    variants = {"1 thread": 1.01, "oneDNN off": 0.99, "float64": "TrainingDivergedError: epoch 3"}
    assert ys.torch_spread(1.0, variants) == pytest.approx(0.02)
    assert ys.loss_tolerance(ys.torch_spread(1.0, variants)) == pytest.approx(0.04)
    assert "Not counted: float64 (TrainingDivergedError" in ys.tolerance_sentence(
        0.04, 0.02, variants
    )
    # torch eager did not train: no reference, nothing is comparable
    assert np.isnan(ys.loss_tolerance(ys.torch_spread(None, variants)))
    assert not _rows({fw.ORT_WHOLE: 1.0}, {fw.TORCH: "x"}, float("nan"), None)[fw.ORT_WHOLE][
        "comparable"
    ]


def _mobile_block():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),  # depthwise
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


def test_torch_variants_train_a_batch_norm_depthwise_block_and_restore_the_settings():
    X = np.random.default_rng(0).standard_normal((64, 3, 8, 8)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 4, 64)
    threads, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    common = dict(batch_size=16, learning_rate=0.05, random_state=0)
    reference = ym.torch_fit(_mobile_block, X, y, "classification", **common)(2)
    variants = ys.torch_variant_losses(_mobile_block, X, y, "classification", 2, 2, **common)
    assert list(variants) == ["1 thread", "oneDNN off", "float64"]
    # none changes the training mathematically: rounding apart, the same loss
    assert all(v == pytest.approx(reference, rel=1e-3) for v in variants.values())
    assert torch.get_num_threads() == threads and torch.backends.mkldnn.enabled == onednn
    assert 0 <= ys.torch_spread(reference, variants) < 1e-3


def _diverges_after(epochs_ok):
    def fit(epochs):
        if epochs > epochs_ok:
            raise TrainingDivergedError(
                f"The updates of epoch {epochs} left non-finite values in 'features.0.0.weight'"
            )
        return 1.0

    return fit


def test_a_framework_that_diverges_is_a_row_and_the_others_still_run():
    candidates = {
        fw.TORCH: lambda epochs: 1.0,
        fw.TORCH_COMPILE: lambda epochs: float("nan"),  # torch goes on with NaN
        fw.ORT_WHOLE: lambda epochs: 1.0005,
        fw.ORT_FORWARD_BACKWARD: _diverges_after(1),  # trains its first epoch, not the second
    }
    fits, failed, _ = ym.first_fits(candidates)
    assert set(fits) == {fw.TORCH, fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD}
    final, diverged = ym.final_losses(fits, 4)
    failed.update(diverged)
    assert set(final) == {fw.TORCH, fw.ORT_WHOLE}
    assert all(ym.is_divergence(reason) for reason in failed.values())
    assert "\n" not in failed[fw.ORT_FORWARD_BACKWARD]
    rows = _rows(final, failed, 1e-3, 0.0)
    assert set(rows) == set(candidates)
    assert rows[fw.ORT_WHOLE]["comparable"] is True and rows[fw.ORT_WHOLE]["error"] is None
    for name in (fw.TORCH_COMPILE, fw.ORT_FORWARD_BACKWARD):
        assert rows[name]["note"] == "diverged: see error"
        assert rows[name]["error"].startswith("TrainingDivergedError: ")


def test_the_memory_measurement_never_trains_a_fitted_model_further():
    """Each model takes its fit and at most one step more: the one fitted on the whole data
    and the first fit are never trained again (a model kept training may diverge)."""
    steps = []  # steps of each model, by the model's number

    def fit(X, y, epochs):
        model = len(steps)
        steps.append(epochs)

        def more(X, y, epochs):
            steps[model] += epochs

        return more

    ticks = iter(np.arange(0.0, 100.0))
    peak_memory_process.setup_costs(
        fit, fit, np.zeros(40), np.zeros(40), 8, 3, repeats=3, clock=lambda: next(ticks)
    )
    # the first fit, 3 refits of one step and a step more each, the refit of 3 epochs
    assert steps == [1, 2, 2, 2, 3]


def test_a_process_that_fails_is_a_row_of_the_memory_table(monkeypatch):
    real_run = peak_memory.subprocess.run

    def run(command, **kwargs):
        if "'ort forward-backward'" in command[-1]:
            stderr = (
                "Traceback (most recent call last):\n  ...\nhelpers.portable.divergence."
                "TrainingDivergedError: The updates of epoch 2 left non-finite values\n"
            )
            return peak_memory.subprocess.CompletedProcess(command, 1, "", stderr)
        return real_run(command, **kwargs)

    monkeypatch.setattr(peak_memory.subprocess, "run", run)
    frameworks = [fw.ORT_FORWARD_BACKWARD, fw.SKLEARN]
    df = peak_memory.measure(4, 8, 32, 16, 1, frameworks=frameworks, record_failures=True)
    assert list(df.framework) == frameworks
    assert df.error[0] == "TrainingDivergedError: The updates of epoch 2 left non-finite values"
    assert np.isnan(df.peak_mb[0]) and df.error[1] is None and df.peak_mb[1] > 0
    assert peak_memory.plot(df, "one bar").startswith(b"\x89PNG")
    with pytest.raises(RuntimeError, match="The process measuring ort forward-backward failed"):
        peak_memory.measure(4, 8, 32, 16, 1, frameworks=frameworks)
