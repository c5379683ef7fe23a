"""Run the benchmark notebooks over a grid of parameters, then summarize.

A sweep expands a grid (:func:`benchmarks.sweep.sweep_grid.load_grid`,
:func:`~benchmarks.sweep.sweep_grid.expand`) into runs, one notebook executed by papermill with one
set of parameters each, and sends them to an engine:

* sequential (the default): one run after the other in this process;
* ``--jobs N``: a ``dask.distributed.LocalCluster`` of N one-thread worker
  processes on this machine;
* ``--scheduler tcp://HOST:8786``: the workers of a running dask cluster,
  on other machines (no shared file system needed).

Wherever it runs, a run executes in a temporary folder of the machine that
runs it (:func:`benchmarks.sweep.notebook_runs.run_notebook`) and hands back its record (the
JSON the notebook writes at its end) and the executed notebook; this process adds
``worker`` (address, processor, threads of the machine that ran it) to the
record and writes, each atomically, into the results folder:

* ``records/<run id>.json``: the record (the layout of the committed
  reference, ``results/reference``);
* ``runs/<run id>/``: ``run.json`` (the run's parameters), the executed
  ``notebook.ipynb`` and a copy of the record, ``record.json``; or
  ``notebook.failed.ipynb`` when the run failed.

Every run trains with the backend ``--backend`` names (:mod:`benchmarks.sweep.backend_choice`),
a parameter of the run. A run whose record exists is complete and skipped on the next sweep; a run
interrupted or lost with its worker leaves no record, so it runs again.
One Ctrl-C stops a sweep: the runs under way stop (their kernels are
killed), the runs not started are cancelled, the complete records stay, and
the same command resumes the sweep (exit status 130).
"""

import argparse
import concurrent.futures
import contextlib
import inspect
import os
import shlex
import sys
import threading
import time
import traceback
import warnings

from tqdm.auto import tqdm

from benchmarks.report.aggregate import summarize
from benchmarks.sweep.backend_choice import BACKENDS, KERNELS, default_kernel, sweep_backend
from benchmarks.sweep.dask_engine import NoWorkerLeft, check_workers, dask_client, run_on_dask
from benchmarks.sweep.notebook_runs import is_complete, run_notebook, store
from benchmarks.sweep.scheduler_address import (
    SchedulerAddressError,
    check_scheduler,
    parse_scheduler_address,
)
from benchmarks.sweep.sweep_grid import expand, load_grid

#: Where sweeps go unless told (relative to the current folder; git ignores it).
DEFAULT_RESULTS = os.path.join("results", "local")
#: The committed reference sweep: written only when named with ``--results``.
REFERENCE_RESULTS = os.path.join("results", "reference")
#: Exit status of a sweep stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Exit status of a command line the sweep refuses (an unknown benchmark, a bad scheduler address).
USAGE_ERROR = 2


class Sweep:
    """The runs of one sweep and what became of them."""

    def __init__(self, todo, results, kernel_name, concurrent=1):
        self.todo = todo
        self.results = results
        self.kernel_name = kernel_name
        self.concurrent = (
            concurrent  # runs at once on one machine: their records say they shared the cores
        )
        self.complete = []
        self.failures = []
        self._progress = None

    @property
    def progress(self):
        """The progress bar, drawn from the first run on (after the engine's messages)."""
        if self._progress is None:
            self._progress = tqdm(total=len(self.todo), desc="runs", unit="run")
        return self._progress

    def close(self):
        """Close the progress bar, if drawn."""
        if self._progress is not None:
            self._progress.close()

    def arguments(self, run):
        """The arguments of :func:`~benchmarks.sweep.notebook_runs.run_notebook` for ``run``, the
        notebook read here."""
        with open(run["notebook"], encoding="utf-8") as f:
            source = f.read()
        return os.path.basename(run["notebook"]), source, run["parameters"], self.kernel_name

    def done(self, run, outcome=None, error=None):
        """Store a run's outcome (or its error) and count it."""
        if outcome is not None:
            error = store(self.results, run, outcome, self.concurrent)
        if error == "stopped":
            return
        if error:
            self.failures.append((run["id"], error))
            tqdm.write(f"FAILED {run['id']}: {error}")
        else:
            self.complete.append(run["id"])
        self.progress.update()

    def sequential(self):
        """One run after the other, each in a thread of its own that Ctrl-C can stop."""
        stop = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="bench-run"
        ) as pool:
            self.progress  # noqa: B018  (draws the bar)
            for run in self.todo:
                future = pool.submit(run_notebook, *self.arguments(run), stop=stop)
                try:
                    outcome = future.result()
                except KeyboardInterrupt:
                    stop.set()  # the run kills its kernel and returns
                    with contextlib.suppress(Exception, KeyboardInterrupt):
                        self.keep_if_complete(run, future.result(timeout=30))
                    raise
                self.done(run, outcome)

    def keep_if_complete(self, run, outcome):
        """Store the outcome of a run that completed while the sweep was stopping."""
        if outcome.get("error") is None and not outcome.get("stopped"):
            self.done(run, outcome)


