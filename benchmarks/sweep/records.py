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
    "onnxruntime",
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


#: The instruction sets that decide a CPU kernel's speed: /proc/cpuinfo's flag, and its name.
INSTRUCTION_SETS = {
    "avx2": "AVX2",
    "avx512f": "AVX-512 (avx512f)",
    "avx512_vnni": "AVX-512 VNNI",
    "amx_tile": "AMX",
}


def _proc_lines(path):
    """The lines of a ``/proc`` file, none off Linux."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


def _cpu_flags():
    """The flags of :data:`INSTRUCTION_SETS` the processor has (sorted), or None where unknown."""
    for line in _proc_lines("/proc/cpuinfo"):
        if line.startswith(("flags", "Features")):
            return sorted(set(line.split(":", 1)[1].split()) & set(INSTRUCTION_SETS))
    return None


def _memory_gib():
    """The machine's memory in GiB (``MemTotal``), or None where unknown."""
    for line in _proc_lines("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 1)
    return None


def machine_info():
    """Describe the machine: processor, instruction sets, memory, cores, threads the libraries use.

    ``cpu_flags`` (the flags of :data:`INSTRUCTION_SETS` the processor has)
    and ``memory_gib`` are None off Linux.
    """
    import torch  # noqa: PLC0415
    from threadpoolctl import threadpool_info  # noqa: PLC0415

    return {
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "memory_gib": _memory_gib(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "blas": [
            {k: pool.get(k) for k in ("internal_api", "num_threads", "version", "architecture")}
            for pool in threadpool_info()
        ],
        "env": {
            k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE") if k in os.environ
        },
    }


#: The versions a results page names, in this order (``onnxruntime-training`` is either package).
PINNED = ("onnxruntime-training", "onnx", "torch", "scikit-learn", "numpy")
#: What a results page says for a field the records lack.
NOT_RECORDED = "not recorded in these runs"


def _and(items, word="and"):
    items = [str(i) for i in items]
    if len(items) < 2:
        return "".join(items)
    return f" {word} ".join([", ".join(items[:-1]), items[-1]])


def _instruction_sets(flags):
    if flags is None:
        return NOT_RECORDED
    has = [name for flag, name in INSTRUCTION_SETS.items() if flag in flags]
    lacks = [name for flag, name in INSTRUCTION_SETS.items() if flag not in flags]
    return ", ".join(has or ["none of them"]) + (f"; not {_and(lacks, 'or')}" if lacks else "")


def machine_lines(info, versions, threads=None):
    """The machine in full, as the markdown list atop every results page.

    Parameters
    ----------
    info : dict
        :func:`machine_info`'s dict, or the ``machine`` of a record (older
        records lack ``cpu_flags`` and ``memory_gib``; a missing field reads
        :data:`NOT_RECORDED`).
    versions : dict
        Package to version (:func:`package_versions`); :data:`PINNED` are named.
    threads : iterable of int, optional
        The thread counts the page's figures used.

    Returns
    -------
    list of str

    Examples
    --------
    >>> info = {"cpu": "AMD EPYC", "logical_cores": 2, "usable_cores": 2,
    ...         "cpu_flags": ["avx2", "avx512f"], "memory_gib": 23.5,
    ...         "platform": "Linux-6.1-x86_64", "python": "3.11.7"}
    >>> versions = {"onnxruntime-training-cpu": "1.19.2", "torch": "2.13.0"}
    >>> print("\\n".join(machine_lines(info, versions, [1, 2])))
    - **Processor**: AMD EPYC, 2 logical cores (2 usable); threads used: 1 and 2
    - **Instruction sets**: AVX2, AVX-512 (avx512f); not AVX-512 VNNI or AMX
    - **Memory**: 23.5 GiB
    - **System**: Linux-6.1-x86_64, Python 3.11.7
    - **Versions**: onnxruntime-training 1.19.2, onnx not recorded in these runs, torch 2.13.0, \
scikit-learn not recorded in these runs, numpy not recorded in these runs

    The maintained onnxruntime, without the training package, is named as such:

    >>> machine_lines(info, {"onnxruntime": "1.31.1", "onnx": "1.23.2"})[-1]  # doctest: +ELLIPSIS
    '- **Versions**: onnxruntime 1.31.1, onnx 1.23.2, torch not recorded in these runs, ...'
    """
    cores = info.get("logical_cores")
    processor = info.get("cpu") or NOT_RECORDED
    if cores:
        usable = info.get("usable_cores")
        processor += f", {cores} logical cores" + (f" ({usable} usable)" if usable else "")
    threads = [] if threads is None else list(threads)
    if threads:
        processor += f"; threads used: {_and(sorted({int(t) for t in threads}))}"
    memory = info.get("memory_gib")
    system = [
        info.get("platform") or f"operating system {NOT_RECORDED}",
        f"Python {info.get('python') or NOT_RECORDED}",
    ]
    found = {p: versions.get(p) for p in PINNED}
    found["onnxruntime-training"] = found["onnxruntime-training"] or versions.get(
        "onnxruntime-training-cpu"
    )
    if not found["onnxruntime-training"] and versions.get("onnxruntime"):
        # the maintained runtime, without the training package: it trains with backend "onnx"
        found = {"onnxruntime": versions["onnxruntime"], **found}
        del found["onnxruntime-training"]
    named = [f"{p} {v or NOT_RECORDED}" for p, v in found.items()]
    if not any(found.values()):
        named = [NOT_RECORDED]
    return [
        f"- **Processor**: {processor}",
        f"- **Instruction sets**: {_instruction_sets(info.get('cpu_flags'))}",
        f"- **Memory**: {NOT_RECORDED if memory is None else f'{memory:g} GiB'}",
        f"- **System**: {', '.join(system)}",
        f"- **Versions**: {', '.join(named)}",
    ]


def results_file(results, name):
    """The path of ``name`` in the folder ``results`` or in the folder above it, or None.

    The studies (targets, time to accuracy, zoo costs) write beside a sweep's
    folder, ``results/``, while the sweep's summary lives in ``results/reference``.

    Examples
    --------
    >>> results_file("no such folder", "step_targets.csv") is None
    True
    """
    for folder in (results, os.path.dirname(os.path.abspath(results))):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return None


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
        One dict per measured configuration; each gets the parameters' ``backend`` (the one that
        trained, :mod:`helpers.core.machine.backends`) when they name one and it has none.
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
    if parameters.get("backend"):
        rows = [{"backend": parameters["backend"], **row} for row in rows]
    record = {
        "notebook": notebook,
        "parameters": parameters,
        "rows": rows,
        "versions": package_versions(),
        "machine": machine_info(),
        "finished": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(),
        "duration_s": None if started is None else now - started,
        "conditions": None
        if started is None
        else machine_conditions(RunClock(started, 0.0), threads),
    }
    if path:
        atomic_write_text(path, json.dumps(record, indent=1, default=float))
    return record
