"""The backend ``onnx`` beside the training package: the step times of ``backend_steps``.

Read from ``backend_steps.csv`` (:data:`COLUMNS`), which :mod:`benchmarks.studies.backend_steps`
writes: for each MLP of the grid and each zoo model, each API (whole-training,
forward/backward) and each run (the training package on 1.19.2, the backend ``onnx`` on 1.19.2's
inference session and on the maintained onnxruntime), the marginal step, its spread, the losses of
the first steps and how far they are from the training package's. :func:`backend_markdown` is
``backend_steps.md`` (the answer first); :func:`backend_section` and :func:`backend_details` are
the summary's section and its table in ``details.md``.
"""

import os

import pandas as pd

from benchmarks.report.backend_tables import (
    AGREE_WITHIN,
    API_NAMES,
    KINDS,
    NOISY_MARK,
    TRAINING,
    answer_table,
    geometric_mean,
    group_table,
    label,
    ratios,
    runtime_of,
    step_table,
)
from benchmarks.report.details import markdown_table
from benchmarks.report.ratios import speed_phrase
from benchmarks.sweep.records import results_file
from helpers.measure.conditions import NOISY_SPREAD

#: The study's file, and the command that writes it.
BACKEND_STEPS_CSV = "backend_steps.csv"
BACKEND_COMMAND = "python -m benchmarks.studies.backend_steps"
#: The columns of ``backend_steps.csv``: ``kind`` (``mlp`` or ``zoo``), ``case`` (``MLP D-H-1@B``
#: or a zoo model), ``api`` (a framework name), ``backend`` and ``runtime`` (who trained),
#: ``step_s`` (CPU time of the calling thread) and ``wall_step_s``, ``spread`` (of the repeats'
#: estimates), ``first_losses`` (the first steps', on one batch), ``loss_gap`` (their largest
#: relative distance to the training package's), ``last_loss`` and ``last_loss_gap`` (the last
#: epoch's loss of the longest timed fit, and the same distance), ``note`` (the timing's caveat, or
#: why a run did not train) and ``machine``.
COLUMNS = [
    "kind",
    "case",
    "api",
    "backend",
    "runtime",
    "batch_size",
    "threads",
    "steps_per_epoch",
    "epochs",
    "step_s",
    "wall_step_s",
    "spread",
    "first_losses",
    "loss_gap",
    "last_loss",
    "last_loss_gap",
    "note",
    "machine",
]


def answer_sentence(df, short=False):
    """The answer in a sentence: the maintained run against the training package, per group of
    cases and API (geometric means of the clean ratios), and the losses' agreement (``short``:
    the groups left to a table, the first steps' losses only, not the longest fit's).

    Examples
    --------
    >>> df = pd.DataFrame({"kind": "zoo", "case": ["m"] * 2, "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"],
    ...                    "runtime": ["onnxruntime 1.19.2", "onnxruntime 1.31.1"],
    ...                    "step_s": [1.0, 1.5], "spread": 1.1, "loss_gap": [0.0, 2e-7]})
    >>> print(answer_sentence(df))
    On onnxruntime 1.31.1 (backend onnx), a step is 1.5x slower than the training package's \
on 1.19.2 (geometric means of the clean ratios): in the zoo, whole-training 1.5x slower. The \
losses of the first steps agree with the training package's for 1 of 1 model and API (largest \
gap 2e-07).
    """
    table = ratios(df)
    maintained = _maintained(table)
    runs = table[table.run == maintained]
    clean = runs.ratio[~runs.noisy & runs.ratio.notna()]
    overall = _against(geometric_mean(clean)) if len(clean) else "not measured against"
    parts = []
    for kind, group in runs.groupby("kind", sort=False):
        said = []
        for api, part in group.groupby("api", sort=False):
            values = part.ratio[~part.noisy & part.ratio.notna()]
            phrase = speed_phrase(geometric_mean(values)) if len(values) else "not measured"
            said.append(f"{API_NAMES[api]} {phrase}")
        parts.append(f"in {KINDS.get(kind, kind)}, {', '.join(said)}")
    runtime = maintained.split(" on ")[-1]
    text = (
        f"On onnxruntime {runtime} (backend onnx), a step is {overall} the training "
        f"package's on {_training_version(table)} (geometric means of the clean ratios"
    )
    text += "; each group below). " if short else "): " + "; ".join(parts) + ". "
    return text + _loss_sentence(table, short)


