"""The step built by ``helpers.portable.gradients`` against the one 1.19.2's builder made.

Read from the ``builder``, ``runtime`` and ``nodes`` columns of ``portable_speed.csv`` and
``portable_zoo.csv`` (:mod:`benchmarks.studies.portable_speed`): for each case and zoo model, the
step model that onnxruntime-training 1.19.2's gradient builder made, its contrib operators lowered
(:data:`~benchmarks.report.portable_section.LOWERED`), and the one whose gradients
:mod:`helpers.portable.gradients` wrote (:data:`~benchmarks.report.portable_section.BUILT`), each
trained one session call per step (``portable step``) on the maintained onnxruntime and on 1.19.2,
side by side in one run. :func:`builder_markdown` is their part of ``portable_speed.md``: an answer
per model, then a table of node counts, steps and ratios.
"""

import math
import re

import pandas as pd

from benchmarks.report.details import markdown_table
from benchmarks.report.portable_section import (
    BUILT,
    LOWERED,
    NOISY_MARK,
    _cell,
    _why_not,
    _zoo_label,
    maintained_runtime,
)
from benchmarks.report.ratios import speed_phrase, verdict
from benchmarks.workloads import frameworks as fw
from helpers.measure.conditions import NOISY_SPREAD

#: The answer counts the models of its most frequent verdict when they are more than this many
#: (it names the others).
NAMED = 3


def _duration_pair(first, second):
    """``'35 / 31 us'``, ``'1.4 / 1.2 ms'``: two steps in the unit of the larger, 2 digits.

    Examples
    --------
    >>> _duration_pair(3.5e-5, 3.1e-5), _duration_pair(1.4e-3, float("nan"))
    ('35 / 31 us', '1.4 / - ms')
    """
    finite = [v for v in (first, second) if math.isfinite(v)]
    scale, unit = (1e6, "us") if finite and max(finite) < 1e-3 else (1e3, "ms")
    cells = [f"{float(f'{v * scale:.2g}'):g}" if math.isfinite(v) else "-" for v in (first, second)]
    return f"{cells[0]} / {cells[1]} {unit}"


def _nodes(value):
    return "-" if value is None or not math.isfinite(value) else f"{value:.0f}"


def builder_pairs(df, group):
    """One record per case or model and runtime: both steps, their ratio, their node counts.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``portable_speed.csv`` (``group="case"``) or ``portable_zoo.csv`` (``"model"``);
        rows without a ``builder`` are the peers', left out.

    Returns
    -------
    pandas.DataFrame
        ``label``, ``runtime`` (the maintained one first), ``lowered_s``, ``built_s``, ``ratio``
        (built over lowered), ``noisy``, ``lowered_nodes``, ``built_nodes`` and ``why_not``
        (``'refused: OP'`` or ``'failed: ...'`` of a step that did not train).

    Examples
    --------
    >>> df = pd.DataFrame({
    ...     "model": "resnet_small", "framework": "portable step",
    ...     "builder": ["lowered", "built"], "runtime": "onnxruntime 1.31.1",
    ...     "nodes": [1025, 744], "step_s": [0.2, 0.16], "spread": [1.1, 1.3], "note": "",
    ...     "maintained": "onnxruntime 1.31.1, Python 3.13.0"})
    >>> pair = builder_pairs(df, "model").iloc[0]
    >>> pair.label, round(float(pair.ratio), 3), int(pair.built_nodes)
    ('ResNet-style CNN (small)', 0.8, 744)
    """
    if "builder" not in df:
        return pd.DataFrame()
    steps = df[(df.framework == fw.PORTABLE_STEP) & df.builder.isin([LOWERED, BUILT])]
    steps = steps.assign(other_runtime=steps.runtime != maintained_runtime(steps))
    records = []
    for (name, runtime), part in steps.groupby([group, "runtime"], sort=False):
        by = part.set_index("builder")

        def value(builder, column, by=by):
            return float(by[column].get(builder, math.nan)) if column in by else math.nan

        lowered, built = value(LOWERED, "step_s"), value(BUILT, "step_s")
        notes = by.note if "note" in by else pd.Series(dtype=object)
        records.append(
            {
                "label": _zoo_label(name) if group == "model" else name,
                "runtime": runtime,
                "other_runtime": bool(part.other_runtime.iloc[0]),
                "lowered_s": lowered,
                "built_s": built,
                "ratio": built / lowered,
                "noisy": bool((part.spread[part.step_s.notna()] > NOISY_SPREAD).any()),
                "lowered_nodes": value(LOWERED, "nodes"),
                "built_nodes": value(BUILT, "nodes"),
                "why_not": "; ".join(
                    f"{builder}: {_untimed(notes.get(builder, ''))}"
                    for builder in (LOWERED, BUILT)
                    if _untimed(notes.get(builder, ""))
                ),
            }
        )
    if not records:
        return pd.DataFrame()
    table = pd.DataFrame(records).sort_values("other_runtime", kind="stable")
    return table.drop(columns="other_runtime").reset_index(drop=True)


