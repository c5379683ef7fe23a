"""Colours of one library's variants (shades), small multiples, and the library colours of the
kernel charts."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as matplotlib_colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.teaching.kernel_plots import plot_kernel_comparison, plot_kernel_times  # noqa: E402
from helpers.teaching.palette import COLORS, line_styles, shades  # noqa: E402
from helpers.teaching.panels import plot_loss_panels  # noqa: E402
from helpers.teaching.plotting import plot_training_history  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def lightness(colour):
    return float(np.mean(matplotlib_colors.to_rgb(colour)))


def test_shades_go_from_dark_to_light_around_the_library_colour():
    tints = shades("ort forward-backward, batch 1", 4)
    assert len(set(tints)) == 4
    assert [lightness(c) for c in tints] == sorted(lightness(c) for c in tints)
    base = lightness(COLORS["ort forward-backward"])
    assert lightness(tints[0]) < base < lightness(tints[-1])
    assert shades("torch", 1) == [COLORS["torch"]]
    with pytest.raises(ValueError, match="at least 1"):
        shades("torch", 0)


def test_variants_of_a_single_library_take_its_shades_and_dashes():
    labels = ["onnxruntime, sgd", "onnxruntime, momentum", "onnxruntime, adamw"]
    styles = line_styles(labels)
    assert [styles[label]["color"] for label in labels] == shades("onnxruntime", 3)
    assert [styles[label]["linestyle"] for label in labels] == ["-", "--", ":"]
    # two libraries: each keeps its exact colour (tests/test_plotting_spread.py)
    assert (
        line_styles(["onnxruntime, sgd", "torch, sgd"])["onnxruntime, sgd"]["color"]
        == COLORS["onnxruntime"]
    )


def test_loss_panels_one_panel_per_curve_the_others_in_grey():
    curves = {
        "onnxruntime, sgd": [4.0, 2.0, 1.0],
        "onnxruntime, adamw": [3.0, 1.0, 0.5],
        "sgd": [5.0, 1.0, 0.2],
    }
    axes = plot_loss_panels(curves, baseline=0.1, loss="mean squared error", title="rules")
    assert [ax.get_title() for ax in axes] == list(curves)
    fig = axes[0].get_figure()
    assert len(fig.axes) == 3  # the fourth panel of the 2 x 2 grid is removed
    assert fig.get_supylabel() == "loss - minimum (mean squared error, log scale)"
    first = axes[0].get_lines()
    assert len(first) == 3 and first[-1].get_label() == "onnxruntime, sgd"
    assert first[-1].get_color() == COLORS["onnxruntime"]
    assert all(line.get_color() == "0.8" for line in first[:-1])
    np.testing.assert_allclose(first[-1].get_ydata(), [3.9, 1.9, 0.9])
    assert axes[1].get_xlabel() == "epoch" and axes[2].get_xlabel() == "epoch"
    with pytest.raises(ValueError, match="empty"):
        plot_loss_panels({})


def test_training_history_takes_the_library_colour():
    class Fitted:
        train_losses_, validation_losses_, validation_epochs_ = [3.0, 2.0], [2.5], [2]

    ax = plot_training_history(
        Fitted(),
        label="ort forward-backward, seed 0",
        validation_name="test",
        loss="log loss",
        logy=False,
    )
    train, test = ax.get_lines()
    assert train.get_color() == test.get_color() == COLORS["ort forward-backward"]
    assert test.get_label() == "ort forward-backward, seed 0 test"
    assert ax.get_ylabel() == "loss (log loss)"


def kernel_table(rows):
    return pd.DataFrame(rows, columns=["session", "op_type", "µs per step"])


def test_kernel_charts_use_the_library_colours():
    table = kernel_table([("model", "MatMul", 30.0), ("update", "Sub", 3.0), ("loss", "Mul", 2.0)])
    ax = plot_kernel_times(table, library="ort whole-training")
    colours = [matplotlib_colors.to_hex(c.patches[0].get_facecolor()) for c in ax.containers]
    assert colours == shades("ort whole-training", 3)
    other = kernel_table([("model", "MatMul", 20.0)])
    ax = plot_kernel_comparison(
        {"ort forward-backward, 1 thread": table, "ort forward-backward, 2 threads": other}
    )
    first, second = (c.patches[0] for c in ax.containers)
    assert matplotlib_colors.to_hex(first.get_facecolor()) == shades("ort forward-backward", 2)[0]
    assert first.get_hatch() is None and second.get_hatch() == "//"
