"""The report of backend_steps: ratios to the training package, the answer, the tables, the loss
check, and the summary's section (hand-written rows, no timing)."""

import math
import re

import pandas as pd
from bench_records import torch_rows, write_record

from benchmarks.report import aggregate
from benchmarks.report import backend_section as bs
from benchmarks.report import backend_tables as bt

WHOLE, FB = "ort whole-training", "ort forward-backward"
RUNS = [
    ("onnxruntime-training", "onnxruntime 1.19.2"),
    ("onnx", "onnxruntime 1.19.2"),
    ("onnx", "onnxruntime 1.31.1"),
]


def rows(cases, steps, spreads=None, gaps=None, notes=None):
    """Rows of ``backend_steps.csv``: ``cases`` ``[(kind, case)]``, both APIs, the three runs;
    ``steps[case][api]`` the three steps; ``spreads``, ``gaps``, ``notes`` by ``(case, api,
    run index)``."""
    spreads, gaps, notes = spreads or {}, gaps or {}, notes or {}
    found = []
    for kind, case in cases:
        for api in (WHOLE, FB):
            for index, (backend, runtime) in enumerate(RUNS):
                key = (case, api, index)
                found.append(
                    {
                        "kind": kind,
                        "case": case,
                        "api": api,
                        "backend": backend,
                        "runtime": runtime,
                        "batch_size": 64,
                        "threads": 1,
                        "step_s": steps[case][api][index],
                        "spread": spreads.get(key, 1.1),
                        "first_losses": "2.3 2.2 2.1",
                        "loss_gap": 0.0 if index == 0 else gaps.get(key, 1e-7),
                        "last_loss_gap": 0.0 if index == 0 else 2e-7,
                        "note": notes.get(key, ""),
                        "machine": "Intel(R) Xeon(R) Processor, 2 cores",
                    }
                )
    return pd.DataFrame(found)


CASES = [("mlp", "MLP 10-50-1@100"), ("zoo", "resnet_small")]
STEPS = {
    "MLP 10-50-1@100": {WHOLE: [1e-4, 1.2e-4, 0.5e-4], FB: [2e-4, 2e-4, 2e-4]},
    "resnet_small": {WHOLE: [0.02, 0.03, 0.04], FB: [0.02, 0.025, 0.03]},
}


def test_every_step_is_set_against_the_training_package_of_its_case_and_api():
    table = bt.ratios(rows(CASES, STEPS)).set_index(["case", "api", "run"])
    assert table.loc[("MLP 10-50-1@100", WHOLE, "onnx on 1.31.1"), "ratio"] == 0.5
    assert table.loc[("resnet_small", FB, "onnx on 1.19.2"), "ratio"] == 1.25
    assert table.loc[("resnet_small", FB, "training package on 1.19.2"), "ratio"] == 1.0


def test_a_noisy_reference_makes_every_ratio_of_its_case_noisy():
    df = rows(CASES, STEPS, spreads={("resnet_small", WHOLE, 0): 3.0})
    table = bt.ratios(df)
    part = table[(table.case == "resnet_small") & (table.api == WHOLE)]
    assert part.noisy.all()
    assert not table[table.case == "MLP 10-50-1@100"].noisy.any()


def test_the_answer_names_the_maintained_runtime_and_each_group_first():
    text = bs.answer_sentence(rows(CASES, STEPS))
    assert text.startswith("On onnxruntime 1.31.1 (backend onnx), a step is ")
    assert "in the MLP grid, whole-training 2.0x faster, forward/backward same" in text
    assert "in the zoo, whole-training 2.0x slower, forward/backward 1.5x slower" in text
    assert "agree with the training package's for 4 of 4 models and APIs" in text


def test_losses_that_differ_are_said_with_their_model_and_gap():
    df = rows(CASES, STEPS, gaps={("resnet_small", FB, 2): 3e-2})
    text = bs.answer_sentence(df)
    assert "for 3 of 4 models and APIs" in text
    assert "they differ for ResNet-style CNN (small) (forward/backward: 3e-02)" in text
    table = bt.step_table(df).set_index(["case", "API"])
    assert table.loc[("ResNet-style CNN (small)", "forward/backward"), "first losses agree"] == (
        "NO (3e-02)"
    )
    assert table.loc[("MLP 10-50-1@100", "whole-training"), "first losses agree"] == "yes (1e-07)"