def _summarize(results, run_ids):
    """``aggregate.summarize`` restricted to the runs of the grid, where it accepts ``run_ids``."""
    if "run_ids" in inspect.signature(summarize).parameters:
        return summarize(results, run_ids=run_ids)
    return summarize(results)


def parse_arguments(argv=None):
    """The command line of ``python -m benchmarks``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run the benchmark notebooks over a grid, then write the summary of the "
        "grid's runs.",
        epilog=(
            f"Sweeps go to {DEFAULT_RESULTS} (git ignores it). The committed reference is "
            f"refreshed only with --results {REFERENCE_RESULTS} --grid full. Ctrl-C stops a sweep; "
            "the same command resumes it."
        ),
    )
    parser.add_argument("--grid", default="quick", help="quick (default), full, or a TOML file")
    parser.add_argument(
        "--results",
        default=DEFAULT_RESULTS,
        help=f"output folder (default: {DEFAULT_RESULTS}; the reference: {REFERENCE_RESULTS})",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at once on this machine, on a dask LocalCluster (default 1: one after the "
        "other, no dask); their timings are not comparable with runs made one at a time",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="send the runs to a running dask cluster: the tcp://HOST:PORT `dask scheduler` "
        "prints (port 8786)",
    )
    parser.add_argument(
        "--stop-without-workers",
        type=float,
        metavar="SECONDS",
        help="with --scheduler: stop the sweep once no worker has been there for SECONDS "
        "(default: say so after 30 s and wait for one)",
    )
    parser.add_argument("--force", action="store_true", help="run again the runs already complete")
    parser.add_argument(
        "--only", action="append", help="run only this benchmark of the grid (repeatable)"
    )
    parser.add_argument(
        "--kernel",
        default=None,
        help=f"Jupyter kernel (default: {KERNELS[0]}, or where there is none {KERNELS[1]})",
    )
    parser.add_argument(
        "--backend",
        default="auto",
        choices=BACKENDS,
        help="who trains the onnxruntime APIs of every run: the training package 1.19.2, or "
        "gradients in standard ONNX on any onnxruntime; auto (default): the training package "
        "where this interpreter has it. Each record and row names it; runs of another backend "
        "than the training package's are other runs",
    )
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="only write the summary of the grid's existing records",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of a connection failure"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.scheduler and args.jobs > 1:
        parser.error("--jobs and --scheduler exclude each other: the cluster's workers decide")
    if args.kernel is None:
        args.kernel = default_kernel()
    return args


def select_runs(runs, only, grid):
    """The runs of the benchmarks named by ``--only``; an unknown name is refused with the valid
    ones.

    Examples
    --------
    >>> runs = [{"benchmark": "torch"}, {"benchmark": "sklearn"}]
    >>> select_runs(runs, ["sklearn"], "quick")
    [{'benchmark': 'sklearn'}]
    >>> select_runs(runs, ["sklern"], "quick")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    SystemExit: error: --only sklern: no such benchmark in grid quick. Its benchmarks: sklearn,
    torch.
    """
    if not only:
        return runs
    known = sorted({r["benchmark"] for r in runs})
    unknown = [name for name in only if name not in known]
    if unknown:
        raise SystemExit(
            f"error: --only {', '.join(unknown)}: no such benchmark in grid {grid}. "
            f"Its benchmarks: {', '.join(known)}."
        )
    return [r for r in runs if r["benchmark"] in only]


def _resume_command(argv):
    """The command that resumes this sweep: this interpreter, these arguments."""
    return shlex.join([sys.executable, "-m", "benchmarks", *argv])


def _summary_or_keep(results, runs):
    """Write the summary of ``runs``, unless none is complete and a summary is there: it stays."""
    summary = os.path.join(results, "summary.md")
    if os.path.exists(summary) and not any(is_complete(results, r) for r in runs):
        print(f"No run of this grid is complete in {results}: its summary is left as it was.")
        return []
    return _summarize(results, [r["id"] for r in runs])


def _connect(args):
    """A dask client, or None with a message when the scheduler cannot be reached (the traceback
    with --debug)."""
    try:
        address = parse_scheduler_address(args.scheduler) if args.scheduler else None
        if address:
            check_scheduler(address)
        return dask_client(jobs=args.jobs, scheduler=address)
    except SchedulerAddressError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _run(sweep, args):
    """Run the sweep's runs with the engine the command line chose; False when the cluster is
    unreachable."""
    if not sweep.todo:
        return True
    if not (args.scheduler or args.jobs > 1):
        sweep.sequential()
        return True
    args.jobs = min(args.jobs, len(sweep.todo))
    client_context = _connect(args)
    if client_context is None:
        return False
    try:
        with client_context as client:
            if args.scheduler:
                tasks_per_host = {}  # tasks a host runs at once: the threads of its workers
                for info in check_workers(client).values():
                    tasks_per_host[info.get("host")] = tasks_per_host.get(
                        info.get("host"), 0
                    ) + info.get("nthreads", 1)
                sweep.concurrent = max(tasks_per_host.values(), default=1)
            run_on_dask(sweep, client, args.stop_without_workers)
    except (
        OSError,
        TimeoutError,
    ) as error:  # the scheduler went away, or never answered dask's handshake
        if args.debug:
            traceback.print_exc()
        print(
            f"error: the dask scheduler at {args.scheduler} stopped answering "
            f"({type(error).__name__}: {str(error).splitlines()[0][:150] if str(error) else ''}).",
            file=sys.stderr,
        )
        return False
    return True


def main(argv=None):
    """Run a sweep; see ``python -m benchmarks --help``. Returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_arguments(argv)
    backend, unavailable = sweep_backend(args.backend)
    if unavailable:
        print(f"error: --backend {args.backend}: {unavailable}", file=sys.stderr)
        return USAGE_ERROR
    runs = select_runs(expand(load_grid(args.grid), backend), args.only, args.grid)
    sweep = None
    try:
        if not args.summary_only:
            done = [r for r in runs if is_complete(args.results, r)]
            todo = runs if args.force else [r for r in runs if r not in done]
            print(
                f"{len(runs)} runs in the grid, {len(done)} already complete, {len(todo)} to run "
                f"(backend {backend})."
            )
            if args.jobs > 1:
                warnings.warn(
                    f"--jobs {args.jobs}: parallel runs share the cores and disturb each other's "
                    "timings: they are not comparable with runs made one at a time (the summary "
                    "says so). "
                    "Use it for smoke tests, not for figures you will quote.",
                    stacklevel=1,
                )
            sweep = Sweep(
                todo, args.results, args.kernel, concurrent=min(args.jobs, max(len(todo), 1))
            )
            started = time.perf_counter()
            if not _run(sweep, args):
                sweep.close()
                return USAGE_ERROR
            sweep.close()
            if todo:
                print(
                    f"{len(sweep.complete)} runs complete in {time.perf_counter() - started:.0f} s."
                )
            if sweep.failures:
                print(
                    f"{len(sweep.failures)} runs failed; their notebooks are "
                    f"{os.path.join(args.results, 'runs', '<run id>', 'notebook.failed.ipynb')}; "
                    "the next sweep runs them again."
                )
        paths = _summary_or_keep(args.results, runs)
    except (KeyboardInterrupt, NoWorkerLeft) as stopped:
        if sweep is not None:
            sweep.close()
        complete = len(sweep.complete) if sweep else 0
        left = len(sweep.todo) - complete - len(sweep.failures) if sweep else 0
        why = "Interrupted" if isinstance(stopped, KeyboardInterrupt) else f"Stopped: {stopped}"
        print(
            f"\n{why}: {complete} runs of this sweep complete, their records kept in "
            f"{os.path.join(args.results, 'records')}; {left} not run.\n"
            "Resume with the same command (complete runs are skipped):\n"
            f"  {_resume_command(argv)}",
            flush=True,
        )
        return INTERRUPTED if isinstance(stopped, KeyboardInterrupt) else 1
    for path in paths:
        print("wrote", path)
    return 1 if sweep is not None and sweep.failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
