"""The summary's sections on the studies' own CSVs, read from their columns alone.

The time to a held-out accuracy (``time_to_accuracy.csv``, :func:`time_to_accuracy_lines`)
and the memory and first fits of the zoo's models (``zoo_costs.csv``, :func:`zoo_costs_section`).
The studies that write these files print the same text (they import it from here); nothing of
the report imports a study.
"""

import math

import pandas as pd

from benchmarks.example_models import ZOO
from benchmarks.report.details import markdown_table
from benchmarks.report.ratios import speed_phrase, value_range, verdict
from benchmarks.report.zoo_summary import APIS, model_label
from benchmarks.sweep.records import results_file

#: The onnxruntime APIs, whose best time to the target is set against torch's.
ORT_APIS = tuple(APIS)
#: The framework every study compares with, as the CSVs name it.
TORCH = "torch eager"
#: The zoo's file, and the command that writes it.
ZOO_COSTS_CSV = "zoo_costs.csv"
ZOO_COSTS_COMMAND = "python -m benchmarks.studies.zoo_costs"


def time_to_target(points, target):
    """The row of the first epoch whose held-out value reaches ``target``, or None.

    None when no epoch of ``points`` (columns ``epoch``,
    ``seconds``, ``heldout_value``) reaches it.

    Examples
    --------
    >>> points = pd.DataFrame({"epoch": [1, 2, 3], "seconds": [0.1, 0.2, 0.3],
    ...                        "heldout_value": [0.5, 0.96, 0.94]})
    >>> int(time_to_target(points, 0.95).epoch), time_to_target(points, 0.99)
    (2, None)
    """
    reached = points.sort_values("epoch").query("heldout_value >= @target")
    return None if reached.empty else reached.iloc[0]


def target_table(curves, targets=None):
    """One row per task and framework: its target, time to it, epochs, final held-out value.

    ``targets`` maps a task to its target; by default each task's ``target``
    column. ``ratio_to_torch`` is an onnxruntime API's time to the target
    over torch eager's (NaN when either never reaches it).

    Examples
    --------
    >>> curves = pd.DataFrame({"task": "t", "framework": ["torch eager", "ort whole-training"] * 2,
    ...                        "epoch": [1, 1, 2, 2], "seconds": [0.2, 0.1, 0.4, 0.2],
    ...                        "heldout_metric": "accuracy",
    ...                        "heldout_value": [0.9, 0.9, 0.96, 0.97]})
    >>> table = target_table(curves, {"t": 0.95})
    >>> table[["framework", "seconds", "epoch", "final", "ratio_to_torch"]]
                framework  seconds  epoch  final  ratio_to_torch
    0         torch eager      0.4      2   0.96             NaN
    1  ort whole-training      0.2      2   0.97             0.5
    """
    rows = []
    for (task, framework), points in curves.groupby(["task", "framework"], sort=False):
        target = targets[task] if targets else points.target.iloc[0]
        reached = time_to_target(points, target)
        last = points.loc[points.epoch.idxmax()]
        missing = reached is None
        rows.append(
            {
                "task": task,
                "framework": framework,
                "metric": last.heldout_metric,
                "target": target,
                "seconds": math.nan if missing else reached.seconds,
                "slowest": math.nan if missing else reached.get("seconds_slowest", math.nan),
                "epoch": None if missing else int(reached.epoch),
                "epochs": int(last.epoch),
                "final": last.heldout_value,
            }
        )
    table = pd.DataFrame(rows)
    torch_s = table[table.framework == TORCH].set_index("task").seconds
    table["ratio_to_torch"] = [
        s / torch_s.get(task, math.nan) if f in ORT_APIS else math.nan
        for task, f, s in zip(table.task, table.framework, table.seconds)
    ]
    return table


