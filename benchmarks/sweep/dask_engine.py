"""A sweep's runs on dask: a ``LocalCluster`` of this machine (``--jobs N``) or a running cluster
(``--scheduler``).

Each run is a task: the notebook and its parameters travel to a worker,
which executes it in a temporary folder of its machine and hands back the
record and the executed notebook (:func:`benchmarks.sweep.notebook_runs.run_notebook`).
:func:`run_on_dask` collects them as they complete and keeps the sweep honest
when the cluster misbehaves:

* a run's result is released as soon as it is stored, so that a worker lost
  later does not make the scheduler compute it again;
* when no worker is left, the sweep says so within :data:`NO_WORKER_NOTICE_S`
  seconds and waits for one, or stops after ``stop_without_workers``
  seconds, as the user chose;
* one Ctrl-C cancels the runs not started and stops those under way.
"""

import contextlib
import logging
import signal
import sys
import threading
import time
import types
import uuid
import warnings

from tqdm.auto import tqdm

from benchmarks.sweep.notebook_runs import run_notebook

#: Seconds without any worker before the sweep says so.
NO_WORKER_NOTICE_S = 30.0
#: Seconds between two looks at the runs and the workers.
POLL_S = 2.0


class NoWorkerLeft(RuntimeError):
    """Every worker of the cluster is gone, for longer than the sweep was told to wait."""


def _by_value(function):
    """A copy of ``function`` that dask sends by value.

    The scheduler unpickles the tasks it receives and the workers run them:
    a function sent by reference (``benchmarks.sweep.notebook_runs.run_notebook``) would
    need this checkout importable on every machine of the cluster. pickle
    cannot find this copy by its name, so dask falls back to cloudpickle,
    which sends its code (and that of the functions of its module it calls,
    registered by value in :func:`dask_client`): the machines need the project's environment
    only (dask, papermill, helpers, the Jupyter kernel).
    """
    copy = types.FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
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
def dask_client(jobs=None, scheduler=None, timeout="10s"):
    """A client of a running cluster (``scheduler``, checked beforehand) or of a new
    ``LocalCluster`` of ``jobs`` workers."""
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
        logger.setLevel(
            logging.CRITICAL
        )  # the cluster's start, connections and failures are said in words
        if scheduler:
            client = Client(scheduler, timeout=timeout)
        else:
            with _sigint_ignored():
                cluster = LocalCluster(
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
            stack.callback(_quiet_close, cluster)
            client = Client(cluster)
        stack.callback(_quiet_close, client)
        yield client


def _quiet_close(closable):
    with contextlib.suppress(Exception):
        closable.close(timeout=20)


def check_workers(client):
    """Warn about workers whose runs share a machine's cores; say how many workers there are."""
    workers = client.scheduler_info().get("workers", {})
    print(f"{len(workers)} dask worker(s) at {client.scheduler.address}.")
    if not workers:
        print("No worker yet: runs start when one joins (dask worker ADDRESS --nthreads 1).")
    crowded = [address for address, info in workers.items() if info.get("nthreads", 1) > 1]
    if crowded:
        warnings.warn(
            f"workers {crowded} run several tasks at once: their runs disturb each other's "
            "timings; start workers with --nthreads 1.",
            stacklevel=2,
        )
    hosts = [info.get("host") for info in workers.values()]
    if len(hosts) != len(set(hosts)):
        warnings.warn(
            "several workers share a machine: their runs share its cores and disturb each other's "
            "timings.",
            stacklevel=2,
        )
    return workers


def run_on_dask(sweep, client, stop_without_workers=None):
    """Every run of ``sweep`` as a task of ``client``'s cluster; results come back through dask.

    Parameters
    ----------
    sweep : benchmarks.sweep.runner.Sweep
        Its ``todo`` runs; each outcome goes to ``sweep.done``.
    client : distributed.Client
    stop_without_workers : float, optional
        Seconds without any worker after which the sweep stops
        (:class:`NoWorkerLeft`); None waits for a worker to join.
    """
    from distributed import Event, wait  # noqa: PLC0415

    stop = Event(f"benchmarks-stop-{uuid.uuid4().hex}", client=client)
    task = _by_value(run_notebook)
    pending = {}
    try:
        for run in sweep.todo:
            future = client.submit(
                task,
                *sweep.arguments(run),
                stop=stop.name,
                key=f"{run['id']}-{uuid.uuid4().hex[:8]}",
                pure=False,
            )
            pending[future] = run
        sweep.progress  # noqa: B018  (draws the bar)
        alone_since, said = None, False
        while pending:
            try:
                done, _ = wait(list(pending), timeout=POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing finished meanwhile
                done = []
            for future in done:
                _collect(sweep, future, pending.pop(future))
            if not pending:
                break
            if client.scheduler_info().get("workers"):
                alone_since, said = None, False
                continue
            alone_since = alone_since or time.monotonic()
            alone = time.monotonic() - alone_since
            if stop_without_workers is not None and alone >= stop_without_workers:
                raise NoWorkerLeft(
                    f"No dask worker for {alone:.0f} s at {client.scheduler.address}: "
                    f"{len(pending)} runs did not run."
                )
            if (
                alone >= min(NO_WORKER_NOTICE_S, stop_without_workers or NO_WORKER_NOTICE_S)
                and not said
            ):
                tqdm.write(
                    f"No dask worker is left at {client.scheduler.address}: {len(pending)} runs "
                    f"wait for one. Start workers (dask worker {client.scheduler.address} "
                    "--nthreads 1), or Ctrl-C to stop (complete runs are kept)."
                )
                said = True
    except (KeyboardInterrupt, NoWorkerLeft):
        _stop(sweep, client, stop, pending)
        raise


def _collect(sweep, future, run):
    """Store a finished task's outcome, then release it: a lost worker must not make dask compute it
    again."""
    try:
        outcome = future.result()
    except Exception as exc:  # noqa: BLE001  (KilledWorker: its worker was lost, too often)
        last_line = (str(exc).strip().splitlines() or [""])[-1]
        sweep.done(run, error=f"{type(exc).__name__}: {last_line[:300]}")
    else:
        sweep.done(run, outcome)
    future.release()


def _stop(sweep, client, stop, pending):
    """Cancel the runs not started; let those under way kill their kernels; keep what completed."""
    from distributed import wait  # noqa: PLC0415

    left = list(pending)
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
                sweep.keep_if_complete(pending[future], future.result())
    with contextlib.suppress(Exception, KeyboardInterrupt):
        client.cancel(left)
