"""The tables of ``backend_steps``: each run's step against the training package's.

Rows of ``backend_steps.csv`` (:data:`benchmarks.report.backend_section.COLUMNS`): for each case
(an MLP of the grid, a zoo model), API and run (a backend on an onnxruntime), the marginal step
and its spread, and the first steps' losses. :func:`ratios` sets each step against the training
package's for the same case and API; the tables read them (:func:`step_table`: every run,
:func:`summary_table`: the training package's and the maintained runtime's, :func:`answer_table`:
per group of cases).
"""

import math

import numpy as np
import pandas as pd

from benchmarks.example_models import ZOO
from benchmarks.report.ratios import span_phrase, speed_phrase
from benchmarks.report.zoo_summary import model_label
from helpers.measure.conditions import NOISY_SPREAD

#: The training package's backend: the reference of every ratio.
TRAINING = "onnxruntime-training"
#: Losses within this relative distance of the training package's agree: float32 rounding
#: (other kernels, other orders of summation), a few steps on.
AGREE_WITHIN = 1e-4
#: The APIs as the tables name them.
API_NAMES = {"ort whole-training": "whole-training", "ort forward-backward": "forward/backward"}
#: A timing whose repeats spread more than :data:`~helpers.measure.conditions.NOISY_SPREAD`.
NOISY_MARK = "*"
#: The groups of cases, as the answer names them.
KINDS = {"mlp": "the MLP grid", "zoo": "the zoo"}
ORDER = {kind: k for k, kind in enumerate(KINDS)}


def loss_gap(losses, reference):
    """The largest relative distance between two lists of losses, step by step.

    Examples
    --------
    >>> round(loss_gap([1.0, 0.5], [1.0, 0.5004]), 6)
    0.000799
    >>> loss_gap([1.0], [1.0])
    0.0
    """
    gaps = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, reference)]
    return float(max(gaps)) if gaps else math.nan


def run_label(backend, runtime):
    """``'onnx on 1.31.1'``, ``'training package on 1.19.2'``: a run in a table's words.

    Examples
    --------
    >>> run_label("onnxruntime-training", "onnxruntime 1.19.2"), run_label("onnx", None)
    ('training package on 1.19.2', 'onnx')
    """
    name = "training package" if backend == TRAINING else str(backend)
    return name if not isinstance(runtime, str) else f"{name} on {runtime.split()[-1]}"


def ratios(df):
    """Each row's step over the training package's for its case and API, whether either timing
    is noisy, and its run's label (``run``).

    Examples
    --------
    >>> df = pd.DataFrame({"case": "c", "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"],
    ...                    "runtime": "onnxruntime 1.19.2", "step_s": [2e-4, 3e-4],
    ...                    "spread": [1.1, 2.5]})
    >>> ratios(df)[["run", "ratio", "noisy"]]  # doctest: +NORMALIZE_WHITESPACE
                              run  ratio  noisy
    0  training package on 1.19.2    1.0  False
    1               onnx on 1.19.2    1.5   True
    """
    if "kind" in df:  # the MLP grid first, then the zoo, each in the order measured
        df = df.sort_values("kind", key=lambda k: k.map(ORDER).fillna(len(ORDER)), kind="stable")
    df = df.assign(run=[run_label(b, r) for b, r in zip(df.backend, df.runtime)])
    noisy = (df.spread > NOISY_SPREAD) | df.step_s.isna()
    if "note" in df:
        noisy |= df.note.map(lambda note: isinstance(note, str) and "not measurable" in note)
    df = df.assign(noisy=noisy)
    base = df[df.backend == TRAINING].set_index(["case", "api"])
    keys = list(zip(df.case, df.api))
    step = base.step_s.reindex(keys).to_numpy()
    base_noisy = base.noisy.reindex(keys).fillna(True).to_numpy(dtype=bool)
    return df.assign(ratio=df.step_s.to_numpy() / step, noisy=df.noisy.to_numpy() | base_noisy)