def _task_sentence(group):
    """Which framework reaches one task's target first, from its rows of :func:`target_table`."""
    first = group.iloc[0]
    goal = f"on the {first.task} ({first.target:.0%} held-out {first.metric})"
    ort = group[group.framework.isin(ORT_APIS)].sort_values("seconds").iloc[0]
    torch_row = group[group.framework == TORCH].iloc[0]
    late = f"in {first.epochs} epochs"
    if math.isnan(ort.seconds) and math.isnan(torch_row.seconds):
        return f"{goal}, no framework reaches it {late}"
    if math.isnan(ort.seconds):
        return (
            f"{goal}, torch eager takes {torch_row.seconds:.2f} s, "
            f"no onnxruntime API reaches it {late}"
        )
    if math.isnan(torch_row.seconds):
        return (
            f"{goal}, {ort.framework} takes {ort.seconds:.2f} s, "
            f"torch eager does not reach it {late}"
        )
    return (
        f"{goal}, {ort.framework} takes {ort.seconds:.2f} s against torch eager's "
        f"{torch_row.seconds:.2f} s: {speed_phrase(ort.ratio_to_torch)}"
    )


def _time_cell(fastest, slowest, epochs):
    """``'0.11 s (0.11-0.15)'``: the fastest round, then the rounds' range; or why there is none."""
    if math.isnan(fastest):
        return f"not reached in {epochs} epochs"
    if math.isnan(slowest):
        return f"{fastest:.2f}"
    return f"{fastest:.2f} ({fastest:.2f}-{slowest:.2f})"


def time_to_accuracy_lines(curves, targets=None):
    """Markdown: which framework reaches each task's held-out target first, then a table.

    ``curves``: the rows of ``time_to_accuracy.csv``; ``targets``: see
    :func:`target_table`.

    Examples
    --------
    >>> curves = pd.DataFrame(
    ...     {
    ...         "task": "digits MLP",
    ...         "framework": [TORCH, "ort whole-training", "ort forward-backward"],
    ...         "epoch": 1,
    ...         "seconds": [0.4, 0.2, 0.3],
    ...         "seconds_slowest": [0.5, 0.2, 0.4],
    ...         "heldout_metric": "accuracy",
    ...         "heldout_value": 0.96,
    ...         "target": 0.95,
    ...         "threads": 2,
    ...     }
    ... )
    >>> print("\\n".join(time_to_accuracy_lines(curves)))  # doctest: +NORMALIZE_WHITESPACE
    Time to a held-out target, set-up included (fresh fits, 2 threads): on the digits MLP
    (95% held-out accuracy), ort whole-training takes 0.20 s against torch eager's 0.40 s:
    2.0x faster.
    <BLANKLINE>
    | task | framework | time to target (s) | epochs | final accuracy | vs torch eager |
    | --- | --- | --- | --- | --- | --- |
    | digits MLP | torch eager | 0.40 (0.40-0.50) | 1 | 96.0% |  |
    | digits MLP | ort whole-training | 0.20 (0.20-0.20) | 1 | 96.0% | 2.0x faster |
    | digits MLP | ort forward-backward | 0.30 (0.30-0.40) | 1 | 96.0% | 1.3x faster |
    """
    table = target_table(curves, targets)
    sentences = [_task_sentence(group) for _, group in table.groupby("task", sort=False)]
    threads = sorted(set(curves.threads)) if "threads" in curves else []
    plural = "" if threads == [1] else "s"
    condition = f"fresh fits, {'/'.join(map(str, threads))} thread{plural}" if threads else ""
    condition = condition or "fresh fits"
    view = pd.DataFrame(
        {
            "task": table.task,
            "framework": table.framework,
            "time to target (s)": [
                _time_cell(s, slowest, n)
                for s, slowest, n in zip(table.seconds, table.slowest, table.epochs)
            ],
            "epochs": table.epoch.astype("Int64").astype(str).replace("<NA>", "-"),
            f"final {table.metric.iloc[0]}": [f"{v:.1%}" for v in table.final],
            "vs torch eager": [
                speed_phrase(r) if f in ORT_APIS else ""
                for f, r in zip(table.framework, table.ratio_to_torch)
            ],
        }
    )
    opening = f"Time to a held-out target, set-up included ({condition}): "
    return [opening + "; ".join(sentences) + ".", ""] + markdown_table(view)


