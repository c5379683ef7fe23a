"""Run the benchmark notebooks over a grid of parameters, then summarize.

A sweep expands a grid (:func:`load_grid`, :func:`expand`) into runs, one
notebook executed by papermill with one set of parameters each, and sends
them to an engine:

* sequential (the default): one run after the other in this process;
* ``--jobs N``: a ``dask.distributed.LocalCluster`` of N one-thread worker
  processes on this machine;
* ``--scheduler tcp://HOST:8786``: the workers of a running dask cluster,
  on other machines (no shared file system needed).

Wherever it runs, a run executes in a temporary folder of the machine that
runs it (:func:`run_notebook`) and hands back its record (the JSON the
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
import hashlib
import inspect
import itertools
import json
import logging
import os
import shlex
import signal
import sys
import threading
import time
import tomllib
import types
import uuid
import warnings

from tqdm.auto import tqdm

from benchmarks.records import atomic_write_bytes, atomic_write_text

from .aggregate import summarize

HERE = os.path.dirname(os.path.abspath(__file__))
GRIDS = os.path.join(HERE, "grids")
#: Where sweeps go unless told (relative to the current folder; git ignores it).
DEFAULT_RESULTS = os.path.join("results", "local")
#: The committed reference sweep: written only when named with ``--results``.
REFERENCE_RESULTS = os.path.join("results", "reference")
#: Exit status of a sweep stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Seconds between two looks at the stop flag while a run executes.
POLL_S = 0.5


def load_grid(name_or_path):
    """Read a grid file: a name in ``benchmarks/grids`` (quick, full) or a path.

    Each table is one benchmark: ``notebook`` (relative to ``benchmarks/``
    or absolute), ``[name.fixed]`` parameters, ``[name.grid]`` lists whose
    every combination is one run, and optionally ``[name.ignored_when]``:
    the parameters that do not apply when another has a given value, e.g.
    ``model = { linear = ["batch_size", "hidden"] }`` (see :func:`expand`).

    Returns
    -------
    dict
        Benchmark name to its table, ``notebook`` made an absolute path.
    """
    path = name_or_path
    if not os.path.exists(path):
        path = os.path.join(GRIDS, f"{name_or_path}.toml")
    if not os.path.exists(path):
        known = sorted(f[:-5] for f in os.listdir(GRIDS) if f.endswith(".toml"))
        raise SystemExit(f"error: no grid {name_or_path!r}: give a path or one of {known}.")
    with open(path, "rb") as f:
        grid = tomllib.load(f)
    for name, spec in grid.items():
        if "notebook" not in spec:
            raise SystemExit(f"error: benchmark {name!r} in {path} names no notebook.")
        notebook = os.path.join(HERE, spec["notebook"])
        if not os.path.exists(notebook):
            raise SystemExit(f"error: benchmark {name!r}: {notebook} does not exist.")
        spec["notebook"] = notebook
        _check_ignored_when(name, spec.get("ignored_when", {}), path)
    return grid


def _check_ignored_when(name, ignored_when, path):
    """``{parameter: {value: [parameters]}}`` or a clear error."""
    where = f"benchmark {name!r} in {path}: [{name}.ignored_when]"
    for key, cases in ignored_when.items():
        if not isinstance(cases, dict):
            raise SystemExit(f"error: {where}: {key} must map values to lists of parameters, "
                             f'e.g. {key} = {{ linear = ["batch_size"] }}.')
        for value, names in cases.items():
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise SystemExit(f"error: {where}: {key}.{value} must be a list of parameter names.")


def _matches(value, case):
    """Whether a parameter's value is the TOML key ``case`` (keys are strings: 1 is '1', True 'true')."""
    return case in (str(value), json.dumps(value))


def applicable(parameters, ignored_when):
    """``parameters`` without those that do not apply to them (``ignored_when``).

    Examples
    --------
    >>> applicable({"model": "linear", "hidden": 50, "epochs": 5},
    ...            {"model": {"linear": ["batch_size", "hidden"]}})
    {'model': 'linear', 'epochs': 5}
    """
    dropped = set()
    for key, cases in ignored_when.items():
        if key in parameters:
            for case, names in cases.items():
                if _matches(parameters[key], case):
                    dropped.update(names)
    return {k: v for k, v in parameters.items() if k not in dropped}


