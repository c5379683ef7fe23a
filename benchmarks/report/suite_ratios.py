"""One line per peer for the whole suite: is onnxruntime faster than torch, scikit-learn?

Every configuration of the grid (the ``torch``, ``sklearn`` and ``scaling``
benchmarks) and of the model zoo (``your_model``) trained with plain SGD
gives, against each peer it ran, the time of onnxruntime's faster API (the
faster of whole-training and forward/backward in that configuration) over
the peer's: a step's time against torch, a whole fit's against scikit-learn.
A configuration is *clean* when none of its timings carries a caveat
(noisy repeats, a busy machine, shared cores, a time not measurable:
:mod:`benchmarks.report.caveats`); only clean configurations make the geometric
mean, the range and the count of wins, and the others are counted apart.
Every ratio reads in one convention, ``'1.7x faster'`` or ``'2.2x slower'``
(:func:`benchmarks.report.ratios.speed_phrase`).
"""

import numpy as np
import pandas as pd

from benchmarks.report.caveats import ratio_caveat
from benchmarks.report.details import markdown_table
from benchmarks.report.ratios import framework_ratios, span_phrase, speed_phrase, verdict

#: The two onnxruntime APIs, as in the records, and their short names.
APIS = {"ort whole-training": "whole-training", "ort forward-backward": "forward/backward"}
#: The peers, in the order the summary answers them.
PEERS = ("torch eager", "torch.compile", "scikit-learn")
#: Each benchmark: the time its ratios compare.
MEASURES = {
    "torch": "time_per_update_s",
    "scaling": "time_per_update_s",
    "your_model": "time_per_update_s",
    "sklearn": "fit_time_s",
}
#: The columns that tell two configurations of a benchmark apart.
CONFIGURATION = ("model", "n_samples", "n_features", "hidden", "batch_size", "epochs")
#: The table's headers for the columns of :func:`suite_table`.
SHORT_NAMES = {
    "configurations": "clean",
    "onnxruntime wins": "wins",
    "geometric mean": "geometric mean",
    "range": "range",
    "left out": "not clean",
    "whole-training": "whole-training",
}
_COLUMNS = ["machine", "benchmark", "configuration", "threads", "peer", "api", "ratio", "caveat"]


def suite_ratios(df):
    """Per machine, configuration, thread count and peer: the faster API's time over the peer's.

    Parameters
    ----------
    df : pandas.DataFrame
        Every row of a sweep (:func:`benchmarks.report.aggregate.load_rows`: ``caveat`` per row).

    Returns
    -------
    pandas.DataFrame
        Columns ``machine``, ``benchmark``, ``configuration``, ``threads``, ``peer``, ``api`` (the
        faster one), ``ratio`` and ``caveat`` (the caveats of every timing the choice rests on:
        ``''`` for a clean configuration).

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "torch", "machine": "m", "threads": 2, "model": "mlp",
    ...                    "caveat": "", "time_per_update_s": [2.0, 1.0, 0.5],
    ...                    "framework": ["torch eager", "ort whole-training",
    ...                                  "ort forward-backward"]})
    >>> suite_ratios(df)[["peer", "api", "ratio"]].to_numpy().tolist()
    [['torch eager', 'ort forward-backward', 0.25]]
    """
    out = []
    for benchmark, measure in MEASURES.items():
        rows = df[df.benchmark == benchmark] if "benchmark" in df else df.iloc[0:0]
        if "optimizer" in rows:
            rows = rows[rows.optimizer.isna() | (rows.optimizer == "sgd")]
        if rows.empty or measure not in rows:
            continue
        keys = ["machine", "threads", *[c for c in CONFIGURATION if c in rows]]
        rows = rows.dropna(subset=[measure])
        for key, group in rows.groupby(keys, dropna=False, sort=False):
            configuration = ", ".join(
                f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                for k, v in zip(keys[2:], key[2:])
                if not pd.isna(v)
            )
            for peer in PEERS:
                found = framework_ratios(group, measure, [(api, peer) for api in APIS])
                if not found:
                    continue
                api, _, ratio, _ = min(found, key=lambda r: r[2])
                out.append(
                    {
                        "machine": key[0],
                        "benchmark": benchmark,
                        "configuration": configuration,
                        "threads": int(key[1]),
                        "peer": peer,
                        "api": api,
                        "ratio": ratio,
                        "caveat": ratio_caveat(*(r[3] for r in found)),
                    }
                )
    return pd.DataFrame(out, columns=_COLUMNS)


def geometric_mean(ratios):
    """The geometric mean of time ratios.

    Examples
    --------
    >>> geometric_mean([0.25, 1.0, 4.0])
    1.0
    """
    return float(np.exp(np.mean(np.log(np.asarray(ratios, dtype=float)))))


