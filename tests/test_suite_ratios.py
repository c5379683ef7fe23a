"""One line per peer for the whole suite: geometric mean, range, wins; clean configurations only."""

import math

import pandas as pd
import pytest

from benchmarks.report.suite_ratios import suite_answer, suite_lines, suite_ratios, suite_table


def _rows(benchmark, configuration, times, threads=2, caveats=None, measure="time_per_update_s"):
    """A configuration's rows: one per framework, with its time and caveat."""
    return [
        {
            "benchmark": benchmark,
            "machine": "m",
            "threads": threads,
            "optimizer": "sgd",
            **configuration,
            "framework": framework,
            measure: time,
            "caveat": (caveats or {}).get(framework, ""),
        }
        for framework, time in times.items()
    ]


def _frame():
    """Two MLPs of the grid, a zoo model, a noisy zoo model, and a scikit-learn fit."""
    rows = []
    rows += _rows(
        "torch",
        {"model": "mlp", "hidden": 50},
        {
            "torch eager": 1.0,
            "torch.compile": 2.0,
            "ort whole-training": 0.25,
            "ort forward-backward": 0.5,
        },
    )
    rows += _rows(
        "torch",
        {"model": "mlp", "hidden": 500},
        {
            "torch eager": 1.0,
            "torch.compile": 1.0,
            "ort whole-training": 3.0,
            "ort forward-backward": 2.0,
        },
    )
    rows += _rows(
        "your_model",
        {"model": "x:cnn_small"},
        {"torch eager": 1.0, "ort whole-training": 1.0, "ort forward-backward": 2.0},
    )
    rows += _rows(
        "your_model",
        {"model": "x:cnn_large"},
        {"torch eager": 1.0, "ort whole-training": 0.01},
        caveats={"ort whole-training": "noisy: repeats spread 3.1x"},
    )
    rows += _rows(
        "sklearn",
        {"model": "linear", "n_samples": 1000},
        {"scikit-learn": 1.0, "ort whole-training": 149.0},
        measure="fit_time_s",
    )
    rows += _rows(
        "torch",
        {"model": "mlp", "hidden": 50, "optimizer": "adamw"},
        {"torch eager": 1.0, "ort whole-training": 0.001},
    )
    return pd.DataFrame(rows)


def test_the_faster_api_of_each_configuration_against_each_peer():
    ratios = suite_ratios(_frame()).set_index(["configuration", "peer"])
    assert ratios.loc[("model mlp, hidden 50", "torch eager"), "api"] == "ort whole-training"
    assert ratios.loc[("model mlp, hidden 50", "torch eager"), "ratio"] == pytest.approx(0.25)
    assert ratios.loc[("model mlp, hidden 50", "torch.compile"), "ratio"] == pytest.approx(0.125)
    assert ratios.loc[("model mlp, hidden 500", "torch eager"), "api"] == "ort forward-backward"
    assert ratios.loc[("model linear, n_samples 1000", "scikit-learn"), "ratio"] == pytest.approx(
        149.0
    )
    assert (
        ratios.loc[("model x:cnn_large", "torch eager"), "caveat"] == "noisy: repeats spread 3.1x"
    )
    assert (ratios.ratio > 0.005).all(), "an AdamW row counted: only plain SGD is compared"
    assert len(ratios) == 7


def test_geometric_mean_range_and_wins_over_clean_configurations_only():
    table = suite_table(suite_ratios(_frame())).set_index("peer")
    eager = table.loc["torch eager"]
    # 0.25, 2.0 and 1.0 are clean; the noisy 0.01 is left out, counted apart
    assert eager["configurations"] == 3 and eager["left out"] == 1
    assert eager["ratio"] == pytest.approx(math.exp((math.log(0.25) + math.log(2.0)) / 3))
    assert eager["onnxruntime wins"] == 1  # 1.0 is the same speed, not a win
    assert eager["geometric mean"] == "1.3x faster"
    assert eager["range"] == "from 4.0x faster to 2.0x slower"
    assert eager["whole-training"] == 2
    compiled = table.loc["torch.compile"]
    assert (
        compiled["configurations"] == 2
        and compiled["onnxruntime wins"] == 1
        and compiled["left out"] == 0
    )
    assert compiled["range"] == "from 8.0x faster to 2.0x slower"


def test_the_convention_never_says_a_bare_time_ratio():
    """149 times longer than scikit-learn reads '149.0x slower', never 0.0067."""
    table = suite_table(suite_ratios(_frame())).set_index("peer")
    assert table.loc["scikit-learn", "geometric mean"] == "149.0x slower"
    assert table.loc["scikit-learn", "range"] == "149.0x slower"
    text = "\n".join(suite_lines(_frame()))
    assert "0.0067" not in text and "0.25x" not in text
    assert "| scikit-learn | 2 | 1 | 0 | 149.0x slower | 149.0x slower | 0 | 1 |" in text


def test_the_answer_is_one_sentence_each_figure_a_row_of_the_table():
    text = "\n".join(suite_lines(_frame()))
    sentence = [line for line in text.splitlines() if line.startswith("Is onnxruntime faster?")]
    assert sentence == [
        (
            "Is onnxruntime faster? Against torch eager, mixed: its faster API wins 1 of 3 clean "
            "configurations at 2 threads; against torch.compile, mixed: 1 of 2 at 2 threads; "
            "against scikit-learn, no: 0 of 1 at 2 threads. The table gives the geometric mean, "
            "the range, and the configurations left out as not clean."
        )
    ]
    assert (
        "| torch eager | 2 | 3 | 1 | 1.3x faster | from 4.0x faster to 2.0x slower | 1 | 2 |"
        in text
    )


def test_yes_needs_most_configurations_won_and_a_faster_mean():
    table = pd.DataFrame(
        {
            "peer": "torch eager",
            "threads": [1, 2],
            "configurations": [4, 4],
            "onnxruntime wins": [3, 3],
            "ratio": [0.5, 0.6],
        }
    )
    assert "Against torch eager, yes:" in suite_answer(table)
    assert "Against torch eager, mixed:" in suite_answer(table.assign(ratio=[1.5, 2.0]))
    assert "Against torch eager, no:" in suite_answer(
        table.assign(ratio=[1.5, 2.0], **{"onnxruntime wins": [1, 1]})
    )


def test_no_ratio_no_section():
    only_torch = pd.DataFrame(_rows("torch", {"model": "mlp"}, {"torch eager": 1.0}))
    assert suite_lines(only_torch) == []
    assert suite_lines(pd.DataFrame()) == []
