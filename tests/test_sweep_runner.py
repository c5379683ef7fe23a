"""The sweep runner on a two-run grid: sequential, on a LocalCluster, on a dask cluster; Ctrl-C,
its options, and the committed reference it never touches."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from bench_records import check_record

from benchmarks.report.aggregate import load_rows
from benchmarks.sweep import runner

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")


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


@pytest.mark.slow
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
        record = check_record(os.path.join(folder, "record.json"), "sklearn")
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


@pytest.mark.slow
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
        check_record(os.path.join(results, "runs", run, "record.json"), "sklearn")
        assert os.path.exists(os.path.join(results, "runs", run, "notebook.ipynb"))
        worker = _worker(results, run)
        assert worker["address"].startswith("tcp://") and worker["threads"] == 1
        assert worker["machine"]["cpu"]
    assert os.path.exists(os.path.join(results, "summary.md"))
    assert _tree_digest(reference) == before  # a default sweep leaves the committed reference alone
    # resuming: the complete runs are skipped, no cluster started
    assert runner.main(["--grid", grid, "--jobs", "2"]) == 0
    assert "2 already complete, 0 to run" in capsys.readouterr().out


@pytest.mark.slow
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
            check_record(os.path.join(results, "runs", run, "record.json"), "sklearn")
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


@pytest.mark.slow
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
