"""A ratio of two timings and how it reads: faster, slower or the same, with the caveat it carries.

The summary's answer (:mod:`benchmarks.aggregate`), the model zoo's
(:mod:`benchmarks.zoo_summary`) and ``bench_your_model``'s sentences
(:mod:`benchmarks.your_model`) all compare an onnxruntime API with a peer
by the ratio of their times; they read it with the same threshold.
"""
import numpy as np

from benchmarks.caveats import ratio_caveat

#: Two timings within this factor of each other are "the same".
SAME_WITHIN = 1.05


def verdict(ratio):
    """``'faster'``, ``'slower'`` or ``'same'``: a time ratio (the API's time over its peer's) in a word.

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


def framework_ratios(group, measure, pairs):
    """``(api, peer, ratio, caveat)`` for each pair of ``pairs`` whose two frameworks both ran in ``group``.

    Each framework's time is the median of its rows' ``measure``; the
    ratio's caveat joins the caveats of both frameworks' rows
    (:func:`benchmarks.caveats.ratio_caveat`). Pairs keep their order.

    Examples
    --------
    >>> import pandas as pd
    >>> group = pd.DataFrame({"framework": ["torch eager", "ort whole-training"], "step_s": [2.0, 1.0],
    ...                       "caveat": ["", "noisy: repeats spread 3.1x"]})
    >>> framework_ratios(group, "step_s", [("ort whole-training", "torch eager"), ("ort whole-training", "x")])
    [('ort whole-training', 'torch eager', 0.5, 'noisy: repeats spread 3.1x')]
    """
    times = group.groupby("framework")[measure].median()
    caveats = group.groupby("framework")["caveat"].agg(lambda c: ratio_caveat(*c))
    return [(api, peer, float(times[api] / times[peer]), ratio_caveat(caveats[api], caveats[peer]))
            for api, peer in pairs if api in times and peer in times]