def run_id(benchmark, parameters):
    """A folder name for one run: the benchmark and a hash of its parameters."""
    digest = hashlib.sha1(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:10]
    return f"{benchmark}-{digest}"


def expand(grid):
    """List the runs of a grid: one per combination of its ``grid`` values.

    The parameters that do not apply to a combination (``ignored_when``) are
    dropped before its id is computed, so combinations that differ only by
    them are one run, listed once.

    Returns
    -------
    list of dict
        ``benchmark``, ``notebook``, ``parameters`` and ``id`` of each run.
    """
    runs, seen = [], set()
    for benchmark, spec in grid.items():
        axes = spec.get("grid", {})
        keys = list(axes)
        for values in itertools.product(*(axes[k] for k in keys)) if keys else [()]:
            parameters = {**spec.get("fixed", {}), **dict(zip(keys, values))}
            parameters = applicable(parameters, spec.get("ignored_when", {}))
            identifier = run_id(benchmark, parameters)
            if identifier in seen:
                continue
            seen.add(identifier)
            runs.append(
                {"benchmark": benchmark, "notebook": spec["notebook"], "parameters": parameters, "id": identifier}
            )
    return runs


# --------------------------------------------------------------------------
# One run, on whichever machine executes it. These functions travel to dask
# workers by value (see _by_value): a worker needs the project's
# environment (helpers, papermill, the Jupyter kernel), not this module.


def _worker_info():
    """The machine that executes this run: dask worker address (or 'local'), threads, processor."""
    from benchmarks.records import machine_info  # noqa: PLC0415

    try:
        from distributed import get_worker  # noqa: PLC0415

        worker = get_worker()
        address, threads = worker.address, getattr(worker, "state", worker).nthreads
    except (ImportError, ValueError):  # not in a dask task
        address, threads = "local", 1
    return {"address": address, "threads": threads, "machine": machine_info()}


def _stop_check(stop):
    """A function telling whether the sweep was stopped: ``stop`` is None, an Event or a dask Event's name."""
    if stop is None:
        return lambda: False
    if isinstance(stop, str):
        from distributed import Event  # noqa: PLC0415

        event = Event(stop)
        return event.is_set
    return stop.is_set