def test_the_table_gives_each_run_its_time_and_ratio_and_marks_noise_and_failures():
    steps = {**STEPS, "resnet_small": {WHOLE: [0.02, math.nan, 0.04], FB: [0.02, 0.025, 0.03]}}
    df = rows(
        CASES,
        steps,
        spreads={("MLP 10-50-1@100", FB, 2): 2.5},
        notes={("resnet_small", WHOLE, 1): "failed: RuntimeError: no gradient for Foo"},
    )
    table = bt.step_table(df).set_index(["case", "API"])
    assert list(table.columns) == [
        "training package on 1.19.2",
        "onnx on 1.19.2",
        "onnx on 1.31.1",
        "first losses agree",
    ]
    mlp = table.loc[("MLP 10-50-1@100", "forward/backward")]
    assert mlp["training package on 1.19.2"] == "200 us"
    assert mlp["onnx on 1.31.1"] == "200 us (same*)"
    resnet = table.loc[("ResNet-style CNN (small)", "whole-training")]
    assert resnet["onnx on 1.19.2"] == "failed"
    assert resnet["onnx on 1.31.1"] == "40 ms (2.0x slower)"


def test_the_answer_table_sums_up_each_group_and_api():
    table = bt.answer_table(rows(CASES, STEPS)).set_index(["cases", "API"])
    assert table.loc[
        ("the MLP grid (1)", "whole-training"), "onnx on 1.31.1 vs training package"
    ] == ("2.0x faster")
    assert table.loc[("the zoo (1)", "forward/backward"), "onnx on 1.19.2 vs training package"] == (
        "1.2x slower"
    )


def test_the_markdown_answers_first_then_says_the_machine_and_the_method(tmp_path):
    rows(CASES, STEPS, spreads={("MLP 10-50-1@100", FB, 1): 2.5}).to_csv(
        tmp_path / bs.BACKEND_STEPS_CSV, index=False
    )
    text = bs.write_markdown(str(tmp_path))
    assert (tmp_path / "backend_steps.md").read_text(encoding="utf-8") == text + "\n"
    lines = text.splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith("On onnxruntime 1.31.1")
    assert "Measured on Intel(R) Xeon(R) Processor, 2 cores, 1 intra-op thread:" in text
    assert "CPU time of the thread that calls onnxruntime" in text
    assert "*: noisy (a timing's repeats spread over 2x)." in text
    assert "/tmp/" not in text and ".venv" not in text


def test_the_summary_gives_the_maintained_steps_beside_the_training_package(tmp_path):
    results = tmp_path / "reference"
    write_record(
        results, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    rows(CASES, STEPS).to_csv(tmp_path / bs.BACKEND_STEPS_CSV, index=False)
    aggregate.summarize(str(results))
    summary = (results / "summary.md").read_text(encoding="utf-8")
    section = summary.split("## The backend onnx on the maintained onnxruntime, beside 1.19.2\n")[1]
    section = section.split("\n## ")[0]
    assert section.lstrip().startswith("On onnxruntime 1.31.1 (backend onnx)")
    assert (
        "| cases | API | training package on 1.19.2 | onnx on 1.31.1 | "
        "onnx on 1.31.1 vs training package |" in section
    )
    assert "| the zoo (1) | whole-training | 20 ms | 40 ms | 2.0x slower |" in section
    for link in re.findall(r"\]\(([^)]+)\)", section):
        assert (results / link).exists(), link
    details = (results / "details.md").read_text(encoding="utf-8")
    assert "### The backend onnx beside the training package" in details
    assert (
        "| ResNet-style CNN (small) | forward/backward | 20 ms | 25 ms (1.2x slower) |" in details
    )


def test_no_section_before_the_study_ran(tmp_path):
    assert bs.backend_section(str(tmp_path)) == [] and bs.backend_details(str(tmp_path)) == []
