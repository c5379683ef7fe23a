"""The benchmark notebooks with tiny parameters, and the sweep runner on a two-run grid."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import papermill
import pytest

from benchmarks.report.aggregate import load_rows, summarize
from benchmarks.studies import thread_scaling
from benchmarks.sweep import runner, sweep_grid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")
FRAMEWORKS = {
    "scikit-learn",
    "torch eager",
    "torch.compile",
    "ort torch module",
    "ort whole-training",
    "ort forward-backward",
    "numpy matmul",
    "onnxruntime matmul bound",
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
    record = _check_record(record_path, benchmark)
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


def _sklearn_grid(path, n_samples):
    """A two-run grid of the scikit-learn notebook with tiny parameters."""
    path.write_text(
        f"""
[sklearn]
notebook = "{os.path.join(BENCHMARKS, "bench_sklearn.ipynb")}"
[sklearn.fixed]
n_samples = {n_samples}
epochs = 2
hidden = 8
[sklearn.grid]
model = ["linear", "mlp"]
[sklearn.ignored_when]
model = {{ linear = ["hidden"] }}
"""
    )
    return str(path)


def _records(results):
    folder = os.path.join(results, "records")
    return sorted(f[: -len(".json")] for f in os.listdir(folder)) if os.path.isdir(folder) else []


def _worker(results, run):
    with open(os.path.join(results, "records", f"{run}.json"), encoding="utf-8") as f:
        return json.load(f)["worker"]


def _tree_digest(folder):
    """A digest of every file under ``folder`` (names and contents)."""
    digest = hashlib.sha1()
    for root, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def _subprocess_env():
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": ROOT}


def test_runner_on_a_two_run_grid(tmp_path, capsys):
    grid = _sklearn_grid(tmp_path / "grid.toml", 300)
    results = str(tmp_path / "results")
    assert runner.main(["--grid", grid, "--results", results]) == 0
    assert "2 runs in the grid, 0 already complete, 2 to run" in capsys.readouterr().out
    runs = sorted(os.listdir(os.path.join(results, "runs")))
    assert (
        len(runs) == 2 and _records(results) == runs
    )  # records/ holds each record, as the reference does
    for run in runs:
        folder = os.path.join(results, "runs", run)
        assert sorted(f for f in os.listdir(folder) if not f.startswith(".")) == [
            "notebook.ipynb",
            "record.json",
            "run.json",
        ]
        record = _check_record(os.path.join(folder, "record.json"), "sklearn")
        assert {row["framework"] for row in record["rows"]} == {
            "scikit-learn",
            "ort whole-training",
            "ort forward-backward",
        }
        # the machine that ran it: sequential runs are local, one at a time
        worker = record["worker"]
        assert worker["address"] == "local" and worker["threads"] == 1
        assert worker["machine"]["cpu"] and worker["machine"]["logical_cores"] >= 1
        with open(os.path.join(results, "records", f"{run}.json"), encoding="utf-8") as f:
            assert json.load(f) == record
    rows = load_rows(results)
    assert set(rows.model) == {"linear", "mlp"}
    assert rows.comparable.notna().all()
    with open(os.path.join(results, "summary.md"), encoding="utf-8") as f:
        assert "2 runs" in f.read()
    assert os.path.exists(os.path.join(results, "summary.csv"))
    # resumable: a second sweep runs nothing
    assert runner.main(["--grid", grid, "--results", results]) == 0
    assert "2 already complete, 0 to run" in capsys.readouterr().out
    # the summary holds the runs of the grid that was run, not every record of the folder
    shutil.copy(
        os.path.join(results, "records", f"{runs[0]}.json"),
        os.path.join(results, "records", "other-run.json"),
    )
    assert runner.main(["--grid", grid, "--results", results, "--summary-only"]) == 0
    assert set(pd.read_csv(os.path.join(results, "summary.csv")).run) == set(runs)


def test_runner_on_a_local_cluster(tmp_path, monkeypatch, capsys):
    """--jobs 2: a LocalCluster of two one-thread workers; results in results/local by default."""
    reference = os.path.join(ROOT, "results", "reference")
    before = _tree_digest(reference)
    monkeypatch.chdir(tmp_path)
    grid = _sklearn_grid(tmp_path / "grid.toml", 200)
    with pytest.warns(UserWarning, match="disturb each other's timings"):
        assert runner.main(["--grid", grid, "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 runs in the grid, 0 already complete, 2 to run" in out and "2 runs complete" in out
    results = os.path.join("results", "local")
    runs = _records(results)
    assert len(runs) == 2
    for run in runs:
        _check_record(os.path.join(results, "runs", run, "record.json"), "sklearn")
        assert os.path.exists(os.path.join(results, "runs", run, "notebook.ipynb"))
        worker = _worker(results, run)
        assert worker["address"].startswith("tcp://") and worker["threads"] == 1
        assert worker["machine"]["cpu"]
    assert os.path.exists(os.path.join(results, "summary.md"))
    assert _tree_digest(reference) == before  # a default sweep leaves the committed reference alone
    # resuming: the complete runs are skipped, no cluster started
    assert runner.main(["--grid", grid, "--jobs", "2"]) == 0
    assert "2 already complete, 0 to run" in capsys.readouterr().out


def test_runner_on_a_dask_cluster(tmp_path):
    """--scheduler: the runs travel to workers that cannot import this checkout, records come
    back."""
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    elsewhere = tmp_path / "elsewhere"  # no benchmarks/ here, no shared folder with the client
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    scheduler_file = str(tmp_path / "scheduler.json")
    processes = [
        subprocess.Popen(
            [
                dask,
                "scheduler",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                scheduler_file,
            ],
            cwd=elsewhere,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(2):
            processes.append(
                subprocess.Popen(
                    [
                        dask,
                        "worker",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--scheduler-file",
                        scheduler_file,
                    ],
                    cwd=elsewhere,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(scheduler_file=scheduler_file, timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
            address = client.scheduler.address
        results = str(tmp_path / "results")
        grid = _sklearn_grid(tmp_path / "grid.toml", 250)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks",
                "--grid",
                grid,
                "--results",
                results,
                "--scheduler",
                address,
            ],
            cwd=ROOT,
            env=_subprocess_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 dask worker(s)" in done.stdout and "2 runs complete" in done.stdout
        runs = _records(results)
        assert len(runs) == 2
        for run in runs:
            worker = _worker(results, run)
            assert worker["address"].startswith("tcp://") and worker["address"] != address
            assert worker["threads"] == 1 and worker["machine"]["cpu"]
            _check_record(os.path.join(results, "runs", run, "record.json"), "sklearn")
            assert os.path.exists(os.path.join(results, "runs", run, "notebook.ipynb"))
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _kernels_of(pid):
    import psutil

    return [
        p
        for p in psutil.Process(pid).children(recursive=True)
        if "ipykernel" in " ".join(p.cmdline())
    ]


@pytest.mark.parametrize("engine", [[], ["--jobs", "2"]], ids=["sequential", "local-cluster"])
def test_ctrl_c_stops_a_sweep(tmp_path, engine, sleep_grid):
    """One Ctrl-C (SIGINT to the whole process group, as a terminal sends it) stops the sweep at
    once."""
    import psutil

    results = str(tmp_path / "results")
    grid = sleep_grid(tmp_path / "grid.toml", [0.0, 300.0, 301.0])
    command = [sys.executable, "-m", "benchmarks", "--grid", grid, "--results", results, *engine]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=_subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not _records(results) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_records(results)) == 1, "the quick run should complete first"
        deadline = time.monotonic() + 60
        while not _kernels_of(process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        kernels = _kernels_of(process.pid)
        assert kernels, "a slow run should be under way"
        time.sleep(1)
        interrupted = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, out + err
    assert time.monotonic() - interrupted < 30
    assert "Traceback" not in err and "Traceback" not in out, err
    assert "Resume with the same command" in out
    assert (
        f"{sys.executable} -m benchmarks --grid" in out and " ".join(engine) in out
    )  # the interpreter used
    # the complete record stays, the interrupted runs left none
    (kept,) = _records(results)
    assert json.load(open(os.path.join(results, "records", f"{kept}.json"), encoding="utf-8"))[
        "parameters"
    ] == {"seconds": 0.0, "threads": 1}
    _, alive = psutil.wait_procs(kernels, timeout=10)
    assert not alive, "the kernels of the interrupted runs must not outlive the sweep"


def test_runner_rejects_unknown_grid(tmp_path):
    with pytest.raises(SystemExit, match="no grid 'nope'.*full.*quick"):
        runner.main(["--grid", "nope", "--results", str(tmp_path)])


def test_runner_options():
    args = runner.parse_arguments([])
    assert (
        args.results == os.path.join("results", "local")
        and args.jobs == 1
        and args.scheduler is None
    )
    for bad in (["--jobs", "0"], ["--jobs", "2", "--scheduler", "tcp://host:8786"]):
        with pytest.raises(SystemExit):
            runner.parse_arguments(bad)


def test_summary_only_never_touches_the_reference(tmp_path):
    """A fresh clone's `python -m benchmarks --summary-only` writes results/local, not the
    reference."""
    reference = os.path.join(ROOT, "results", "reference")
    assert sorted(os.listdir(reference)) and os.path.isdir(os.path.join(reference, "records"))
    before = _tree_digest(reference)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--summary-only"],
        cwd=tmp_path,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No complete run" in (tmp_path / "results" / "local" / "summary.md").read_text(
        encoding="utf-8"
    )
    assert _tree_digest(reference) == before
    with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
        assert "results/local/" in f.read().split()


def test_grids_expand(tmp_path):
    quick = sweep_grid.expand(sweep_grid.load_grid("quick"))
    full = sweep_grid.expand(sweep_grid.load_grid("full"))
    assert len({r["id"] for r in quick}) == len(quick) >= 3
    assert len(full) > len(quick)
    assert {r["benchmark"].split("_")[0] for r in full} == {
        "sklearn",
        "torch",
        "scaling",
        "your",
        "zoo",
    }
    # the model zoo: every builder of ZOO at 1 and 2 threads, given the input and task ZOO says
    from benchmarks.example_models import ZOO

    zoo = [r["parameters"] for r in full if r["benchmark"].startswith("zoo_")]
    assert sorted((p["model_function"].split(":")[1], p["n_threads"]) for p in zoo) == sorted(
        (name, threads) for name in ZOO for threads in (1, 2)
    )
    for p in zoo:
        _, shape, task = ZOO[p["model_function"].split(":")[1]]
        assert p["task"] == task and p.get("input_shape", shape) == shape
    # the committed reference holds a record of every run of the full grid
    records = os.path.join(ROOT, "results", "reference", "records")
    assert {r["id"] for r in full} == {f[: -len(".json")] for f in os.listdir(records)}


def test_parameters_that_do_not_apply_make_no_duplicate_runs(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f"""
[sk]
notebook = "{os.path.join(BENCHMARKS, "bench_sklearn.ipynb")}"
[sk.fixed]
epochs = 2
[sk.grid]
model = ["linear", "mlp"]
batch_size = [32, 64]
hidden = [10, 20]
[sk.ignored_when]
model = {{ linear = ["batch_size", "hidden"] }}
"""
    )
    runs = sweep_grid.expand(sweep_grid.load_grid(str(grid)))
    linear = [r for r in runs if r["parameters"]["model"] == "linear"]
    assert len(runs) == 5 and len(linear) == 1  # not 4 identical linear runs
    assert linear[0]["parameters"] == {"epochs": 2, "model": "linear"}
    assert len({r["id"] for r in runs}) == 5
    # the quick grid: the linear model's run carries no batch size nor hidden layer
    (quick_linear,) = [
        r
        for r in sweep_grid.expand(sweep_grid.load_grid("quick"))
        if r["parameters"].get("model") == "linear"
    ]
    assert (
        "batch_size" not in quick_linear["parameters"]
        and "hidden" not in quick_linear["parameters"]
    )
    # values other than strings: TOML keys are strings
    assert sweep_grid.applicable({"threads": 1, "x": 0}, {"threads": {"1": ["x"]}}) == {
        "threads": 1
    }
    assert sweep_grid.applicable({"flag": True, "x": 0}, {"flag": {"true": ["x"]}}) == {
        "flag": True
    }
    grid.write_text(
        grid.read_text().replace('{ linear = ["batch_size", "hidden"] }', '["batch_size"]')
    )
    with pytest.raises(SystemExit, match="ignored_when"):
        sweep_grid.load_grid(str(grid))


def test_thread_scaling_quick(tmp_path):
    """The thread-scaling script, as a user runs it, on a tiny size and one thread."""
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            os.path.join("benchmarks", "studies", "thread_scaling.py"),
            "--quick",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    # the three files, no temporary file left behind
    assert sorted(os.listdir(out)) == [
        "thread_scaling.csv",
        "thread_scaling.md",
        "thread_scaling.png",
    ]
    df = pd.read_csv(out / "thread_scaling.csv", dtype={"note": "string"})
    assert list(df.columns) == list(thread_scaling.COLUMNS)
    assert len(df) == 5 and sorted(df.framework) == sorted(thread_scaling.FRAMEWORKS)
    assert set(df["size"]) == set(thread_scaling.QUICK_SIZES) and (df.threads == 1).all()
    # a busy machine can lose a tiny step in its noise: then the figure is NaN and the note says why
    notes = df.note.fillna("")
    assert ((df.ms_per_step > 0) | df.ms_per_step.isna()).all()
    assert ((df.fixed_ms >= 0) | df.fixed_ms.isna()).all()
    assert (df.ms_per_step.isna() == notes.str.startswith("not measurable")).all()
    assert (df.fixed_ms.isna() == notes.str.contains("not measurable")).all()
    ms = df.ms_per_step
    by_framework = df.set_index("framework").ms_per_step  # the CSV keeps 6 digits
    np.testing.assert_allclose(df.ratio_to_torch, ms / by_framework["torch eager"], rtol=1e-5)
    bound = by_framework["onnxruntime matmul bound"]
    np.testing.assert_allclose(df.ratio_to_ort_bound, ms / bound, rtol=1e-5)
    np.testing.assert_array_equal(df.speedup_vs_1_thread, np.where(ms.isna(), np.nan, 1))
    text = (out / "thread_scaling.md").read_text(encoding="utf-8")
    assert "How do both APIs scale with threads, against torch?" in text
    assert "| 8-16-1@32 | 1 |" in text
    # the machine in full atop the page (benchmarks.sweep.records.machine_lines)
    head = "# Thread scaling of a training step\n\nMeasured on:\n\n- **Processor**: "
    assert text.startswith(head)
    assert "; threads used: 1\n- **Instruction sets**: " in text
    assert "- **Versions**: onnxruntime-training 1.19.2, onnx 1.17.0, torch " in text
    assert "only 1 thread(s) measured" in text
    for row in df[notes != ""].itertuples():
        assert f"- 8-16-1@32, 1 thread(s), {row.framework}: {row.note}" in text
    for written in (text, (out / "thread_scaling.csv").read_text(encoding="utf-8")):
        assert (
            str(tmp_path) not in written
            and ROOT not in written
            and os.path.expanduser("~") + "/" not in written
        )
    assert (out / "thread_scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_thread_scaling_ratios_and_answer():
    """Ratios compare frameworks at one size and thread count; the speed-up compares with one
    thread."""
    rows = []
    for threads, factor in ((1, 1.0), (2, 0.5)):
        for framework, ms in (
            ("ort whole-training", 1.0),
            ("ort forward-backward", 2.0),
            ("torch eager", 4.0),
            ("onnxruntime matmul bound", 0.5),
            ("numpy matmul", 0.25),
        ):
            rows.append(
                {
                    "size": "4-8-1@16",
                    "n_features": 4,
                    "hidden": 8,
                    "batch_size": 16,
                    "n_samples": 128,
                    "threads": threads,
                    "framework": framework,
                    "ms_per_step": ms * factor,
                    "fixed_ms": 3.0,
                    "note": "",
                }
            )
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
    assert (
        df.assign(threads=df.threads + 1)
        .pipe(thread_scaling.add_ratios)
        .speedup_vs_1_thread.isna()
        .all()
    )
    # a step lost in the noise: no figure, no ratio, and the summary says why
    note = "not measurable: the longer fit was not slower than the shorter one"
    rows[2].update(ms_per_step=float("nan"), fixed_ms=float("nan"), note=note)  # torch, 1 thread
    df = thread_scaling.add_ratios(pd.DataFrame(rows))
    assert df[(df.threads == 1)].ratio_to_torch.isna().all()
    text = thread_scaling.markdown(df, (1, 4), 3)
    assert "| 4-8-1@16 | 1 | 1 | 2 | - | 0.5 | 0.25 |" in text
    assert f"- 4-8-1@16, 1 thread(s), torch eager: {note}" in text
    assert "torch eager - -> 2 ms (not measurable here" in text


def test_thread_scaling_arguments():
    assert thread_scaling.parse_size("100-50-1@100")["n_samples"] == 8000
    assert thread_scaling.parse_size("500-500-1@1000")["n_samples"] == 8000
    assert thread_scaling.parse_threads("2,1,2") == [2, 1]
    for bad in (["--sizes", "100x50"], ["--threads", "0"], ["--threads", "a"], ["--epochs", "4,1"]):
        with pytest.raises(SystemExit):
            thread_scaling.main(bad)


def test_step_targets_verdicts_follow_the_ratios():
    from benchmarks.studies import step_targets as st
    from benchmarks.workloads import models as bm

    times = {
        ("100-50-1@100", bm.ORT_WHOLE): 0.05,
        ("100-50-1@100", bm.ORT_FORWARD_BACKWARD): 0.09,
        ("100-50-1@100", bm.TORCH): 0.2,
        ("100-50-1@100", st.SKLEARN): 0.1,
        ("500-500-1@1000", bm.ORT_WHOLE): 6.0,
        ("500-500-1@1000", bm.ORT_FORWARD_BACKWARD): 6.5,
        ("500-500-1@1000", bm.ORT_BOUND): 5.0,
    }
    steps = pd.DataFrame(
        [
            {"size": s, "framework": f, "ms_per_step": v, "rounds_ms": [v, v]}
            for (s, f), v in times.items()
        ]
    )
    setup = pd.DataFrame(
        [
            {"framework": bm.ORT_WHOLE, "setup_ms": 3.0},
            {"framework": bm.ORT_FORWARD_BACKWARD, "setup_ms": 7.0},
        ]
    )
    table = st.target_table(steps, setup, st.selected(["small MLP", "large MLP"])).set_index(
        "target"
    )
    assert table.loc["small MLP, whole-training vs torch", "measured"] == "0.25x"
    assert table.loc["small MLP, whole-training vs torch", "verdict"] == "met"
    assert (
        table.loc["small MLP, forward/backward vs torch", "verdict"] == "missed by 1.12x"
    )  # 0.45 / 0.4
    assert table.loc["small MLP, whole-training vs scikit-learn", "verdict"] == "missed by 1.25x"
    assert table.loc["large MLP, whole-training vs runtime bound", "verdict"] == "missed by 1.04x"
    assert table.loc["large MLP, forward/backward vs runtime bound", "verdict"] == "met"
    assert table.loc[f"refit set-up, {bm.ORT_FORWARD_BACKWARD}", "verdict"] == "missed"
    text = st.markdown(table.reset_index(), steps, threads=2)
    assert text.startswith("# Training-speed targets") and "| target |" in text
