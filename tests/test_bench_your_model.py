"""bench_your_model on models written here: images, sequences, token ids, a 7-class classifier, an
untrainable one.

The notebook imports the models of this module by name (``test_bench_your_model:image_cnn``):
its kernel, and the processes measuring memory, run in this folder.
"""

import json
import math
import os

import papermill
import pytest
import torch
from torch import nn

from benchmarks.workloads.model_inputs import InputSpec, input_spec, output_width
from benchmarks.workloads.your_model_record import compile_note

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOK = os.path.join(os.path.dirname(HERE), "benchmarks", "bench_your_model.ipynb")
EVERY_FRAMEWORK = {"torch eager", "torch.compile", "ort whole-training", "ort forward-backward"}


def image_cnn():
    """1x28x28 images, 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 13 * 13, 10)
    )


def sequence_conv():
    """Sequences of 4 channels and 32 steps, one value to regress."""
    return nn.Sequential(
        nn.Conv1d(4, 8, 3, padding=1),
        nn.GELU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(8, 1),
    )


class TokenClassifier(nn.Module):
    """Token ids below 100, 7 classes."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(100, 8)
        self.head = nn.Linear(8, 7)

    def forward(self, ids):
        return self.head(self.embedding(ids).mean(dim=1))


def dropout_mlp():
    """16 features, dropout between the layers, 3 classes."""
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))


def mobile_cnn():
    """3x16x16 images, 10 classes: a MobileNet-like block (1x1 expansion, depthwise 3x3,
    1x1 projection), batch normalization after each convolution."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.Conv2d(8, 16, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU6(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU6(),
        nn.Conv2d(16, 8, 1, bias=False),
        nn.BatchNorm2d(8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )


class DivergesInOnnx(nn.Module):
    """16 features, 3 classes: torch trains it, but its ONNX export scales the scores by 1e30, so
    that onnxruntime's trainings diverge (a TrainingDivergedError) within their first steps."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(16, 3)

    def forward(self, x):
        scores = self.layer(x)
        return scores * 1e30 if torch.onnx.is_in_onnx_export() else scores


class Rounded(nn.Module):
    """``torch.round`` between two layers: torch trains it (a zero gradient), onnxruntime has no
    gradient for Round."""

    def __init__(self):
        super().__init__()
        self.first, self.last = nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x):
        return self.last(torch.round(self.first(x)))


def _run(tmp_path, model, **parameters):
    tmp_path.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        NOTEBOOK,
        str(out),
        kernel_name="ort-training",
        cwd=HERE,
        progress_bar=False,
        parameters={
            "model_function": f"test_bench_your_model:{model}",
            "n_samples": 512,
            "batch_size": 32,
            "epochs": 2,
            "n_threads": 1,
            "record_path": str(record),
            **parameters,
        },
    )
    rows = {row["framework"]: row for row in json.loads(record.read_text())["rows"]}
    return rows, out.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, parameters, shape, dtype, loss",
    [
        (
            "image_cnn",
            dict(input_shape=[1, 28, 28], measure_memory=False),
            [1, 28, 28],
            "float32",
            "cross-entropy",
        ),
        (
            "sequence_conv",
            dict(input_shape=[4, 32], task="regression", measure_memory=False),
            [4, 32],
            "float32",
            "mean squared error",
        ),
        # ids and their shape read from nn.Embedding; the memory processes draw ids too
        ("TokenClassifier", {}, [32], "int64", "cross-entropy"),
    ],
    ids=["image", "sequence", "token-ids-7-classes"],
)
def test_every_framework_trains_the_model_alike(
    tmp_path, model, parameters, shape, dtype, loss, check_step_time
):
    rows, notebook = _run(tmp_path, model, **parameters)
    assert set(rows) == EVERY_FRAMEWORK
    for framework, row in rows.items():
        assert row["error"] is None, framework
        check_step_time(row)  # timed, or NaN and why (the machine's noise)
        assert row["comparable"] is True, (
            framework,
            row["train_loss"],
            rows["torch eager"]["train_loss"],
        )
        assert row["input_shape"] == shape and row["input_dtype"] == dtype and row["time_to_loss"]
    lost = [framework for framework, row in rows.items() if math.isnan(row["time_per_update_s"])]
    assert all(f"  {framework}: not measurable" in notebook for framework in lost)  # said in words
    compiled = rows["torch.compile"]  # a compilation time, or NaN and why (the machine's noise)
    assert compiled["compile_time_s"] > 0 or math.isnan(compiled["compile_time_s"])
    assert compiled["note"] == compile_note(compiled["compile_time_s"])
    assert f"loss: {loss}" in notebook
    if parameters.get("measure_memory", True):
        assert all(
            rows[f]["peak_mb"] >= rows[f]["import_mb"] > 0
            for f in EVERY_FRAMEWORK - {"torch.compile"}
        )


