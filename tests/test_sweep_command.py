"""The sweep command on input a user types: unknown names, bad scheduler addresses, lost workers,
leftovers."""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from benchmarks.sweep import dask_engine, runner
from benchmarks.sweep.notebook_runs import RUN_FOLDER_PREFIX

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _command(*arguments, timeout=120):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": ROOT},
    )
    return done, time.monotonic() - started


def test_an_unknown_benchmark_is_refused_before_anything_is_written(tmp_path):
    results = tmp_path / "results"
    done, _ = _command("--grid", "quick", "--only", "sklern", "--results", str(results))
    assert done.returncode != 0
    assert (
        "--only sklern: no such benchmark in grid quick. Its benchmarks: scaling, sklearn, torch"
        in done.stderr
    )
    assert not results.exists()


def test_a_summary_is_not_replaced_when_no_run_of_the_grid_is_complete(
    tmp_path, capsys, sleep_grid
):
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.md").write_text("# the summary of an earlier sweep\n")
    grid = sleep_grid(tmp_path / "grid.toml", [0.0])
    assert runner.main(["--grid", grid, "--results", str(results), "--summary-only"]) == 0
    assert "summary is left as it was" in capsys.readouterr().out
    assert (results / "summary.md").read_text() == "# the summary of an earlier sweep\n"


class _Dashboard(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.send_response(302)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def web_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    "address, message",
    [
        ("tcp:/127.0.0.1:8786", "is not an address dask reads"),
        ("127.0.0.1", "has no port: write tcp://127.0.0.1:8786"),
        ("http://127.0.0.1:8787", "is a web address"),
        ("tcp://127.0.0.1:9", "Nothing answers at tcp://127.0.0.1:9"),
        ("web server", "answers HTTP: that is a web server"),
    ],
)
def test_a_bad_scheduler_address_says_what_to_do_within_seconds(
    tmp_path, address, message, web_server, sleep_grid
):
    address = web_server if address == "web server" else address
    grid = sleep_grid(tmp_path / "grid.toml", [0.0])
    done, seconds = _command(
        "--grid", grid, "--results", str(tmp_path / "results"), "--scheduler", address
    )
    assert done.returncode == runner.USAGE_ERROR
    assert message in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) <= 2
    assert seconds < 10 + 5  # the command's start included
    assert "Resume with" not in done.stdout


@pytest.fixture()
def scheduler_without_workers(tmp_path):
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    scheduler_file = str(tmp_path / "scheduler.json")
    process = subprocess.Popen(
        [dask, "scheduler", "--port", "0", "--no-dashboard", "--scheduler-file", scheduler_file],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(scheduler_file) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        with open(scheduler_file, encoding="utf-8") as f:
            yield json.load(f)["address"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_cluster_without_workers_is_said_and_stops_when_asked(
    tmp_path, scheduler_without_workers, sleep_grid
):
    grid = sleep_grid(tmp_path / "grid.toml", [0.0])
    done, seconds = _command(
        "--grid",
        grid,
        "--results",
        str(tmp_path / "results"),
        "--scheduler",
        scheduler_without_workers,
        "--stop-without-workers",
        "3",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No dask worker for" in done.stdout and "1 not run" in done.stdout
    assert f"{sys.executable} -m benchmarks --grid" in done.stdout  # the interpreter actually used
    assert seconds < 60


@pytest.mark.slow
def test_collected_results_are_released_so_a_lost_worker_does_not_run_them_again(
    tmp_path, sleep_grid
):
    grid = sleep_grid(tmp_path / "grid.toml", [0.0, 0.1])
    runs = runner.expand(runner.load_grid(grid))
    sweep = runner.Sweep(runs, str(tmp_path / "results"), "ort-training")
    with dask_engine.dask_client(jobs=1) as client:
        dask_engine.run_on_dask(sweep, client)
        assert sorted(sweep.complete) == sorted(r["id"] for r in runs)
        deadline = time.monotonic() + 10  # releases reach the scheduler asynchronously
        while client.who_has() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.who_has() == {}  # nothing left for the scheduler to compute again


def test_folders_of_killed_runs_are_removed_by_the_next_run(tmp_path, sleep_grid):
    where = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    stale = tempfile.mkdtemp(prefix=f"{RUN_FOLDER_PREFIX}999999999_", dir=where)
    grid = sleep_grid(tmp_path / "grid.toml", [0.0])
    assert runner.main(["--grid", grid, "--results", str(tmp_path / "results")]) == 0
    assert not os.path.exists(stale)


@pytest.mark.slow
def test_runs_on_shared_cores_are_said_first_in_the_summary(tmp_path, sleep_grid):
    """--jobs 2 with runs of 2 threads on this machine: the summary's first lines say so; one at a
    time, not."""
    cores = os.cpu_count()
    grid = sleep_grid(tmp_path / "grid.toml", [0.0, 0.1], threads=cores)
    for jobs, shared in ((["--jobs", "2"], True), ([], False)):
        results = tmp_path / f"results{len(jobs)}"
        done, _ = _command("--grid", grid, "--results", str(results), *jobs, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        first_lines = (results / "summary.md").read_text().split("\n## ")[0]
        assert ("runs shared the machine's cores" in first_lines) == shared, first_lines
