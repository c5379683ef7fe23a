"""helpers.teaching.plotting.plot_loss_spread: the median and the band hold the right values."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as matplotlib_colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.teaching.palette import COLORS  # noqa: E402
from helpers.teaching.plotting import plot_coefficients, plot_loss_curves, plot_loss_spread  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _band_limits(collection):
    """Lowest and highest y of a fill_between polygon, at each x."""
    vertices = collection.get_paths()[0].vertices
    limits = {}
    for x, y in vertices:
        low, high = limits.get(x, (np.inf, -np.inf))
        limits[x] = (min(low, y), max(high, y))
    return limits


def test_median_line_and_min_max_band_per_group():
    runs = [[4.0, 2.0, 1.0], [5.0, 3.0, 0.5], [6.0, 2.5, 2.0]]
    ax = plot_loss_spread({"ort": runs, "sklearn": [[3.0, 2.0, 1.5], [3.5, 2.2, 1.4]]}, logy=False)
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["ort (median of 3)", "sklearn (median of 2)"]
    np.testing.assert_allclose(lines[0].get_ydata(), [5.0, 2.5, 1.0])
    np.testing.assert_allclose(lines[0].get_xdata(), [1, 2, 3])
    assert len(ax.collections) == 2
    limits = _band_limits(ax.collections[0])
    assert limits[1.0] == (4.0, 6.0) and limits[3.0] == (0.5, 2.0)
    assert ax.collections[0].get_facecolor()[0][:3] == pytest.approx(
        matplotlib.colors.to_rgb(lines[0].get_color())
    )


def test_baseline_and_log_scale():
    ax = plot_loss_spread({"a": [[11.0, 10.5, 10.0], [12.0, 10.2, 10.0]]}, baseline=10.0)
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    np.testing.assert_allclose(y[:2], [1.5, 0.35])
    assert np.isnan(y[2])  # zero cannot be drawn on a log axis
    assert ax.get_yscale() == "log" and "minimum" in ax.get_ylabel()


def test_single_run_has_no_band_and_keeps_its_label():
    ax = plot_loss_spread({"only": [([0.5, 1.5], [2.0, 1.0])]}, logy=False)
    assert ax.get_lines()[0].get_label() == "only"
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), [0.5, 1.5])
    assert len(ax.collections) == 0


def test_errors():
    with pytest.raises(ValueError, match="empty"):
        plot_loss_spread({})
    with pytest.raises(ValueError, match="no run"):
        plot_loss_spread({"a": []})
    with pytest.raises(ValueError, match="x values"):
        plot_loss_spread({"a": [[1.0, 2.0], [1.0, 2.0, 3.0]]})


def test_same_library_same_colour_across_figures():
    """A library keeps its colour in every figure; two rules of one library differ by their
    dashes."""
    runs = [[1.0, 0.5], [1.0, 0.4]]
    ax1 = plot_loss_spread(
        {"scikit-learn, SGD": runs, "onnxruntime, SGD": runs, "onnxruntime, Nesterov": runs}
    )
    ax2 = plot_loss_curves({"onnxruntime": [1.0, 0.3], "scikit-learn": [1.0, 0.2]})
    ax3 = plot_coefficients(pd.DataFrame({"scikit-learn": [1.0], "onnxruntime": [0.9]}))
    spread = {line.get_label(): line for line in ax1.get_lines()}
    sgd, nesterov = (
        spread["onnxruntime, SGD (median of 2)"],
        spread["onnxruntime, Nesterov (median of 2)"],
    )
    assert sgd.get_color() == nesterov.get_color() == COLORS["onnxruntime"]
    assert sgd.get_linestyle() != nesterov.get_linestyle()
    assert spread["scikit-learn, SGD (median of 2)"].get_linestyle() == sgd.get_linestyle()
    curves = {line.get_label(): line.get_color() for line in ax2.get_lines()}
    assert curves == {"onnxruntime": COLORS["onnxruntime"], "scikit-learn": COLORS["scikit-learn"]}
    bar_colours = [matplotlib_colors.to_hex(p.get_facecolor()) for p in ax3.patches]
    assert bar_colours == [
        matplotlib_colors.to_hex(COLORS[name]) for name in ("scikit-learn", "onnxruntime")
    ]
    plt.close("all")
