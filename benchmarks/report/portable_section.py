"""The summary's section on the step model trained on the maintained onnxruntime (``portable``).

Read from the columns of ``portable_speed.csv`` (the linear fit of one row at a time and the MLP
100-50-1, :data:`SPEED_COLUMNS`) and ``portable_zoo.csv`` (the zoo, :data:`ZOO_COLUMNS`), which
:mod:`benchmarks.studies.portable_speed` writes; it prints the same text
(:func:`portable_markdown`). The answer comes first, the three goals of the step model's speed:
a step of the linear fit with the epoch loop (goal: at most :data:`LINEAR_GOAL_S` seconds, the
runtime's floor, about 50 times ``SGDRegressor``'s), a step of the MLP against the whole-training
API's (goal: no slower), and each zoo model's step against whole-training's (goal: no slower for
every model); then each zoo model's step and peak memory. Those are the
rows of the step model onnxruntime-training's builder made (:data:`LOWERED`) trained on the
maintained runtime (:func:`section_rows`); :mod:`benchmarks.report.portable_builders` sets the
step built by :mod:`helpers.portable.gradients` (:data:`BUILT`) against it.
"""

import math
import os

import pandas as pd

from benchmarks.example_models import ZOO
from benchmarks.report.details import markdown_table
from benchmarks.report.ratios import speed_phrase, value_range, verdict
from benchmarks.report.zoo_summary import model_label
from benchmarks.sweep.records import results_file
from benchmarks.workloads import frameworks as fw
from helpers.measure.conditions import NOISY_SPREAD

#: The study's files, and the command that writes them.
PORTABLE_SPEED_CSV = "portable_speed.csv"
PORTABLE_ZOO_CSV = "portable_zoo.csv"
PORTABLE_COMMAND = "python -m benchmarks.studies.portable_speed"
#: The columns of each file (``builder``: who made a portable fit's step model, :data:`LOWERED` or
#: :data:`BUILT`; ``runtime``: the onnxruntime that trained it; ``nodes``: its node count;
#: ``machine``: the processor; ``maintained``: the runtime and Python of the maintained
#: environment; ``note``: the timing's caveat, or why a framework did not run).
_STEP = ["builder", "runtime", "nodes"]
_TIMING = ["framework", *_STEP, "threads", "batch_size", "steps_per_epoch", "step_s", "spread"]
_CONDITIONS = ["note", "machine", "maintained"]
SPEED_COLUMNS = ["case", *_TIMING, *_CONDITIONS]
ZOO_COLUMNS = ["model", *_TIMING, "import_mb", "peak_mb", *_CONDITIONS]
#: Who made a portable fit's step model: onnxruntime-training 1.19.2's gradient builder, its
#: contrib operators lowered to standard ones (``export_training_step``'s default), or
#: :mod:`helpers.portable.gradients` (``gradient_builder="onnx"``).
LOWERED, BUILT = "lowered", "built"
#: The goal of a step of the linear fit with the epoch loop, in seconds (the runtime's floor:
#: ``results/loop_floor.md``, :mod:`benchmarks.studies.loop_floor`).
LINEAR_GOAL_S = 5e-6
#: The frameworks of a case's table, in order, and what the tables call them.
NAMES = {
    fw.SKLEARN: "SGDRegressor",
    fw.ORT_WHOLE: "whole-training",
    fw.PORTABLE_STEP: "portable step",
    fw.PORTABLE_EPOCH_LOOP: "portable epoch loop",
    fw.TORCH: "torch eager",
}
#: How the note of a model whose step model was refused begins (then ``DOMAIN:OPERATOR (from the
#: layer LAYER)``); a fit that failed otherwise has a note beginning with :data:`FAILED`.
REFUSED = "refused: "
FAILED = "failed: "
#: A ratio whose either timing spread more than :data:`~helpers.measure.conditions.NOISY_SPREAD`.
NOISY_MARK = "*"