def compared(df):
    """One row per model: the faster onnxruntime API (smaller step) beside torch eager.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``api``, and for the API and torch (suffixes ``_ort``, ``_torch``)
        ``import_mb``, ``training_mb``, ``peak_mb``, ``first_fit_setup_s``,
        ``refit_setup_s``; ``ratio``, onnxruntime's peak over torch's.
    """
    ort = df[df.framework.isin(APIS)].sort_values("step_s").drop_duplicates("model")
    torch = df[df.framework == TORCH]
    both = ort.merge(torch, on="model", suffixes=("_ort", "_torch"))
    both = both.rename(columns={"framework_ort": "api"})
    order = {name: i for i, name in enumerate(df.model.drop_duplicates())}
    both = both.sort_values("model", key=lambda m: m.map(order)).reset_index(drop=True)
    return both.assign(ratio=both.peak_mb_ort / both.peak_mb_torch)


def _label(model):
    return model_label(ZOO[model][0], model) if model in ZOO else model


def _names(labels):
    labels = list(labels)
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def costs_sentence(df):
    """Where onnxruntime peaks higher than torch eager, by how much, why; what its first fit costs.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``zoo_costs.csv`` (with ``step_s``), or of
        :func:`benchmarks.studies.zoo_costs.measure_zoo`.

    Examples
    --------
    >>> df = pd.DataFrame({
    ...     "model": ["resnet_small"] * 3 + ["image_cnn_small"] * 3,
    ...     "framework": ["ort whole-training", "ort forward-backward", "torch eager"] * 2,
    ...     "import_mb": [420.0, 420, 220, 420, 420, 220],
    ...     "peak_mb": [800.0, 540, 400, 430, 430, 440],
    ...     "first_fit_setup_s": [0.5, 0.25, 0.8, 0.3, 0.2, 0.7],
    ...     "refit_setup_s": [0.1, 0.002, 0.001, 0.05, 0.001, 0.001],
    ...     "step_s": [0.13, 0.03, 0.02, 0.002, 0.003, 0.004]})
    >>> print(costs_sentence(df))
    onnxruntime (the faster of its two APIs for each model) peaks higher than torch eager for \
ResNet-style CNN (small) (1.4x more: +200 MB in its imports, which load torch as well, -60 MB \
while training).
    <BLANKLINE>
    Its first fit spends 0.25 to 0.30 s setting up (export, training graph, sessions), a refit \
that finds its training graph cached 0.002 to 0.050 s, against 0.70 to 0.80 s for torch's first \
module and optimizer.
    """
    rows = compared(df.assign(training_mb=df.peak_mb - df.import_mb))
    higher = rows[rows.ratio.map(verdict) == "slower"]
    others = rows.drop(higher.index)
    if higher.empty:
        where = "peaks no higher than torch eager for any model"
    else:
        if others.empty:
            models = "every model"
        elif len(higher) > len(others):
            models = f"every model but {_names(others.model.map(_label))}"
        else:
            models = _names(higher.model.map(_label))
        imports = value_range(higher.import_mb_ort - higher.import_mb_torch, "{:+.0f}")
        training = value_range(higher.training_mb_ort - higher.training_mb_torch, "{:+.0f}")
        ratios = value_range(higher.ratio, "{:.1f}")
        where = (
            f"peaks higher than torch eager for {models} ({ratios}x more: {imports} MB in "
            f"its imports, which load torch as well, {training} MB while training)"
        )
    first = value_range(rows.first_fit_setup_s_ort, "{:.2f}")
    refit = value_range(rows.refit_setup_s_ort, "{:.3f}")
    torch_first = value_range(rows.first_fit_setup_s_torch, "{:.2f}")
    return (
        f"onnxruntime (the faster of its two APIs for each model) {where}.\n\n"
        f"Its first fit spends {first} s setting up (export, training graph, sessions), a "
        f"refit that finds its training graph cached {refit} s, against {torch_first} s for "
        "torch's first module and optimizer."
    )


