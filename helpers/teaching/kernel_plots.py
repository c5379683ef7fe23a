"""Plots of runtime profiles: where the time of a training step goes, kernel by kernel.

They read the tables of :func:`helpers.measure.profiling.kernel_table` and,
as :mod:`helpers.teaching.plotting`, draw on a matplotlib ``Axes`` and return it.
"""

import matplotlib.pyplot as plt
import numpy as np

from .palette import line_styles, shades
from .plotting import bar_style, new_axes

#: Columns of a kernel table (:func:`helpers.measure.profiling.kernel_table`) the
#: kernel plots read.
_KERNEL_COLUMNS = ("session", "op_type", "µs per step")


def _check_kernel_table(table, name="table"):
    missing = [c for c in _KERNEL_COLUMNS if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(
            f"{name} lacks the columns {missing}: give a table made by "
            "helpers.measure.profiling.profile_training or kernel_table."
        )
    if len(table) == 0:
        raise ValueError(f"{name} has no rows: the profile recorded no kernel.")


def _check_top(top):
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ValueError(f"top must be an integer >= 1, got {top!r}.")


def _short_session(session):
    """A session role without its explanation: 'model (forward + backward)' -> 'model'."""
    return str(session).split(" (", 1)[0]


def plot_kernel_times(
    table, ax=None, top=10, title=None, colors=None, figsize=(8, 4.5), library=None
):
    """Horizontal bars: the time of each kernel in a training step, one colour per session.

    Parameters
    ----------
    table : pandas.DataFrame
        A kernel table (:func:`helpers.measure.profiling.profile_training`): columns
        ``session``, ``op_type``, ``µs per step`` and, optionally,
        ``share of step (%)``, written at the end of each bar.
    ax : matplotlib.axes.Axes or None
        Where to draw; a new figure of size ``figsize`` when None.
    top : int
        The ``top`` slowest rows are drawn, the slowest at the top.
    title : str or None
    colors : dict, optional
        Session to a matplotlib colour; by default the colour cycle, or the
        shades of ``library``, in the order the sessions first appear among
        the slowest rows.
    figsize : tuple
        Size of a new figure, in inches.
    library : str, optional
        The library that ran the profile (``'ort whole-training'``...): its
        sessions take the :func:`~helpers.teaching.palette.shades` of its
        colour, so that the chart keeps the library's colour of every figure.

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
    >>> ax = plot_kernel_times(table, library="ort forward-backward")
    >>> ax.containers[0].patches[0].get_facecolor() == ax.containers[1].patches[0].get_facecolor()
    False
    """
    _check_kernel_table(table)
    _check_top(top)
    rows = table.sort_values("µs per step", ascending=False, kind="stable").head(top)
    ax = new_axes(ax, figsize)
    sessions = list(dict.fromkeys(rows["session"]))
    if library is None:
        cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
        cycle = [cycle[i % len(cycle)] for i in range(len(sessions))]
    else:
        cycle = shades(library, len(sessions))
    colors = {**dict(zip(sessions, cycle)), **(colors or {})}
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
        table (:func:`helpers.measure.profiling.profile_training`). Kernels are matched
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
        Labels that start with a library (``'ort whole-training, 1 thread'``)
        take its colour (:mod:`~helpers.teaching.palette`), with shades and
        hatches for the profiles of the same library.
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
    # an operator type found in several sessions (Mul in the model and in the update) is named with
    # its session
    op_types = [op for _, op in wide.index]
    order = wide.max(axis=1).sort_values(ascending=False, kind="stable").index[:top]
    wide = wide.loc[order]
    ax = new_axes(ax, figsize)
    positions = np.arange(len(wide))
    height = 0.8 / len(tables)
    styles = line_styles([str(label) for label in wide.columns])
    for i, label in enumerate(wide.columns):
        offset = (i - (len(tables) - 1) / 2) * height
        ax.barh(
            positions + offset,
            wide[label].to_numpy(dtype=float),
            height,
            label=str(label),
            **bar_style(styles[str(label)]),
        )
    ax.set_yticks(positions)
    ax.set_yticklabels(
        [
            op if op_types.count(op) == 1 else f"{op}, {_short_session(session)}"
            for session, op in wide.index
        ]
    )
    ax.set_ylim(len(wide) - 0.5, -0.5)
    ax.set_xlabel("µs per training step")
    ax.set_ylabel("operator (kernel)")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right")
    return ax
