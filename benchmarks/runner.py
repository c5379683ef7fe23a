"""Run the benchmark notebooks over a grid of parameters, then summarize.

A sweep expands a grid (:func:`benchmarks.sweep_grid.load_grid`, :func:`~benchmarks.sweep_grid.expand`) into runs, one
notebook executed by papermill with one set of parameters each, and sends
them to an engine:

* sequential (the default): one run after the other in this process;
* ``--jobs N``: a ``dask.distributed.LocalCluster`` of N one-thread worker
  processes on this machine;
* ``--scheduler tcp://HOST:8786``: the workers of a running dask cluster,
  on other machines (no shared file system needed).

Wherever it runs, a run executes in a temporary folder of the machine that
runs it (:func:`benchmarks.notebook_runs.run_notebook`) and hands back its record (the JSON the
notebook writes at its end) and the executed notebook; this process adds
``worker`` (address, processor, threads of the machine that ran it) to the
record and writes, each atomically, into the results folder:

* ``records/<run id>.json``: the record (the layout of the committed
  reference, ``results/reference``);
* ``runs/<run id>/``: ``run.json`` (the run's parameters), the executed
  ``notebook.ipynb`` and a copy of the record, ``record.json``; or
  ``notebook.failed.ipynb`` when the run failed.

A run whose record exists is complete and skipped on the next sweep; a run
interrupted or lost with its worker leaves no record, so it runs again.
One Ctrl-C stops a sweep: the runs under way stop (their kernels are
killed), the runs not started are cancelled, the complete records stay, and
the same command resumes the sweep (exit status 130).
"""
import argparse
import concurrent.futures
import contextlib
import inspect
import logging
import os
import shlex
import signal
import sys
import threading
import time
import types
import uuid
import warnings

from tqdm.auto import tqdm

from .aggregate import summarize
from .notebook_runs import is_complete, run_notebook, store
from .sweep_grid import expand, load_grid

#: Where sweeps go unless told (relative to the current folder; git ignores it).
DEFAULT_RESULTS = os.path.join("results", "local")
#: The committed reference sweep: written only when named with ``--results``.
REFERENCE_RESULTS = os.path.join("results", "reference")
#: Exit status of a sweep stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130


def _arguments(run, kernel_name):
    """The arguments of :func:`~benchmarks.notebook_runs.run_notebook` for ``run``, the notebook read here."""
    with open(run["notebook"], encoding="utf-8") as f:
        source = f.read()
    return os.path.basename(run["notebook"]), source, run["parameters"], kernel_name


class Sweep:
    """The runs of one sweep and what became of them."""

    def __init__(self, todo, results, kernel_name):
        self.todo = todo
        self.results = results
        self.kernel_name = kernel_name
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

    def done(self, run, outcome=None, error=None):
        """Store a run's outcome (or its error) and count it."""
        if outcome is not None:
            error = store(self.results, run, outcome)
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
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-run") as pool:
            self.progress  # noqa: B018  (draws the bar)
            for run in self.todo:
                future = pool.submit(run_notebook, *_arguments(run, self.kernel_name), stop=stop)
                try:
                    outcome = future.result()
                except KeyboardInterrupt:
                    stop.set()  # the run kills its kernel and returns
                    with contextlib.suppress(Exception, KeyboardInterrupt):
                        self._keep_if_complete(run, future.result(timeout=30))
                    raise
                self.done(run, outcome)

    def _keep_if_complete(self, run, outcome):
        if outcome.get("error") is None and not outcome.get("stopped"):
            self.done(run, outcome)

    def dask(self, client):
        """Every run as a task of ``client``'s cluster; results come back through dask."""
        from distributed import Event, as_completed  # noqa: PLC0415

        stop_name = f"benchmarks-stop-{uuid.uuid4().hex}"
        stop = Event(stop_name, client=client)
        futures = {}
        task = _by_value(run_notebook)
        try:
            for run in self.todo:
                future = client.submit(
                    task, *_arguments(run, self.kernel_name), stop=stop_name,
                    key=f"{run['id']}-{uuid.uuid4().hex[:8]}", pure=False,
                )
                futures[future] = run
            self.progress  # noqa: B018  (draws the bar)
            for future in as_completed(futures):
                self._collect(future, futures[future])
        except KeyboardInterrupt:
            self._stop_dask(client, stop, futures)
            raise

    def _stop_dask(self, client, stop, futures):
        """Cancel the runs not started; let those under way kill their kernels; keep what completed."""
        from distributed import wait  # noqa: PLC0415

        logging.getLogger("distributed").setLevel(logging.CRITICAL)  # cancelled tasks are no news
        left = [f for f in futures if not f.done()]
        with contextlib.suppress(Exception, KeyboardInterrupt):
            stop.set()
            running = {key for keys in client.processing().values() for key in keys}
            client.cancel([f for f in left if f.key not in running])
            # the runs under way see the flag within a second, kill their kernels and return
            started = [f for f in left if f.key in running]
            with contextlib.suppress(Exception):
                wait(started, timeout=15)
            for future in started:
                if future.status == "finished":
                    self._keep_if_complete(futures[future], future.result())
        with contextlib.suppress(Exception, KeyboardInterrupt):
            client.cancel(left)

    def _collect(self, future, run):
        try:
            outcome = future.result()
        except Exception as exc:  # noqa: BLE001  (KilledWorker: its worker was lost, too often)
            last_line = (str(exc).strip().splitlines() or [""])[-1]
            self.done(run, error=f"{type(exc).__name__}: {last_line[:300]}")
        else:
            self.done(run, outcome)


