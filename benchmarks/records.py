"""What the benchmark notebooks share: timing, provenance and their records.

A benchmark notebook measures, then calls :func:`write_record` once with its
rows; ``python -m benchmarks`` runs the notebooks and aggregates the records.
"""
import datetime
import json
import os
import platform
import tempfile
import time
from importlib import metadata

#: Packages whose versions every record keeps.
PACKAGES = (
    "onnxruntime-training-cpu",
    "onnxruntime-training",
    "onnx",
    "skl2onnx",
    "scikit-learn",
    "torch",
    "numpy",
)


def package_versions():
    """Return the installed version of each package of :data:`PACKAGES`."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info():
    """Describe the machine: processor, cores, threads the libraries use."""
    from threadpoolctl import threadpool_info  # noqa: PLC0415

    import torch  # noqa: PLC0415

    return {
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "blas": [
            {k: pool.get(k) for k in ("internal_api", "num_threads", "version", "architecture")}
            for pool in threadpool_info()
        ],
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE") if k in os.environ},
    }


def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` so that a reader never sees half a file.

    The data goes to a temporary file in the same folder, which then replaces
    ``path`` in one step; an interruption leaves the old file or none. The
    file gets the permissions of an ordinary new file (the umask's), not the
    private ones of a temporary file.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically, as :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_record(path, notebook, parameters, rows, started=None):
    """Write the machine-readable record of one benchmark run (atomically).

    Parameters
    ----------
    path : str or None
        Where to write; None writes nothing (interactive use).
    notebook : str
        Name of the benchmark.
    parameters : dict
        Every parameter of the run.
    rows : list of dict
        One dict per measured configuration.
    started : float, optional
        ``time.time()`` at the start of the run, to record its duration and
        the conditions it ran under (:func:`helpers.measure.conditions.machine_conditions`:
        the load on the machine, the processor time the kernel got; the
        threads are the parameters' ``threads`` or ``n_threads``).

    Returns
    -------
    dict
        The record.
    """
    from helpers.measure.conditions import RunClock, machine_conditions  # noqa: PLC0415

    now = time.time()
    threads = parameters.get("threads", parameters.get("n_threads", 1))
    record = {
        "notebook": notebook,
        "parameters": parameters,
        "rows": rows,
        "versions": package_versions(),
        "machine": machine_info(),
        "finished": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(),
        "duration_s": None if started is None else now - started,
        "conditions": None if started is None else machine_conditions(RunClock(started, 0.0), threads),
    }
    if path:
        atomic_write_text(path, json.dumps(record, indent=1, default=float))
    return record
