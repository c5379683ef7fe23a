"""One run of a sweep: a benchmark notebook executed by papermill, and what it leaves.

:func:`run_notebook` executes a notebook in a temporary folder of the
machine that runs it (a dask worker's or this one's) and hands back its
record and the executed notebook; :func:`store` writes them, atomically,
into the results folder, where :func:`is_complete` finds them again.
"""

import contextlib
import json
import logging
import os
import threading

from benchmarks.sweep.records import atomic_write_bytes, atomic_write_text

#: Seconds between two looks at the stop flag while a run executes.
POLL_S = 0.5
#: Prefix of the temporary folder of a run: ``bench-<pid>_<random>``.
RUN_FOLDER_PREFIX = "bench-"


def _worker_info():
    """The machine that executes this run: dask worker address (or 'local'), threads, processor."""
    from benchmarks.sweep.records import machine_info  # noqa: PLC0415

    try:
        from distributed import get_worker  # noqa: PLC0415

        worker = get_worker()
        address, threads = worker.address, getattr(worker, "state", worker).nthreads
    except (ImportError, ValueError):  # not in a dask task
        address, threads = "local", 1
    return {"address": address, "threads": threads, "machine": machine_info()}


def _stop_check(stop):
    """A function telling whether the sweep was stopped: ``stop`` is None, an Event or a dask
    Event's name."""
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

    from helpers.core.machine.training_cache import remove_stale_folders  # noqa: PLC0415

    is_stopped = _stop_check(stop)
    outcome = {
        "record": None,
        "notebook": None,
        "error": None,
        "stopped": False,
        "worker": _worker_info(),
    }
    # a short path: the kernel's sockets are files in it (at most 107 characters); named with this
    # process's id, so that the next run on this machine removes it if this process is killed
    where = "/tmp" if os.path.isdir("/tmp") else None
    remove_stale_folders(RUN_FOLDER_PREFIX, where)
    folder = tempfile.mkdtemp(prefix=f"{RUN_FOLDER_PREFIX}{os.getpid()}_", dir=where)
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


def store(results, run, outcome, concurrent=1):
    """Write what a run brought back; return None or its error.

    The notebook goes first and the record last, each atomically, so that a
    record exists only beside its notebook. The record says whether the run
    shared its machine's cores with others (``concurrent`` runs at once on
    it, :func:`helpers.measure.conditions.sharing`).
    """
    from helpers.measure.conditions import sharing  # noqa: PLC0415

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
    parameters = record.get("parameters", {})
    threads = parameters.get("threads", parameters.get("n_threads", 1))
    cores = outcome["worker"].get("machine", {}).get("usable_cores")
    record["shared"] = sharing(concurrent, threads, cores)
    text = json.dumps(record, indent=1, default=float)
    atomic_write_bytes(os.path.join(folder, "notebook.ipynb"), outcome["notebook"])
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(folder, "notebook.failed.ipynb"))
    atomic_write_text(os.path.join(folder, "record.json"), text)
    atomic_write_text(record_path(results, run), text)
    return None
