"""Benchmark records in the tests: written by hand for the report, checked once a notebook ran.

A record is what a benchmark notebook writes for a run
(:func:`benchmarks.sweep.records.write_record`) and what the report reads
(:func:`benchmarks.report.aggregate.load_rows`).
"""

import json
import os

#: Every framework a benchmark row may name.
FRAMEWORKS = {
    "scikit-learn",
    "torch eager",
    "torch.compile",
    "ort torch module",
    "ort whole-training",
    "ort forward-backward",
    "numpy matmul",
    "onnxruntime matmul bound",
}


def check_record(path, benchmark):
    """Check the record a notebook wrote at ``path`` for ``benchmark``; return it."""
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    assert record["parameters"]  # every parameter of the run is kept
    assert record["versions"]["onnx"] == "1.17.0"
    assert record["machine"]["logical_cores"] >= 1
    rows = record["rows"]
    assert rows and all(row["benchmark"] == benchmark for row in rows)
    assert {row["framework"] for row in rows} <= FRAMEWORKS
    timed = [row for row in rows if not row.get("error")]
    assert timed and all(row["time_per_update_s"] > 0 for row in timed)
    return record


def write_record(folder, run, machine, rows, threads=2, shared="", busy=""):
    """Write the record of run ``run`` under ``folder/records``: ``rows`` measured on ``machine``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_record(folder, "torch-a", "m", torch_rows(50, {"torch eager": 1.0}))
    ...     os.listdir(os.path.join(folder, "records"))
    ['torch-a.json']
    """
    os.makedirs(os.path.join(folder, "records"), exist_ok=True)
    record = {
        "notebook": "bench_torch",
        "parameters": {},
        "rows": rows,
        "versions": {"onnxruntime-training-cpu": "1.19.2", "torch": "2.13.0"},
        "machine": {"cpu": machine, "logical_cores": 2, "torch_threads": threads},
        "shared": shared,
        "conditions": {"busy": busy},
    }
    with open(os.path.join(folder, "records", f"{run}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


def torch_rows(hidden, times, threads=2):
    """Rows of the torch benchmark for an MLP 10-``hidden``-1: a step time per framework.

    Examples
    --------
    >>> [(r["framework"], r["time_per_update_s"]) for r in torch_rows(50, {"torch eager": 1.0})]
    [('torch eager', 1.0)]
    """
    base = dict(
        benchmark="torch",
        model="mlp",
        optimizer="sgd",
        n_features=10,
        hidden=hidden,
        batch_size=100,
        threads=threads,
    )
    return [{**base, "framework": f, "time_per_update_s": t} for f, t in times.items()]


def timed_rows(hidden, times, spreads=None, threads=2):
    """Torch rows whose repeats spread as ``spreads`` says (1.0: all repeats equal).

    Examples
    --------
    >>> (row,) = timed_rows(50, {"torch eager": 1.0}, spreads={"torch eager": 3.0})
    >>> row["time_min_s"], row["time_max_s"]
    (1.0, 3.0)
    """
    rows = torch_rows(hidden, times, threads)
    for row in rows:
        spread = (spreads or {}).get(row["framework"], 1.0)
        row.update(
            time_min_s=row["time_per_update_s"], time_max_s=row["time_per_update_s"] * spread
        )
    return rows
