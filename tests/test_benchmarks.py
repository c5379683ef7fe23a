"""The benchmark notebooks with tiny parameters, and the sweep runner on a two-run grid."""
import json
import os

import papermill
import pytest

from benchmarks import runner
from benchmarks.aggregate import load_rows

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.join(os.path.dirname(HERE), "benchmarks")
FRAMEWORKS = {
    "scikit-learn", "torch eager", "torch.compile", "ORTModule", "ort whole-training",
    "ort forward-backward", "numpy matmul",
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
        ("bench_scaling.ipynb", "scaling", {"torch eager", "ort whole-training", "ort forward-backward", "numpy matmul"}),
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
