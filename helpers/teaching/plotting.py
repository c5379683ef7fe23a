"""Plots shared by the notebooks: loss curves and coefficients.

Every function draws on a matplotlib ``Axes`` (a new figure when ``ax`` is
None) and returns it, so that a notebook can add to the plot or put several
plots side by side.
"""

import matplotlib.pyplot as plt
import numpy as np

from .palette import line_styles

#: Bars of the variants of one library: their line styles as hatches.
_HATCHES = {"-": None, "--": "//", ":": "..", "-.": "xx"}


def bar_style(style):
    """The keyword arguments of ``Axes.bar`` for a style of
    :func:`~helpers.teaching.palette.line_styles`.

    The colour stays, the line style becomes a hatch; an empty style (a
    label naming no library) leaves matplotlib's colour cycle.

    Examples
    --------
    >>> bar_style({"color": "tab:blue", "linestyle": "--"}), bar_style({})
    ({'color': 'tab:blue', 'hatch': '//'}, {})
    """
    return {"color": style["color"], "hatch": _HATCHES[style["linestyle"]]} if style else {}


def new_axes(ax, figsize):
    """``ax``, or the axes of a new figure of size ``figsize`` when ``ax`` is None.

    Examples
    --------
    >>> new_axes(None, (4, 3)).get_figure().get_size_inches().tolist()
    [4.0, 3.0]
    """
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _as_curve(values):
    """Return ``(x, y)`` float arrays from ``losses`` or ``(x, losses)``."""
    if isinstance(values, tuple) and len(values) == 2:
        x, y = (np.asarray(v, dtype=float).ravel() for v in values)
        if x.shape != y.shape:
            raise ValueError(f"x has {x.size} values but the losses have {y.size}.")
    else:
        y = np.asarray(values, dtype=float).ravel()
        x = np.arange(1, y.size + 1, dtype=float)
    if y.size == 0:
        raise ValueError("A loss curve has no values.")
    return x, y


def _transform(y, baseline, logy):
    if baseline is not None:
        y = y - baseline
    if logy:
        # A log axis cannot show zero or negative values: leave gaps instead.
        y = np.where(y > 0, y, np.nan)
    return y


def loss_label(loss=None, baseline=None, logy=False):
    """The y label of a loss curve: what is plotted, the loss it is, its scale.

    Examples
    --------
    >>> loss_label("mean squared error", logy=True)
    'loss (mean squared error, log scale)'
    >>> loss_label(baseline=3.0)
    'loss - minimum'
    """
    details = [part for part in (loss, "log scale" if logy else None) if part]
    name = "loss" if baseline is None else "loss - minimum"
    return f"{name} ({', '.join(details)})" if details else name


def _finish(ax, logy, title, xlabel, ylabel, baseline, loss=None):
    if logy:
        ax.set_yscale("log")
    if ylabel is None:
        ylabel = loss_label(loss, baseline, logy)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return ax


def plot_loss_curves(
    curves,
    ax=None,
    baseline=None,
    logy=True,
    title=None,
    xlabel="epoch",
    ylabel=None,
    figsize=(7, 4),
    loss=None,
):
    """Plot one or more loss curves on the same axes.

    Parameters
    ----------
    curves : dict
        Label to losses. Losses are a sequence, plotted against 1, 2, ...
        (epochs), or a tuple ``(x, losses)``.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    baseline : float or None
        Subtracted from every loss, for example the minimum of the loss:
        the curves then show how far training is from the optimum.
    logy : bool
        Logarithmic y axis. Values that are zero or negative (after
        subtracting ``baseline``) are left out of the curve.
    title : str or None
    xlabel : str
    ylabel : str or None
        A label built from ``loss``, ``baseline`` and ``logy`` when None
        (:func:`loss_label`).
    figsize : tuple
        Size of a new figure, in inches.
    loss : str or None
        What the loss is, for the y label: ``'mean squared error'`` gives
        ``'loss (mean squared error, log scale)'``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> ax = plot_loss_curves({"sgd": [1.0, 0.5, 0.3], "adam": [1.0, 0.2, 0.1]}, title="Training",
    ...                       loss="log loss")
    >>> [line.get_label() for line in ax.get_lines()], ax.get_title(), ax.get_ylabel()
    (['sgd', 'adam'], 'Training', 'loss (log loss, log scale)')
    >>> plt.close("all")
    """
    if not curves:
        raise ValueError("curves is empty: give at least one label and its losses.")
    ax = new_axes(ax, figsize)
    styles = line_styles(list(curves))
    for label, values in curves.items():
        x, y = _as_curve(values)
        ax.plot(x, _transform(y, baseline, logy), label=label, **styles[label])
    return _finish(ax, logy, title, xlabel, ylabel, baseline, loss)