def label(case):
    """A case as the tables name it: a zoo model by its family and size, an MLP as it is.

    Examples
    --------
    >>> label("resnet_small"), label("MLP 10-50-1@100")
    ('ResNet-style CNN (small)', 'MLP 10-50-1@100')
    """
    return model_label(ZOO[case][0], case) if case in ZOO else case


def _time(seconds):
    """``'120 us'``, ``'3.4 ms'``, ``'1.2 s'``: two significant digits; ``'-'`` for NaN.

    Examples
    --------
    >>> _time(1.234e-4), _time(0.0009996), _time(2.5), _time(float("nan"))
    ('120 us', '1 ms', '2.5 s', '-')
    """
    if not isinstance(seconds, float | int) or not math.isfinite(seconds):
        return "-"
    seconds = float(f"{seconds:.2g}")
    for unit, scale in (("us", 1e6), ("ms", 1e3)):
        if seconds * scale < 1000:
            return f"{float(f'{seconds * scale:.2g}'):g} {unit}"
    return f"{seconds:g} s"


def _cell(row, with_ratio=True):
    """A run's step in a table: its time, its ratio to the training package's, the noisy mark."""
    if not math.isfinite(row.step_s if isinstance(row.step_s, float) else math.nan):
        return "failed" if str(row.note).startswith("failed") else "-"
    mark = NOISY_MARK if row.noisy else ""
    if not with_ratio or row.backend == TRAINING:
        return _time(row.step_s) + mark
    return f"{_time(row.step_s)} ({speed_phrase(row.ratio)}{mark})"


def _agreement(part):
    """``'yes (2e-07)'``, ``'NO (3e-02)'``: whether a case's losses agree, its largest gap."""
    gaps = part.loss_gap[part.backend != TRAINING].dropna()
    if gaps.empty:
        return "-"
    return f"{'yes' if gaps.max() <= AGREE_WITHIN else 'NO'} ({gaps.max():.0e})"


def step_table(df):
    """One row per case and API: the training package's step, each other run's and its ratio,
    and whether the first losses agreed.

    Examples
    --------
    >>> df = pd.DataFrame({"case": "MLP 3-4-1@8", "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"],
    ...                    "runtime": ["onnxruntime 1.19.2", "onnxruntime 1.31.1"],
    ...                    "step_s": [2e-4, 1e-4], "spread": 1.1, "loss_gap": [0.0, 1e-7],
    ...                    "note": ""})
    >>> print(step_table(df).iloc[0].to_string())  # doctest: +NORMALIZE_WHITESPACE
    case                          MLP 3-4-1@8
    API                        whole-training
    training package on 1.19.2         200 us
    onnx on 1.31.1          100 us (2.0x faster)
    first losses agree             yes (1e-07)
    """
    table = ratios(df)
    runs = list(dict.fromkeys(table.run))
    rows = []
    for (case, api), part in table.groupby(["case", "api"], sort=False):
        by = {row.run: row for row in part.itertuples()}
        row = {"case": label(case), "API": API_NAMES.get(api, api)}
        row.update({run: _cell(by[run]) if run in by else "-" for run in runs})
        rows.append({**row, "first losses agree": _agreement(part)})
    return pd.DataFrame(rows)


