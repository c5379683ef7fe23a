"""Small multiples: one panel per loss curve, for curves that would hide one another on a single
plot.

Four jittery curves of one library share its colour (:mod:`~helpers.teaching.palette`)
and cross a hundred times: on one plot, no line style keeps them apart.
:func:`plot_loss_panels` gives each its own panel, in its colour, with the
others drawn in grey behind it for comparison.
"""

import math

import matplotlib.pyplot as plt

from .palette import color, library_of
from .plotting import _as_curve, _transform, loss_label


def plot_loss_panels(
    curves,
    baseline=None,
    logy=True,
    title=None,
    xlabel="epoch",
    ylabel=None,
    loss=None,
    ncols=2,
    panel_size=(5.0, 3.2),
):
    """One panel per loss curve, every other curve in grey behind it.

    Parameters
    ----------
    curves : dict
        Label to losses: a sequence (plotted against 1, 2, ...) or a tuple
        ``(x, losses)``, as in :func:`~helpers.teaching.plotting.plot_loss_curves`.
    baseline : float or None
        Subtracted from every loss, for example the minimum of the loss.
    logy : bool
        Logarithmic y axis; values that are zero or negative are left out.
    title : str or None
        The title of the figure, above the panels.
    xlabel : str
    ylabel : str or None
        A label built from ``loss``, ``baseline`` and ``logy`` when None.
    loss : str or None
        What the loss is, for the y label: ``'mean squared error'``.
    ncols : int
        Panels per row.
    panel_size : tuple
        Size of one panel, in inches.

    Returns
    -------
    numpy.ndarray of matplotlib.axes.Axes
        One panel per curve, in the order of ``curves``, titled with its
        label; the panels share their axes. A curve whose label starts
        with a library is drawn in the library's colour.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> axes = plot_loss_panels(
    ...     {
    ...         "onnxruntime, sgd": [4.0, 2.0, 1.0],
    ...         "onnxruntime, adamw": [3.0, 1.0, 0.5],
    ...         "onnxruntime, nesterov": [5.0, 1.0, 0.2],
    ...     },
    ...     title="Three rules",
    ... )
    >>> [ax.get_title() for ax in axes], len(axes[0].get_lines())
    (['onnxruntime, sgd', 'onnxruntime, adamw', 'onnxruntime, nesterov'], 3)
    >>> axes[0].get_lines()[-1].get_label(), axes[0].get_figure().get_suptitle()
    ('onnxruntime, sgd', 'Three rules')
    >>> axes[0].get_figure().get_supylabel()
    'loss (log scale)'
    >>> plt.close("all")
    """
    if not curves:
        raise ValueError("curves is empty: give at least one label and its losses.")
    if ncols < 1:
        raise ValueError(f"ncols must be at least 1, got {ncols}.")
    ncols = min(ncols, len(curves))
    nrows = math.ceil(len(curves) / ncols)
    fig, grid = plt.subplots(
        nrows,
        ncols,
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    points = {label: _as_curve(values) for label, values in curves.items()}
    axes = grid.ravel()
    for index, (ax, (label, (x, y))) in enumerate(zip(axes, points.items())):
        for other, (x_other, y_other) in points.items():
            if other != label:
                ax.plot(x_other, _transform(y_other, baseline, logy), color="0.8", linewidth=0.8)
        colour = color(label) if library_of(label) else f"C{index % 10}"  # the library's own colour
        ax.plot(x, _transform(y, baseline, logy), color=colour, linewidth=1.5, label=label)
        ax.set_title(label)
        ax.grid(True, alpha=0.3)
        if logy:
            ax.set_yscale("log")
    for ax in axes[len(curves) :]:
        ax.remove()
    axes = axes[: len(curves)]
    fig.supylabel(
        ylabel if ylabel is not None else loss_label(loss, baseline, logy)
    )  # once, for every row
    for index, ax in enumerate(axes):
        if index + ncols >= len(curves):  # the lowest panel of its column
            ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return axes