def _seconds(value):
    """Seconds with two significant digits (``0.0015``, ``0.25``, ``1.5``)."""
    return float(f"{value:.2g}")


def costs_table(df):
    """One row per model: peaks of the faster onnxruntime API and torch, their ratio, the set-ups.

    Examples
    --------
    >>> df = pd.DataFrame({"model": "resnet_small",
    ...                    "framework": ["ort whole-training", "torch eager"],
    ...                    "import_mb": [420.0, 220], "peak_mb": [540.0, 400],
    ...                    "step_s": [0.03, 0.02], "first_fit_setup_s": [0.25, 0.8],
    ...                    "refit_setup_s": [0.00213, 0.001]})
    >>> print(costs_table(df).iloc[0].to_string())
    model                            ResNet-style CNN (small)
    peak MB, ORT / torch                     540 / 400 (1.4x)
    ORT set-up (s), first / refit               0.25 / 0.0021
    torch set-up (s)                                      0.8
    """
    rows = compared(df.assign(training_mb=df.peak_mb - df.import_mb))
    return pd.DataFrame(
        {
            "model": rows.model.map(_label),
            "peak MB, ORT / torch": [
                f"{ort:.0f} / {torch:.0f} ({ratio:.1f}x)"
                for ort, torch, ratio in zip(rows.peak_mb_ort, rows.peak_mb_torch, rows.ratio)
            ],
            "ORT set-up (s), first / refit": [
                f"{_seconds(first)} / {_seconds(refit)}"
                for first, refit in zip(rows.first_fit_setup_s_ort, rows.refit_setup_s_ort)
            ],
            "torch set-up (s)": rows.first_fit_setup_s_torch.map(_seconds),
        }
    )


def zoo_costs_markdown(df):
    """The answer in a sentence, then the table: markdown (the summary's glossary defines its
    terms).

    Examples
    --------
    >>> df = pd.DataFrame({"model": "resnet_small",
    ...                    "framework": ["ort whole-training", "torch eager"],
    ...                    "import_mb": [420.0, 220], "peak_mb": [540.0, 400],
    ...                    "step_s": [0.03, 0.02], "first_fit_setup_s": [0.25, 0.8],
    ...                    "refit_setup_s": [0.002, 0.001]})
    >>> row = zoo_costs_markdown(df).splitlines()[6]
    >>> row.split(" | ")
    ['| ResNet-style CNN (small)', '540 / 400 (1.4x)', '0.25 / 0.002', '0.8 |']
    """
    return "\n".join([costs_sentence(df), "", *markdown_table(costs_table(df))])


def read_zoo_costs(results):
    """``zoo_costs.csv`` beside ``results`` or in the folder above it, or None.

    Examples
    --------
    >>> read_zoo_costs("no such folder") is None
    True
    """
    path = results_file(results, ZOO_COSTS_CSV)
    return None if path is None else pd.read_csv(path)


def zoo_costs_section(results):
    """The summary's lines on memory and first fits: a heading, :func:`costs_sentence`; or none.

    The table of every model is in ``details.md`` (:func:`zoo_costs_details`): the summary has a
    page's words.

    Examples
    --------
    >>> zoo_costs_section("no such folder")
    []
    """
    df = read_zoo_costs(results)
    if df is None:
        return []
    return [
        "## Memory and first fit, per model of the zoo",
        "",
        costs_sentence(df),
        "",
        f"Per model: [details](details.md); rows: `{ZOO_COSTS_CSV}` (`{ZOO_COSTS_COMMAND}`).",
        "",
    ]


def zoo_costs_details(results):
    """The lines of ``details.md`` on memory and first fits: the table of every model; or none.

    Examples
    --------
    >>> zoo_costs_details("no such folder")
    []
    """
    df = read_zoo_costs(results)
    if df is None:
        return []
    return [
        "### Memory and first fit, per model of the zoo",
        "",
        *markdown_table(costs_table(df)),
        "",
    ]
