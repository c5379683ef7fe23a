"""helpers.teaching.tables: what a displayed table shows, the table itself untouched."""
import numpy as np
import pandas as pd
import pytest

from helpers.teaching.tables import column_format, format_table


def shown(styler):
    """The cells of a Styler as displayed text, one list per row (header rows first)."""
    return [line.split(" ") for line in styler.to_string(delimiter=" ").splitlines()]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([123.456789, 7.5], "{:.1f}"),         # four digits for the largest value, same decimals below
        ([0.123456, 0.5], "{:.4f}"),
        ([1e-3, 0.01, 0.3], "{:g}"),           # learning rates as written
        ([7500.0, 750.0, np.nan], "{:.0f}"),   # counts stored as floats
        ([1.19e-7, 2.38e-7 + 1e-12], "{:.2e}"),  # float32 rounding
        ([2.5e7 + 0.5, 1.5], "{:.2e}"),
        ([0.98201, 6.1441e-6], "{:.4g}"),      # more than four decades apart
        ([np.nan, np.nan], "{:g}"),
    ],
)
def test_column_format(values, expected):
    assert column_format(values) == expected


def test_format_table_rounds_each_float_column_and_keeps_the_table():
    table = pd.DataFrame(
        {"loss": [1234.5678, 2.25], "updates": [10, 20], "ok": [True, False], "name": ["a", "b"]},
        index=["first", "second"],
    )
    copy = table.copy()
    rows = shown(format_table(table, index_name="run", units={"loss": "MSE"}))
    assert rows[0] == ["", "loss", "(MSE)", "updates", "ok", "name"]
    assert rows[1][0] == "run"
    assert rows[2] == ["first", "1235", "10", "True", "a"]
    assert rows[3] == ["second", "2", "20", "False", "b"]
    pd.testing.assert_frame_equal(table, copy)


def test_format_table_missing_values_float_index_and_caption():
    table = pd.Series([0.21563, np.nan], index=pd.Index([0.0, 0.3], name="alpha"), name="R²")
    styler = format_table(table, caption="test R²")
    assert styler.caption == "test R²"
    assert shown(styler)[2:] == [["0", "0.2156"], ["0.3", "—"]]


def test_format_table_numbers_of_a_transposed_mixed_table():
    rows = {"whole": {"epochs": 5, "last loss": 2.2303219, "exported": "Relu"},
            "fb": {"epochs": 5, "last loss": 2.2303221, "exported": "Relu"}}
    cells = shown(format_table(pd.DataFrame(rows).T, digits=7))
    assert cells[-1] == ["fb", "5", "2.230322", "Relu"]


def test_format_table_units_on_the_first_level_of_two():
    columns = pd.MultiIndex.from_product([["time", "R²"], ["mean", "std"]])
    table = pd.DataFrame([[1.0, 0.5, 0.9, 0.01]], columns=columns)
    styler = format_table(table, units={"time": "s"})
    assert list(styler.data.columns.get_level_values(0)) == ["time (s)", "time (s)", "R²", "R²"]