def maintained_runtime(df):
    """Each row's maintained runtime, ``'onnxruntime 1.31.1'``, read from its ``maintained``.

    Examples
    --------
    >>> maintained_runtime(pd.DataFrame({"maintained": ["onnxruntime 1.31.1, Python 3.13.0"]}))
    0    onnxruntime 1.31.1
    Name: maintained, dtype: object
    """
    return df.maintained.astype(str).str.split(",").str[0]


def section_rows(df):
    """The rows the section reads: the peers' and the lowered step's on the maintained runtime.

    A file written before the ``builder`` and ``runtime`` columns is read whole; None stays None.

    Examples
    --------
    >>> df = pd.DataFrame({
    ...     "framework": ["ort whole-training"] + ["portable step"] * 3,
    ...     "builder": [None, "lowered", "built", "lowered"],
    ...     "runtime": [None, "onnxruntime 1.31.1", "onnxruntime 1.31.1", "onnxruntime 1.19.2"],
    ...     "maintained": "onnxruntime 1.31.1, Python 3.13.0"})
    >>> section_rows(df).index.tolist()
    [0, 1]
    """
    if df is None or "builder" not in df:
        return df
    keep = df.builder.isna() | (df.builder == LOWERED)
    if "runtime" in df and "maintained" in df:
        keep &= df.runtime.isna() | (df.runtime == maintained_runtime(df))
    return df[keep]


def _reference(frameworks):
    """The framework a case's ratios are taken to: ``SGDRegressor`` where it ran, else the
    whole-training API."""
    return fw.SKLEARN if fw.SKLEARN in set(frameworks) else fw.ORT_WHOLE


def ratios(df, group="case", reference=None):
    """Each row's step over its group's reference step, and whether that ratio is noisy.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of ``portable_speed.csv`` (``group="case"``) or ``portable_zoo.csv`` (``"model"``).
    reference : str, optional
        The framework of the denominator; by default ``scikit-learn`` where the group has it,
        else the whole-training API.

    Returns
    -------
    pandas.DataFrame
        ``df`` with ``reference``, ``ratio`` (NaN where either step is missing) and ``noisy``
        (either spread over :data:`~helpers.measure.conditions.NOISY_SPREAD`).

    Examples
    --------
    >>> df = pd.DataFrame({"case": "c", "framework": ["ort whole-training", "portable step"],
    ...                    "step_s": [2e-4, 1e-4], "spread": [1.1, 2.5]})
    >>> ratios(df)[["framework", "reference", "ratio", "noisy"]]
                framework           reference  ratio  noisy
    0  ort whole-training  ort whole-training    1.0  False
    1       portable step  ort whole-training    0.5   True
    """
    parts = []
    for _, part in df.groupby(group, sort=False):
        name = reference or _reference(part.framework)
        base = part[part.framework == name]
        step = base.step_s.iloc[0] if len(base) else math.nan
        spread = base.spread.iloc[0] if len(base) else math.nan
        parts.append(
            part.assign(
                reference=name,
                ratio=part.step_s / step,
                noisy=(part.spread > NOISY_SPREAD) | (spread > NOISY_SPREAD),
            )
        )
    return pd.concat(parts) if parts else df.assign(reference=[], ratio=[], noisy=[])


def ratio_of(table, case, framework):
    """``(ratio, noisy)`` of one framework of one case of :func:`ratios`, or ``(nan, False)``.

    Examples
    --------
    >>> table = pd.DataFrame({"case": ["MLP"], "framework": ["portable step"], "ratio": [1.5],
    ...                       "noisy": [True]})
    >>> [(float(r), noisy) for r, noisy in (ratio_of(table, "MLP", f) for f in
    ...                                     ("portable step", "torch eager"))]
    [(1.5, True), (nan, False)]
    """
    row = table[(table.case == case) & (table.framework == framework)]
    return (row.ratio.iloc[0], bool(row.noisy.iloc[0])) if len(row) else (math.nan, False)


def _times(ratio, noisy):
    """``'8.1x'``, ``'8.1x (noisy)'``; ``'not measured'`` for NaN."""
    if not math.isfinite(ratio):
        return "not measured"
    return f"{ratio:.1f}x" + (" (noisy)" if noisy else "")


