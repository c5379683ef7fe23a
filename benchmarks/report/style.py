"""One look for every benchmark figure: a colour per framework, legends off the data.

The colours are those of the notebooks (:mod:`helpers.teaching.palette`).

Examples
--------
>>> color("ort whole-training")
'tab:blue'
>>> spans_decades([0.1, 5.0]), spans_decades([1.0, 5.0])
(True, False)
"""

import io

import numpy as np

from helpers.teaching.palette import color  # noqa: F401  (the benchmarks' colour of a framework)


def spans_decades(values):
    """Whether positive ``values`` span more than a factor of 10 (then plot them on a log scale)."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[np.isfinite(values) & (values > 0)]
    return bool(values.size > 1 and values.max() / values.min() > 10)


def legend_outside(ax, **kwargs):
    """Put the legend of ``ax`` to the right of the axes, where it covers no data."""
    return ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8, **kwargs
    )


def png_bytes(fig):
    """The figure as PNG bytes (trimmed to its content, legends outside included); closes it."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()
