"""Gather the records of a sweep into a summary that answers the question first.

Every record (``<results>/records/<run id>.json``, or the one left in
``<results>/runs/<run id>/record.json``) holds rows, one per measured
configuration and framework, with these keys (absent when they do not apply):

* ``benchmark``: ``'sklearn'``, ``'torch'``, ``'scaling'`` or ``'your_model'``;
* ``model`` (``'linear'``, ``'mlp'``...), ``framework`` (``'scikit-learn'``,
  ``'torch eager'``, ``'torch.compile'``, ``'ort whole-training'``,
  ``'ort forward-backward'``, and the two references of ``scaling``,
  ``'numpy matmul'`` and ``'onnxruntime matmul bound'``), ``optimizer``,
  ``threads``;
* the configuration: ``n_samples``, ``n_features``, ``hidden``,
  ``batch_size``, ``epochs``, ``updates``, and for ``scaling`` the ``varied``
  parameter;
* the measures: ``fit_time_s``, ``time_per_update_s``, ``time_per_sample_s``,
  ``samples_per_s``, ``train_loss``, ``val_loss``, ratios to the references;
* ``comparable`` (False flags a row whose loss is not close to the
  reference's), ``note``, ``error``;
* for ``your_model``: ``family``, ``input_shape``, ``input_dtype``,
  ``n_weights``, ``compile_time_s`` (the model zoo's table,
  :mod:`benchmarks.report.zoo_summary`).

:func:`summarize` writes ``summary.md`` (the answer, the conditions, the
targets, the plots: at most a page), ``details.md`` (every table),
``summary.csv`` (every row) and the plots (:mod:`benchmarks.report.plots`).
Figures of different machines are never mixed: the answer
(:mod:`benchmarks.report.answer`) has one table per machine; nor are those of two backends
(``python -m benchmarks --backend``): a record of the backend ``onnx`` names its machine with it.
"""

import glob
import json
import os

import pandas as pd

from benchmarks.report.answer import answer_details, answer_ratios, answer_sentences
from benchmarks.report.backend_section import backend_details, backend_section
from benchmarks.report.caveats import add_caveats
from benchmarks.report.details import markdown_table, write_details
from benchmarks.report.portable_section import portable_details, portable_section
from benchmarks.report.study_sections import (
    time_to_accuracy_lines,
    zoo_costs_details,
    zoo_costs_section,
)
from benchmarks.report.suite_ratios import suite_lines
from benchmarks.report.summary_terms import glossary_lines, targets_in_words
from benchmarks.report.zoo_summary import zoo_details, zoo_section
from benchmarks.sweep.records import atomic_write_text, machine_lines, results_file
from benchmarks.sweep.sweep_grid import DEFAULT_BACKEND

#: Why ORTModule has no row: the one sentence the summary says about it.
ORTMODULE_SENTENCE = (
    "ORTModule (onnxruntime's torch integration) imports torch internals removed in torch 2.9: "
    "[OrtTorchModule](#glossary) takes its row; the [details](details.md) give its share of time "
    "in onnxruntime."
)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def record_paths(results, run_ids=None):
    """The record of each run under ``results`` (``records/`` first), by run id."""
    paths = {}
    for path in sorted(glob.glob(os.path.join(results, "runs", "*", "record.json"))):
        paths[os.path.basename(os.path.dirname(path))] = path
    for path in sorted(glob.glob(os.path.join(results, "records", "*.json"))):
        paths[os.path.basename(path)[: -len(".json")]] = path
    if run_ids is not None:
        paths = {k: v for k, v in paths.items() if k in set(run_ids)}
    return paths


def record_backend(record):
    """The backend that trained a record's onnxruntime rows, and the onnxruntime it ran on.

    Records written before the sweeps chose a backend were the training package's.

    Examples
    --------
    >>> record_backend({"versions": {"onnxruntime-training-cpu": "1.19.2"}})
    ('onnxruntime-training', '1.19.2')
    >>> record_backend({"parameters": {"backend": "onnx"}, "versions": {"onnxruntime": "1.31.1"}})
    ('onnx', '1.31.1')
    """
    versions = record.get("versions", {})
    names = ("onnxruntime-training-cpu", "onnxruntime-training", "onnxruntime")
    runtime = next((versions[n] for n in names if versions.get(n)), None)
    backend = (record.get("parameters") or {}).get("backend") or DEFAULT_BACKEND
    return backend, runtime