def answer_sentence(speed):
    """The first two goals: a step of the linear fit with the epoch loop (at most
    :data:`LINEAR_GOAL_S`), a step of the MLP against whole-training's (no slower).

    Parameters
    ----------
    speed : pandas.DataFrame
        Rows of ``portable_speed.csv``: a case whose ``scikit-learn`` row exists is the linear fit,
        the others are set against the whole-training API.

    Examples
    --------
    >>> speed = pd.DataFrame({
    ...     "case": ["linear regression"] * 4 + ["MLP 100-50-1 (batch 100)"] * 3,
    ...     "framework": ["scikit-learn", "ort whole-training", "portable step",
    ...                   "portable epoch loop", "ort whole-training", "portable step",
    ...                   "portable epoch loop"],
    ...     "threads": [1] * 4 + [2] * 3,
    ...     "step_s": [1e-7, 1.2e-5, 1.7e-5, 6e-6, 1e-4, 9e-5, 8e-5],
    ...     "spread": [1.2, 1.1, 1.3, 3.0, 1.1, 1.1, 1.2]})
    >>> print(answer_sentence(speed))
    With the epoch loop, a step of the linear regression on 1 thread takes 6 us (noisy), 60.0x \
SGDRegressor's (goal: at most 5 us, the runtime's floor; whole-training: 120.0x), missed; a step \
of the MLP 100-50-1 (batch 100) on 2 threads is 1.2x faster than whole-training's (goal: no \
slower), met.
    """
    table = ratios(speed)
    parts = []
    for case, group in table.groupby("case", sort=False):
        loop, noisy = ratio_of(table, case, fw.PORTABLE_EPOCH_LOOP)
        threads = group.threads.iloc[0]
        where = f"the {case} on {threads} thread{'s' if threads != 1 else ''}"
        if not math.isfinite(loop):
            parts.append(f"{where} was not measured")
            continue
        if group.reference.iloc[0] == fw.SKLEARN:
            whole, _ = ratio_of(table, case, fw.ORT_WHOLE)
            step = group[group.framework == fw.PORTABLE_EPOCH_LOOP].step_s.iloc[0]
            met = step <= LINEAR_GOAL_S
            said = (
                f"a step of {where} takes {_microseconds(step)}{' (noisy)' if noisy else ''}, "
                f"{_times(loop, False)} SGDRegressor's (goal: at most "
                f"{_microseconds(LINEAR_GOAL_S)}, the runtime's floor; whole-training: "
                f"{_times(whole, False)})"
            )
        else:
            met = verdict(loop) != "slower"
            said = (
                f"a step of {where} is {_against(loop, noisy)} whole-training's (goal: no slower)"
            )
        parts.append(f"{said}, {'met' if met else 'missed'}")
    return "With the epoch loop, " + "; ".join(parts) + "."


def _against(ratio, noisy=False):
    """``'1.2x faster than'``, ``'as fast as'``: a time ratio before its peer's name."""
    noisy = " (noisy)" if noisy else ""
    if verdict(ratio) == "same":
        return f"as fast{noisy} as"
    return f"{speed_phrase(ratio)}{noisy} than"


def _cell(ratio, noisy):
    """A ratio in the summary's convention (``'2.0x faster'``), :data:`NOISY_MARK` when noisy."""
    return speed_phrase(ratio) + (NOISY_MARK if noisy and math.isfinite(ratio) else "")


def _microseconds(seconds):
    """``'1.2 us'``, ``'340 us'``: a step in microseconds, two significant digits."""
    return "-" if not math.isfinite(seconds) else f"{float(f'{seconds * 1e6:.2g}'):g} us"


