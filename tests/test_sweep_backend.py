"""A sweep's backend: its option, the runs it gives (the training package's keep their ids), the
record and rows that name it, and reports that never mix two backends (no notebook is run)."""

import json
import os

import pytest
from bench_records import torch_rows, write_record

from benchmarks.report import aggregate
from benchmarks.sweep import backend_choice, records, runner, sweep_grid
from helpers.core.machine import backends

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_option_defaults_to_auto_and_takes_the_backends():
    assert runner.parse_arguments([]).backend == "auto"
    assert runner.parse_arguments(["--backend", "onnx"]).backend == "onnx"
    with pytest.raises(SystemExit):
        runner.parse_arguments(["--backend", "torch"])


def test_the_kernel_defaults_to_one_that_is_there():
    args = runner.parse_arguments([])
    assert args.kernel in backend_choice.KERNELS
    assert runner.parse_arguments(["--kernel", "mine"]).kernel == "mine"


def test_runs_of_the_training_package_keep_their_ids_and_onnx_runs_are_others():
    grid = sweep_grid.load_grid("quick")
    plain = sweep_grid.expand(grid)
    training = sweep_grid.expand(grid, "onnxruntime-training")
    onnx = sweep_grid.expand(grid, "onnx")
    assert [r["id"] for r in training] == [r["id"] for r in plain]
    assert all(r["parameters"]["backend"] == "onnxruntime-training" for r in training)
    assert not {r["id"] for r in onnx} & {r["id"] for r in plain}
    assert all(r["parameters"]["backend"] == "onnx" for r in onnx)


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "results", "reference", "records")),
    reason="the committed reference sweep is not in this checkout",
)
def test_the_reference_records_are_the_runs_of_the_full_grid_with_the_training_package():
    runs = sweep_grid.expand(sweep_grid.load_grid("full"), "onnxruntime-training")
    names = os.listdir(os.path.join(ROOT, "results", "reference", "records"))
    assert {f"{r['id']}.json" for r in runs} <= set(names)


def test_a_grid_that_names_a_backend_keeps_it(tmp_path):
    notebook = os.path.join(ROOT, "benchmarks", "bench_torch.ipynb")
    grid = tmp_path / "grid.toml"
    grid.write_text(f'[t]\nnotebook = "{notebook}"\n[t.fixed]\nbackend = "onnx"\n')
    (run,) = sweep_grid.expand(sweep_grid.load_grid(str(grid)), "onnxruntime-training")
    assert run["parameters"]["backend"] == "onnx"


def test_a_backend_this_environment_lacks_is_refused_with_the_fix(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(backend_choice, "training_module_here", lambda: False)
    status = runner.main(["--backend", "onnxruntime-training", "--results", str(tmp_path)])
    assert status == runner.USAGE_ERROR
    assert "use --backend onnx" in capsys.readouterr().err
    assert not os.listdir(tmp_path)
    assert backend_choice.sweep_backend("auto") == ("onnx", None)


def test_the_runner_resolves_auto_as_the_optimizers_do(monkeypatch):
    choice = backend_choice
    assert choice.training_module_here() == backends.has_training_package()
    assert choice.sweep_backend("auto") == (backends.resolve_backend("auto"), None)
    assert choice.BACKENDS == backends.BACKENDS
    assert choice.BACKEND_VARIABLE == backends.BACKEND_VARIABLE
    monkeypatch.setenv(backends.BACKEND_VARIABLE, "onnx")
    assert choice.sweep_backend("auto") == ("onnx", None)
    monkeypatch.setenv(backends.BACKEND_VARIABLE, "torch")
    assert choice.sweep_backend("auto")[0] is None


def test_the_record_and_every_row_name_the_backend(tmp_path):
    path = str(tmp_path / "record.json")
    rows = [{"framework": "ort whole-training"}, {"framework": "torch eager", "backend": "x"}]
    records.write_record(path, "bench_torch", {"threads": 1, "backend": "onnx"}, rows)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    assert record["parameters"]["backend"] == "onnx"
    assert [row["backend"] for row in record["rows"]] == ["onnx", "x"]
    assert "onnxruntime" in records.PACKAGES


def test_the_reports_keep_the_figures_of_each_backend_apart(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    write_record(
        tmp_path, "torch-b", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 2.0})
    )
    path = tmp_path / "records" / "torch-b.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["parameters"] = {"backend": "onnx"}
    record["versions"] = {"onnxruntime": "1.31.1", "torch": "2.13.0"}
    path.write_text(json.dumps(record), encoding="utf-8")
    df = aggregate.load_rows(str(tmp_path))
    by_run = df.groupby("run").first()
    assert by_run.loc["torch-a", "backend"] == "onnxruntime-training"
    assert by_run.loc["torch-b", "backend"] == "onnx"
    assert by_run.loc["torch-b", "onnxruntime"] == "1.31.1"
    assert by_run.loc["torch-b", "machine"] == "m, 2 cores, backend onnx on onnxruntime 1.31.1"
    aggregate.summarize(str(tmp_path))
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## m, 2 cores, 2 threads" in summary
    assert "## m, 2 cores, backend onnx on onnxruntime 1.31.1, 2 threads" in summary
    assert "- **Versions**: onnxruntime 1.31.1, onnx not recorded in these runs" in summary