def _by_value(function):
    """A copy of ``function`` that dask sends by value.

    The scheduler unpickles the tasks it receives and the workers run them:
    a function sent by reference (``benchmarks.runner.run_notebook``) would
    need this checkout importable on every machine of the cluster. pickle
    cannot find this copy by its name, so dask falls back to cloudpickle,
    which sends its code (and that of the functions of its module it calls,
    registered by value in :func:`_dask_client`): the machines need the project's environment
    only (dask, papermill, helpers, the Jupyter kernel).
    """
    copy = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__, function.__closure__,
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__doc__ = function.__doc__
    copy.__module__ = function.__module__
    copy.__qualname__ = f"{function.__qualname__}.<sent by value>"
    return copy


@contextlib.contextmanager
def _sigint_ignored():
    """Processes started inside ignore SIGINT: a Ctrl-C reaches the sweep, not its local workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _dask_client(jobs=None, scheduler=None):
    """A client of a running cluster (``scheduler``) or of a new ``LocalCluster`` of ``jobs`` workers."""
    import cloudpickle  # noqa: PLC0415
    from distributed import Client, LocalCluster  # noqa: PLC0415

    logger = logging.getLogger("distributed")
    level = logger.level
    module = sys.modules[run_notebook.__module__]
    # the functions run_notebook calls travel by value with it (see _by_value)
    cloudpickle.register_pickle_by_value(module)
    with contextlib.ExitStack() as stack:
        # callbacks run last in, first out: the level comes back once all is closed
        stack.callback(logger.setLevel, level)
        stack.callback(cloudpickle.unregister_pickle_by_value, module)
        logger.setLevel(logging.WARNING)  # the cluster's start and connections are no news either
        if scheduler:
            client = Client(scheduler, timeout="30s")
        else:
            with _sigint_ignored():
                cluster = LocalCluster(
                    n_workers=jobs, threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.ERROR,
                )
            stack.callback(_quiet_close, cluster)
            client = Client(cluster)
        stack.callback(_quiet_close, client)
        # closing with runs cancelled logs warnings that are no news
        stack.callback(logger.setLevel, logging.CRITICAL)
        yield client


def _quiet_close(closable):
    with contextlib.suppress(Exception):
        closable.close(timeout=20)


def _check_workers(client):
    """Warn about workers whose runs share a machine's cores; say how many workers there are."""
    workers = client.scheduler_info().get("workers", {})
    print(f"{len(workers)} dask worker(s) at {client.scheduler.address}.")
    if not workers:
        print("No worker yet: runs start when one joins (dask worker ADDRESS --nthreads 1).")
    crowded = [address for address, info in workers.items() if info.get("nthreads", 1) > 1]
    if crowded:
        warnings.warn(
            f"workers {crowded} run several tasks at once: their runs disturb each other's timings; "
            "start workers with --nthreads 1.",
            stacklevel=2,
        )
    hosts = [info.get("host") for info in workers.values()]
    if len(hosts) != len(set(hosts)):
        warnings.warn(
            "several workers share a machine: their runs share its cores and disturb each other's timings.",
            stacklevel=2,
        )