def speed_table(speed):
    """One row per case: the reference's step, then every other framework's against it.

    Examples
    --------
    >>> speed = pd.DataFrame({"case": "MLP", "framework": ["ort whole-training", "portable step"],
    ...                       "threads": 2, "step_s": [1e-4, 5e-5], "spread": [1.1, 1.1]})
    >>> print(speed_table(speed).iloc[0].to_string())  # doctest: +NORMALIZE_WHITESPACE
    case                           MLP
    step of the reference    whole-training: 100 us
    portable step                  2.0x faster
    """
    table = ratios(speed)
    rows = []
    for case, group in table.groupby("case", sort=False):
        reference = group.reference.iloc[0]
        base = group[group.framework == reference].step_s
        row = {
            "case": case,
            "step of the reference": f"{NAMES[reference]}: "
            + _microseconds(base.iloc[0] if len(base) else math.nan),
        }
        for framework in NAMES:
            if framework != reference and framework in set(group.framework):
                ratio, noisy = ratio_of(table, case, framework)
                row[NAMES[framework]] = _cell(ratio, noisy)
        rows.append(row)
    return pd.DataFrame(rows)


def _zoo_label(model):
    return model_label(ZOO[model][0], model) if model in ZOO else model


def zoo_table(zoo):
    """One row per zoo model: both portable steps and torch's against the whole-training API's,
    and the peak memory of each framework's process; a refusal instead of the portable figures.

    Examples
    --------
    >>> zoo = pd.DataFrame({
    ...     "model": ["resnet_small"] * 4,
    ...     "framework": ["ort whole-training", "torch eager", "portable step",
    ...                   "portable epoch loop"],
    ...     "step_s": [0.02, 0.01, 0.03, 0.024], "spread": [1.1, 1.1, 1.2, 2.5],
    ...     "peak_mb": [550.0, 360, 120, 125], "note": ""})
    >>> print(zoo_table(zoo).iloc[0].to_string())  # doctest: +NORMALIZE_WHITESPACE
    model                            ResNet-style CNN (small)
    vs whole-training: portable step              1.5x slower
    epoch loop                                    1.2x slower*
    torch eager                                   2.0x faster
    peak MB: portable / whole-training / torch   120 / 550 / 360
    """
    table = ratios(zoo, group="model", reference=fw.ORT_WHOLE)
    rows = []
    for model, group in table.groupby("model", sort=False):
        by = group.set_index("framework")

        def cell(framework, by=by):
            if framework not in by.index:
                return "-"
            row = by.loc[framework]
            return _cell(row.ratio, bool(row.noisy))

        def peak(framework, by=by):
            value = by.peak_mb.get(framework, math.nan) if "peak_mb" in by else math.nan
            return "-" if not math.isfinite(value) else f"{value:.0f}"

        refused = _why_not(by.note.get(fw.PORTABLE_STEP, "") if "note" in by else "")
        rows.append(
            {
                "model": _zoo_label(model),
                "vs whole-training: portable step": refused or cell(fw.PORTABLE_STEP),
                "epoch loop": "-" if refused else cell(fw.PORTABLE_EPOCH_LOOP),
                "torch eager": cell(fw.TORCH),
                "peak MB: portable / whole-training / torch": " / ".join(
                    peak(f) for f in (fw.PORTABLE_STEP, fw.ORT_WHOLE, fw.TORCH)
                ),
            }
        )
    return pd.DataFrame(rows)


