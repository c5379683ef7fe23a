"""The benchmark notebooks with tiny parameters: a record of every framework, and the scaling
benchmark's bound in the details."""

import json
import os
import shutil

import papermill
import pytest
from bench_records import check_record

from benchmarks.report.aggregate import summarize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")


@pytest.mark.slow
@pytest.mark.parametrize(
    "notebook, benchmark, expected, extra",
    [
        (
            "bench_torch.ipynb",
            "torch",
            {"torch eager", "ort whole-training", "ort forward-backward", "ort torch module"},
            {},
        ),
        # AdamW in every framework, the forward/backward API and OrtTorchModule included, all
        # comparable with torch
        (
            "bench_torch.ipynb",
            "torch",
            {"torch eager", "ort whole-training", "ort forward-backward", "ort torch module"},
            {"optimizer": "adamw"},
        ),
        # the backend "onnx": this project's gradients on 1.19.2's inference session, every API
        (
            "bench_torch.ipynb",
            "torch",
            {"torch eager", "ort whole-training", "ort forward-backward", "ort torch module"},
            {"backend": "onnx"},
        ),
        (
            "bench_scaling.ipynb",
            "scaling",
            {
                "torch eager",
                "ort whole-training",
                "ort forward-backward",
                "numpy matmul",
                "onnxruntime matmul bound",
            },
            {},
        ),
    ],
)
def test_notebook_with_tiny_parameters(tmp_path, notebook, benchmark, expected, extra):
    record_path = str(tmp_path / "record.json")
    papermill.execute_notebook(
        os.path.join(BENCHMARKS, notebook),
        str(tmp_path / "out.ipynb"),
        parameters={"record_path": record_path, **extra},
        kernel_name="ort-training",
        cwd=BENCHMARKS,
        progress_bar=False,
    )
    record = check_record(record_path, benchmark)
    # the backend that trained, resolved, in the parameters and in every row
    backend = extra.get("backend", "onnxruntime-training")
    assert record["parameters"]["backend"] == backend
    assert all(row["backend"] == backend for row in record["rows"])
    frameworks = {row["framework"] for row in record["rows"]}
    assert expected <= frameworks
    if extra:
        timed = {row["framework"]: row for row in record["rows"] if not row.get("error")}
        assert expected <= set(timed) and all(timed[f]["comparable"] for f in expected)
    assert (
        "ORTModule" not in frameworks
    )  # it cannot import with torch 2.13: OrtTorchModule has its row
    # records hold versions, never a path of this machine
    text = json.dumps(record)
    assert os.path.expanduser("~") not in text and ".venv" not in text and "/tmp/" not in text
    if benchmark == "scaling":
        _check_scaling_bound(tmp_path, record_path, record)


def _check_scaling_bound(tmp_path, record_path, record):
    """Every row has its ratio to the runtime's bound; the details show the row and the column."""
    for row in record["rows"]:
        assert row["ratio_to_ort_bound"] > 0 and row["ratio_to_numpy"] > 0
        if row["framework"] == "onnxruntime matmul bound":
            assert row["ratio_to_ort_bound"] == 1.0 and row["gflops"] > 0
    results = tmp_path / "results"
    os.makedirs(results / "runs" / "scaling-test")
    shutil.copy(record_path, results / "runs" / "scaling-test" / "record.json")
    summarize(str(results))
    details = (results / "details.md").read_text(encoding="utf-8")
    assert "| onnxruntime matmul bound |" in details  # a column of the scaling table
    assert "ratio_to_ort_bound" in (results / "details_scaling.csv").read_text(encoding="utf-8")
    assert (results / "scaling_batch_size.png").exists()