def plot_training_history(
    optimizer,
    ax=None,
    label=None,
    baseline=None,
    logy=True,
    title=None,
    figsize=(7, 4),
    loss=None,
    ylabel=None,
    validation_name="validation",
):
    """Plot the training and validation losses recorded by an optimizer.

    Parameters
    ----------
    optimizer : object
        A fitted optimizer of :mod:`helpers`, with ``train_losses_`` (one
        per epoch), ``validation_losses_`` and ``validation_epochs_``.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    label : str or None
        Prefix of the legend entries (``'<label> train'``,
        ``'<label> validation'``); the class name when None. A label that
        starts with a library (``'onnxruntime, seed 2'``) draws in its
        colour (:mod:`~helpers.teaching.palette`).
    baseline : float or None
        Subtracted from every loss (see :func:`plot_loss_curves`).
    logy : bool
        Logarithmic y axis.
    title : str or None
    figsize : tuple
    loss : str or None
        What the loss is, for the y label (see :func:`plot_loss_curves`).
    ylabel : str or None
        The y label; built from ``loss``, ``baseline`` and ``logy`` when None.
    validation_name : str
        What the validation rows are, in the legend: ``'test'`` when the
        test set served as validation set.

    Returns
    -------
    matplotlib.axes.Axes
        With one line for the training losses and, when the optimizer
        recorded some, one for the validation losses in the same colour.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    >>> y = X.sum(axis=1, keepdims=True)
    >>> opt = OrtGradientOptimizer(
    ...     add_loss_output(mlp_onnx(3, hidden=(4,))),
    ...     max_iter=4,
    ...     batch_size=16,
    ...     validation_every=2,
    ...     random_state=0,
    ... ).fit(X, y, X_val=X, y_val=y)
    >>> ax = plot_training_history(opt, label="onnxruntime", validation_name="test")
    >>> [line.get_label() for line in ax.get_lines()], ax.get_lines()[1].get_color()
    (['onnxruntime train', 'onnxruntime test'], 'tab:blue')
    >>> plt.close("all")
    """
    if not hasattr(optimizer, "train_losses_"):
        raise ValueError(f"{type(optimizer).__name__} is not fitted: it has no train_losses_.")
    label = type(optimizer).__name__ if label is None else label
    ax = new_axes(ax, figsize)
    x, y = _as_curve(optimizer.train_losses_)
    (line,) = ax.plot(
        x, _transform(y, baseline, logy), label=f"{label} train", **line_styles([label])[label]
    )
    if len(optimizer.validation_losses_):
        x, y = _as_curve((optimizer.validation_epochs_, optimizer.validation_losses_))
        ax.plot(
            x,
            _transform(y, baseline, logy),
            "o--",
            color=line.get_color(),
            markersize=4,
            label=f"{label} {validation_name}",
        )
    return _finish(ax, logy, title, "epoch", ylabel, baseline, loss)