def zoo_sentence(zoo):
    """How many zoo models the step model trains, its step and peak memory against the peers.

    Examples
    --------
    >>> zoo = pd.DataFrame({
    ...     "model": ["a"] * 4 + ["b"] * 4,
    ...     "framework": ["ort whole-training", "torch eager", "portable step",
    ...                   "portable epoch loop"] * 2,
    ...     "batch_size": 64, "threads": 2,
    ...     "step_s": [0.02, 0.01, 0.03, 0.025, 0.01, 0.01, None, None],
    ...     "spread": 1.1, "peak_mb": [550.0, 360, 120, 121, 400, 300, None, None],
    ...     "note": [""] * 6 + ["refused: com.microsoft:Round (from the layer /r/Round)"] * 2})
    >>> print(zoo_sentence(zoo))
    The zoo (batch 64, 2 threads): 1 of 2 step models train (refused: Round), a step 1.5x \
slower than whole-training's (epoch loop: 1.2x slower); no slower for 0 of 2 (goal: every \
model), missed; the runner peaks at 120 MB, torch eager at 360 MB (no higher for 1 of 1).
    """
    table = ratios(zoo, group="model", reference=fw.ORT_WHOLE)
    portable = table[table.framework == fw.PORTABLE_STEP]
    why = portable.note.map(_why_not)
    refused = why[why.str.startswith(REFUSED)].str.removeprefix(REFUSED)
    trained = portable[portable.step_s.notna()]
    loop = table[(table.framework == fw.PORTABLE_EPOCH_LOOP) & table.step_s.notna()]
    said = (
        f"The zoo (batch {table.batch_size.iloc[0]}, {table.threads.iloc[0]} threads): "
        f"{len(trained)} of {table.model.nunique()} step models train"
    )
    failed = why.str.startswith(FAILED).sum()
    if len(refused) or failed:
        said += (
            " ("
            + "; ".join(
                ([f"refused: {', '.join(sorted(set(refused)))}"] if len(refused) else [])
                + ([f"{failed} failed"] if failed else [])
            )
            + ")"
        )
    if len(trained):
        torch_peak = table[table.framework == fw.TORCH].set_index("model").peak_mb
        torch_peak = torch_peak.reindex(trained.model).to_numpy()
        lower = int((trained.peak_mb.to_numpy() <= torch_peak).sum())
        steps, noisy = _clean_span(trained)
        loops, loop_noisy = _clean_span(loop)
        omitted = f"; {noisy + loop_noisy} noisy omitted" if noisy + loop_noisy else ""
        no_slower, models = _no_slower(table)
        goal = "met" if no_slower == models else "missed"
        said += (
            f", a step {steps} {'as' if steps.endswith('same') else 'than'} whole-training's "
            f"(epoch loop: {loops}{omitted}); no slower for {no_slower} of "
            f"{models} (goal: every model), {goal}; the runner "
            f"peaks at {value_range(trained.peak_mb, '{:.0f}')} "
            f"MB, torch eager at {value_range(torch_peak[pd.notna(torch_peak)], '{:.0f}')} MB "
            f"(no higher for {lower} of {len(trained)})"
        )
    return said + "."


def slower_models(table):
    """The models of a :func:`ratios` table of the zoo whose portable step trained slower than
    whole-training's.

    Examples
    --------
    >>> zoo = pd.DataFrame({"model": ["a", "a", "b", "b"], "step_s": [0.02, 0.03, 0.01, 0.01],
    ...                     "framework": ["ort whole-training", "portable step"] * 2,
    ...                     "spread": 1.1})
    >>> slower_models(ratios(zoo, group="model", reference="ort whole-training"))
    ['a']
    """
    trained = table[(table.framework == fw.PORTABLE_STEP) & table.step_s.notna()]
    return [row.model for row in trained.itertuples() if verdict(row.ratio) == "slower"]


def _no_slower(table):
    """``(models whose portable step is no slower than whole-training's, models)`` of a
    :func:`ratios` table of the zoo (a refused step counts as slower)."""
    trained = table[(table.framework == fw.PORTABLE_STEP) & table.step_s.notna()]
    return len(trained) - len(slower_models(table)), table.model.nunique()


def zoo_goal_sentence(zoo):
    """The third goal in a sentence: the zoo models whose portable step is no slower.

    Examples
    --------
    >>> zoo = pd.DataFrame({"model": ["a", "a", "b", "b"], "batch_size": 64, "threads": 2,
    ...                     "framework": ["ort whole-training", "portable step"] * 2,
    ...                     "step_s": [0.02, 0.019, 0.01, 0.02], "spread": 1.1})
    >>> print(zoo_goal_sentence(zoo))
    In the zoo (batch 64, 2 threads), a portable step is no slower than whole-training's for 1 \
of 2 models (goal: every model), missed.
    """
    table = ratios(zoo, group="model", reference=fw.ORT_WHOLE)
    no_slower, models = _no_slower(table)
    return (
        f"In the zoo (batch {table.batch_size.iloc[0]}, {table.threads.iloc[0]} threads), a "
        f"portable step is no slower than whole-training's for {no_slower} of {models} models "
        f"(goal: every model), {'met' if no_slower == models else 'missed'}."
    )