def _untimed(note):
    """Why a step has no time: ``'refused: OP'``, ``'failed: ...'``, ``'not measurable'`` or ''.

    Examples
    --------
    >>> _untimed("not measurable: the longer fit was not slower; busy machine"), _untimed("")
    ('not measurable', '')
    """
    if isinstance(note, str) and note.startswith("not measurable"):
        return "not measurable"
    return _why_not(note)


def _version(runtime):
    """``'1.31.1'`` of ``'onnxruntime 1.31.1'``."""
    return str(runtime).removeprefix("onnxruntime ")


def builder_table(pairs):
    """One row per case or model: node counts, then each runtime's two steps and their ratio.

    Examples
    --------
    >>> pairs = pd.DataFrame({
    ...     "label": ["MLP"] * 2, "runtime": ["onnxruntime 1.31.1", "onnxruntime 1.19.2"],
    ...     "lowered_s": [4e-4, 5e-4], "built_s": [3e-4, 5e-4], "ratio": [0.75, 1.0],
    ...     "noisy": [False, True], "lowered_nodes": [40.0] * 2, "built_nodes": [30.0] * 2,
    ...     "why_not": ""})
    >>> print(builder_table(pairs).iloc[0].to_string())  # doctest: +NORMALIZE_WHITESPACE
    model or case                          MLP
    nodes: lowered / built             40 / 30
    step on 1.31.1: lowered / built   400 / 300 us
    built vs lowered, 1.31.1          1.3x faster
    step on 1.19.2: lowered / built   500 / 500 us
    built vs lowered, 1.19.2                 same*
    """
    rows = {}
    for pair in pairs.itertuples():
        row = rows.setdefault(
            pair.label,
            {
                "model or case": pair.label,
                "nodes: lowered / built": f"{_nodes(pair.lowered_nodes)} / "
                f"{_nodes(pair.built_nodes)}",
            },
        )
        version = _version(pair.runtime)
        row[f"step on {version}: lowered / built"] = _duration_pair(pair.lowered_s, pair.built_s)
        row[f"built vs lowered, {version}"] = pair.why_not or _cell(pair.ratio, pair.noisy)
    return pd.DataFrame(list(rows.values()))


def _listed(items):
    """``'A'``, ``'A and B'``, ``'A, B and C'``.

    Examples
    --------
    >>> _listed(["A"]), _listed(["A", "B", "C"])
    ('A', 'A, B and C')
    """
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _runtime_answer(pairs):
    """``'faster for 9 of 16 (1.1x to 1.6x); as fast for A; slower for B by 1.2x'``: each
    verdict's models named, the most frequent one's counted when it has over :data:`NAMED`."""
    timed = pairs[pairs.ratio.map(math.isfinite)]
    verdicts = {"faster": [], "same": [], "slower": []}
    for pair in timed.itertuples():
        phrase = speed_phrase(pair.ratio).split(" ")[0] + (NOISY_MARK if pair.noisy else "")
        word = verdict(pair.ratio)
        verdicts[word].append(pair.label if word == "same" else f"{pair.label} by {phrase}")
    counted = max(verdicts, key=lambda w: len(verdicts[w]))
    parts = []
    for word, said in (("faster", "faster"), ("same", "as fast"), ("slower", "slower")):
        items = verdicts[word]
        if not items:
            continue
        if word == counted and len(items) > NAMED:
            ratios = [r for r in timed.ratio if verdict(r) == word]
            ratios = sorted(1 / r if word == "faster" else r for r in ratios)
            span = "" if word == "same" else f" ({ratios[0]:.1f}x to {ratios[-1]:.1f}x)"
            parts.append(f"{said} for {len(items)} of {len(timed)}{span}")
        else:
            parts.append(f"{said} for {_listed(items)}")
    untimed = len(pairs) - len(timed)
    if untimed:
        parts.append(f"not timed for {untimed} (the table says why)")
    return "; ".join(parts) if parts else "not measured"


