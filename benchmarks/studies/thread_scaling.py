"""How a training step scales with threads: both onnxruntime APIs against torch and the matrix
products.

For each network size (``D-H-1@B``: a ReLU MLP ``D -> H -> 1`` trained on
batches of ``B`` rows with plain SGD) and each thread count, the script
measures the marginal cost of one training step of

* the whole-training API (:class:`helpers.OrtGradientOptimizer`),
* the forward/backward API (:class:`helpers.OrtGradientForwardBackwardOptimizer`),
* torch eager (the same network, ``MSELoss``, ``torch.optim.SGD``),
* the onnxruntime bound: the step's five matrix products run by onnxruntime's
  kernels in one session call (:class:`benchmarks.workloads.matmul_references.OrtStepProducts`),
* numpy's products: the same five products with numpy's BLAS
  (:class:`benchmarks.workloads.matmul_references.NumpyMatmul`).

Every one of them runs whole epochs (a permutation of the rows per epoch, the
shuffled rows gathered, one step per batch), and the marginal cost of a step is
``(fit of E2 epochs - fit of E1 epochs) / extra steps``, best of alternating
repeats (:func:`benchmarks.workloads.models.marginal_step_cost`), so that the set-up of
a fit (artifacts, sessions) is not counted in the step. Threads are given to
each framework explicitly: ``n_threads`` to the onnxruntime optimizers and to
the bound, ``torch.set_num_threads`` to torch, ``threadpoolctl`` to numpy's BLAS.
The fits and their timing: :mod:`benchmarks.studies.thread_scaling_fits`; this module
writes what they measured.

It writes, in ``--out``: ``thread_scaling.csv`` (one row per size, thread count
and framework), ``thread_scaling.md`` (the answer, a table, the machine) and
``thread_scaling.png`` (time per step against threads, one panel per size)::

    .venv/bin/python -m benchmarks.studies.thread_scaling --threads 1,2 --out results/
"""

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: python benchmarks/studies/thread_scaling.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np
import pandas as pd

from benchmarks.report import style
from benchmarks.studies.thread_scaling_fits import FRAMEWORKS, PRESETS, measure, parse_size
from benchmarks.sweep.records import (
    atomic_write_bytes,
    machine_info,
    machine_lines,
    package_versions,
)
from benchmarks.workloads import frameworks as fw

#: A tiny size for ``--quick`` (tests, smoke runs).
QUICK_SIZES = ("8-16-1@32",)
#: The CSV's columns, in order.
COLUMNS = (
    "size",
    "n_features",
    "hidden",
    "batch_size",
    "n_samples",
    "threads",
    "framework",
    "ms_per_step",
    "fixed_ms",
    "ratio_to_torch",
    "ratio_to_ort_bound",
    "speedup_vs_1_thread",
    "note",
)


def parse_threads(text):
    """``'1,2,4'`` -> ``[1, 2, 4]`` (positive, duplicates dropped, order kept)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--threads takes integers separated by commas, got {text!r}.") from None
    if not values or min(values) < 1:
        raise ValueError(f"--threads takes integers >= 1, got {text!r}.")
    return list(dict.fromkeys(values))


def add_ratios(df):
    """Add ``ratio_to_torch``, ``ratio_to_ort_bound`` and ``speedup_vs_1_thread`` columns.

    The ratios compare frameworks at the same size and thread count; the
    speed-up compares a framework with itself at one thread (empty when one
    thread was not measured).
    """
    df = df.copy()

    def times_of(selected, keys):
        reference = df[selected].set_index(keys)["ms_per_step"]
        return reference.reindex(pd.MultiIndex.from_frame(df[keys])).to_numpy()

    for column, reference in (("ratio_to_torch", fw.TORCH), ("ratio_to_ort_bound", fw.ORT_BOUND)):
        df[column] = df["ms_per_step"].to_numpy() / times_of(
            df.framework == reference, ["size", "threads"]
        )
    df["speedup_vs_1_thread"] = (
        times_of(df.threads == 1, ["size", "framework"]) / df["ms_per_step"].to_numpy()
    )
    return df[list(COLUMNS)]


def _ms(value):
    return f"{value:.3g}" if np.isfinite(value) else "-"


def _times(value, reference, speedup=False):
    """``value / reference`` as a ratio (``x2.00`` for a speed-up), or why there is none."""
    ratio = value / reference
    if not np.isfinite(ratio):
        return "not measurable here (timing noise above its cost)"
    return f"x{ratio:.2f}" if speedup else f"{ratio:.2f}x"


def answer(df):
    """Sentences answering: how do both APIs scale with threads, against torch?"""
    lines = []
    for size, group in df.groupby("size", sort=False):
        # pivot, not pivot_table: a NaN time (noise above a tiny step's cost) keeps its column
        times = group.pivot(index="threads", columns="framework", values="ms_per_step")
        low, high = times.index.min(), times.index.max()
        apis = ((fw.ORT_WHOLE, "whole-training"), (fw.ORT_FORWARD_BACKWARD, "forward/backward"))
        against = ", ".join(
            f"{label} {_times(times.loc[high, name], times.loc[high, fw.TORCH])} torch eager"
            for name, label in apis
        )
        if low == high:
            lines.append(
                f"- `{size}`: only {low} thread(s) measured, so no scaling to report; "
                f"per step {against}."
            )
            continue
        moves = "; ".join(
            f"{label} {_ms(times.loc[low, name])} -> {_ms(times.loc[high, name])} ms "
            f"({_times(times.loc[low, name], times.loc[high, name], speedup=True)})"
            for name, label in (
                *apis,
                (fw.TORCH, "torch eager"),
                (fw.ORT_BOUND, "onnxruntime bound"),
            )
        )
        lines.append(f"- `{size}`, {low} -> {high} threads: {moves}; at {high} threads {against}.")
    return lines


def markdown(df, epochs, repeats):
    """The text of ``thread_scaling.md``."""
    table = df.pivot_table(
        index=["size", "threads"],
        columns="framework",
        values="ms_per_step",
        sort=False,
        dropna=False,
    )
    columns = [f for f in FRAMEWORKS if f in table]
    lines = [
        "# Thread scaling of a training step",
        "",
        "Measured on:",
        "",
        *machine_lines(machine_info(), package_versions(), df.threads),
        "",
        "How do both APIs scale with threads, against torch? (x: speed-up from the fewest to the "
        "most threads; ratios to torch at the most threads, below 1 is faster than torch.)",
        "",
        *answer(df),
        "",
        f"Milliseconds per step: the marginal cost of one step, (fit of {epochs[1]} epochs - fit "
        f"of {epochs[0]}) / extra steps, best of {repeats} alternating repeats; ReLU MLP `D-H-1`, "
        "batches of `B` rows, plain SGD, every framework on the row's threads. The two last "
        "columns are the step's five matrix products alone, in onnxruntime's kernels (the "
        "runtime's bound) and in numpy.",
        "",
        "| size | threads | " + " | ".join(columns) + " |",
        "| --- | --- | " + " | ".join("---" for _ in columns) + " |",
    ]
    for (size, threads), row in table.iterrows():
        lines.append(f"| {size} | {threads} | " + " | ".join(_ms(row[c]) for c in columns) + " |")
    noted = df[df.note.fillna("") != ""]
    if len(noted):
        lines += [
            "",
            "Lost in the machine's noise (- in the table; time more epochs, or on a "
            "quieter machine):",
            "",
        ]
        lines += [
            f"- {r.size}, {r.threads} thread(s), {r.framework}: {r.note}"
            for r in noted.itertuples()
        ]
    return "\n".join([*lines, ""])


def plot(df):
    """Time per step against threads, log y, one panel per size; returns the PNG bytes."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    sizes = list(dict.fromkeys(df["size"]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        group = df[df["size"] == size]
        for framework in FRAMEWORKS:
            rows = group[group.framework == framework].sort_values("threads")
            if rows.empty:
                continue
            bound = framework in fw.BOUNDS
            ax.plot(
                rows.threads,
                rows.ms_per_step,
                "--" if bound else "-",
                marker="o",
                color=style.color(framework),
                label=framework,
            )
        ax.set_yscale("log")
        ax.set_xticks(sorted(group.threads.unique()))
        ax.set_xlabel("threads")
        ax.set_ylabel("ms per step (marginal, log scale)")
        ax.set_title(f"MLP {size}")
        ax.grid(True, which="both", alpha=0.3)
    style.legend_outside(axes[0][-1])
    return style.png_bytes(fig)


