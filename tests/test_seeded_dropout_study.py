"""The study behind the README's figures on repeatable dropout: it runs and says what it found."""

import pandas as pd

from benchmarks.studies import seeded_dropout


def test_the_quick_study_times_both_apis_and_compares_thread_counts(tmp_path):
    assert seeded_dropout.main(["--quick", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "seeded_dropout.csv")
    cost = table[table.part == "cost"]
    assert sorted(cost.api) == ["ort forward-backward", "ort whole-training"]
    assert (cost.drawn_step_us > 0).all() or cost.caveat.notna().any()
    threads = table[table.part == "threads"]
    assert sorted(set(threads.threads.astype(str))) == ["2", "2 again", "4"]
    # the same thread count twice: the same weights, to the last bit
    assert (threads[threads.threads.astype(str) == "2 again"].max_weight_difference == 0).all()
    text = (tmp_path / "seeded_dropout.md").read_text()
    assert text.startswith("# What a repeatable dropout costs") and "20-64-3@32" in text