@pytest.mark.slow
def test_an_untrainable_model_is_a_row_and_torch_still_runs(tmp_path, check_step_time):
    rows, _ = _run(tmp_path, "Rounded", task="regression")
    assert set(rows) == EVERY_FRAMEWORK
    for framework in ("ort whole-training", "ort forward-backward"):
        assert (
            "UntrainableModelError" in rows[framework]["error"]
            and "Round" in rows[framework]["error"]
        )
        assert rows[framework]["time_per_update_s"] is None
    for framework in ("torch eager", "torch.compile"):
        assert rows[framework]["error"] is None
        check_step_time(rows[framework])
    # the memory chart holds only the frameworks that ran
    assert rows["torch eager"]["peak_mb"] > 0 and "peak_mb" not in rows["ort whole-training"]


@pytest.mark.slow
def test_a_framework_that_diverges_is_a_row_and_the_notebook_goes_on(tmp_path):
    """Both onnxruntime trainings diverge; torch still trains, is timed and its memory measured,
    and every row is written with the tolerance it is judged by."""
    rows, notebook = _run(tmp_path, "DivergesInOnnx", try_compile=False)
    assert set(rows) == EVERY_FRAMEWORK - {"torch.compile"}
    for framework in ("ort whole-training", "ort forward-backward"):
        row = rows[framework]
        assert row["note"] == "diverged: see error", framework
        assert row["error"].startswith("TrainingDivergedError: ") and "\n" not in row["error"]
        assert f"{framework}: diverged: TrainingDivergedError" in notebook
    torch_row = rows["torch eager"]
    assert torch_row["error"] is None and torch_row["peak_mb"] >= torch_row["import_mb"] > 0
    assert torch_row["comparable"] is True and torch_row["loss_gap"] == 0
    assert torch_row["tolerance"] == max(1e-3, 2 * torch_row["torch_spread"])
    assert "comparable: a loss within" in notebook


@pytest.mark.slow
def test_a_dropout_model_run_twice_writes_the_same_losses(tmp_path):
    """Every framework's dropout masks come from random_state: a second run repeats the first."""
    common = dict(n_samples=256, try_compile=False, measure_memory=False)
    first, _ = _run(tmp_path / "first", "dropout_mlp", **common)
    second, _ = _run(tmp_path / "second", "dropout_mlp", **common)
    assert set(first) == EVERY_FRAMEWORK - {"torch.compile"}
    for framework, row in first.items():
        assert row["error"] is None and math.isfinite(row["train_loss"]), framework
        assert second[framework]["train_loss"] == row["train_loss"], framework
        losses = [point[-1] for point in row["time_to_loss"]]
        assert [point[-1] for point in second[framework]["time_to_loss"]] == losses, framework


def test_the_input_is_read_from_the_first_layer_or_asked_for():
    assert input_spec(nn.Linear(16, 1)).shape == (16,)
    tokens = input_spec(TokenClassifier())
    assert (tokens.shape, tokens.dtype, tokens.vocabulary) == ((32,), "int64", 100)
    assert input_spec(TokenClassifier(), input_shape=[5]).shape == (5,)
    assert input_spec(image_cnn(), input_shape=[1, 28, 28]).dtype == "float32"
    with pytest.raises(ValueError, match=r"Give input_shape, \(channels, length\), e.g. \[4, 32\]"):
        input_spec(sequence_conv())
    with pytest.raises(ValueError, match="no nn.Embedding"):
        input_spec(nn.Linear(16, 1), input_dtype="int64")
    assert output_width(TokenClassifier(), input_spec(TokenClassifier())) == 7
    with pytest.raises(
        ValueError, match=r"returns \[2\] for 2 samples: it must return \(batch, outputs\)"
    ):
        output_width(nn.Sequential(nn.Linear(4, 1), nn.Flatten(0)), InputSpec((4,), "float32"))
    with pytest.raises(ValueError, match=r"does not take samples of shape \[4, 30\]"):
        output_width(image_cnn(), InputSpec((4, 30), "float32"))