def _machine(record):
    """A short name of the machine that ran a record: processor and cores; and the backend when it
    is not the training package's, so that no table mixes the figures of two backends."""
    worker = record.get("worker") or {}
    machine = worker.get("machine") or record.get("machine", {})
    cores = machine.get("usable_cores") or machine.get("logical_cores")
    name = machine.get("cpu") or "unknown processor"
    name = f"{name}, {cores} cores" if cores else name
    backend, runtime = record_backend(record)
    if backend != DEFAULT_BACKEND:
        name += f", backend {backend}" + (f" on onnxruntime {runtime}" if runtime else "")
    return name


def _machine_blocks(df, results):
    """The machine in full (:func:`benchmarks.sweep.records.machine_lines`), one per machine."""
    machines = {}
    for path in record_paths(results, set(df.run) if "run" in df else None).values():
        record = _read(path)
        info = (record.get("worker") or {}).get("machine") or record.get("machine", {})
        machines.setdefault(_machine(record), (info, record.get("versions", {})))
    lines = []
    for name, (info, versions) in machines.items():
        threads = df.loc[df.machine == name, "threads"].dropna() if "threads" in df else None
        lines += ["Measured on:" if len(machines) == 1 else f"Measured on {name}:", ""]
        lines += machine_lines(info, versions, threads) + [""]
    return lines


