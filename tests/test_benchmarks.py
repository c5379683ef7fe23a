"""The benchmark notebooks with tiny parameters, and the sweep runner on a two-run grid."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import papermill
import pytest

from benchmarks import runner, thread_scaling
from benchmarks.aggregate import load_rows, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")
FRAMEWORKS = {
    "scikit-learn", "torch eager", "torch.compile", "ORTModule", "ort whole-training",
    "ort forward-backward", "numpy matmul", "onnxruntime matmul bound",
}


def _check_record(path, benchmark):
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    assert record["parameters"]  # every parameter of the run is kept
    assert record["versions"]["onnx"] == "1.17.0"
    assert record["machine"]["logical_cores"] >= 1
    rows = record["rows"]
    assert rows and all(row["benchmark"] == benchmark for row in rows)
    assert {row["framework"] for row in rows} <= FRAMEWORKS
    timed = [row for row in rows if not row.get("error")]
    assert timed and all(row["time_per_update_s"] > 0 for row in timed)
    return record


@pytest.mark.parametrize(
    "notebook, benchmark, expected",
    [
        ("bench_torch.ipynb", "torch", {"torch eager", "ort whole-training", "ort forward-backward", "ORTModule"}),
        ("bench_scaling.ipynb", "scaling", {
            "torch eager", "ort whole-training", "ort forward-backward", "numpy matmul", "onnxruntime matmul bound",
        }),
    ],
)
def test_notebook_with_tiny_parameters(tmp_path, notebook, benchmark, expected):
    record_path = str(tmp_path / "record.json")
    papermill.execute_notebook(
        os.path.join(BENCHMARKS, notebook),
        str(tmp_path / "out.ipynb"),
        parameters={"record_path": record_path},
        kernel_name="ort-training",
        cwd=BENCHMARKS,
        progress_bar=False,
    )
    record = _check_record(record_path, benchmark)
    frameworks = {row["framework"] for row in record["rows"]}
    assert expected <= frameworks
    ortmodule = [row for row in record["rows"] if row["framework"] == "ORTModule"]
    assert all(row["error"] for row in ortmodule)  # torch 2.13: cannot import, said in the row
    if benchmark == "scaling":
        _check_scaling_bound(tmp_path, record_path, record)


def _check_scaling_bound(tmp_path, record_path, record):
    """Every row has its ratio to the runtime's bound; the summary shows the row and the column."""
    for row in record["rows"]:
        assert row["ratio_to_ort_bound"] > 0 and row["ratio_to_numpy"] > 0
        if row["framework"] == "onnxruntime matmul bound":
            assert row["ratio_to_ort_bound"] == 1.0 and row["gflops"] > 0
    results = tmp_path / "results"
    os.makedirs(results / "runs" / "scaling-test")
    shutil.copy(record_path, results / "runs" / "scaling-test" / "record.json")
    summarize(str(results))
    summary = (results / "summary.md").read_text(encoding="utf-8")
    assert "ratio_to_ort_bound" in summary and "| onnxruntime matmul bound |" in summary
    # a reference is not a framework judged against numpy's products
    assert "step / numpy matmul time, ort whole-training" in summary
    assert "numpy matmul time, onnxruntime matmul bound" not in summary


