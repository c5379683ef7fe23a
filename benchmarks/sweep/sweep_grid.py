"""The grids of a benchmark sweep: TOML files expanded into runs.

A grid names, per benchmark notebook, the values of its parameters; a sweep
runs every combination (:func:`expand`), except those a benchmark's
``ignored_when`` table says do not apply (:func:`applicable`). Each run has
an id made of its benchmark and a hash of its parameters (:func:`run_id`),
so that a sweep run again finds the runs it already completed.
"""

import hashlib
import itertools
import json
import os
import tomllib

#: The folder of the benchmark notebooks and their grids (``benchmarks/``).
BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The grids that come with the project (``quick``, ``full``...).
GRIDS = os.path.join(BENCHMARKS, "grids")
#: The backend of the runs made before a sweep chose one: its runs keep the ids they had.
DEFAULT_BACKEND = "onnxruntime-training"


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
        notebook = os.path.join(BENCHMARKS, spec["notebook"])
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
            raise SystemExit(
                f"error: {where}: {key} must map values to lists of parameters, "
                f'e.g. {key} = {{ linear = ["batch_size"] }}.'
            )
        for value, names in cases.items():
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise SystemExit(
                    f"error: {where}: {key}.{value} must be a list of parameter names."
                )


def _matches(value, case):
    """Whether a parameter's value is the TOML key ``case`` (keys are strings: 1 is '1', True
    'true')."""
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
    """A folder name for one run: the benchmark and a hash of its parameters.

    A ``backend`` of :data:`DEFAULT_BACKEND` is no part of the hash, so that the runs of the
    training package keep their ids; another backend gives other runs.

    Examples
    --------
    >>> run_id("torch", {"hidden": 50}) == run_id(
    ...     "torch", {"hidden": 50, "backend": "onnxruntime-training"})
    True
    >>> run_id("torch", {"hidden": 50}) == run_id("torch", {"hidden": 50, "backend": "onnx"})
    False
    """
    if parameters.get("backend") == DEFAULT_BACKEND:
        parameters = {k: v for k, v in parameters.items() if k != "backend"}
    digest = hashlib.sha1(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:10]
    return f"{benchmark}-{digest}"


def expand(grid, backend=None):
    """List the runs of a grid: one per combination of its ``grid`` values.

    The parameters that do not apply to a combination (``ignored_when``) are
    dropped before its id is computed, so combinations that differ only by
    them are one run, listed once. ``backend`` (``python -m benchmarks --backend``) is the
    ``backend`` parameter of each run whose grid names none.

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
            if backend is not None:
                parameters.setdefault("backend", backend)
            identifier = run_id(benchmark, parameters)
            if identifier in seen:
                continue
            seen.add(identifier)
            runs.append(
                {
                    "benchmark": benchmark,
                    "notebook": spec["notebook"],
                    "parameters": parameters,
                    "id": identifier,
                }
            )
    return runs


# --------------------------------------------------------------------------
# One run, on whichever machine executes it. These functions travel to dask
# workers by value (see _by_value): a worker needs the project's
# environment (helpers, papermill, the Jupyter kernel), not this module.
