"""The figures of a sweep's summary, one colour per framework in all of them.

:func:`write_plots` draws what the records hold: the step time against each
axis of the scaling benchmark, the step time of every framework in the torch
benchmark, the fit time in the scikit-learn benchmark, and, from the
``your_model`` benchmark, the loss against wall-clock time and the peak
memory of each framework.
"""

import os

import numpy as np

from benchmarks.report import style
from benchmarks.sweep.records import atomic_write_bytes

#: Line styles of the references in the scaling plots.
REFERENCE_STYLES = {"numpy matmul": ":", "onnxruntime matmul bound": "--"}


def _save(fig, path):
    atomic_write_bytes(path, style.png_bytes(fig))
    return path


def _scaling(df, results):
    import matplotlib.pyplot as plt  # noqa: PLC0415

    paths = []
    scaling = df[df.benchmark == "scaling"]
    if scaling.empty or "varied" not in scaling:
        return paths
    for (varied, machine, threads), group in scaling.groupby(["varied", "machine", "threads"]):
        fig, ax = plt.subplots(figsize=(7, 4))
        for framework, rows in group.groupby("framework"):
            times = rows.groupby(varied)["time_per_update_s"].median() * 1e3
            line = REFERENCE_STYLES.get(framework, "o-")
            ax.plot(times.index, times.values, line, color=style.color(framework), label=framework)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(varied.replace("_", " "))
        ax.set_ylabel("time per training step (ms, log scale)")
        ax.set_title(
            f"Step time against {varied.replace('_', ' ')}: the dashed line is the step's "
            f"matrix products alone\n({machine}, {int(threads)} threads)",
            fontsize=10,
        )
        ax.grid(True, which="both", alpha=0.3)
        style.legend_outside(ax)
        suffix = (
            ""
            if scaling.machine.nunique() == 1 and scaling.threads.nunique() == 1
            else f"_{int(threads)}t"
        )
        paths.append(_save(fig, os.path.join(results, f"scaling_{varied}{suffix}.png")))
    return paths


def _bars(df, results, benchmark, measure, title):
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = (
        df[(df.benchmark == benchmark)].dropna(subset=[measure]) if measure in df else df.iloc[0:0]
    )
    if rows.empty:
        return []
    order = [
        c
        for c in ("threads", "optimizer", "model", "n_features", "hidden", "batch_size")
        if c in rows
    ]
    rows = rows.sort_values(order, na_position="first")
    rows = rows.assign(
        configuration=[
            ", ".join(
                p
                for p in (
                    f"{r.get('model', 'mlp')} {_v(r.get('n_features'))}-{_v(r.get('hidden'))}-1"
                    if r.get("model") != "linear"
                    else f"linear {_v(r.get('n_features'))}",
                    f"batch {_v(r.get('batch_size'))}",
                    r.get("optimizer") if isinstance(r.get("optimizer"), str) else "",
                    f"{_v(r.get('threads'))} thread{'' if r.get('threads') == 1 else 's'}",
                )
                if p
            )
            for r in rows.to_dict("records")
        ]
    )
    table = rows.pivot_table(
        index="configuration", columns="framework", values=measure, aggfunc="median", sort=False
    )
    table = table * 1e3
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(table) * max(1, len(table.columns) / 3) + 1.5))
    table.plot.barh(ax=ax, color=[style.color(f) for f in table.columns], width=0.8)
    if style.spans_decades(table.to_numpy()):
        ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(
        f"{measure.replace('_s', '').replace('_', ' ')} "
        f"(ms{', log scale' if ax.get_xscale() == 'log' else ''}; lower is better)"
    )
    ax.set_ylabel("")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    style.legend_outside(ax)
    return [_save(fig, os.path.join(results, f"{benchmark}.png"))]


def _v(value):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return str(int(value)) if float(value).is_integer() else str(value)


def write_plots(df, results):
    """Draw every figure the rows allow into ``results``; return their paths."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    if "benchmark" not in df:
        return []
    paths = _scaling(df, results)
    paths += _bars(
        df,
        results,
        "torch",
        "time_per_update_s",
        "Time of one training step, same network, data and update rule",
    )
    paths += _bars(
        df,
        results,
        "sklearn",
        "fit_time_s",
        "Time of a whole fit against scikit-learn, same epochs and update rule",
    )
    return paths
