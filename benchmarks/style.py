"""One look for every benchmark figure: a colour per framework, legends off the data.

Examples
--------
>>> color("ort whole-training")
'tab:blue'
>>> spans_decades([0.1, 5.0]), spans_decades([1.0, 5.0])
(True, False)
"""
import io

import numpy as np

#: The colour of each framework, the same in every figure.
COLORS = {
    "ort whole-training": "tab:blue",
    "ort forward-backward": "tab:orange",
    "torch eager": "tab:green",
    "torch.compile": "tab:olive",
    "scikit-learn": "tab:purple",
    "onnxruntime matmul bound": "black",
    "numpy matmul": "tab:gray",
}
#: Any other framework (a new row) gets this one.
OTHER = "tab:brown"


def color(framework):
    """The colour of ``framework`` (:data:`COLORS`)."""
    return COLORS.get(framework, OTHER)


def spans_decades(values):
    """Whether positive ``values`` span more than a factor of 10 (then plot them on a log scale)."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[np.isfinite(values) & (values > 0)]
    return bool(values.size > 1 and values.max() / values.min() > 10)


def legend_outside(ax, **kwargs):
    """Put the legend of ``ax`` to the right of the axes, where it covers no data."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8, **kwargs)


def png_bytes(fig):
    """The figure as PNG bytes (trimmed to its content, legends outside included); closes it."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()