def builder_sentence(pairs):
    """The answer: on each runtime, is the step built here faster than the lowered one, per model.

    Examples
    --------
    >>> pairs = pd.DataFrame({
    ...     "label": ["A", "B", "A", "B"],
    ...     "runtime": ["onnxruntime 1.31.1"] * 2 + ["onnxruntime 1.19.2"] * 2,
    ...     "lowered_s": 1.0, "built_s": [0.8, 1.3, 1.0, 1.02], "ratio": [0.8, 1.3, 1.0, 1.02],
    ...     "noisy": [False, True, False, False], "lowered_nodes": [50.0, 80, 50, 80],
    ...     "built_nodes": [40.0, 80, 40, 80], "why_not": ""})
    >>> print(builder_sentence(pairs))
    Per model, the step model built with gradient_builder="onnx" (gradients in standard ONNX, no \
training package) against the one onnxruntime-training 1.19.2 builds, lowered (the default), on \
onnxruntime 1.31.1: faster for A by 1.2x; slower for B by 1.3x*. On onnxruntime 1.19.2: as fast \
for A and B. The built step has fewer nodes for 1 of 2 (20% fewer) and as many for 1.
    """
    said = [
        f"{runtime}: {_runtime_answer(part)}."
        for runtime, part in pairs.groupby("runtime", sort=False)
    ]
    text = (
        'Per model, the step model built with gradient_builder="onnx" (gradients in standard '
        "ONNX, no training package) against the one onnxruntime-training 1.19.2 builds, lowered "
        f"(the default), on {said[0]}" + "".join(f" On {s}" for s in said[1:])
    )
    nodes = pairs.drop_duplicates("label")
    nodes = nodes[nodes.lowered_nodes.notna() & nodes.built_nodes.notna()]
    change = (nodes.built_nodes / nodes.lowered_nodes - 1).to_numpy()
    if len(nodes):
        fewer, more = change[change < 0], change[change > 0]
        counts = []
        if len(fewer):
            span = _percent_span(-fewer)
            counts.append(f"fewer nodes for {len(fewer)} of {len(nodes)} ({span} fewer)")
        if len(more):
            counts.append(f"more for {len(more)} ({_percent_span(more)} more)")
        if len(nodes) - len(fewer) - len(more):
            counts.append(f"as many for {len(nodes) - len(fewer) - len(more)}")
        text += f" The built step has {_listed(counts)}."
    return text


def _percent_span(values):
    """``'20%'``, ``'2% to 43%'``."""
    low, high = (f"{100 * v:.0f}%" for v in (min(values), max(values)))
    return low if low == high else f"{low} to {high}"


def _load(frames):
    """The highest load average a caveat of ``frames`` names, as ``'4.9 on 2 cores'``, or ''."""
    found = []
    for frame in frames:
        for note in frame.get("note", pd.Series(dtype=object)).dropna().astype(str):
            found += re.findall(r"load average ([\d.]+) on (\d+) cores", note)
    if not found:
        return ""
    load, cores = max(found, key=lambda f: float(f[0]))
    return f"{load} on {cores} cores"


def builder_markdown(speed, zoo):
    """The answer and its table, with the conditions: markdown lines ([] without builder rows).

    Examples
    --------
    >>> builder_markdown(pd.DataFrame({"case": ["c"], "framework": ["scikit-learn"]}), None)
    []
    """
    frames = [f for f in (speed, zoo) if f is not None and not f.empty]
    parts = [builder_pairs(f, "case" if "case" in f else "model") for f in frames]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return []
    pairs = pd.concat(parts, ignore_index=True)
    lines = [builder_sentence(pairs), "", *markdown_table(builder_table(pairs)), ""]
    lines.append(
        "Steps: one session call per step (`portable step`), timed side by side with the other "
        "frameworks in one run; the ratios compare them, the times move from run to run."
    )
    load = _load(frames)
    if load:
        lines[-1] += f" The machine was busy meanwhile (load average up to {load}): noisy figures."
    if pairs.noisy.any():
        lines[-1] += f" {NOISY_MARK}: a timing's repeats spread over {NOISY_SPREAD:.0f}x."
    return lines
