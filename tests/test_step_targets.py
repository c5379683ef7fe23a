"""The training-speed targets: each verdict follows its measured ratio."""

import pandas as pd


def test_step_targets_verdicts_follow_the_ratios():
    from benchmarks.studies import step_targets as st
    from benchmarks.workloads import frameworks as fw

    times = {
        ("100-50-1@100", fw.ORT_WHOLE): 0.05,
        ("100-50-1@100", fw.ORT_FORWARD_BACKWARD): 0.09,
        ("100-50-1@100", fw.TORCH): 0.2,
        ("100-50-1@100", st.SKLEARN): 0.1,
        ("500-500-1@1000", fw.ORT_WHOLE): 6.0,
        ("500-500-1@1000", fw.ORT_FORWARD_BACKWARD): 6.5,
        ("500-500-1@1000", fw.ORT_BOUND): 5.0,
    }
    steps = pd.DataFrame(
        [
            {"size": s, "framework": f, "ms_per_step": v, "rounds_ms": [v, v]}
            for (s, f), v in times.items()
        ]
    )
    setup = pd.DataFrame(
        [
            {"framework": fw.ORT_WHOLE, "setup_ms": 3.0},
            {"framework": fw.ORT_FORWARD_BACKWARD, "setup_ms": 7.0},
        ]
    )
    table = st.target_table(steps, setup, st.selected(["small MLP", "large MLP"])).set_index(
        "target"
    )
    assert table.loc["small MLP, whole-training vs torch", "measured"] == "0.25x"
    assert table.loc["small MLP, whole-training vs torch", "verdict"] == "met"
    assert (
        table.loc["small MLP, forward/backward vs torch", "verdict"] == "missed by 1.12x"
    )  # 0.45 / 0.4
    assert table.loc["small MLP, whole-training vs scikit-learn", "verdict"] == "missed by 1.25x"
    assert table.loc["large MLP, whole-training vs runtime bound", "verdict"] == "missed by 1.04x"
    assert table.loc["large MLP, forward/backward vs runtime bound", "verdict"] == "met"
    assert table.loc[f"refit set-up, {fw.ORT_FORWARD_BACKWARD}", "verdict"] == "missed"
    text = st.markdown(table.reset_index(), steps, threads=2)
    assert text.startswith("# Training-speed targets") and "| target |" in text
