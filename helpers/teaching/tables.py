"""Tables the notebooks display: numbers rounded column by column, units in the headers, a named index.

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
    largest = float(f"{magnitudes.max():.{digits}g}")  # 0.0099999998 (a float32 0.01) counts as 0.01
    if largest < 1e-3 or largest >= 10 ** (digits + 2):
        return f"{{:.{max(digits - 2, 1)}e}}"
    if largest / magnitudes.min() > 1e4:
        return f"{{:.{digits}g}}"
    return f"{{:.{max(digits - 1 - math.floor(math.log10(largest)), 0)}f}}"


def format_table(table, digits=4, index_name=None, units=None, caption=None, na_rep="—"):
    """A DataFrame ready to be displayed: rounded floats, units in the headers, a named index.

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
     fit (s) steps lr
    library
    scikit-learn 0.123 100 0.01
    onnxruntime 1.500 200 0.1
    <BLANKLINE>
    >>> penalties = pd.DataFrame({"R²": [0.21563, 0.37761]}, index=pd.Index([0.0, 0.3], name="alpha"))
    >>> print(format_table(penalties).to_string())  # doctest: +NORMALIZE_WHITESPACE
     R²
    alpha
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
    formats = {
        column: column_format(table[column], digits)
        for column in table.columns
        if pd.api.types.is_float_dtype(table[column].dtype)
    }
    styler = table.style.format(formats, na_rep=na_rep)
    for level in range(table.index.nlevels):  # float index levels too: alpha=0.3, not 0.300000
        values = table.index.get_level_values(level)
        if pd.api.types.is_float_dtype(values.dtype):
            styler = styler.format_index(column_format(values, digits), axis=0, level=level, na_rep=na_rep)
    if caption:
        styler = styler.set_caption(caption)
    return styler
