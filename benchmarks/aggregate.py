"""Gather the records of the benchmark runs into tables and plots.

Every record (``results/runs/*/record.json``) holds rows, one per measured
configuration, with these keys (absent when they do not apply):

* ``benchmark``: ``'sklearn'``, ``'torch'`` or ``'scaling'``;
* ``model`` (``'linear'``, ``'mlp'``), ``framework`` (``'scikit-learn'``,
  ``'torch eager'``, ``'torch.compile'``, ``'ORTModule'``,
  ``'ort whole-training'``, ``'ort forward-backward'``, and the two
  references of ``scaling``, ``'numpy matmul'`` and ``'onnxruntime matmul bound'``),
  ``optimizer``;
* the configuration: ``n_samples``, ``n_features``, ``hidden``,
  ``batch_size``, ``epochs``, ``updates``, and for ``scaling`` the name of
  the ``varied`` parameter;
* the measures: ``fit_time_s``, ``time_per_update_s``,
  ``time_per_sample_s``, ``samples_per_s``, ``train_loss``, ``val_loss``;
* for ``scaling``, ``ratio_to_numpy`` and ``ratio_to_ort_bound``: the time
  per update over that of each reference;
* ``comparable`` (False flags a row whose loss is not close to the
  reference's), ``note``, ``error``.

:func:`summarize` writes ``summary.csv``, ``summary.md`` and PNG plots.
"""
import glob
import json
import os

import numpy as np
import pandas as pd

from helpers.benchmarking import atomic_write_text

#: Targets of the summary: (title, benchmark, numerator, denominator, bound).
TARGETS = [
    ("whole-training step / torch eager step", "ort whole-training", "torch eager", 0.25),
    ("forward-backward step / torch eager step", "ort forward-backward", "torch eager", 0.5),
]

#: The references of the scaling benchmark (the step's matrix products alone), not frameworks.
REFERENCES = ("numpy matmul", "onnxruntime matmul bound")


def load_rows(results):
    """Return every row of every complete record under ``results/runs``."""
    frames = []
    for path in sorted(glob.glob(os.path.join(results, "runs", "*", "record.json"))):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        rows = pd.DataFrame(record["rows"])
        if rows.empty:
            continue
        rows["run"] = os.path.basename(os.path.dirname(path))
        rows["notebook"] = record["notebook"]
        rows["cpu"] = record["machine"].get("cpu")
        rows["threads"] = record["machine"].get("torch_threads")
        rows["onnxruntime"] = record["versions"].get(
            "onnxruntime-training-cpu", record["versions"].get("onnxruntime-training")
        )
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _config_columns(df):
    keys = ("model", "n_samples", "n_features", "hidden", "batch_size", "optimizer", "threads")
    return [c for c in keys if c in df]


def step_ratios(df, numerator, denominator):
    """Ratio of time per update of two frameworks, configuration by configuration."""
    torch_rows = df[df.get("benchmark") == "torch"] if "benchmark" in df else df.iloc[0:0]
    if torch_rows.empty or "time_per_update_s" not in torch_rows:
        return pd.DataFrame()
    keys = _config_columns(torch_rows)
    table = torch_rows.pivot_table(index=keys, columns="framework", values="time_per_update_s", aggfunc="median")
    if numerator not in table or denominator not in table:
        return pd.DataFrame()
    out = (table[numerator] / table[denominator]).rename("ratio").reset_index()
    return out.dropna()


def _targets(df):
    lines = ["| target | configuration | measured | goal | verdict |", "| --- | --- | --- | --- | --- |"]
    found = False
    for title, numerator, denominator, goal in TARGETS:
        ratios = step_ratios(df, numerator, denominator)
        if ratios.empty:
            continue
        # every measured configuration, smallest network first: one line each
        ratios = ratios.sort_values([c for c in ("hidden", "n_features", "batch_size", "optimizer") if c in ratios])
        for _, row in ratios.iterrows():
            config = ", ".join(f"{k}={row[k]}" for k in ratios.columns if k != "ratio")
            verdict = "met" if row.ratio <= goal else f"missed by x{row.ratio / goal:.2f}"
            lines.append(f"| {title} | {config} | {row.ratio:.3f} | <= {goal} | {verdict} |")
            found = True
    fit = _fit_speedups(df)
    for _, row in fit.iterrows():
        verdict = "met" if row.speedup >= 2 else f"missed by x{2 / row.speedup:.2f}"
        lines.append(
            f"| MLPRegressor fit time / {row.framework} fit time | {row.config} | "
            f"{row.speedup:.2f} | >= 2 | {verdict} |"
        )
        found = True
    bound = _bound_ratios(df)
    for _, row in bound.iterrows():
        verdict = "met" if row.ratio <= 1.5 else f"missed by x{row.ratio / 1.5:.2f}"
        lines.append(
            f"| step / numpy matmul time, {row.framework} | {row.config} | {row.ratio:.2f} | <= 1.5 | {verdict} |"
        )
        found = True
    return lines if found else []


def _fit_speedups(df):
    if "benchmark" not in df:
        return pd.DataFrame()
    rows = df[(df.benchmark == "sklearn") & (df.get("model") == "mlp")]
    if rows.empty or "fit_time_s" not in rows:
        return pd.DataFrame()
    keys = [c for c in ("n_samples", "hidden", "batch_size") if c in rows]
    out = []
    for config, group in rows.groupby(keys):
        times = group.groupby("framework")["fit_time_s"].median()
        if "scikit-learn" not in times:
            continue
        for framework, seconds in times.items():
            if framework.startswith("ort"):
                label = ", ".join(f"{k}={v}" for k, v in zip(keys, np.atleast_1d(config)))
                out.append({"framework": framework, "config": label, "speedup": times["scikit-learn"] / seconds})
    return pd.DataFrame(out)


