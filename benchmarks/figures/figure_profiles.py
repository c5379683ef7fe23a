"""Figures read from the committed profiles: the tables of ``results/kernel_survey.md``.

Each function takes a :class:`benchmarks.figures.figure_sources.Results` and returns
the text a document quotes (a share of the machine's peak, a kernel's time
against torch's, a rewrite's measured ratio);
:data:`benchmarks.figures.figure_names.FIGURES` names each figure quoted.
"""

import re

import pandas as pd

from benchmarks.figures.figure_sources import Results  # noqa: F401  (the examples use it)
from benchmarks.report.ratios import value_range


def kernel_value(results, model, family, column):
    """A cell of a side-by-side kernel table: ``'2.50'``, or a GFLOP/s cell's share of the peak.

    Examples
    --------
    >>> family = "conv gradients (input+weight)"
    >>> kernel_value(Results("."), "resnet_large", family, "ORT GFLOP/s (% peak)")[-1]
    '%'
    """
    cell = results.kernels[model].loc[family, column]
    peak = re.search(r"\((\d+%)\)", cell)
    return peak[1] if peak else cell


def kernel_span(results, family, column, fmt="{:.1f}x", models=None):
    """The range of a side-by-side kernel column for ``family`` over ``models`` (default: all).

    Examples
    --------
    >>> " to " in kernel_span(Results("."), "normalization", "ORT/torch")
    True
    """
    values = []
    for model, table in results.kernels.items():
        if (models is None or model in models) and family in table.index:
            cell = kernel_value(results, model, family, column)
            if cell != "-" and float(cell.rstrip("%")) > 0:
                values.append(float(cell.rstrip("%")))
    return value_range(values, fmt)


def kernel_peak_max(results, family, column):
    """The highest share of the machine's peak ``family`` reaches in ``column``, over the models.

    Examples
    --------
    >>> kernel_peak_max(Results("."), "matrix products", "torch GFLOP/s (% peak)").endswith("%")
    True
    """
    values = [
        float(kernel_value(results, m, family, column).rstrip("%"))
        for m, t in results.kernels.items()
        if family in t.index
    ]
    return f"{max(values):.0f}%"


def study_span(results, section, variant, models=None, threads=None, invert=False):
    """``'0.87 to 0.98'``: a rewrite's step-time ratio over a study of ``kernel_survey.md``.

    The rows of ``section``'s tables whose ``variant`` matches, for ``models`` and ``threads``
    (every one by default); ``invert`` gives how many times longer the step was without it.

    Examples
    --------
    >>> study_span(Results("."), "The Gather rewrite", "gather_nd").startswith("0.")
    True
    """
    ratios = []
    for _, table in results.sections[section]:
        if "variant" not in table or "ratio" not in table:
            continue
        rows = table[table.variant == variant]
        rows = rows[rows.model.isin(models)] if models else rows
        rows = rows[rows.threads == str(threads)] if threads else rows
        ratios += [1 / float(r) if invert else float(r) for r in rows.ratio]
    return value_range(ratios, "{:.1f}" if invert else "{:.2f}")


def section_cells(results, section, column, fmt="{:.0f}", **match):
    """The range of ``column`` over the matching rows of ``section``'s tables (kernel_survey.md).

    ``match`` gives the value of other columns (``mask="where"``); ``fmt`` writes each end.

    Examples
    --------
    >>> section_cells(Results("."), "Masks for Relu's gradient", "µs, 1 thread", mask="where",
    ...               kernel="Where").isdigit()
    True
    """
    values = []
    for _, table in results.sections[section]:
        if column in table and all(key in table for key in match):
            rows = table[(table[list(match)] == pd.Series(match)).all(axis=1)]
            values += [float(v) for v in rows[column]]
    return value_range(values, fmt)