def suite_table(ratios):
    """Per machine, peer and thread count: the clean configurations, onnxruntime's wins, the spread.

    Returns
    -------
    pandas.DataFrame
        Columns ``machine``, ``peer``, ``threads``, ``configurations`` (clean ones),
        ``onnxruntime wins`` (faster by more than 5%), ``geometric mean`` and ``range`` (phrases),
        ``left out`` (configurations not clean), ``whole-training`` (clean configurations whose
        faster API is whole-training) and ``ratio`` (the geometric mean as a number).

    Examples
    --------
    >>> ratios = pd.DataFrame({"machine": "m", "peer": "torch eager", "threads": 2,
    ...                        "api": "ort whole-training", "ratio": [0.25, 0.5, 2.0, 0.1],
    ...                        "caveat": ["", "", "", "noisy: repeats spread 3x"]})
    >>> table = suite_table(ratios).drop(columns="machine")
    >>> table.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'peer': 'torch eager', 'threads': 2, 'configurations': 3, 'onnxruntime wins': 2,
      'geometric mean': '1.6x faster', 'range': 'from 4.0x faster to 2.0x slower', 'left out': 1,
      'whole-training': 3, 'ratio': 0.62996...}]
    """
    out = []
    order = {p: i for i, p in enumerate(PEERS)}
    ratios = ratios.assign(rank=ratios.peer.map(order)).sort_values(
        ["machine", "rank", "threads"], kind="stable"
    )
    for (machine, peer, threads), group in ratios.groupby(
        ["machine", "peer", "threads"], sort=False
    ):
        clean = group[group.caveat.fillna("") == ""]
        if clean.empty:
            continue
        mean = geometric_mean(clean.ratio)
        out.append(
            {
                "machine": machine,
                "peer": peer,
                "threads": int(threads),
                "configurations": len(clean),
                "onnxruntime wins": int((clean.ratio.map(verdict) == "faster").sum()),
                "geometric mean": speed_phrase(mean),
                "range": span_phrase(clean.ratio),
                "left out": len(group) - len(clean),
                "whole-training": int((clean.api == "ort whole-training").sum()),
                "ratio": mean,
            }
        )
    return pd.DataFrame(out)


def _answer(rows):
    """``'yes'``, ``'no'`` or ``'mixed'``: most configurations won and a faster mean, or neither."""
    wins, total = rows["onnxruntime wins"].sum(), rows.configurations.sum()
    mean = np.exp((np.log(rows.ratio) * rows.configurations).sum() / total)
    if 2 * wins > total and verdict(mean) == "faster":
        return "yes"
    return "no" if 2 * wins < total and verdict(mean) == "slower" else "mixed"


def _threads(n):
    return f"{n} thread{'' if n == 1 else 's'}"


def suite_answer(table):
    """The sentence that answers "Is onnxruntime faster?", peer by peer, each figure a table row.

    Examples
    --------
    >>> table = pd.DataFrame({"peer": ["torch eager", "torch eager", "scikit-learn"],
    ...                       "threads": [1, 2, 2], "configurations": [4, 6, 4],
    ...                       "onnxruntime wins": [3, 5, 3], "ratio": [0.5, 0.8, 1.5]})
    >>> print(suite_answer(table))  # doctest: +NORMALIZE_WHITESPACE
    Is onnxruntime faster? Against torch eager, yes: its faster API wins 3 of 4 clean
    configurations at 1 thread, 5 of 6 at 2 threads; against scikit-learn, mixed: 3 of 4 at
    2 threads. The table gives the geometric mean, the range, and the configurations left out
    as not clean.
    """
    parts = []
    for peer in dict.fromkeys(table.peer):
        rows = table[table.peer == peer]
        counts = [
            f"{r['onnxruntime wins']} of {r['configurations']}"
            f"{'' if parts or i else ' clean configurations'} at {_threads(r['threads'])}"
            for i, r in enumerate(rows.to_dict("records"))
        ]
        parts.append(
            f"against {peer}, {_answer(rows)}: "
            + ("its faster API wins " if not parts else "")
            + ", ".join(counts)
        )
    text = "; ".join(parts)
    return (
        f"Is onnxruntime faster? {text[0].upper()}{text[1:]}. The table gives the geometric "
        "mean, the range, and the configurations left out as not clean."
    )


def suite_lines(df):
    """The summary's first section: the sentence that answers, then the table (or nothing).

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "torch", "machine": "m", "threads": 2, "model": "mlp",
    ...                    "caveat": "", "time_per_update_s": [2.0, 1.0],
    ...                    "framework": ["torch eager", "ort whole-training"]})
    >>> print(suite_lines(df)[-2])
    | torch eager | 2 | 1 | 1 | 2.0x faster | 2.0x faster | 0 | 1 |
    """
    table = suite_table(suite_ratios(df))
    if table.empty:
        return []
    lines = ["## The whole suite, one line per peer", ""]
    for machine, part in table.groupby("machine", sort=False):
        if table.machine.nunique() > 1:
            lines += [f"### {machine}", ""]
        lines += [suite_answer(part), ""]
        lines += [
            (
                "Each [clean configuration](#glossary) of the grid and the zoo counts once; "
                "*wins*: onnxruntime faster by over 5%; *whole-training*: the configurations "
                "whose [faster API](#glossary) it is."
            ),
            "",
        ]
        shown = part.rename(columns=SHORT_NAMES)  # short headers: the rows stay one line tall
        lines += markdown_table(shown, ["peer", "threads", *SHORT_NAMES.values()]) + [""]
    return lines