def _summarize(results, run_ids):
    """``aggregate.summarize`` restricted to the runs of the grid, where it accepts ``run_ids``."""
    if "run_ids" in inspect.signature(summarize).parameters:
        return summarize(results, run_ids=run_ids)
    return summarize(results)


def parse_arguments(argv=None):
    """The command line of ``python -m benchmarks``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run the benchmark notebooks over a grid, then write the summary of the grid's runs.",
        epilog=(
            f"Sweeps go to {DEFAULT_RESULTS} (git ignores it). The committed reference is refreshed "
            f"only with --results {REFERENCE_RESULTS} --grid full. Ctrl-C stops a sweep; the same "
            "command resumes it."
        ),
    )
    parser.add_argument("--grid", default="quick", help="quick (default), full, or a TOML file")
    parser.add_argument(
        "--results", default=DEFAULT_RESULTS,
        help=f"output folder (default: {DEFAULT_RESULTS}; the reference: {REFERENCE_RESULTS})",
    )
    parser.add_argument(
        "--jobs", type=int, default=1,
        help="runs at once on this machine, on a dask LocalCluster (default 1: one after the other, no dask)",
    )
    parser.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="send the runs to a running dask cluster, e.g. tcp://HOST:8786",
    )
    parser.add_argument("--force", action="store_true", help="run again the runs already complete")
    parser.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    parser.add_argument("--kernel", default="ort-training", help="Jupyter kernel (default ort-training)")
    parser.add_argument(
        "--summary-only", action="store_true", help="only write the summary of the grid's existing records",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.scheduler and args.jobs > 1:
        parser.error("--jobs and --scheduler exclude each other: the cluster's workers decide")
    return args


def main(argv=None):
    """Run a sweep; see ``python -m benchmarks --help``. Returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_arguments(argv)
    runs = expand(load_grid(args.grid))
    if args.only:
        runs = [r for r in runs if r["benchmark"] in args.only]
    sweep = None
    try:
        if not args.summary_only:
            done = [r for r in runs if is_complete(args.results, r)]
            todo = runs if args.force else [r for r in runs if r not in done]
            print(f"{len(runs)} runs in the grid, {len(done)} already complete, {len(todo)} to run.")
            if args.jobs > 1:
                warnings.warn(
                    f"--jobs {args.jobs}: parallel runs share the cores and disturb each other's "
                    "timings; use it for smoke tests, not for figures you will quote.",
                    stacklevel=1,
                )
            sweep = Sweep(todo, args.results, args.kernel)
            started = time.perf_counter()
            if not todo:
                pass
            elif args.scheduler or args.jobs > 1:
                with _dask_client(jobs=min(args.jobs, len(todo)), scheduler=args.scheduler) as client:
                    if args.scheduler:
                        _check_workers(client)
                    sweep.dask(client)
            else:
                sweep.sequential()
            sweep.close()
            if todo:
                print(f"{len(sweep.complete)} runs complete in {time.perf_counter() - started:.0f} s.")
            if sweep.failures:
                print(f"{len(sweep.failures)} runs failed; their notebooks are "
                      f"{os.path.join(args.results, 'runs', '<run id>', 'notebook.failed.ipynb')}; "
                      "the next sweep runs them again.")
        paths = _summarize(args.results, [r["id"] for r in runs])
    except KeyboardInterrupt:
        if sweep is not None:
            sweep.close()
        complete = len(sweep.complete) if sweep else 0
        left = len(sweep.todo) - complete - len(sweep.failures) if sweep else 0
        print(
            f"\nInterrupted: {complete} runs of this sweep complete, their records kept in "
            f"{os.path.join(args.results, 'records')}; {left} not run.\n"
            "Resume with the same command (complete runs are skipped):\n"
            f"  {shlex.join(['python', '-m', 'benchmarks', *argv])}",
            flush=True,
        )
        return INTERRUPTED
    for path in paths:
        print("wrote", path)
    return 1 if sweep is not None and sweep.failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