def _bound_ratios(df):
    if "benchmark" not in df:
        return pd.DataFrame()
    rows = df[(df.benchmark == "scaling") & (df.get("varied") == "batch_size")]
    if rows.empty:
        return pd.DataFrame()
    out = []
    # one comparison per thread count: a 1-thread run must not mix with a 2-thread one
    for threads, group in rows.groupby("threads") if "threads" in rows else [(None, rows)]:
        largest = group.batch_size.max()
        group = group[group.batch_size == largest]
        bound = group[group.framework == "numpy matmul"].time_per_update_s.median()
        config = f"batch_size={largest}" + ("" if threads is None else f", threads={threads}")
        for framework, runs in group[~group.framework.isin(REFERENCES)].groupby("framework"):
            out.append(
                {"framework": framework, "config": config, "ratio": runs.time_per_update_s.median() / bound}
            )
    return pd.DataFrame(out)


def _cell(value):
    """One table cell: floats with 4 significant digits, missing values empty."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _label(value):
    """A configuration value as a plot label: ``20`` not ``20.0``, ``-`` when missing."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def markdown_table(df, columns=None):
    """Lines of a markdown table of ``df``'s ``columns`` (all by default); NaN and None as ``-``."""
    columns = [c for c in (columns or list(df.columns)) if c in df]
    view = df[columns].copy()
    for c in columns:
        # object columns mix floats with None (a row without that measure)
        view[c] = view[c].map(_cell)
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in view.itertuples(index=False)]
    return lines


TABLE_COLUMNS = [
    "model", "framework", "optimizer", "n_samples", "n_features", "hidden", "batch_size",
    "varied", "time_per_update_s", "time_per_sample_s", "samples_per_s", "fit_time_s",
    "train_loss", "val_loss", "comparable", "note", "error",
]

#: The scaling table adds the ratios to its two references.
_at = TABLE_COLUMNS.index("time_per_update_s") + 1
SCALING_COLUMNS = TABLE_COLUMNS[:_at] + ["ratio_to_ort_bound", "ratio_to_numpy"] + TABLE_COLUMNS[_at:]

#: Line styles of the references in the scaling plots.
REFERENCE_STYLES = {"numpy matmul": ":", "onnxruntime matmul bound": "--"}


def _plots(df, results):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    paths = []
    if "benchmark" not in df:
        return paths
    scaling = df[df.benchmark == "scaling"]
    for varied, group in scaling.groupby("varied") if not scaling.empty else []:
        fig, ax = plt.subplots(figsize=(6, 4))
        for framework, rows in group.groupby("framework"):
            rows = rows.groupby(varied)["time_per_update_s"].median()
            if framework in REFERENCE_STYLES:
                ax.loglog(rows.index, rows.values, REFERENCE_STYLES[framework], color="black", label=framework)
            else:
                ax.loglog(rows.index, rows.values, "o-", label=framework)
        ax.set_xlabel(varied)
        ax.set_ylabel("seconds per update")
        ax.set_title(f"Time per training step against {varied}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        path = os.path.join(results, f"scaling_{varied}.png")
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    for benchmark, value in (("torch", "time_per_update_s"), ("sklearn", "fit_time_s")):
        rows = df[(df.benchmark == benchmark)]
        if rows.empty or value not in rows or rows[value].isna().all():
            continue
        keys = [c for c in ("model", "hidden", "batch_size", "optimizer") if c in rows]
        if "threads" in rows and rows.threads.nunique() > 1:
            keys.append("threads")
        rows = rows.dropna(subset=[value]).copy()
        # a missing key (no hidden layer in a linear model) must not drop the row
        for key in keys:
            rows[key] = rows[key].map(_label)
        table = rows.pivot_table(index=keys, columns="framework", values=value, aggfunc="median", sort=False)
        fig, ax = plt.subplots(figsize=(7, 0.5 * len(table) + 2))
        table.plot.barh(ax=ax, logx=True)
        ax.set_xlabel(value.replace("_", " "))
        ax.set_title(f"{benchmark}: {value.replace('_s', '').replace('_', ' ')} (log scale, lower is better)")
        ax.legend(fontsize=8)
        path = os.path.join(results, f"{benchmark}.png")
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def summarize(results):
    """Write ``summary.csv``, ``summary.md`` and plots from the records.

    Returns
    -------
    list of str
        The paths written.
    """
    df = load_rows(results)
    os.makedirs(results, exist_ok=True)
    csv_path = os.path.join(results, "summary.csv")
    md_path = os.path.join(results, "summary.md")
    atomic_write_text(csv_path, df.to_csv(index=False))
    lines = ["# Benchmark summary", ""]
    if df.empty:
        lines.append("No complete run yet: `python -m benchmarks` runs the quick grid.")
    else:
        lines += [
            f"{df.run.nunique()} runs, {len(df)} rows. Machine: {df.cpu.iloc[0]}, "
            f"{df.threads.iloc[0]} threads; onnxruntime-training {df.onnxruntime.iloc[0]}.",
            "",
        ]
        targets = _targets(df)
        if targets:
            lines += ["## Targets", ""] + targets + [""]
        for benchmark, group in df.groupby("benchmark"):
            columns = SCALING_COLUMNS if benchmark == "scaling" else TABLE_COLUMNS
            lines += [f"## {benchmark}", ""] + markdown_table(group, columns) + [""]
    atomic_write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path, *_plots(df, results)]
