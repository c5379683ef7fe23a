"""helpers.plotting: what the figures hold, not how they look."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers.plotting import (  # noqa: E402
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
