"""Run the benchmark notebooks over a grid of parameters, then summarize.

Each run executes one notebook with papermill and leaves, in its own folder
``results/runs/<run id>/``, the executed notebook and ``record.json``, the
machine-readable record the notebook writes at its end. A run whose record
exists is complete and skipped on the next sweep; a run killed half way
leaves no record (records and notebooks are written atomically), so it is
run again.
"""
import argparse
import concurrent.futures
import hashlib
import itertools
import json
import os
import sys
import tomllib
import warnings

from tqdm.auto import tqdm

from helpers.benchmarking import atomic_write_text

from .aggregate import summarize

HERE = os.path.dirname(os.path.abspath(__file__))
GRIDS = os.path.join(HERE, "grids")


def load_grid(name_or_path):
    """Read a grid file: a name in ``benchmarks/grids`` (quick, full) or a path.

    Returns
    -------
    dict
        Benchmark name to ``{'notebook': path, 'fixed': {...}, 'grid': {...}}``.
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
    return grid


def run_id(benchmark, parameters):
    """A folder name for one run: the benchmark and a hash of its parameters."""
    digest = hashlib.sha1(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:10]
    return f"{benchmark}-{digest}"


def expand(grid):
    """List the runs of a grid: one per combination of its ``grid`` values.

    Returns
    -------
    list of dict
        ``benchmark``, ``notebook``, ``parameters`` and ``id`` of each run.
    """
    runs = []
    for benchmark, spec in grid.items():
        axes = spec.get("grid", {})
        keys = list(axes)
        for values in itertools.product(*(axes[k] for k in keys)) if keys else [()]:
            parameters = {**spec.get("fixed", {}), **dict(zip(keys, values))}
            runs.append(
                {
                    "benchmark": benchmark,
                    "notebook": spec["notebook"],
                    "parameters": parameters,
                    "id": run_id(benchmark, parameters),
                }
            )
    return runs


def execute(run, results, kernel_name):
    """Execute one run with papermill; return its id and None or the error."""
    import papermill  # noqa: PLC0415  (slow to import, only where needed)

    folder = os.path.join(results, "runs", run["id"])
    os.makedirs(folder, exist_ok=True)
    record = os.path.join(folder, "record.json")
    executed = os.path.join(folder, "notebook.ipynb")
    partial = os.path.join(folder, ".notebook.partial.ipynb")
    atomic_write_text(
        os.path.join(folder, "run.json"),
        json.dumps({k: run[k] for k in ("benchmark", "parameters", "id")}, indent=1),
    )
    try:
        papermill.execute_notebook(
            run["notebook"],
            partial,
            parameters={**run["parameters"], "record_path": os.path.abspath(record)},
            kernel_name=kernel_name,
            cwd=os.path.dirname(run["notebook"]),
            progress_bar=False,
        )
    except Exception as exc:  # the failed notebook stays for reading
        if os.path.exists(partial):
            os.replace(partial, os.path.join(folder, "notebook.failed.ipynb"))
        last_line = (str(exc).strip().splitlines() or [""])[-1]
        return run["id"], f"{type(exc).__name__}: {last_line[:300]}"
    os.replace(partial, executed)
    if not os.path.exists(record):
        return run["id"], "the notebook ended without writing its record"
    return run["id"], None


def main(argv=None):
    """Run a sweep; see ``python -m benchmarks --help``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run the benchmark notebooks over a grid, then write the summary.",
    )
    parser.add_argument("--grid", default="quick", help="quick (default), full, or a TOML file")
    parser.add_argument("--results", default="results", help="output folder (default: results)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--force", action="store_true", help="run again the runs already complete")
    parser.add_argument("--only", action="append", help="run only this benchmark (repeatable)")
    parser.add_argument("--kernel", default="ort-training", help="Jupyter kernel (default ort-training)")
    parser.add_argument("--summary-only", action="store_true", help="only aggregate existing records")
    args = parser.parse_args(argv)

    if not args.summary_only:
        runs = expand(load_grid(args.grid))
        if args.only:
            runs = [r for r in runs if r["benchmark"] in args.only]
        done = [
            r for r in runs if os.path.exists(os.path.join(args.results, "runs", r["id"], "record.json"))
        ]
        todo = runs if args.force else [r for r in runs if r not in done]
        print(f"{len(runs)} runs in the grid, {len(done)} already complete, {len(todo)} to run.")
        if args.jobs > 1:
            warnings.warn(
                f"--jobs {args.jobs}: parallel runs share the cores and disturb each other's "
                "timings; use it for smoke tests, not for figures you will quote.",
                stacklevel=1,
            )
        failures = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(execute, r, args.results, args.kernel) for r in todo]
            for future in tqdm(
                concurrent.futures.as_completed(futures), total=len(futures), desc="runs", unit="run"
            ):
                run, error = future.result()
                if error:
                    failures.append((run, error))
                    tqdm.write(f"FAILED {run}: {error}")
        if failures:
            print(f"{len(failures)} runs failed; their notebooks are notebook.failed.ipynb.")
    paths = summarize(args.results)
    for path in paths:
        print("wrote", path)
    return 1 if not args.summary_only and failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