def load_rows(results, run_ids=None):
    """Every row of every record of ``results`` (only the runs ``run_ids`` when given)."""
    frames = []
    for run, path in record_paths(results, run_ids).items():
        record = _read(path)
        rows = pd.DataFrame(record["rows"])
        if rows.empty:
            continue
        rows["run"] = run
        rows["notebook"] = record["notebook"]
        rows["machine"] = _machine(record)
        if "threads" not in rows:
            rows["threads"] = record.get("machine", {}).get("torch_threads")
        else:
            rows["threads"] = rows["threads"].fillna(record.get("machine", {}).get("torch_threads"))
        rows["worker"] = (record.get("worker") or {}).get("address", "local")
        rows["shared"] = record.get("shared") or ""
        rows["busy"] = (record.get("conditions") or {}).get("busy") or ""
        backend, rows["onnxruntime"] = record_backend(record)
        rows["backend"] = rows["backend"].fillna(backend) if "backend" in rows else backend
        rows["torch_version"] = record.get("versions", {}).get("torch")
        frames.append(rows)
    return add_caveats(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame()


def shared_sentence(df):
    """The first lines of a summary of runs that shared their cores, or ``''``.

    Examples
    --------
    >>> df = pd.DataFrame(
    ...     {
    ...         "run": ["a", "b"],
    ...         "shared": [
    ...             "2 runs at once, 2 threads each, on 2 cores: the runs shared the cores",
    ...             "",
    ...         ],
    ...     }
    ... )
    >>> print(shared_sentence(df))  # doctest: +NORMALIZE_WHITESPACE
    **1 of 2 runs shared the machine's cores with other runs** (2 runs at once, 2 threads each, on 2
    cores: the runs shared the cores): their timings are not comparable with runs made one at a
    time. Their ratios are kept apart, under "runs that shared the cores", and no answer rests on
    them.
    """
    if "shared" not in df:
        return ""
    runs = df.groupby("run")["shared"].first()
    shared = runs[runs.astype(bool)]
    if shared.empty:
        return ""
    return (
        f"**{len(shared)} of {len(runs)} runs shared the machine's cores with other runs** "
        f"({shared.iloc[0]}): "
        "their timings are not comparable with runs made one at a time. Their ratios are kept "
        "apart, under "
        '"runs that shared the cores", and no answer rests on them.'
    )


def _compile_sentence(df):
    """How long torch.compile compiled, stated apart from its step time."""
    if "compile_time_s" not in df:
        return ""
    seconds = pd.to_numeric(df["compile_time_s"], errors="coerce").dropna()
    if seconds.empty:
        return ""
    low, high = seconds.min(), seconds.max()
    return f"`torch.compile` compiled for {low:.1f} to {high:.1f} s, outside its steps."


def _step_targets(results):
    """The table of ``step_targets.md`` beside ``results`` (or above it), if any."""
    path = results_file(results, "step_targets.csv")
    if path is None:
        return None, None
    return pd.read_csv(path), os.path.relpath(path, results)


def _time_to_accuracy(results):
    """The summary's lines on the time to a held-out accuracy, if the study has run."""
    path = results_file(results, "time_to_accuracy.csv")
    if path is None:
        return []
    plot = os.path.relpath(os.path.join(os.path.dirname(path), "time_to_accuracy.png"), results)
    return (
        ["## Time to a held-out accuracy", ""]
        + time_to_accuracy_lines(pd.read_csv(path))
        + [
            "",
            f"![time_to_accuracy.png]({plot})",
            "",
            "Same model, weights, batches and plain SGD in every framework; the point after k "
            "epochs is a fresh fit of k epochs, set-up included (`python -m "
            "benchmarks.studies.time_to_accuracy`).",
            "",
        ]
    )


def _conditions(df):
    """The paragraphs under the grid's answer: how its ratios were taken, and which versions."""
    ratios_said = (
        f"{df.run.nunique()} runs. Ratios of time at equal thread counts, same data, "
        "weights, batches and plain SGD: a step against torch, a whole fit against "
        "scikit-learn; a ratio with a caveat counts in no sentence. "
    )
    ratios_said += _compile_sentence(df)
    return [ratios_said.strip(), "", ORTMODULE_SENTENCE, ""]


def summary_text(df, results, plots):
    """The text of ``summary.md``: the machine, the answer per peer, the grid, the zoo..."""
    lines = ["# Is onnxruntime training faster than torch and scikit-learn?", ""]
    if df.empty:
        return "\n".join(
            lines + ["No complete run in this folder yet: `python -m benchmarks` runs a sweep.", ""]
        )
    lines += _machine_blocks(df, results)
    shared = shared_sentence(df)
    if shared:
        lines += [shared, ""]
    lines += suite_lines(df)
    ratios = answer_ratios(df)
    for is_shared in (False, True):
        apart = " (runs that shared the cores: not findings)" if is_shared else ""
        part_of = ratios[ratios.shared == is_shared] if not ratios.empty else ratios
        for machine, group in part_of.groupby("machine", sort=False) if not part_of.empty else []:
            for threads, part in group.groupby("threads"):
                lines += [f"## {machine}, {threads} thread{'' if threads == 1 else 's'}{apart}", ""]
                said = part[part.peer != "torch.compile"]  # the suite's table answers it
                grid = "The MLPs of the grid, each API apart ([each configuration](details.md)):"
                lines += [grid, ""]
                lines += [f"- {sentence}" for sentence in answer_sentences(said)] + [""]
    if not ratios.empty:
        lines += _conditions(df)
    lines += zoo_section(df)
    targets, path = _step_targets(results)
    if targets is not None:
        lines += [
            "## Targets",
            "",
            "Each target for the configuration it was set for, measured side by side by "
            f"`python -m benchmarks.studies.step_targets` ([{os.path.basename(path)}]({path})):",
            "",
        ]
        table, zoo = targets_in_words(targets)
        lines += markdown_table(table) + [""] + ([zoo, ""] if zoo else [])
    lines += _time_to_accuracy(results) + zoo_costs_section(results) + portable_section(results)
    lines += backend_section(results)
    if plots:
        lines += ["## Plots", ""] + [f"![{name}]({name})" for name in plots] + [""]
    lines += [
        "Every configuration: [details](details.md); every row: [summary.csv](summary.csv).",
        "",
    ]
    return "\n".join(lines + glossary_lines())


def summarize(results, run_ids=None):
    """Write ``summary.md``, ``details.md``, ``summary.csv`` and the plots of ``results``.

    Parameters
    ----------
    results : str
        A results folder (``records/`` and ``runs/`` below it).
    run_ids : iterable of str, optional
        Summarize only these runs (the grid just run); all by default.

    Returns
    -------
    list of str
        The paths written.
    """
    # matplotlib, only when summarizing
    from benchmarks.report.plots import write_plots  # noqa: PLC0415

    df = load_rows(results, run_ids)
    os.makedirs(results, exist_ok=True)
    plots = write_plots(df, results) if not df.empty else []
    paths = {name: os.path.join(results, name) for name in ("summary.csv", "summary.md")}
    atomic_write_text(paths["summary.csv"], df.to_csv(index=False))
    atomic_write_text(
        paths["summary.md"], summary_text(df, results, [os.path.basename(p) for p in plots])
    )
    extra = answer_details(df) + zoo_details(df) if not df.empty else []
    extra += zoo_costs_details(results) + portable_details(results) + backend_details(results)
    header = _machine_blocks(df, results) if not df.empty else []
    return [*paths.values(), *write_details(df, results, atomic_write_text, header, extra), *plots]
