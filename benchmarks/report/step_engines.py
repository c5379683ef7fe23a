"""The page of ``step_engines``: which engine trains each zoo model's step fastest.

Read from the rows of ``step_engines.csv`` (:mod:`benchmarks.studies.step_engines`): one per
model and engine, with its step in seconds (``step_s``, NaN when it was not timed), the spread of
its repeats and its caveats (``note``), and its ``status``: ``''``, or why it was not timed
(``refused: ...``, ``loss mismatch: ...``, ``not measured: ...``). The answer comes first
(:func:`answer_sentence`), then a table of each model's step per engine and the fastest
(:func:`engines_table`), then the conditions: the machine, the runtimes, and the noise of the
run, marked as :mod:`benchmarks.report.portable_builders` marks it.
"""

import math

import pandas as pd

from benchmarks.example_models import ZOO
from benchmarks.report.details import markdown_table
from benchmarks.report.portable_builders import _load as busy_load
from benchmarks.report.portable_section import NOISY_MARK, REFUSED
from benchmarks.report.zoo_summary import model_label
from helpers.measure.conditions import NOISY_SPREAD

#: The engines, as the rows name them, and as the page names them, in the table's order.
CPU, OPENVINO, TORCH = "onnxruntime CPU", "OpenVINO", "torch eager"
ENGINES = {
    CPU: "the CPU provider",
    OPENVINO: "OpenVINO",
    TORCH: "torch eager",
}
#: How the status of a loss that differs from the CPU provider's begins, and of an engine that
#: did not run at all.
MISMATCH, NOT_MEASURED = "loss mismatch: ", "not measured: "


def _label(model):
    return model_label(ZOO[model][0], model) if model in ZOO else model


def _timed(df):
    """The rows with a step: status empty, a finite ``step_s``."""
    status = df.status.astype(object).fillna("").astype(str)
    return df[(status == "") & df.step_s.map(lambda s: math.isfinite(float(s)))]


def _noisy(row):
    return float(row.spread) > NOISY_SPREAD or "noisy" in str(row.note)


def fastest(df):
    """Model to the engine of its smallest timed step; a model with none timed is left out.

    A refused engine, or one whose loss differs, has no step: it is never the fastest.

    Examples
    --------
    >>> rows = pd.DataFrame({"model": ["m", "m", "m"], "engine": [CPU, OPENVINO, TORCH],
    ...                      "step_s": [0.02, float("nan"), 0.03], "spread": 1.1, "note": "",
    ...                      "status": ["", "refused: ReduceSum: axes", ""]})
    >>> fastest(rows).to_dict()
    {'m': 'onnxruntime CPU'}
    """
    timed = _timed(df)
    if timed.empty:
        return pd.Series(dtype=object)
    return timed.loc[timed.groupby("model", sort=False).step_s.idxmin()].set_index("model").engine


def _cell(row):
    """A step in milliseconds (``'12.3'``, ``'12.3*'`` when noisy), or the status."""
    if row.status:
        return row.status
    if not math.isfinite(float(row.step_s)):
        return row.note.split("; ")[0] or "-"  # not measurable: the first caveat says why
    ms = 1e3 * float(row.step_s)
    return (f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}") + (NOISY_MARK if _noisy(row) else "")


def engines_table(df):
    """One row per model: its step on each engine (ms, or why none) and the fastest engine.

    Examples
    --------
    >>> rows = pd.DataFrame({"model": ["m", "m"], "engine": [CPU, TORCH], "spread": 1.1,
    ...                      "step_s": [0.0123, 0.02], "note": "", "status": ""})
    >>> engines_table(rows).iloc[0].to_dict()  # doctest: +NORMALIZE_WHITESPACE
    {'model': 'm', 'CPU provider ms': '12.3', 'torch eager ms': '20',
     'fastest': 'the CPU provider'}
    """
    df = df.assign(
        status=df.status.astype(object).fillna("").astype(str), note=df.note.fillna("").astype(str)
    )
    engines = [e for e in ENGINES if e in set(df.engine)]
    best = fastest(df)
    rows = []
    for model, by in df.groupby("model", sort=False):
        row = {"model": _label(model)}
        for engine in engines:
            found = by[by.engine == engine]
            title = ENGINES[engine].removeprefix("the ")
            row[f"{title} ms"] = _cell(found.iloc[0]) if len(found) else "-"
        row["fastest"] = ENGINES.get(best.get(model), "none timed")
        rows.append(row)
    return pd.DataFrame(rows)


def _listed(items):
    """``'a'``, ``'a and b'``, ``'a, b and c'``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _winners(df):
    """Engine to the models it trains fastest (:func:`fastest`), labelled and marked noisy
    where its timing is; engines in the table's order, those that win none left out."""
    best = fastest(df)
    noisy = {(r.model, r.engine) for r in _timed(df).itertuples() if _noisy(r)}
    winners = {}
    for engine in ENGINES:
        models = [
            _label(m) + (NOISY_MARK if (m, engine) in noisy else "")
            for m, e in best.items()
            if e == engine
        ]
        if models:
            winners[engine] = models
    return winners