def plot_coefficients(table, ax=None, title=None, ylabel="coefficient", figsize=(8, 4)):
    """Grouped bars comparing the coefficients of several models.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per feature (the index names them), one column per model.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    title : str or None
    ylabel : str
    figsize : tuple

    Returns
    -------
    matplotlib.axes.Axes
        With one group of bars per feature and one bar colour per model
        (the library's colour, :mod:`~helpers.teaching.palette`, when the
        column names one).

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import pandas as pd
    >>> table = pd.DataFrame({"true": [1.0, -2.0, 0.5], "fitted": [0.9, -1.8, 0.6]},
    ...                      index=["a", "b", "c"])
    >>> ax = plot_coefficients(table, title="Coefficients")
    >>> len(ax.patches), [t.get_text() for t in ax.get_xticklabels()], ax.get_title()
    (6, ['a', 'b', 'c'], 'Coefficients')
    >>> plt.close("all")
    """
    if table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"The table has shape {table.shape}: it needs rows and columns.")
    ax = new_axes(ax, figsize)
    n_rows, n_models = table.shape
    positions = np.arange(n_rows)
    width = 0.8 / n_models
    styles = line_styles([str(column) for column in table.columns])
    for i, column in enumerate(table.columns):
        offset = (i - (n_models - 1) / 2) * width
        ax.bar(
            positions + offset,
            table[column].to_numpy(dtype=float),
            width,
            label=str(column),
            **bar_style(styles[str(column)]),
        )
    ax.set_xticks(positions)
    ax.set_xticklabels([str(i) for i in table.index], rotation=45 if n_rows > 8 else 0)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(table.index.name or "feature")
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def plot_loss_spread(
    groups,
    ax=None,
    baseline=None,
    logy=True,
    title=None,
    xlabel="epoch",
    ylabel=None,
    figsize=(7, 4),
    band_alpha=0.25,
    loss=None,
):
    """Compare groups of runs: the median loss of each group and its min-max band.

    Two trainings that shuffle their minibatches differently never follow
    the same curve; several runs per group (one per shuffling seed) show
    whether two groups differ by more than the runs of one group differ
    among themselves.

    Parameters
    ----------
    groups : dict
        Label to a list of runs. A run is a sequence of losses, plotted
        against 1, 2, ... (epochs), or a tuple ``(x, losses)``; the runs of
        one group share their x values.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    baseline : float or None
        Subtracted from every loss (see :func:`plot_loss_curves`).
    logy : bool
        Logarithmic y axis.
    title : str or None
    xlabel : str
    ylabel : str or None
        A label built from ``baseline`` and ``logy`` when None.
    figsize : tuple
        Size of a new figure, in inches.
    band_alpha : float
        Opacity of the bands.
    loss : str or None
        What the loss is, for the y label (see :func:`plot_loss_curves`).

    Returns
    -------
    matplotlib.axes.Axes
        One line (the median over the runs, at each x) and one shaded band
        (from the smallest to the largest run) per group, in the same colour.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> groups = {
    ...     "sgd": [[1.0, 0.5, 0.3], [1.0, 0.6, 0.4], [1.0, 0.4, 0.2]],
    ...     "adam": [[1.0, 0.2, 0.1]],
    ... }
    >>> ax = plot_loss_spread(groups)
    >>> [line.get_label() for line in ax.get_lines()], ax.get_lines()[0].get_ydata().tolist()
    (['sgd (median of 3)', 'adam'], [1.0, 0.5, 0.3])
    >>> len(ax.collections)  # one band, for the group of several runs
    1
    >>> plt.close("all")
    """
    if not groups:
        raise ValueError("groups is empty: give at least one label and its runs.")
    ax = new_axes(ax, figsize)
    styles = line_styles(list(groups))
    for label, runs in groups.items():
        if len(runs) == 0:
            raise ValueError(f"Group {label!r} has no run.")
        curves = [_as_curve(run) for run in runs]
        x = curves[0][0]
        for other_x, _ in curves[1:]:
            if other_x.shape != x.shape or not np.allclose(other_x, x):
                raise ValueError(f"The runs of group {label!r} do not share their x values.")
        ys = np.vstack([_transform(y, baseline, False) for _, y in curves])
        median, low, high = np.median(ys, axis=0), ys.min(axis=0), ys.max(axis=0)
        if logy:
            median, low, high = (np.where(v > 0, v, np.nan) for v in (median, low, high))
        name = label if len(runs) == 1 else f"{label} (median of {len(runs)})"
        (line,) = ax.plot(x, median, label=name, **styles[label])
        if len(runs) > 1:
            ax.fill_between(x, low, high, color=line.get_color(), alpha=band_alpha, linewidth=0)
    return _finish(ax, logy, title, xlabel, ylabel, baseline, loss)