def _against(ratio):
    """``'1.2x faster than'``, ``'as fast as'``: a time ratio before its peer's name.

    Examples
    --------
    >>> _against(0.5), _against(1.01)
    ('2.0x faster than', 'as fast as')
    """
    phrase = speed_phrase(ratio)
    return "as fast as" if phrase == "same" else f"{phrase} than"


def _maintained(table):
    """The label of the newest runtime's ``onnx`` run."""
    runs = table[table.backend != TRAINING].dropna(subset=["runtime"])
    versions = {run: tuple(int(p) for p in run.split()[-1].split(".")) for run in set(runs.run)}
    return max(versions, key=versions.get) if versions else "onnx"


def _training_version(table):
    runtime = runtime_of(table, TRAINING)
    return runtime.split()[-1] if runtime else "1.19.2"


def _loss_sentence(table, short=False):
    """How many (case, API) pairs have first losses that agree, and the disagreements; unless
    ``short``, how far the longest fit's last loss went."""
    gaps = table[table.backend != TRAINING].groupby(["case", "api"], sort=False).loss_gap.max()
    gaps = gaps.dropna()
    if gaps.empty:
        return ""
    agree = gaps <= AGREE_WITHIN
    said = (
        f"The losses of the first steps agree with the training package's for {int(agree.sum())} "
        f"of {len(gaps)} model{'s' if len(gaps) != 1 else ''} and API"
        f"{'s' if len(gaps) != 1 else ''} (largest gap {gaps[agree].max():.0e})"
        if agree.any()
        else "The losses of the first steps agree for no model"
    )
    off = [f"{label(c)} ({API_NAMES.get(a, a)}: {g:.0e})" for (c, a), g in gaps[~agree].items()]
    said += f"; they differ for {', '.join(off)}." if off else "."
    if not short and "last_loss_gap" in table and table.last_loss_gap.notna().any():
        said += (
            " The last epoch's loss of the longest timed fit is at most "
            f"{table.last_loss_gap.max():.0e} from the training package's, relative."
        )
    return said


def _conditions(table):
    """The machine, the threads, the method and the noisy mark's meaning.

    Examples
    --------
    >>> table = pd.DataFrame({"machine": "Xeon, 2 cores", "threads": [1, 1], "noisy": False})
    >>> print(_conditions(table)[0])  # doctest: +ELLIPSIS
    Measured on Xeon, 2 cores, 1 intra-op thread: each step is the marginal cost of a step in ...
    """
    threads = sorted({int(t) for t in table.threads.dropna()})
    said = " or ".join(str(t) for t in threads)
    plural = "s" if threads != [1] else ""
    lines = [
        f"Measured on {table.machine.iloc[0]}, {said} intra-op thread{plural}: each step is the "
        "marginal cost of a step in CPU time of the thread that calls onnxruntime (a fit of more "
        "epochs minus a fit of fewer, best of the repeats, the runs taking turns), the three "
        "runs in one run of the study; the ratios compare them, the times move from run to run."
    ]
    busy = _busy(table)
    if busy:
        lines.append(busy)
    if table.noisy.any():
        lines.append(f"{NOISY_MARK}: noisy (a timing's repeats spread over {NOISY_SPREAD:.0f}x).")
    return lines