def _why_not(note):
    """``'refused: Gelu'`` for a refused step model (its operator), ``'failed: ...'``, or ``''``.

    Examples
    --------
    >>> _why_not("refused: com.microsoft:Gelu (from the layer /act/Gelu)"), _why_not(math.nan)
    ('refused: Gelu', '')
    """
    if not isinstance(note, str):
        return ""
    if note.startswith(REFUSED):
        return REFUSED + note.removeprefix(REFUSED).split(" ")[0].split(":")[-1]
    return note if note.startswith(FAILED) else ""


def _clean_span(rows):
    """:func:`_span` of the ratios of ``rows`` that are not noisy, and how many noisy ones it
    leaves out."""
    measured = rows[rows.ratio.notna()]
    noisy = measured.noisy.astype(bool)
    return _span(measured.ratio[~noisy]), int(noisy.sum())


def _span(values):
    """A range of time ratios in words: ``'1.2x faster to 1.5x slower'``, or one phrase."""
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "not measured"
    low, high = (
        speed_phrase(v).replace("same", "about the same") for v in (min(values), max(values))
    )
    if low == high:
        return low
    if verdict(min(values)) == verdict(max(values)) == "slower":
        return f"{min(values):.1f}x to {max(values):.1f}x slower"
    if verdict(min(values)) == verdict(max(values)) == "faster":
        return f"{1 / max(values):.1f}x to {1 / min(values):.1f}x faster"
    return f"from {low} to {high}"


def _conditions(frames, tabled, noisy="noisy (a timing's repeats spread over {:.0f}x)"):
    """The runtimes and the machine of the first frame; the noisy mark's meaning (``noisy``,
    formatted with :data:`~helpers.measure.conditions.NOISY_SPREAD`) where a table of ``tabled``
    has one."""
    first = frames[0].iloc[0]
    lines = [f"Portable fits: {first.maintained}; {first.machine}."]
    groups = {id(f): "case" if "case" in f else "model" for f in tabled}
    if any(ratios(f, groups[id(f)]).noisy.any() for f in tabled):
        lines.append(f"{NOISY_MARK}: {noisy.format(NOISY_SPREAD)}.")
    return lines


def portable_markdown(speed, zoo, zoo_table_too=True, noisy=None):
    """The answer, its table, the zoo's sentence and table: markdown (either frame may be None).

    ``zoo_table_too=False`` leaves the zoo's table out (the summary's page has
    :func:`portable_details` hold it); ``noisy`` says what the noisy mark means (a sentence by
    default).

    Examples
    --------
    >>> speed = pd.DataFrame({"case": "MLP", "framework": ["ort whole-training", "portable step"],
    ...                       "threads": 2, "step_s": [1e-4, 5e-5], "spread": [3.0, 1.1],
    ...                       "machine": "AMD EPYC",
    ...                       "maintained": "onnxruntime 1.31.1, Python 3.13.0"})
    >>> print(portable_markdown(speed, None))  # doctest: +NORMALIZE_WHITESPACE
    With the epoch loop, the MLP on 2 threads was not measured.
    <BLANKLINE>
    | case | step of the reference | portable step |
    | --- | --- | --- |
    | MLP | whole-training: 100 us | 2.0x faster* |
    <BLANKLINE>
    Portable fits: onnxruntime 1.31.1, Python 3.13.0; AMD EPYC.
    *: noisy (a timing's repeats spread over 2x).
    """
    speed, zoo = _rows(speed), _rows(zoo)
    lines, tabled = [], []
    if speed is not None:
        lines += [answer_sentence(speed), "", *markdown_table(speed_table(speed)), ""]
        tabled.append(speed)
    if zoo is not None:
        lines += [zoo_sentence(zoo), ""]
        if zoo_table_too:
            lines += [*markdown_table(zoo_table(zoo)), ""]
            tabled.append(zoo)
    frames = [f for f in (speed, zoo) if f is not None]
    said = _conditions(frames, tabled, *([noisy] if noisy else [])) if frames else []
    return "\n".join(lines + said)