def answer_sentence(df):
    """Which engine trains each model fastest, in one sentence; then how many steps OpenVINO read.

    Examples
    --------
    >>> rows = pd.DataFrame({"model": ["image_cnn_large"] * 3, "engine": [CPU, OPENVINO, TORCH],
    ...                      "step_s": [0.03, float("nan"), 0.02], "spread": 1.1, "note": "",
    ...                      "status": ["", "refused: ReduceSum: axes", ""]})
    >>> answer_sentence(rows)
    'torch eager trains CNN on images (large) fastest. OpenVINO refused 1 of 1 step models.'
    """
    winners = _winners(df)
    parts = [f"{ENGINES[e]} trains {_listed(models)} fastest" for e, models in winners.items()]
    best = fastest(df)
    untimed = [_label(m) for m in df.model.unique() if m not in best.index]
    if untimed:
        parts.append(f"no engine was timed for {_listed(untimed)}")
    sentence = "; ".join(parts) + "."
    if not sentence.startswith(ENGINES[TORCH]):
        sentence = sentence[0].upper() + sentence[1:]
    openvino = df[df.engine == OPENVINO].status.astype(object).fillna("").astype(str)
    refused = openvino.str.startswith(REFUSED).sum()
    if len(openvino) and not openvino.str.startswith(NOT_MEASURED).all():
        sentence += f" OpenVINO refused {refused} of {len(openvino)} step models."
    return sentence


def short_answer(df):
    """The fastest engine per model in a short sentence: the models of every engine but the
    one that wins most, named; that one's counted.

    Examples
    --------
    >>> rows = pd.DataFrame({"model": ["image_cnn_large"] * 2 + ["resnet_large"] * 2
    ...                      + ["mobilenet_large"] * 2, "engine": [CPU, OPENVINO] * 3,
    ...                      "step_s": [0.02, 0.03, 0.5, 0.3, 0.4, 0.6], "spread": 1.1,
    ...                      "note": "", "status": ""})
    >>> short_answer(rows)
    'Fastest engine per zoo model: OpenVINO for ResNet-style CNN (large); the CPU provider for \
the other 2.'
    """
    winners = _winners(df)
    if not winners:
        return "No engine was timed."
    most = max(winners, key=lambda e: len(winners[e]))  # a tie: the first in the table's order
    parts = [f"{ENGINES[e]} for {_listed(m)}" for e, m in winners.items() if e != most]
    parts.append(f"{ENGINES[most]} for the other {len(winners[most])}")
    return "Fastest engine per zoo model: " + "; ".join(parts) + "."


def engines_markdown(df):
    """The page: the answer, the table, the conditions and the marks' meaning (markdown).

    Examples
    --------
    >>> rows = pd.DataFrame({"model": ["m", "m"], "engine": [CPU, TORCH], "spread": [1.1, 3.0],
    ...     "step_s": [0.0123, 0.02], "note": "", "status": "", "runtime": ["onnxruntime 1.31.1",
    ...     "torch 2.13.0"], "threads": 2, "batch_size": 64,
    ...     "machine": "AMD EPYC", "cores": 2})
    >>> print(engines_markdown(rows).splitlines()[0])
    The CPU provider trains m fastest.
    """
    first = df.iloc[0]
    runtimes = df.drop_duplicates("engine").set_index("engine").runtime.dropna()
    engines = "; ".join(f"{ENGINES[e]} on {runtimes[e]}" for e in ENGINES if e in runtimes)
    steps = "as exported"
    if df.get("trainer_lean", pd.Series(dtype=object)).fillna(False).astype(bool).any():
        steps += ", which the trainer specialises to the batch size (PortableTrainer's lean)"
    lines = [answer_sentence(df), "", *markdown_table(engines_table(df)), ""]
    lines.append(
        f"A training step in milliseconds, batches of {first.batch_size}, {first.threads} threads "
        "for every engine, the same weights and batches; the step model "
        f"{steps}. Each engine's loss after an epoch is checked against the CPU provider's; a "
        "refused step or a different loss is not timed. Timed side by side in one run (the "
        "marginal cost of a step): the engines compare, the times move from run to run."
    )
    load = busy_load([df])
    if load:
        lines[-1] += f" The machine was busy meanwhile (load average up to {load}): noisy figures."
    if any(_noisy(r) for r in _timed(df).itertuples()):
        lines[-1] += f" {NOISY_MARK}: noisy (a timing's repeats spread over {NOISY_SPREAD:.0f}x)."
    lines += ["", f"Machine: {first.machine}, {first.cores} cores. Engines: {engines}."]
    return "\n".join(lines)
