"""``details.md``: every measured configuration of a sweep, one compact table per benchmark.

Each benchmark's table has the few columns that answer (the configuration,
the framework, the time, the ratio to its reference, the loss, and the
caveat or error of the row: :mod:`benchmarks.report.caveats`); every column of
every row is in the benchmark's CSV beside it (``details_<benchmark>.csv``).
The scaling benchmark, one row per framework and value of the varied
parameter, reads better as one table per parameter: values down, frameworks
across.
"""

import os

import numpy as np
import pandas as pd

from benchmarks.report.caveats import ratio_caveat, short_caveat
from benchmarks.report.ratios import speed_phrase

#: How the sizes of the MLPs of the torch and scikit-learn benchmarks read.
_LINEAR_SIZE = "linear {n_features} features, batch {batch_size}"
_MLP_SIZE = "MLP {n_features}-{hidden}-1, batch {batch_size}"


def size_label(row):
    """``'MLP 10-50-1, batch 100'`` or ``'linear 20 features, batch 1'`` for a row of the MLP
    benchmarks.

    Examples
    --------
    >>> size_label({"model": "mlp", "n_features": 10, "hidden": 50, "batch_size": 100})
    'MLP 10-50-1, batch 100'
    >>> size_label({"model": "linear", "n_features": 20, "hidden": None, "batch_size": None})
    'linear 20 features, batch 1'
    """
    hidden, batch = row.get("hidden"), row.get("batch_size")
    batch = int(batch) if batch is not None and not pd.isna(batch) else 1
    if row.get("model") == "linear" or hidden is None or pd.isna(hidden):
        return _LINEAR_SIZE.format(n_features=int(row["n_features"]), batch_size=batch)
    return _MLP_SIZE.format(n_features=int(row["n_features"]), hidden=int(hidden), batch_size=batch)