def test_runner_on_a_two_run_grid(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f"""
[sklearn]
notebook = "{os.path.join(BENCHMARKS, 'bench_sklearn.ipynb')}"
[sklearn.fixed]
n_samples = 300
epochs = 2
[sklearn.grid]
model = ["linear", "mlp"]
"""
    )
    results = str(tmp_path / "results")
    assert runner.main(["--grid", str(grid), "--results", results]) == 0
    assert "2 runs in the grid, 0 already complete, 2 to run" in capsys.readouterr().out
    runs = sorted(os.listdir(os.path.join(results, "runs")))
    assert len(runs) == 2
    for run in runs:
        folder = os.path.join(results, "runs", run)
        assert sorted(f for f in os.listdir(folder) if not f.startswith(".")) == [
            "notebook.ipynb", "record.json", "run.json",
        ]
        record = _check_record(os.path.join(folder, "record.json"), "sklearn")
        assert {row["framework"] for row in record["rows"]} == {
            "scikit-learn", "ort whole-training", "ort forward-backward",
        }
    rows = load_rows(results)
    assert set(rows.model) == {"linear", "mlp"}
    assert rows.comparable.notna().all()
    with open(os.path.join(results, "summary.md"), encoding="utf-8") as f:
        summary = f.read()
    assert "2 runs" in summary and "## sklearn" in summary
    assert "MLPRegressor fit time" in summary  # the fit-time target
    assert os.path.exists(os.path.join(results, "summary.csv"))
    assert os.path.exists(os.path.join(results, "sklearn.png"))
    # resumable: a second sweep runs nothing
    assert runner.main(["--grid", str(grid), "--results", results]) == 0
    assert "2 already complete, 0 to run" in capsys.readouterr().out


def test_runner_rejects_unknown_grid(tmp_path):
    with pytest.raises(SystemExit, match="no grid 'nope'.*full.*quick"):
        runner.main(["--grid", "nope", "--results", str(tmp_path)])


def test_grids_expand(tmp_path):
    quick = runner.expand(runner.load_grid("quick"))
    full = runner.expand(runner.load_grid("full"))
    assert len({r["id"] for r in quick}) == len(quick) >= 3
    assert len(full) > len(quick)
    assert {r["benchmark"].split("_")[0] for r in full} == {"sklearn", "torch", "scaling"}


