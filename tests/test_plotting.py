"""helpers.teaching.plotting: what the figures hold, not how they look."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.teaching.kernel_plots import plot_kernel_comparison, plot_kernel_times  # noqa: E402
from helpers.teaching.plotting import (  # noqa: E402
    plot_coefficients,
    plot_loss_curves,
    plot_training_history,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


class FakeOptimizer:
    def __init__(self, train, val=(), epochs=()):
        self.train_losses_ = list(train)
        self.validation_losses_ = list(val)
        self.validation_epochs_ = list(epochs)


def legend_labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_loss_curves_one_line_per_curve_with_labels():
    ax = plot_loss_curves({"sgd": [4.0, 2.0, 1.0], "adamw": [3.0, 1.5, 0.5, 0.2]})
    lines = ax.get_lines()
    assert len(lines) == 2
    assert [line.get_label() for line in lines] == ["sgd", "adamw"]
    assert legend_labels(ax) == ["sgd", "adamw"]
    np.testing.assert_array_equal(lines[1].get_xdata(), [1, 2, 3, 4])
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "epoch"
    assert "loss" in ax.get_ylabel()


def test_loss_curves_accepts_x_values():
    ax = plot_loss_curves({"steps": ([0.5, 1.0, 1.5], [3.0, 2.0, 1.0])}, logy=False)
    line = ax.get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), [0.5, 1.0, 1.5])
    np.testing.assert_array_equal(line.get_ydata(), [3.0, 2.0, 1.0])
    assert ax.get_yscale() == "linear"


def test_loss_curves_baseline_is_subtracted_and_nonpositive_masked():
    ax = plot_loss_curves({"a": [12.0, 11.0, 10.0, 9.5]}, baseline=10.0)
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    np.testing.assert_allclose(y[:2], [2.0, 1.0])
    assert np.isnan(y[2]) and np.isnan(y[3])
    assert "minimum" in ax.get_ylabel()


def test_loss_curves_draws_on_given_axes():
    fig, axes = plt.subplots(1, 2)
    ax = plot_loss_curves({"a": [1.0, 0.5]}, ax=axes[1], title="right")
    assert ax is axes[1]
    assert len(axes[0].get_lines()) == 0
    assert axes[1].get_title() == "right"


def test_loss_curves_errors():
    with pytest.raises(ValueError, match="empty"):
        plot_loss_curves({})
    with pytest.raises(ValueError, match="no values"):
        plot_loss_curves({"a": []})
    with pytest.raises(ValueError, match="x has 2 values"):
        plot_loss_curves({"a": ([1, 2], [1.0, 2.0, 3.0])})


def test_training_history_train_and_validation_same_colour():
    opt = FakeOptimizer([5.0, 3.0, 2.0, 1.5], val=[4.0, 2.5], epochs=[2, 4])
    ax = plot_training_history(opt, label="sgd")
    train, val = ax.get_lines()
    assert legend_labels(ax) == ["sgd train", "sgd validation"]
    np.testing.assert_array_equal(train.get_xdata(), [1, 2, 3, 4])
    np.testing.assert_array_equal(val.get_xdata(), [2, 4])
    np.testing.assert_array_equal(val.get_ydata(), [4.0, 2.5])
    assert train.get_color() == val.get_color()
    assert ax.get_yscale() == "log"


def test_training_history_without_validation_has_one_line():
    ax = plot_training_history(FakeOptimizer([2.0, 1.0]))
    assert len(ax.get_lines()) == 1
    assert legend_labels(ax) == ["FakeOptimizer train"]


def test_training_history_needs_a_fitted_optimizer():
    with pytest.raises(ValueError, match="not fitted"):
        plot_training_history(object())


def test_coefficients_one_bar_group_per_model():
    table = pd.DataFrame(
        {"true": [1.0, -2.0, 3.0], "sklearn": [1.1, -1.9, 2.8]},
        index=pd.Index(["x0", "x1", "x2"], name="feature"),
    )
    ax = plot_coefficients(table, title="coefs")
    assert len(ax.containers) == 2
    assert [len(c) for c in ax.containers] == [3, 3]
    heights = [bar.get_height() for bar in ax.containers[1]]
    np.testing.assert_allclose(heights, [1.1, -1.9, 2.8])
    assert legend_labels(ax) == ["true", "sklearn"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x0", "x1", "x2"]
    assert ax.get_title() == "coefs"


def test_coefficients_empty_table_raises():
    with pytest.raises(ValueError, match="shape"):
        plot_coefficients(pd.DataFrame())


def kernel_table(rows):
    """A kernel table as helpers.measure.profiling.kernel_table returns it (session, op_type, µs,
    share)."""
    table = pd.DataFrame(rows, columns=["session", "op_type", "µs per step"])
    table["share of step (%)"] = 100 * table["µs per step"] / table["µs per step"].sum()
    return table


def test_kernel_times_top_rows_slowest_first_one_colour_per_session():
    table = kernel_table(
        [
            ("model", "Add", 5.0),
            ("model", "MatMul", 300.0),
            ("update", "(overhead)", 40.0),
            ("model", "ReluGrad", 120.0),
            ("model", "(overhead)", 30.0),
            ("update", "Sub", 1.0),
        ]
    )
    ax = plot_kernel_times(table, top=4, title="where the step goes")
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "MatMul",
        "ReluGrad",
        "(overhead)",
        "(overhead)",
    ]
    # one container per session, in the order they first appear among the slowest rows
    assert [len(c) for c in ax.containers] == [3, 1]
    assert legend_labels(ax) == ["model", "update"]
    widths = {
        (round(bar.get_y() + bar.get_height() / 2), bar.get_width())
        for c in ax.containers
        for bar in c
    }
    assert widths == {(0, 300.0), (1, 120.0), (2, 40.0), (3, 30.0)}
    colours = [c.patches[0].get_facecolor() for c in ax.containers]
    assert colours[0] != colours[1]
    assert all(bar.get_facecolor() == colours[0] for bar in ax.containers[0])
    # the slowest is drawn at the top
    bottom, top = ax.get_ylim()
    assert bottom > top
    assert "µs" in ax.get_xlabel()
    assert ax.get_title() == "where the step goes"
    # shares written at the end of the bars
    assert [t.get_text().strip() for t in ax.texts] == ["60%", "24%", "8%", "6%"]


def test_kernel_times_colours_given_and_no_share_column():
    table = kernel_table([("model", "MatMul", 3.0), ("loss", "Sub", 1.0)]).drop(
        columns="share of step (%)"
    )
    ax = plot_kernel_times(table, colors={"loss": "red"})
    assert ax.containers[1].patches[0].get_facecolor() == matplotlib.colors.to_rgba("red")
    assert len(ax.texts) == 0


def test_kernel_times_errors():
    with pytest.raises(ValueError, match="no rows"):
        plot_kernel_times(kernel_table([]))
    with pytest.raises(ValueError, match="lacks the columns"):
        plot_kernel_times(pd.DataFrame({"op_type": ["MatMul"]}))
    with pytest.raises(ValueError, match="top"):
        plot_kernel_times(kernel_table([("model", "MatMul", 1.0)]), top=0)


def test_kernel_comparison_matches_kernels_across_profiles():
    model, update = "model (forward + backward)", "weight update"
    slow = kernel_table(
        [
            (model, "ReluGrad", 480.0),
            (model, "MatMul", 200.0),
            (model, "Mul", 1.0),
            (update, "Mul", 30.0),
        ]
    )
    fast = kernel_table(
        [
            (model, "MatMul", 210.0),
            (model, "Where", 50.0),
            (model, "Mul", 40.0),
            (update, "Mul", 30.0),
        ]
    )
    ax = plot_kernel_comparison({"fast_gradients=False": slow, "fast_gradients=True": fast}, top=4)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # ordered by the largest time over the profiles; Mul is in two sessions, so they are named
    assert labels == ["ReluGrad", "MatMul", "Where", "Mul, model"]
    assert len(ax.containers) == 2
    assert [len(c) for c in ax.containers] == [4, 4]
    np.testing.assert_array_equal(
        [bar.get_width() for bar in ax.containers[0]], [480.0, 200.0, 0.0, 1.0]
    )
    np.testing.assert_array_equal(
        [bar.get_width() for bar in ax.containers[1]], [0.0, 210.0, 50.0, 40.0]
    )
    assert legend_labels(ax) == ["fast_gradients=False", "fast_gradients=True"]
    assert "µs" in ax.get_xlabel()


def test_kernel_comparison_sums_duplicate_rows_and_checks_input():
    table = kernel_table([("model", "MatMul", 2.0), ("model", "MatMul", 3.0)])
    ax = plot_kernel_comparison({"a": table})
    assert [bar.get_width() for bar in ax.containers[0]] == [5.0]
    with pytest.raises(ValueError, match="empty"):
        plot_kernel_comparison({})
    with pytest.raises(ValueError, match="'b'"):
        plot_kernel_comparison({"a": table, "b": table.iloc[:0]})
