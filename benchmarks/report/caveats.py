"""When a benchmark's timing is not a finding, and the words that say so.

A record keeps the repeats of each timing (the fastest and the slowest), the
load on its machine while it ran (``conditions``, from
:func:`helpers.measure.conditions.machine_conditions`) and whether other runs
shared its cores (``shared``, written by the runner). :func:`add_caveats`
turns these into one column of words per row, and :func:`ratio_caveat` into
the caveat of a ratio of two rows: the summary prints it beside the number
and never builds its answer on such a ratio.
"""

import numpy as np
import pandas as pd

from helpers.measure.conditions import timing_caveat

#: Columns holding the fastest and the slowest repeat of a timing, by benchmark.
SPREAD_COLUMNS = (("time_min_s", "time_max_s"), ("fit_time_min_s", "fit_time_max_s"))


def _spread(df):
    spread = pd.Series(np.nan, index=df.index)
    for low, high in SPREAD_COLUMNS:
        if low in df and high in df:
            lo, hi = (
                pd.to_numeric(df[low], errors="coerce"),
                pd.to_numeric(df[high], errors="coerce"),
            )
            ratio = (hi / lo).where(lo > 0, np.inf)
            spread = spread.fillna(ratio.where(lo.notna() & hi.notna()))
    return spread


def _text(value):
    return value if isinstance(value, str) else ""


def add_caveats(df):
    """Return ``df`` with the columns ``spread`` (slowest repeat over fastest) and ``caveat``
    (words, or ``''``).

    The caveat of a row says, in this order: what its measure said
    (``timing_note``: a step or set-up that could not be measured), noisy
    repeats (a spread above 2), cores shared with other runs (``shared``),
    a busy machine (``busy``).

    Examples
    --------
    >>> rows = pd.DataFrame(
    ...     {
    ...         "framework": ["a", "b"],
    ...         "time_min_s": [1.0, 1.0],
    ...         "time_max_s": [1.2, 3.1],
    ...         "shared": ["", ""],
    ...         "busy": ["", ""],
    ...     }
    ... )
    >>> add_caveats(rows)[["spread", "caveat"]].to_numpy().tolist()
    [[1.2, ''], [3.1, 'noisy: repeats spread 3.1x']]
    """
    df = df.copy()
    df["spread"] = _spread(df)
    notes = df["timing_note"] if "timing_note" in df else pd.Series("", index=df.index)
    shared = df["shared"] if "shared" in df else pd.Series("", index=df.index)
    busy = df["busy"] if "busy" in df else pd.Series("", index=df.index)
    df["caveat"] = [
        timing_caveat(1.0 if pd.isna(spread) else spread, {"busy": _text(b)}, _text(s), _text(n))
        for spread, n, s, b in zip(df["spread"], notes, shared, busy)
    ]
    return df


def ratio_caveat(*caveats):
    """The caveat of a ratio of rows: each part of their caveats, once.

    Examples
    --------
    >>> ratio_caveat(
    ...     "noisy: repeats spread 3.1x", "", "noisy: repeats spread 3.1x; busy machine: load 3"
    ... )
    'noisy: repeats spread 3.1x; busy machine: load 3'
    """
    parts = []
    for caveat in caveats:
        for part in _text(caveat).split("; "):
            if part and part not in parts:
                parts.append(part)
    return "; ".join(parts)


def short_caveat(caveat):
    """The caveat as a table shows it: the name of each reason, once (the CSVs keep the words).

    Examples
    --------
    >>> short_caveat("set-up not measurable: its estimate was negative; noisy: repeats spread 3.1x")
    'set-up not measurable; noisy'
    >>> short_caveat("noisy: repeats spread 3.8x; noisy: repeats spread 2.8x")  # both frameworks'
    'noisy'
    """
    return "; ".join(dict.fromkeys(p.split(":")[0] for p in _text(caveat).split("; ") if p))


def with_caveat(phrase, caveat):
    """``'2.0x faster'``, or ``'2.0x faster (noisy)'``: the number and, beside
    it, why it is no finding.

    The reason is said in short (:func:`short_caveat`).

    Examples
    --------
    >>> with_caveat("2.0x faster", ""), with_caveat("2.0x faster", "noisy: repeats spread 3.1x")
    ('2.0x faster', '2.0x faster (noisy)')
    >>> with_caveat("1.4x slower", "busy machine: load average 3.2 on 2 cores")
    '1.4x slower (busy machine)'
    """
    return f"{phrase} ({short_caveat(caveat)})" if caveat and phrase != "-" else phrase
