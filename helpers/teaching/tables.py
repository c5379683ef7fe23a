"""Tables the notebooks display: numbers rounded column by column, units in the headers, a named
index.

A notebook keeps computing with its DataFrame as it is; only what it shows
goes through :func:`format_table`, whose pandas ``Styler`` renders as HTML in
Jupyter and on the documentation site, the underlying numbers untouched.
"""

import math

import numpy as np
import pandas as pd


def column_format(values, digits=4):
    """The format string that shows a column of floats with about ``digits`` significant digits.

    * integers (epochs, counts stored as floats) and short values written
      as given (learning rates such as 0.01) stay as they are;
    * a column spanning more than four decades shows each value with
      ``digits`` significant digits;
    * very small or very large columns are written in scientific notation;
    * any other column gets the decimals that give its largest value
      ``digits`` significant digits, the same for every row, so that the
      decimal points line up.

    Parameters
    ----------
    values : array-like of float
    digits : int
        Significant digits of the largest value.

    Returns
    -------
    str
        A format string such as ``'{:.2f}'``.

    Examples
    --------
    >>> column_format([12.3456, 3.2]), column_format([0.01, 0.3]), column_format([7500.0, 300.0])
    ('{:.2f}', '{:g}', '{:.0f}')
    >>> column_format([0.0099999998, 0.0070000002])  # float32 learning rates
    '{:.5f}'

    >>> column_format([2.61803e-7, 1.41421e-6]), column_format([0.982014, 6.14417e-6, 0.0])
    ('{:.2e}', '{:.4g}')
    """
    values = np.asarray(values, dtype=float).ravel()
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "{:g}"
    if np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e15:
        return "{:.0f}"
    if all(float(f"{v:.{digits}g}") == v for v in finite):
        return "{:g}"
    magnitudes = np.abs(finite[finite != 0])
    largest = float(
        f"{magnitudes.max():.{digits}g}"
    )  # 0.0099999998 (a float32 0.01) counts as 0.01
    if largest < 1e-3 or largest >= 10 ** (digits + 2):
        return f"{{:.{max(digits - 2, 1)}e}}"
    if largest / magnitudes.min() > 1e4:
        return f"{{:.{digits}g}}"
    return f"{{:.{max(digits - 1 - math.floor(math.log10(largest)), 0)}f}}"


#: The colour of the bars :func:`format_table` draws (matplotlib's ``tab:blue``): as
#: visible on a light page as on a dark one.
BAR_COLOR = "#1f77b4"


def _bar_label(table, k):
    """A blank header for the k-th bar column, unlike any column of ``table``."""
    label = " " * (k + 1)
    while label in table.columns:
        label += " "
    return label


def _mean_std_columns(table, digits, na_rep):
    """``table`` with each ``(name, 'mean')``, ``(name, 'std')`` pair as one column of text.

    The column is ``(name, 'mean ± std')``: the mean rounded as :func:`column_format`
    rounds its column, the standard deviation to two significant digits (the mean
    alone where the deviation is missing: a single run).
    """
    columns = table.columns
    if columns.nlevels != 2:
        return table
    names = list(dict.fromkeys(columns.get_level_values(0)))
    if not all(
        sorted(columns[columns.get_level_values(0) == n].get_level_values(1)) == ["mean", "std"]
        for n in names
    ):
        return table
    shown = {}
    for name in names:
        mean, std = table[(name, "mean")], table[(name, "std")]
        if not (
            pd.api.types.is_numeric_dtype(mean.dtype) and pd.api.types.is_numeric_dtype(std.dtype)
        ):
            return table
        mean_format = column_format(mean, digits)
        shown[(name, "mean ± std")] = [
            na_rep
            if pd.isna(m)
            else mean_format.format(m)
            if pd.isna(s)
            else f"{mean_format.format(m)} ± {s:.2g}"
            for m, s in zip(mean, std)
        ]
    result = pd.DataFrame(shown, index=table.index)
    result.columns = result.columns.set_names(columns.names)
    return result