def main(argv=None):
    """Measure, then write the CSV, the markdown summary and the plot; see ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.thread_scaling",
        description="Marginal cost of a training step against the number of threads: both "
        "onnxruntime "
        "APIs, torch eager, onnxruntime's matrix products (the bound) and numpy's.",
    )
    parser.add_argument(
        "--threads",
        default=None,
        help=f"thread counts, comma-separated (default 1 to the {os.cpu_count()} cores: "
        f"{','.join(map(str, range(1, (os.cpu_count() or 1) + 1)))})",
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help=f"network sizes D-H-1@B, comma-separated (default {','.join(PRESETS)}; "
        f"with --quick {','.join(QUICK_SIZES)})",
    )
    parser.add_argument("--out", default="results", help="output folder (default results)")
    parser.add_argument(
        "--epochs", default="1,4", help="E1,E2: epochs of the short and the long fit (default 1,4)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="alternating repeats, the best is kept (default 3)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, 4 steps per epoch, epochs 1,2 and one repeat: checks the script, "
        "measures nothing",
    )
    args = parser.parse_args(argv)
    try:
        threads = (
            parse_threads(args.threads)
            if args.threads
            else list(range(1, (os.cpu_count() or 1) + 1))
        )
        sizes = [
            parse_size(s)
            for s in (
                args.sizes.split(",") if args.sizes else QUICK_SIZES if args.quick else PRESETS
            )
        ]
        epochs = tuple(int(e) for e in args.epochs.split(","))
        if len(epochs) != 2 or not epochs[1] > epochs[0] >= 1:
            raise ValueError(f"--epochs takes E1,E2 with E2 > E1 >= 1, got {args.epochs!r}.")
    except ValueError as exc:
        parser.error(str(exc))
    repeats = args.repeats
    if args.quick:
        # enough extra steps (3 epochs of 32) that a tiny step's cost stands above the noise
        for config in sizes:
            config["n_samples"] = 32 * config["batch_size"]
        epochs, repeats = (1, 4), 2
    if repeats < 1:
        parser.error("--repeats must be >= 1")

    measured = []
    for config in sizes:
        for n_threads in threads:
            start = time.perf_counter()
            rows = measure(config, n_threads, epochs, repeats)
            measured += rows
            timings = ", ".join(f"{r['framework']} {r['ms_per_step']:.3g}" for r in rows)
            print(
                f"{config['size']}, {n_threads} threads: {timings} ms per step "
                f"({time.perf_counter() - start:.1f} s)",
                flush=True,
            )
    df = add_ratios(pd.DataFrame(measured))
    paths = {
        name: os.path.join(args.out, f"thread_scaling.{name}") for name in ("csv", "md", "png")
    }
    atomic_write_bytes(paths["csv"], df.to_csv(index=False, float_format="%.6g").encode())
    atomic_write_bytes(paths["md"], markdown(df, epochs, repeats).encode())
    atomic_write_bytes(paths["png"], plot(df))
    for path in paths.values():
        print("wrote", path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