def _cell(value):
    """One table cell: floats with 4 significant digits, missing values ``-``."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(df, columns=None):
    """Lines of a markdown table of ``df``'s ``columns`` (all by default); NaN and None as ``-``.

    Examples
    --------
    >>> print("\\n".join(markdown_table(pd.DataFrame({"a": [1.23456, None], "b": ["x|y", "z"]}))))
    | a | b |
    | --- | --- |
    | 1.235 | x\\|y |
    | - | z |
    """
    columns = [c for c in (columns or list(df.columns)) if c in df]
    view = df[columns].copy()
    for c in columns:
        view[c] = view[c].map(_cell)
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in view.itertuples(index=False)]
    return lines


def _caveat_or_error(group):
    """Per row: why it did not run, or its caveat in short (the table's cell)."""
    caveat = group["caveat"] if "caveat" in group else pd.Series("", index=group.index)
    error = group["error"] if "error" in group else pd.Series(None, index=group.index)
    return [
        f"not run: {e}" if isinstance(e, str) and e else short_caveat(c)
        for c, e in zip(caveat.fillna(""), error)
    ]


def _caveats_in_full(group):
    """The sentence under a table that says in whole words the caveats its cells say in short."""
    parts = ratio_caveat(*group.get("caveat", pd.Series(dtype=object)).fillna("")).split("; ")
    full = [part for part in parts if part and short_caveat(part) != part]
    return f"In full: {'; '.join(full)}." if full else ""


def _compact(group, benchmark):
    """The few columns that answer, for one benchmark's rows."""
    view = pd.DataFrame(index=group.index)
    if benchmark in ("torch", "sklearn"):
        view["model, batch"] = [size_label(r) for r in group.to_dict("records")]
    elif "model" in group:
        view["model"] = group["model"].astype(str).str.split(":").str[-1]
    if "input_shape" in group and group["input_shape"].notna().any():
        view["input"] = [
            f"{shape} {dtype}" if isinstance(dtype, str) else str(shape)
            for shape, dtype in zip(
                group["input_shape"], group.get("input_dtype", [None] * len(group))
            )
        ]
    for column in ("optimizer", "threads", "framework"):
        if column in group and group[column].notna().any():
            view[column] = group[column]
    if benchmark == "sklearn":  # a whole fit is what is compared
        view["samples"] = group.get("n_samples")
        view["fit (s)"] = group.get("fit_time_s")
    else:
        view["ms per step"] = pd.to_numeric(group.get("time_per_update_s"), errors="coerce") * 1e3
    # one convention for every ratio: "1.7x faster" or "2.2x slower" than the peer
    for column, name, as_time in (
        ("ratio_to_torch_eager", "against torch eager", lambda r: r),
        ("speedup_vs_sklearn", "against scikit-learn", lambda r: 1 / r),
    ):
        if column in group and group[column].notna().any():
            view[name] = [
                speed_phrase(as_time(float(r))) if pd.notna(r) and float(r) > 0 else "-"
                for r in pd.to_numeric(group[column], errors="coerce")
            ]
    if "compile_time_s" in group and group["compile_time_s"].notna().any():
        view["compile (s)"] = group["compile_time_s"]
    else:
        loss = (
            "val_loss" if "val_loss" in group and group["val_loss"].notna().any() else "train_loss"
        )
        if loss in group:
            view[loss.replace("_", " ")] = group[loss]
    view["caveat, or why not run"] = _caveat_or_error(group)
    return view


def _hoist_constants(view):
    """The columns with one value in every row, said above the table instead: ``(view,
    sentence)``."""
    caveat = "caveat, or why not run"
    constant = [c for c in view.columns if c != caveat and view[c].astype(str).nunique() == 1]
    if len(view) < 2:
        return view, ""
    said = [f"{c} {_cell(view[c].iloc[0])}" for c in constant]
    if caveat in view and not view[caveat].astype(bool).any():
        constant.append(caveat)
        said.append("no caveat")
    return view.drop(columns=constant), f"Every row: {', '.join(said)}." if said else ""


def _scaling_tables(group):
    """One table per varied parameter: its values down, the frameworks across (µs per update)."""
    lines = []
    for varied, part in group.groupby("varied", sort=False):
        table = part.assign(
            us=pd.to_numeric(part["time_per_update_s"], errors="coerce") * 1e6
        ).pivot_table(index=varied, columns="framework", values="us", aggfunc="median", sort=False)
        table = table.reset_index().rename(columns={varied: f"{varied} (µs per update below)"})
        lines += [f"### {varied}", ""] + markdown_table(table) + [""]
        caveats = [
            f"{r['framework']} at {varied} {int(r[varied])}: {r['caveat']}"
            for r in part.to_dict("records")
            if r.get("caveat")
        ]
        if caveats:
            lines += ["Not findings: " + "; ".join(caveats) + ".", ""]
    return lines


def details_text(df, csv_names=None, header=(), answers=()):
    """The text of ``details.md``: per benchmark, a compact table, and where all its columns are.

    Parameters
    ----------
    df : pandas.DataFrame
        Every row of the sweep (:func:`benchmarks.report.aggregate.load_rows`).
    csv_names : dict, optional
        Benchmark to the name of its CSV, linked under its table.
    header : list of str
        The machine in full (:func:`benchmarks.sweep.records.machine_lines`), under the title.
    answers : list of str
        The summary's answers per configuration (its ratios, under their own headings), first.
    """
    lines = [
        "# Every measured configuration",
        "",
        *header,
        "One table per benchmark, with the columns that answer; each table's CSV holds every "
        "column.",
        "",
    ]
    if answers:
        lines += [
            "## Ratios per configuration",
            "",
            "The ratios the summary's answers rest on, a row per configuration and peer.",
            "",
            *answers,
        ]
    for benchmark, group in df.groupby("benchmark", sort=False) if not df.empty else []:
        lines += [f"## {benchmark}", ""]
        if benchmark == "scaling":
            lines += _scaling_tables(group)
        else:
            view, constants = _hoist_constants(_compact(group, benchmark))
            lines += ([constants, ""] if constants else []) + markdown_table(view) + [""]
            full = _caveats_in_full(group)
            lines += [full, ""] if full else []
        if csv_names and benchmark in csv_names:
            lines += [f"All columns: [{csv_names[benchmark]}]({csv_names[benchmark]}).", ""]
    return "\n".join(lines)


def write_details(df, results, write_text, header=(), answers=()):
    """Write ``details.md`` and one CSV per benchmark into ``results``; return their paths.

    ``write_text(path, text)`` writes a file atomically; ``header`` and
    ``answers`` as :func:`details_text` takes them.
    """
    paths, csv_names = [], {}
    for benchmark, group in df.groupby("benchmark", sort=False) if not df.empty else []:
        name = f"details_{benchmark}.csv"
        write_text(os.path.join(results, name), group.dropna(axis=1, how="all").to_csv(index=False))
        csv_names[benchmark] = name
        paths.append(os.path.join(results, name))
    path = os.path.join(results, "details.md")
    write_text(path, details_text(df, csv_names, header, answers))
    return [path, *paths]