def _busy(table):
    """How many timings other programs' work on the machine went with, and the highest load.

    Examples
    --------
    >>> notes = ["busy machine: load average 6.6 on 2 cores, this run used 1 thread(s)", ""]
    >>> print(_busy(pd.DataFrame({"note": notes, "step_s": [1.0, 1.0]})))
    Other programs loaded the machine during 1 of 2 timings (load average up to 6.6): the CPU \
time of the calling thread leaves their share out, the repeats' spread shows what remains.
    """
    if "note" not in table:
        return ""
    notes = table.note[table.step_s.notna()].map(lambda note: note if isinstance(note, str) else "")
    loads = notes.str.extract(r"busy machine: load average ([\d.]+)")[0].dropna().astype(float)
    if loads.empty:
        return ""
    return (
        f"Other programs loaded the machine during {len(loads)} of {len(notes)} timings (load "
        f"average up to {loads.max():.1f}): the CPU time of the calling thread leaves their share "
        "out, the repeats' spread shows what remains."
    )


def backend_markdown(df):
    """``backend_steps.md``: the answer (a sentence, a small table), the conditions, then every
    case's steps and loss check.

    Examples
    --------
    >>> df = pd.DataFrame({"kind": "mlp", "case": "MLP 3-4-1@8", "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"],
    ...                    "runtime": ["onnxruntime 1.19.2", "onnxruntime 1.31.1"],
    ...                    "step_s": [2e-4, 1e-4], "spread": 1.1, "loss_gap": [0.0, 1e-7],
    ...                    "note": "", "machine": "Xeon, 2 cores", "threads": 2})
    >>> print(backend_markdown(df).splitlines()[0])  # doctest: +ELLIPSIS
    # The backend onnx beside the training package...
    """
    table = ratios(df)
    return "\n".join(
        [
            "# The backend onnx beside the training package, a step of each",
            "",
            answer_sentence(df),
            "",
            *markdown_table(answer_table(df)),
            "",
            *_conditions(table),
            "",
            "## Every model and API",
            "",
            *markdown_table(step_table(df)),
            "",
            f"Rows: [{BACKEND_STEPS_CSV}]({BACKEND_STEPS_CSV}) (`{BACKEND_COMMAND}`); first "
            f"losses agree within {AGREE_WITHIN:g} of the training package's, relative.",
        ]
    )


def write_markdown(out):
    """Write ``backend_steps.md`` from ``backend_steps.csv`` in ``out``; return its text."""
    from benchmarks.sweep.records import atomic_write_text  # noqa: PLC0415

    text = backend_markdown(pd.read_csv(os.path.join(out, BACKEND_STEPS_CSV)))
    atomic_write_text(os.path.join(out, "backend_steps.md"), text + "\n")
    return text


def _read(results):
    """``(rows, path)`` of ``backend_steps.csv`` beside ``results`` or above it; ``(None, None)``
    before the study wrote rows."""
    path = results_file(results, BACKEND_STEPS_CSV)
    df = None if path is None else pd.read_csv(path)
    return (None, None) if df is None or df.empty else (df, path)


def backend_section(results):
    """The summary's section: the answer, each case's step on the training package and on the
    maintained runtime; none before the study ran.

    Examples
    --------
    >>> backend_section("no such folder")
    []
    """
    df, path = _read(results)
    if df is None:
        return []
    table = ratios(df)
    link = os.path.relpath(path, results)
    page = link.removesuffix(".csv") + ".md"
    page = f", [{os.path.basename(page)}]({page})" if os.path.exists(path[:-4] + ".md") else ""
    threads = sorted({int(t) for t in table.threads.dropna()})
    plural = "s" if threads != [1] else ""
    return [
        "## The backend onnx on the maintained onnxruntime, beside 1.19.2",
        "",
        answer_sentence(df, short=True),
        "",
        *markdown_table(group_table(df, _maintained(table), spans=False)),
        "",
        f"{table.machine.iloc[0]}, {' or '.join(map(str, threads))} intra-op thread{plural}, CPU "
        f"time of the calling thread. Every model: [details](details.md){page}; rows: "
        f"[{BACKEND_STEPS_CSV}]({link}) (`{BACKEND_COMMAND}`).",
        "",
    ]


def backend_details(results):
    """The lines of ``details.md``: every case's steps on the three runs; none before the study.

    Examples
    --------
    >>> backend_details("no such folder")
    []
    """
    df = _read(results)[0]
    if df is None:
        return []
    title = "### The backend onnx beside the training package"
    return [title, "", *markdown_table(step_table(df)), ""]