def read_portable(results):
    """``(speed, zoo)``: the study's two files beside ``results`` or above it, each or None.

    Examples
    --------
    >>> read_portable("no such folder")
    (None, None)
    """
    paths = [results_file(results, name) for name in (PORTABLE_SPEED_CSV, PORTABLE_ZOO_CSV)]
    return tuple(None if path is None else pd.read_csv(path) for path in paths)


def portable_section(results):
    """The summary's lines on the step model on the maintained runtime; none before the study ran.

    The three goals in short, links to why the missed ones are missed, the fastest engine per
    zoo model; the tables and the figures behind them are in ``details.md``
    (:func:`portable_details`).

    Examples
    --------
    >>> portable_section("no such folder")
    []
    """
    speed, zoo = (_rows(frame) for frame in read_portable(results))
    if speed is None and zoo is None:
        return []
    links = [
        f"[{name}]({os.path.relpath(path, results)})"
        for name in (PORTABLE_SPEED_CSV, PORTABLE_ZOO_CSV)
        if (path := results_file(results, name)) is not None
    ]
    lines = ["## Training on the maintained onnxruntime", ""]
    if speed is not None:
        lines += [answer_sentence(speed), ""]
    if zoo is not None:
        lines += [zoo_goal_sentence(zoo), ""]
    lines += _why_and_engines(results)
    lines += [
        *_conditions([f for f in (speed, zoo) if f is not None], [], noisy=""),
        f"Tables: [details](details.md); rows: {', '.join(links)} (`{PORTABLE_COMMAND}`).",
        "",
    ]
    return lines


def _rows(frame):
    """:func:`section_rows` of ``frame``, None for a missing or empty one."""
    frame = section_rows(frame)
    return None if frame is None or frame.empty else frame


def _studies(results):
    """Each study beside ``results`` that explains a goal: ``(file name, its first line, its
    link from results)``."""
    found = []
    for name in ("loop_floor.md", "step_profiles.md"):
        path = results_file(results, name)
        if path is not None:
            with open(path) as file:
                found.append((name, file.readline().strip(), os.path.relpath(path, results)))
    return found


def _engines_lines(results, short):
    """The answer of ``step_engines.csv`` beside ``results``, linked to its page: the short
    one of the summary or the whole one (:mod:`benchmarks.report.step_engines`); none without
    the file."""
    from benchmarks.report import step_engines  # noqa: PLC0415

    path = results_file(results, "step_engines.csv")
    if path is None:
        return []
    link = os.path.relpath(path, results).removesuffix(".csv") + ".md"
    answer = (step_engines.short_answer if short else step_engines.answer_sentence)(
        pd.read_csv(path)
    )
    return [f"{answer} ([{os.path.basename(link)}]({link}))", ""]


def _why_and_engines(results):
    """The summary's links to why the missed goals are missed and its fastest engine per zoo
    model (:func:`benchmarks.report.step_engines.short_answer`), where those studies ran.

    Examples
    --------
    >>> _why_and_engines("no such folder")
    []
    """
    lines = []
    studies = _studies(results)
    if studies:
        what = {"loop_floor.md": "what a node costs", "step_profiles.md": "the slower steps"}
        said = ", ".join(f"[{name}]({link}) ({what[name]})" for name, _, link in studies)
        lines += [f"Why the missed goals are missed: {said}.", ""]
    return lines + _engines_lines(results, short=True)


def portable_details(results):
    """The lines of ``details.md`` on the step model: the goals, the tables, the studies'
    answers; none before the study ran.

    Examples
    --------
    >>> portable_details("no such folder")
    []
    """
    speed, zoo = (_rows(frame) for frame in read_portable(results))
    if speed is None and zoo is None:
        return []
    lines = ["### Training on the maintained onnxruntime", "", portable_markdown(speed, zoo), ""]
    for name, answer, link in _studies(results):
        lines += [f"{answer} ([{name}]({link}))", ""]
    return lines + _engines_lines(results, short=False)
