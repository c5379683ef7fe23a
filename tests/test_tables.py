"""helpers.teaching.tables: what a displayed table shows, the table itself untouched."""

import numpy as np
import pandas as pd
import pytest

from helpers.teaching.tables import BAR_COLOR, column_format, format_table


def shown(styler):
    """The cells of a Styler as displayed text, one list per row (header rows first)."""
    return [line.split(" ") for line in styler.to_string(delimiter=" ").splitlines()]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([123.456789, 7.5], "{:.1f}"),  # four digits for the largest value, same decimals below
        ([0.123456, 0.5], "{:.4f}"),
        ([1e-3, 0.01, 0.3], "{:g}"),  # learning rates as written
        ([7500.0, 750.0, np.nan], "{:.0f}"),  # counts stored as floats
        ([1.19e-7, 2.38e-7 + 1e-12], "{:.2e}"),  # float32 rounding
        ([2.5e7 + 0.5, 1.5], "{:.2e}"),
        ([0.98201, 6.1441e-6], "{:.4g}"),  # more than four decades apart
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
    assert rows[0] == ["run", "loss", "(MSE)", "updates", "ok", "name"]
    assert rows[1] == ["first", "1235", "10", "True", "a"]
    assert rows[2] == ["second", "2", "20", "False", "b"]
    pd.testing.assert_frame_equal(table, copy)


def test_format_table_missing_values_float_index_and_caption():
    table = pd.Series([0.21563, np.nan], index=pd.Index([0.0, 0.3], name="alpha"), name="R²")
    styler = format_table(table, caption="test R²")
    assert styler.caption == "test R²"
    assert shown(styler) == [["alpha", "R²"], ["0", "0.2156"], ["0.3", "—"]]


def test_format_table_numbers_of_a_transposed_mixed_table():
    rows = {
        "whole": {"epochs": 5, "last loss": 2.2303219, "exported": "Relu"},
        "fb": {"epochs": 5, "last loss": 2.2303221, "exported": "Relu"},
    }
    cells = shown(format_table(pd.DataFrame(rows).T, digits=7))
    assert cells[-1] == ["fb", "5", "2.230322", "Relu"]


def test_format_table_units_on_the_first_level_of_two():
    columns = pd.MultiIndex.from_product([["time", "R²"], ["min", "max"]])
    table = pd.DataFrame([[1.0, 0.5, 0.9, 0.01]], columns=columns)
    styler = format_table(table, units={"time": "s"})
    assert list(styler.data.columns.get_level_values(0)) == ["time (s)", "time (s)", "R²", "R²"]


def header_rows(styler):
    html = styler.to_html()
    return html[html.index("<thead>") : html.index("</thead>")].count("<tr>")


def test_format_table_one_header_row_with_the_index_name_in_the_corner():
    named = pd.DataFrame({"a": [1.5, 2.5]}, index=pd.Index(["x", "y"], name="run"))
    assert header_rows(named.style) == 2  # pandas: the index's name on a row of its own
    styler = format_table(named)
    assert header_rows(styler) == 1
    assert '<th class="index_name level0" >run</th>' in styler.to_html()
    assert named.columns.name is None  # the table itself is untouched
    both = named.rename_axis("metric", axis="columns")
    assert shown(format_table(both))[0] == ["run", "↓", "metric", "→", "a"]
    assert header_rows(format_table(both)) == 1
    unnamed = format_table(pd.DataFrame({"a": [1.5, 2.5]}))
    assert header_rows(unnamed) == 1
    assert shown(unnamed)[0] == ["", "a"]


def test_format_table_two_header_rows_only_when_the_corner_is_taken():
    columns = pd.MultiIndex.from_product([["time", "R²"], ["min", "max"]])
    table = pd.DataFrame(
        [[1.0, 0.5, 0.9, 0.01]], columns=columns, index=pd.Index(["ort"], name="library")
    )
    styler = format_table(table)
    assert header_rows(styler) == 2  # the columns' two levels, the index's name beside the second
    assert shown(styler)[1][:3] == ["library", "min", "max"]
    two_levels = table.set_index(
        pd.MultiIndex.from_tuples([("ort", 1)], names=["library", "threads"])
    )
    assert header_rows(format_table(two_levels)) == 3  # two index names: pandas' own layout


def test_format_table_bars_in_a_column_of_their_own():
    table = pd.DataFrame(
        {"kernel": ["MatMul", "ReluGrad"], "share (%)": [43.04, 27.3]},
        index=pd.Index([0, 1]),
    )
    styler = format_table(table, bars={"share (%)": 100})
    rows = [line.split("|") for line in styler.to_string(delimiter="|").splitlines()]
    assert rows[0] == ["", "kernel", "share (%)", " "]
    assert rows[1] == ["0", "MatMul", "43.04", ""]  # the number, then its bar without text
    html = styler.to_html()
    assert html.count(f"linear-gradient(90deg, {BAR_COLOR} 43.0%, transparent 43.0%)") == 1
    assert html.count("linear-gradient") == 2  # bars only in the bar column
    assert list(table.columns) == ["kernel", "share (%)"]  # the table itself is untouched
    whole = format_table(table, bars={"share (%)": None}).to_html()
    assert f"{BAR_COLOR} 100.0%" in whole  # the largest value is a full bar


def test_format_table_bars_of_unknown_columns():
    with pytest.raises(ValueError, match="does not have"):
        format_table(pd.DataFrame({"a": [1.0]}), bars={"b": 1})


def test_format_table_mean_and_std_in_one_column():
    scores = pd.DataFrame(
        {
            "library": ["scikit-learn", "onnxruntime"] * 2,
            "seed": [0, 0, 1, 1],
            "R² (test)": [0.80, 0.82, 0.84, 0.80],
            "fit time": [1.5, 0.5, 2.5, 0.7],
        }
    )
    summary = scores.groupby("library", sort=False)[["R² (test)", "fit time"]].agg(["mean", "std"])
    rows = [
        line.split("|")
        for line in format_table(summary, units={"fit time": "s"})
        .to_string(delimiter="|")
        .splitlines()
    ]
    assert rows[0] == ["", "R² (test)", "fit time (s)"]
    assert rows[1] == ["library", "mean ± std", "mean ± std"]
    assert rows[2] == ["scikit-learn", "0.8200 ± 0.028", "2 ± 0.71"]
    assert rows[3] == ["onnxruntime", "0.8100 ± 0.014", "0.6 ± 0.14"]
    single = summary.copy()
    single.loc[:, (slice(None), "std")] = np.nan  # one run: no deviation
    assert format_table(single).to_string(delimiter="|").splitlines()[2] == "scikit-learn|0.8200|2"
    other = summary.rename(columns={"std": "min"}, level=1)  # not a mean/std summary: as it is
    assert list(format_table(other).data.columns) == list(other.columns)