def group_table(df, maintained, spans=True):
    """One row per group of cases and API: the training package's steps and ``maintained``'s (a
    run's label), from the shortest to the longest, and the latter against the former (the
    geometric mean of the clean ratios, their span unless ``spans`` is False).

    Examples
    --------
    >>> df = pd.DataFrame({"kind": "mlp", "case": ["a", "a", "b", "b"],
    ...                    "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"] * 2,
    ...                    "runtime": ["onnxruntime 1.19.2", "onnxruntime 1.31.1"] * 2,
    ...                    "step_s": [2e-4, 1e-4, 3e-3, 3e-3], "spread": 1.1})
    >>> print(group_table(df, "onnx on 1.31.1").iloc[0].to_string())
    ... # doctest: +NORMALIZE_WHITESPACE
    cases                                                   the MLP grid (2)
    API                                                       whole-training
    training package on 1.19.2                              200 us to 3 ms
    onnx on 1.31.1                                          100 us to 3 ms
    onnx on 1.31.1 vs training package  1.4x faster (from 2.0x faster to about the same)
    """
    table = ratios(df)
    training = run_label(TRAINING, runtime_of(table, TRAINING))
    rows = []
    for (kind, api), part in table.groupby(["kind", "api"], sort=False):
        row = {"cases": f"{KINDS.get(kind, kind)} ({part.case.nunique()})", "API": API_NAMES[api]}
        for run in (training, maintained):
            steps = part.step_s[(part.run == run) & part.step_s.notna()]
            low, high = (_time(steps.min()), _time(steps.max())) if len(steps) else ("-", "-")
            row[run] = low if low == high else f"{low} to {high}"
        row[f"{maintained} vs training package"] = _summary_of(part[part.run == maintained], spans)
        rows.append(row)
    return pd.DataFrame(rows)


def runtime_of(df, backend):
    """The ``runtime`` of ``backend``'s first row in ``df``, or None.

    Examples
    --------
    >>> runtime_of(pd.DataFrame({"backend": ["onnx"], "runtime": ["onnxruntime 1.31.1"]}), "onnx")
    'onnxruntime 1.31.1'
    """
    runtimes = df.runtime[df.backend == backend].dropna()
    return runtimes.iloc[0] if len(runtimes) else None


def geometric_mean(values):
    """The geometric mean of positive ratios.

    Examples
    --------
    >>> round(geometric_mean([0.5, 2.0]), 6)
    1.0
    """
    return float(np.exp(np.mean(np.log(values))))


def _summary_of(part, spans=True):
    """``'1.2x slower (from 1.1x faster to 1.5x slower)'`` of a set of ratios: the geometric mean
    of the clean ones, their span, how many noisy ones are left out.

    Examples
    --------
    >>> part = pd.DataFrame({"ratio": [1.2, 0.5, 2.0], "noisy": [False, False, True]})
    >>> _summary_of(part)
    '1.3x faster (from 2.0x faster to 1.2x slower; 1 noisy left out)'
    >>> _summary_of(part.iloc[[0, 2]])
    '1.2x slower (1 noisy left out)'
    """
    clean = part.ratio[~part.noisy & part.ratio.notna()]
    if clean.empty:
        return "not measured"
    noisy = int((part.noisy & part.ratio.notna()).sum())
    said = speed_phrase(geometric_mean(clean)).replace("same", "about the same")
    details = ([span_phrase(list(clean))] if spans and len(clean) > 1 else []) + (
        [f"{noisy} noisy left out"] if noisy else []
    )
    return said + (f" ({'; '.join(details)})" if details else "")


def answer_table(df):
    """The small table of the answer: per group of cases and API, each ``onnx`` run against the
    training package (geometric mean of the clean ratios, their span).

    Examples
    --------
    >>> df = pd.DataFrame({"kind": "mlp", "case": ["a", "a", "b", "b"],
    ...                    "api": "ort whole-training",
    ...                    "backend": ["onnxruntime-training", "onnx"] * 2,
    ...                    "runtime": "onnxruntime 1.31.1", "step_s": [1.0, 2.0, 1.0, 0.5],
    ...                    "spread": 1.1})
    >>> print(answer_table(df).iloc[0].to_string())  # doctest: +NORMALIZE_WHITESPACE
    cases                                                             the MLP grid (2)
    API                                                                 whole-training
    onnx on 1.31.1 vs training package  about the same (from 2.0x faster to 2.0x slower)
    """
    table = ratios(df)
    others = [run for run in dict.fromkeys(table.run[table.backend != TRAINING])]
    rows = []
    for (kind, api), part in table.groupby(["kind", "api"], sort=False):
        row = {"cases": f"{KINDS.get(kind, kind)} ({part.case.nunique()})", "API": API_NAMES[api]}
        for run in others:
            row[f"{run} vs training package"] = _summary_of(part[part.run == run])
        rows.append(row)
    return pd.DataFrame(rows)
