"""Plots shared by the notebooks: loss curves and coefficients.

Every function draws on a matplotlib ``Axes`` (a new figure when ``ax`` is
None) and returns it, so that a notebook can add to the plot or put several
plots side by side.
"""
import matplotlib.pyplot as plt
import numpy as np


def _new_axes(ax, figsize):
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


def _finish(ax, logy, title, xlabel, ylabel, baseline):
    if logy:
        ax.set_yscale("log")
    if ylabel is None:
        ylabel = "loss" if baseline is None else "loss - minimum"
        if logy:
            ylabel += " (log scale)"
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
        A label built from ``baseline`` and ``logy`` when None.
    figsize : tuple
        Size of a new figure, in inches.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not curves:
        raise ValueError("curves is empty: give at least one label and its losses.")
    ax = _new_axes(ax, figsize)
    for label, values in curves.items():
        x, y = _as_curve(values)
        ax.plot(x, _transform(y, baseline, logy), label=label)
    return _finish(ax, logy, title, xlabel, ylabel, baseline)


def plot_training_history(
    optimizer,
    ax=None,
    label=None,
    baseline=None,
    logy=True,
    title=None,
    figsize=(7, 4),
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
        ``'<label> validation'``); the class name when None.
    baseline : float or None
        Subtracted from every loss (see :func:`plot_loss_curves`).
    logy : bool
        Logarithmic y axis.
    title : str or None
    figsize : tuple

    Returns
    -------
    matplotlib.axes.Axes
        With one line for the training losses and, when the optimizer
        recorded some, one for the validation losses in the same colour.
    """
    if not hasattr(optimizer, "train_losses_"):
        raise ValueError(f"{type(optimizer).__name__} is not fitted: it has no train_losses_.")
    label = type(optimizer).__name__ if label is None else label
    ax = _new_axes(ax, figsize)
    x, y = _as_curve(optimizer.train_losses_)
    (line,) = ax.plot(x, _transform(y, baseline, logy), label=f"{label} train")
    if len(optimizer.validation_losses_):
        x, y = _as_curve((optimizer.validation_epochs_, optimizer.validation_losses_))
        ax.plot(
            x,
            _transform(y, baseline, logy),
            "o--",
            color=line.get_color(),
            markersize=4,
            label=f"{label} validation",
        )
    return _finish(ax, logy, title, "epoch", None, baseline)


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
        With one group of bars per feature and one bar colour per model.
    """
    if table.shape[0] == 0 or table.shape[1] == 0:
        raise ValueError(f"The table has shape {table.shape}: it needs rows and columns.")
    ax = _new_axes(ax, figsize)
    n_rows, n_models = table.shape
    positions = np.arange(n_rows)
    width = 0.8 / n_models
    for i, column in enumerate(table.columns):
        offset = (i - (n_models - 1) / 2) * width
        ax.bar(positions + offset, table[column].to_numpy(dtype=float), width, label=str(column))
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

    Returns
    -------
    matplotlib.axes.Axes
        One line (the median over the runs, at each x) and one shaded band
        (from the smallest to the largest run) per group, in the same colour.
    """
    if not groups:
        raise ValueError("groups is empty: give at least one label and its runs.")
    ax = _new_axes(ax, figsize)
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
        (line,) = ax.plot(x, median, label=name)
        if len(runs) > 1:
            ax.fill_between(x, low, high, color=line.get_color(), alpha=band_alpha, linewidth=0)
    return _finish(ax, logy, title, xlabel, ylabel, baseline)


#: Columns of a kernel table (:func:`helpers.profiling.kernel_table`) the
#: kernel plots read.
_KERNEL_COLUMNS = ("session", "op_type", "µs per step")


def _check_kernel_table(table, name="table"):
    missing = [c for c in _KERNEL_COLUMNS if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(
            f"{name} lacks the columns {missing}: give a table made by "
            "helpers.profiling.profile_training or kernel_table."
        )
    if len(table) == 0:
        raise ValueError(f"{name} has no rows: the profile recorded no kernel.")


def _check_top(top):
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ValueError(f"top must be an integer >= 1, got {top!r}.")


def _short_session(session):
    """A session role without its explanation: 'model (forward + backward)' -> 'model'."""
    return str(session).split(" (", 1)[0]


def plot_kernel_times(table, ax=None, top=10, title=None, colors=None, figsize=(8, 4.5)):
    """Horizontal bars: the time of each kernel in a training step, one colour per session.

    Parameters
    ----------
    table : pandas.DataFrame
        A kernel table (:func:`helpers.profiling.profile_training`): columns
        ``session``, ``op_type``, ``µs per step`` and, optionally,
        ``share of step (%)``, written at the end of each bar.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    top : int
        The ``top`` slowest rows are drawn, the slowest at the top.
    title : str or None
    colors : dict, optional
        Session to a matplotlib colour; by default the colour cycle, in the
        order the sessions first appear among the slowest rows.
    figsize : tuple
        Size of a new figure, in inches.

    Returns
    -------
    matplotlib.axes.Axes
        One bar per row (``ax.containers``: one group of bars per session),
        labelled with the operator type; the legend names the sessions.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({
    ...     "session": ["model", "model", "update", "model"],
    ...     "op_type": ["MatMul", "ReluGrad", "Sub", "Add"],
    ...     "µs per step": [300.0, 120.0, 10.0, 5.0]})
    >>> ax = plot_kernel_times(table, top=3)
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['MatMul', 'ReluGrad', 'Sub']
    >>> [len(bars) for bars in ax.containers]
    [2, 1]
    """
    _check_kernel_table(table)
    _check_top(top)
    rows = table.sort_values("µs per step", ascending=False, kind="stable").head(top)
    ax = _new_axes(ax, figsize)
    sessions = list(dict.fromkeys(rows["session"]))
    cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    colors = {**{s: cycle[i % len(cycle)] for i, s in enumerate(sessions)}, **(colors or {})}
    positions = np.arange(len(rows))
    times = rows["µs per step"].to_numpy(dtype=float)
    for session in sessions:
        mask = (rows["session"] == session).to_numpy()
        ax.barh(positions[mask], times[mask], color=colors[session], label=str(session))
    if "share of step (%)" in rows:
        for y, x, share in zip(positions, times, rows["share of step (%)"]):
            ax.annotate(f" {share:.0f}%", (x, y), va="center", fontsize="small")
    ax.set_yticks(positions)
    ax.set_yticklabels([str(op) for op in rows["op_type"]])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the slowest at the top
    ax.set_xlim(0, times.max() * 1.15 if times.max() > 0 else 1)
    ax.set_xlabel("µs per training step")
    ax.set_ylabel("operator (kernel)")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(title="session", loc="lower right")
    return ax


def plot_kernel_comparison(tables, ax=None, top=10, title=None, figsize=(8, 5)):
    """Grouped horizontal bars: the same kernels in several profiles of a training step.

    Parameters
    ----------
    tables : dict
        Label (a configuration: ``'fast_gradients=False'``...) to its kernel
        table (:func:`helpers.profiling.profile_training`). Kernels are matched
        on ``(session, op_type)``; one missing from a profile counts as 0 µs.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    top : int
        The ``top`` kernels whose largest time over the profiles is largest
        are drawn, the slowest at the top.
    title : str or None
    figsize : tuple
        Size of a new figure, in inches.

    Returns
    -------
    matplotlib.axes.Axes
        One group of bars per kernel, one bar colour per profile
        (``ax.containers``: one per profile, in the order of ``tables``).
        A kernel is labelled with its operator type, followed by its session
        (without its parenthesis) when the operator type appears in several
        sessions of the profiles: ``'(overhead), model'``.

    Examples
    --------
    >>> import pandas as pd
    >>> slow = pd.DataFrame({"session": ["model", "model"], "op_type": ["MatMul", "ReluGrad"],
    ...                      "µs per step": [300.0, 120.0]})
    >>> fast = pd.DataFrame({"session": ["model", "model"], "op_type": ["MatMul", "Where"],
    ...                      "µs per step": [300.0, 20.0]})
    >>> ax = plot_kernel_comparison({"before": slow, "after": fast})
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['MatMul', 'ReluGrad', 'Where']
    >>> [float(bar.get_width()) for bar in ax.containers[1]]
    [300.0, 0.0, 20.0]
    """
    if not tables:
        raise ValueError("tables is empty: give at least one label and its kernel table.")
    for label, table in tables.items():
        _check_kernel_table(table, f"The table of {label!r}")
    _check_top(top)
    times = {
        label: table.groupby(["session", "op_type"], sort=False)["µs per step"].sum()
        for label, table in tables.items()
    }
    # one column per profile, one row per kernel; absent kernels take 0 µs
    import pandas as pd  # noqa: PLC0415 - pandas is only needed here

    wide = pd.DataFrame(times).fillna(0.0)
    # an operator type found in several sessions (Mul in the model and in the update) is named with its session
    op_types = [op for _, op in wide.index]
    order = wide.max(axis=1).sort_values(ascending=False, kind="stable").index[:top]
    wide = wide.loc[order]
    ax = _new_axes(ax, figsize)
    positions = np.arange(len(wide))
    height = 0.8 / len(tables)
    for i, label in enumerate(wide.columns):
        offset = (i - (len(tables) - 1) / 2) * height
        ax.barh(positions + offset, wide[label].to_numpy(dtype=float), height, label=str(label))
    ax.set_yticks(positions)
    ax.set_yticklabels(
        [op if op_types.count(op) == 1 else f"{op}, {_short_session(session)}" for session, op in wide.index]
    )
    ax.set_ylim(len(wide) - 0.5, -0.5)
    ax.set_xlabel("µs per training step")
    ax.set_ylabel("operator (kernel)")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right")
    return ax