def format_table(table, digits=4, index_name=None, units=None, caption=None, na_rep="—", bars=None):
    """A DataFrame ready to be displayed: rounded floats, units in the headers, a named index.

    The header is one row: the index's name stands in the corner above the
    index (where pandas would add a second, otherwise empty, header row),
    beside the columns' name if they have one (``'run ↓ metric →'``), unless
    the index has several levels or the columns several, the last one named.
    A summary over runs, whose columns are ``(name, 'mean')`` and
    ``(name, 'std')`` pairs (:func:`helpers.teaching.comparison.summarize_runs`),
    shows one ``mean ± std`` column per name: half the columns.

    Parameters
    ----------
    table : pandas.DataFrame or pandas.Series
        The table, left unchanged.
    digits : int
        Significant digits of the largest value of each float column (see
        :func:`column_format`).
    index_name : str or list of str, optional
        The name of the index (one per level), when the table has none or
        a less telling one. Float index values are rounded as the columns.
    units : dict, optional
        Column to its unit, written in the header: ``{'time': 'ms'}`` shows
        the column ``time`` as ``time (ms)``. With columns on several levels,
        the names of the first level.
    caption : str, optional
        A line above the table: what it holds, or what to look at.
    na_rep : str
        What a missing value shows.
    bars : dict, optional
        Column to the value a full bar stands for (``None``: the column's
        largest): each such column is followed by a column of bars, without
        text, so that the numbers stay readable on any background and never
        overlap a bar. ``{'share (%)': 100}`` draws shares of a whole.

    Returns
    -------
    pandas.io.formats.style.Styler
        Renders as HTML in notebooks and on the documentation site.

    Examples
    --------
    >>> import pandas as pd
    >>> times = pd.DataFrame({"fit": [0.123456, 1.5], "steps": [100, 200], "lr": [0.01, 0.1]},
    ...                      index=["scikit-learn", "onnxruntime"])
    >>> styler = format_table(times, index_name="library", units={"fit": "s"})
    >>> print(styler.to_string())  # doctest: +NORMALIZE_WHITESPACE
    library fit (s) steps lr
    scikit-learn 0.123 100 0.01
    onnxruntime 1.500 200 0.1
    <BLANKLINE>
    >>> penalties = pd.DataFrame(
    ...     {"R²": [0.21563, 0.37761]}, index=pd.Index([0.0, 0.3], name="alpha")
    ... )
    >>> print(format_table(penalties).to_string())  # doctest: +NORMALIZE_WHITESPACE
    alpha R²
    0 0.2156
    0.3 0.3776
    <BLANKLINE>
    """
    if isinstance(table, pd.Series):
        table = table.to_frame()
    table = table.infer_objects()  # the numbers of a transposed table of mixed rows are objects
    if units:
        level = 0 if isinstance(table.columns, pd.MultiIndex) else None
        table = table.rename(columns={c: f"{c} ({u})" for c, u in units.items()}, level=level)
    if index_name is not None:
        table = table.rename_axis(index_name)
    table = _mean_std_columns(table, digits, na_rep)
    formats = {
        column: column_format(table[column], digits)
        for column in table.columns
        if pd.api.types.is_float_dtype(table[column].dtype)
    }
    scales = {}
    if bars:
        if isinstance(table.columns, pd.MultiIndex):
            raise ValueError("bars needs a table whose columns have one level")
        missing = [c for c in bars if c not in table.columns]
        if missing:
            raise ValueError(f"bars names columns the table does not have: {missing}")
        table = table.copy()
        for k, (column, full) in enumerate(bars.items()):
            label = _bar_label(table, k)
            values = pd.to_numeric(table[column], errors="coerce").astype(float)
            table.insert(table.columns.get_loc(column) + 1, label, values)
            formats[label] = lambda value: ""
            scales[label] = values.max() if full is None else full
    # one header row: the index's name in the corner, as the columns' (last) name; when
    # the columns of one level have a name too, both: "rows' name ↓ columns' name →"
    one_row = (
        table.index.nlevels == 1
        and table.index.name is not None
        and (table.columns.names[-1] is None or table.columns.nlevels == 1)
    )
    if one_row:
        table = table.copy() if not bars else table
        names = list(table.columns.names)
        names[-1] = table.index.name if names[-1] is None else f"{table.index.name} ↓ {names[-1]} →"
        table.columns = table.columns.set_names(names)
    styler = table.style.format(formats, na_rep=na_rep)
    if one_row:
        styler = styler.hide(axis="index", names=True)
    for label, full in scales.items():
        styler = styler.bar(subset=[label], color=BAR_COLOR, vmin=0, vmax=full, props="width: 8em;")
    for level in range(table.index.nlevels):  # float index levels too: alpha=0.3, not 0.300000
        values = table.index.get_level_values(level)
        if pd.api.types.is_float_dtype(values.dtype):
            styler = styler.format_index(
                column_format(values, digits), axis=0, level=level, na_rep=na_rep
            )
    if caption:
        styler = styler.set_caption(caption)
    return styler