def test_thread_scaling_quick(tmp_path):
    """The thread-scaling script, as a user runs it, on a tiny size and one thread."""
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, os.path.join("benchmarks", "thread_scaling.py"), "--quick", "--threads", "1",
         "--out", str(out)],
        cwd=ROOT, check=True, capture_output=True, text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    # the three files, no temporary file left behind
    assert sorted(os.listdir(out)) == ["thread_scaling.csv", "thread_scaling.md", "thread_scaling.png"]
    df = pd.read_csv(out / "thread_scaling.csv")
    assert list(df.columns) == list(thread_scaling.COLUMNS)
    assert len(df) == 5 and sorted(df.framework) == sorted(thread_scaling.FRAMEWORKS)
    assert set(df["size"]) == set(thread_scaling.QUICK_SIZES) and (df.threads == 1).all()
    assert df[["ms_per_step", "fixed_ms", "ratio_to_torch", "ratio_to_ort_bound"]].notna().all().all()
    by_framework = df.set_index("framework")
    assert by_framework.loc["torch eager", "ratio_to_torch"] == 1.0
    assert by_framework.loc["onnxruntime matmul bound", "ratio_to_ort_bound"] == 1.0
    assert (df.speedup_vs_1_thread == 1.0).all()
    text = (out / "thread_scaling.md").read_text(encoding="utf-8")
    assert "How do both APIs scale with threads, against torch?" in text
    assert "| 8-16-1@32 | 1 |" in text
    assert "Machine:" in text and "onnxruntime-training 1.19.2" in text and "torch" in text
    assert "only 1 thread(s) measured" in text
    for written in (text, (out / "thread_scaling.csv").read_text(encoding="utf-8")):
        assert str(tmp_path) not in written and ROOT not in written and os.path.expanduser("~") + "/" not in written
    assert (out / "thread_scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_thread_scaling_ratios_and_answer():
    """Ratios compare frameworks at one size and thread count; the speed-up compares with one thread."""
    rows = []
    for threads, factor in ((1, 1.0), (2, 0.5)):
        for framework, ms in (("ort whole-training", 1.0), ("ort forward-backward", 2.0), ("torch eager", 4.0),
                              ("onnxruntime matmul bound", 0.5), ("numpy matmul", 0.25)):
            rows.append({"size": "4-8-1@16", "n_features": 4, "hidden": 8, "batch_size": 16, "n_samples": 128,
                         "threads": threads, "framework": framework, "ms_per_step": ms * factor,
                         "fixed_ms": 3.0})
    rows[-2]["ms_per_step"] = 1.0  # the bound at 2 threads did not scale
    df = thread_scaling.add_ratios(pd.DataFrame(rows))
    at = df.set_index(["threads", "framework"])
    assert at.loc[(2, "ort whole-training"), "ratio_to_torch"] == pytest.approx(0.25)
    assert at.loc[(2, "ort whole-training"), "ratio_to_ort_bound"] == pytest.approx(0.5)
    assert at.loc[(2, "torch eager"), "speedup_vs_1_thread"] == pytest.approx(2.0)
    assert at.loc[(2, "onnxruntime matmul bound"), "speedup_vs_1_thread"] == pytest.approx(0.5)
    assert np.allclose(at.loc[1, "speedup_vs_1_thread"], 1.0)
    (line,) = thread_scaling.answer(df)
    assert "1 -> 2 threads" in line and "whole-training 1 -> 0.5 ms (x2.00)" in line
    assert "whole-training 0.25x torch eager" in line
    # no thread count 1 measured: no speed-up over one thread
    assert df.assign(threads=df.threads + 1).pipe(thread_scaling.add_ratios).speedup_vs_1_thread.isna().all()


def test_thread_scaling_arguments():
    assert thread_scaling.parse_size("100-50-1@100")["n_samples"] == 8000
    assert thread_scaling.parse_size("500-500-1@1000")["n_samples"] == 8000
    assert thread_scaling.parse_threads("2,1,2") == [2, 1]
    for bad in (["--sizes", "100x50"], ["--threads", "0"], ["--threads", "a"], ["--epochs", "4,1"]):
        with pytest.raises(SystemExit):
            thread_scaling.main(bad)


def test_step_targets_verdicts_follow_the_ratios():
    from benchmarks import step_targets as st
    from helpers import bench_models as bm

    times = {
        ("100-50-1@100", bm.ORT_WHOLE): 0.05, ("100-50-1@100", bm.ORT_FORWARD_BACKWARD): 0.09,
        ("100-50-1@100", bm.TORCH): 0.2, ("100-50-1@100", st.SKLEARN): 0.1,
        ("500-500-1@1000", bm.ORT_WHOLE): 6.0, ("500-500-1@1000", bm.ORT_FORWARD_BACKWARD): 6.5,
        ("500-500-1@1000", bm.ORT_BOUND): 5.0,
    }
    steps = pd.DataFrame([{"size": s, "framework": f, "ms_per_step": v} for (s, f), v in times.items()])
    setup = pd.DataFrame([{"framework": bm.ORT_WHOLE, "setup_ms": 3.0}, {"framework": bm.ORT_FORWARD_BACKWARD, "setup_ms": 7.0}])
    table = st.target_table(steps, setup).set_index("target")
    assert table.loc["small MLP, whole-training vs torch", "measured"] == "0.25x"
    assert table.loc["small MLP, whole-training vs torch", "verdict"] == "met"
    assert table.loc["small MLP, forward/backward vs torch", "verdict"] == "missed by 1.12x"  # 0.45 / 0.4
    assert table.loc["small MLP, whole-training vs scikit-learn", "verdict"] == "missed by 1.25x"
    assert table.loc["large MLP, whole-training vs runtime bound", "verdict"] == "missed by 1.04x"
    assert table.loc["large MLP, forward/backward vs runtime bound", "verdict"] == "met"
    assert table.loc[f"refit set-up, {bm.ORT_FORWARD_BACKWARD}", "verdict"] == "missed"
    text = st.markdown(table.reset_index(), steps, threads=2)
    assert text.startswith("# Training-speed targets") and "| target |" in text
