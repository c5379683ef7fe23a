"""A ratio of two timings and how it reads: faster, slower or the same, with the caveat it carries.

The summary's answer (:mod:`benchmarks.report.aggregate`), the model zoo's
(:mod:`benchmarks.report.zoo_summary`) and ``bench_your_model``'s sentences
(:mod:`benchmarks.workloads.your_model`) all compare an onnxruntime API with a peer
by the ratio of their times; they read it with the same threshold.
"""

import numpy as np

from benchmarks.report.caveats import ratio_caveat

#: Two timings within this factor of each other are "the same".
SAME_WITHIN = 1.05


def verdict(ratio):
    """``'faster'``, ``'slower'`` or ``'same'``: a time ratio (the API's time over its peer's) in a
    word.

    Examples
    --------
    >>> verdict(0.5), verdict(1.3), verdict(1.02)
    ('faster', 'slower', 'same')
    """
    if ratio < 1 / SAME_WITHIN:
        return "faster"
    return "slower" if ratio > SAME_WITHIN else "same"


def speed_phrase(ratio):
    """``'1.9x faster'`` for a time ratio of 0.53, ``'1.3x slower'`` for 1.3, ``'same'`` near 1.

    Examples
    --------
    >>> speed_phrase(0.5), speed_phrase(1.32), speed_phrase(1.02), speed_phrase(float("nan"))
    ('2.0x faster', '1.3x slower', 'same', '-')
    """
    if ratio is None or not np.isfinite(ratio):
        return "-"
    word = verdict(ratio)
    if word == "same":
        return word
    return f"{1 / ratio:.1f}x faster" if word == "faster" else f"{ratio:.1f}x slower"


def value_range(values, fmt="{:.1f}x"):
    """``'low to high'`` of ``values`` written by ``fmt``: one value when both read the same.

    Examples
    --------
    >>> value_range([1.52, 4.9]), value_range([2.01, 1.98]), value_range([3, 12], "{:+d} MB")
    ('1.5x to 4.9x', '2.0x', '+3 MB to +12 MB')
    >>> value_range([])
    '-'
    """
    if len(values) == 0:
        return "-"
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low} to {high}"


def span_phrase(ratios):
    """A range of time ratios in words, the best for onnxruntime first.

    Examples
    --------
    >>> span_phrase([0.5, 0.25]), span_phrase([1.3]), span_phrase([1.02])
    ('2.0x to 4.0x faster', '1.3x slower', 'about the same')
    >>> span_phrase([0.9, 1.9]), span_phrase([1.0, 1.5])
    ('from 1.1x faster to 1.9x slower', 'from about the same to 1.5x slower')
    """
    if len(ratios) == 0:
        return "-"
    low, high = min(ratios), max(ratios)
    if verdict(low) == verdict(high) == "faster":
        return f"{value_range([1 / high, 1 / low])} faster"
    if verdict(low) == verdict(high) == "slower":
        return f"{value_range([low, high])} slower"
    if verdict(low) == verdict(high):
        return "about the same"
    phrases = [speed_phrase(r).replace("same", "about the same") for r in (low, high)]
    return f"from {phrases[0]} to {phrases[1]}"


def framework_ratios(group, measure, pairs):
    """``(api, peer, ratio, caveat)`` for each pair of ``pairs`` whose two frameworks both ran in
    ``group``.

    Each framework's time is the median of its rows' ``measure``; the
    ratio's caveat joins the caveats of both frameworks' rows
    (:func:`benchmarks.report.caveats.ratio_caveat`). Pairs keep their order.

    Examples
    --------
    >>> import pandas as pd
    >>> group = pd.DataFrame(
    ...     {
    ...         "framework": ["torch eager", "ort whole-training"],
    ...         "step_s": [2.0, 1.0],
    ...         "caveat": ["", "noisy: repeats spread 3.1x"],
    ...     }
    ... )
    >>> framework_ratios(
    ...     group, "step_s", [("ort whole-training", "torch eager"), ("ort whole-training", "x")]
    ... )
    [('ort whole-training', 'torch eager', 0.5, 'noisy: repeats spread 3.1x')]
    """
    times = group.groupby("framework")[measure].median()
    caveats = group.groupby("framework")["caveat"].agg(lambda c: ratio_caveat(*c))
    return [
        (api, peer, float(times[api] / times[peer]), ratio_caveat(caveats[api], caveats[peer]))
        for api, peer in pairs
        if api in times and peer in times
    ]