def run_notebook(notebook, source, parameters, kernel_name, stop=None, attempts=2):
    """Execute one benchmark notebook in a temporary folder of this machine.

    Parameters
    ----------
    notebook : str
        The notebook's file name (for messages).
    source : str
        The notebook itself (JSON text): the sweep sends it, so that a worker
        runs the sweep's version of the notebook.
    parameters : dict
        papermill parameters; ``record_path`` is added.
    kernel_name : str
        The Jupyter kernel that runs it (registered on this machine).
    stop : threading.Event or str, optional
        The sweep's stop flag, or the name of a ``distributed.Event``: once
        set, the kernel is killed and the run ends with ``stopped=True``.
    attempts : int
        Tries when the kernel fails outside the notebook's cells (a kernel
        that does not start); an error in a cell is not retried.

    Returns
    -------
    dict
        ``record`` (the record's JSON text, or None), ``notebook`` (the
        executed or failed notebook, bytes, or None), ``error`` (None or a
        line), ``stopped`` and ``worker`` (:func:`_worker_info`).
    """
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    import papermill  # noqa: PLC0415  (slow to import, only where needed)
    from jupyter_client.manager import AsyncKernelManager  # noqa: PLC0415

    is_stopped = _stop_check(stop)
    outcome = {"record": None, "notebook": None, "error": None, "stopped": False, "worker": _worker_info()}
    # a short path: the kernel's sockets are files in it (at most 107 characters)
    folder = tempfile.mkdtemp(prefix="bench-", dir="/tmp" if os.path.isdir("/tmp") else None)
    managers = []

    class RunKernelManager(AsyncKernelManager):
        """A kernel of its own for this run, talking through socket files of the run's folder.

        Files, not TCP ports: kernels started at once on one machine cannot
        race for the same port.
        """

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            if os.name == "posix":
                self.transport = "ipc"
                self.ip = os.path.join(folder, f"kernel{len(managers)}")
            managers.append(self)

    finished = threading.Event()
    papermill_log = logging.getLogger("papermill")
    papermill_level = papermill_log.level

    def watch():
        while not finished.wait(POLL_S):
            try:
                stopped = is_stopped()
            except Exception:  # noqa: BLE001  (scheduler gone: the run goes on)
                stopped = False
            if stopped:
                outcome["stopped"] = True
                papermill_log.setLevel(logging.CRITICAL)  # a killed kernel is no error here
                for manager in managers:
                    process = getattr(manager.provisioner, "process", None)
                    if process is not None and process.poll() is None:
                        process.kill()  # papermill then raises DeadKernelError
                return

    watcher = threading.Thread(target=watch, name="bench-stop-watch", daemon=True)
    watcher.start()
    try:
        source_path = os.path.join(folder, notebook)
        output = os.path.join(folder, "executed.ipynb")
        record = os.path.join(folder, "record.json")
        with open(source_path, "w", encoding="utf-8") as f:
            f.write(source)
        for attempt in range(attempts):
            if outcome["stopped"] or is_stopped():
                outcome["stopped"] = True
                break
            try:
                papermill.execute_notebook(
                    source_path,
                    output,
                    parameters={**parameters, "record_path": record},
                    kernel_name=kernel_name,
                    kernel_manager_class=RunKernelManager,
                    cwd=folder,
                    progress_bar=False,
                )
                outcome["error"] = None
                break
            except Exception as exc:  # noqa: BLE001  (the failed notebook stays for reading)
                last_line = (str(exc).strip().splitlines() or [""])[-1]
                outcome["error"] = f"{type(exc).__name__}: {last_line[:300]}"
                in_a_cell = isinstance(exc, papermill.PapermillExecutionError)
                if in_a_cell or outcome["stopped"] or attempt + 1 == attempts:
                    break
        if os.path.exists(output):
            with open(output, "rb") as f:
                outcome["notebook"] = f.read()
        if outcome["error"] is None:
            if os.path.exists(record):
                with open(record, encoding="utf-8") as f:
                    outcome["record"] = f.read()
            else:
                outcome["error"] = "the notebook ended without writing its record"
        if outcome["stopped"]:
            outcome["error"] = "stopped"
    finally:
        finished.set()
        watcher.join()
        papermill_log.setLevel(papermill_level)
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


# --------------------------------------------------------------------------
# The sweep, in this process.


def record_path(results, run):
    """Where the record of ``run`` lives: ``<results>/records/<id>.json``."""
    return os.path.join(results, "records", f"{run['id']}.json")


def is_complete(results, run):
    """Whether ``run`` has a record under ``results``.

    A record left only in ``runs/<id>/record.json`` (a sweep of an older
    runner) is copied to ``records/`` on the way.
    """
    path = record_path(results, run)
    if os.path.exists(path):
        return True
    legacy = os.path.join(results, "runs", run["id"], "record.json")
    if os.path.exists(legacy):
        with open(legacy, encoding="utf-8") as f:
            atomic_write_text(path, f.read())
        return True
    return False


def store(results, run, outcome):
    """Write what a run brought back; return None or its error.

    The notebook goes first and the record last, each atomically, so that a
    record exists only beside its notebook.
    """
    if outcome.get("stopped"):
        return "stopped"
    folder = os.path.join(results, "runs", run["id"])
    atomic_write_text(
        os.path.join(folder, "run.json"),
        json.dumps({k: run[k] for k in ("benchmark", "parameters", "id")}, indent=1),
    )
    if outcome["error"] is not None:
        if outcome["notebook"] is not None:
            atomic_write_bytes(os.path.join(folder, "notebook.failed.ipynb"), outcome["notebook"])
        return outcome["error"]
    record = json.loads(outcome["record"])
    record["worker"] = outcome["worker"]
    text = json.dumps(record, indent=1, default=float)
    atomic_write_bytes(os.path.join(folder, "notebook.ipynb"), outcome["notebook"])
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(folder, "notebook.failed.ipynb"))
    atomic_write_text(os.path.join(folder, "record.json"), text)
    atomic_write_text(record_path(results, run), text)
    return None


def _arguments(run, kernel_name):
    """The arguments of :func:`run_notebook` for ``run``, the notebook read here."""
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
    which sends its code (and that of the functions of this module it calls,
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
    module = sys.modules[__name__]
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
