"""The summary's section on the step model trained on the maintained onnxruntime: ratios, answer,
tables and the files they are read from; the builders' part of portable_speed.md (hand-written
rows, no timing)."""

import math
import re

import pandas as pd
from bench_records import torch_rows, write_record

from benchmarks.report import aggregate
from benchmarks.report import portable_section as ps

WHOLE, STEP, LOOP = "ort whole-training", "portable step", "portable epoch loop"
LINEAR = "linear regression (batch 1)"
MLP = "MLP 100-50-1 (batch 100)"


def speed_rows(loop_us=6.0, sgd_us=1.0, mlp_loop_us=80.0, spread=1.1):
    """A linear case against SGDRegressor and an MLP case against whole-training."""
    return pd.DataFrame(
        {
            "case": [LINEAR] * 4 + [MLP] * 3,
            "framework": ["scikit-learn", WHOLE, STEP, LOOP, WHOLE, STEP, LOOP],
            "threads": [1] * 4 + [2] * 3,
            "step_s": [x * 1e-6 for x in (sgd_us, 120, 17, loop_us, 100, 95, mlp_loop_us)],
            "spread": [1.1, 1.1, 1.1, spread, 1.1, 1.1, 1.1],
            "note": "",
            "machine": "AMD EPYC",
            "maintained": "onnxruntime 1.31.1, Python 3.13.0",
        }
    )


def zoo_rows():
    """One model trained by every framework, one whose step model was refused."""
    frameworks = [WHOLE, "torch eager", STEP, LOOP]
    return pd.DataFrame(
        {
            "model": ["image_cnn_small"] * 4 + ["resnet_small"] * 4,
            "framework": frameworks * 2,
            "threads": 2,
            "batch_size": 64,
            "step_s": [0.010, 0.008, 0.012, 0.011, 0.03, 0.02, math.nan, math.nan],
            "spread": [1.1, 1.1, 1.2, 1.1, 1.1, 1.1, math.nan, math.nan],
            "peak_mb": [445.0, 322, 130, 131, 556, 365, math.nan, math.nan],
            "note": [""] * 6 + ["refused: com.microsoft:ConvGrad (from the layer /conv1/Conv)"] * 2,
            "machine": "AMD EPYC",
            "maintained": "onnxruntime 1.31.1, Python 3.13.0",
        }
    )


def test_each_case_is_set_against_sgdregressor_where_it_ran_else_whole_training():
    table = ps.ratios(speed_rows()).set_index(["case", "framework"])
    assert table.loc[(LINEAR, LOOP), "reference"] == "scikit-learn"
    assert table.loc[(LINEAR, LOOP), "ratio"] == 6.0
    assert table.loc[(MLP, LOOP), "reference"] == WHOLE
    assert table.loc[(MLP, LOOP), "ratio"] == 0.8


def test_a_ratio_is_noisy_when_either_of_its_timings_spread():
    table = ps.ratios(speed_rows(spread=3.0)).set_index(["case", "framework"])
    assert table.loc[(LINEAR, LOOP), "noisy"]
    assert not table.loc[(LINEAR, STEP), "noisy"]
    sgd_noisy = speed_rows().assign(
        spread=lambda d: d.spread.where(d.framework != "scikit-learn", 5)
    )
    table = ps.ratios(sgd_noisy).set_index(["case", "framework"])
    assert table.loc[(LINEAR, STEP), "noisy"] and not table.loc[(MLP, STEP), "noisy"]


def test_the_answer_says_each_goal_met_or_missed():
    """The linear goal is a step of at most 5 us; the MLP's, no slower than whole-training."""
    met = ps.answer_sentence(speed_rows(loop_us=4.5, mlp_loop_us=80.0))
    assert met.startswith(f"With the epoch loop, a step of the {LINEAR} on 1 thread takes 4.5 us")
    assert "4.5x SGDRegressor's (goal: at most 5 us, the runtime's floor; whole-training: " in met
    assert "1.2x faster than whole-training's (goal: no slower), met." in met
    assert met.count(", met") == 2
    missed = ps.answer_sentence(speed_rows(loop_us=12.0, mlp_loop_us=130.0))
    assert "takes 12 us, 12.0x SGDRegressor's" in missed and missed.count("missed") == 2
    assert "1.3x slower than whole-training's" in missed


def test_the_zoo_goal_counts_the_models_no_slower_than_whole_training():
    said = ps.zoo_sentence(zoo_rows())
    assert "no slower for 0 of 2 (goal: every model), missed" in said
    rows = zoo_rows()
    rows.loc[(rows.model == "image_cnn_small") & (rows.framework == STEP), "step_s"] = 0.0099
    assert "no slower for 1 of 2 (goal: every model), missed" in ps.zoo_sentence(rows)


def test_the_section_says_why_and_which_engine_where_those_studies_ran(tmp_path):
    speed_rows().to_csv(tmp_path / ps.PORTABLE_SPEED_CSV, index=False)
    assert not [line for line in ps.portable_section(str(tmp_path)) if line.startswith("Why")]
    (tmp_path / "loop_floor.md").write_text("A step runs 16 nodes.\n\n| table |\n")
    (tmp_path / "step_profiles.md").write_text("ConvGrad runs as Slice.\n")
    engines = pd.DataFrame(
        {
            "model": ["image_cnn_large"] * 2 + ["resnet_large"] * 2,
            "engine": ["onnxruntime CPU", "torch eager"] * 2,
            "step_s": [0.03, 0.02, 0.4, 0.5],
            "spread": 1.1,
            "note": "",
            "status": "",
        }
    )
    engines.to_csv(tmp_path / "step_engines.csv", index=False)
    text = "\n".join(ps.portable_section(str(tmp_path)))
    assert "Why the missed goals are missed: [loop_floor.md](loop_floor.md) (what a node " in text
    assert "[step_profiles.md](step_profiles.md) (the slower steps)." in text
    assert (
        "Fastest engine per zoo model: torch eager for CNN on images (large); the CPU provider "
        "for the other 1. ([step_engines.md](step_engines.md))" in text
    )
    details = "\n".join(ps.portable_details(str(tmp_path)))  # the studies' answers, whole
    assert "A step runs 16 nodes. ([loop_floor.md](loop_floor.md))" in details
    assert "ConvGrad runs as Slice. ([step_profiles.md](step_profiles.md))" in details
    assert "torch eager trains CNN on images (large) fastest" in details


def test_a_case_without_its_epoch_loop_is_said_not_measured():
    rows = speed_rows().query("framework != @LOOP or case != @MLP")
    assert f"the {MLP} on 2 threads was not measured" in ps.answer_sentence(rows)


def test_the_tables_keep_the_summary_convention():
    """A time ratio reads '2.0x faster' or '1.3x slower', never a bare '0.5x'."""
    lines = ps.portable_markdown(speed_rows(spread=3.0), zoo_rows()).splitlines()
    cells = [
        c.strip() for line in lines if line.startswith("|") for c in line.strip("|").split("|")
    ]
    assert not [c for c in cells if re.fullmatch(r"[<>=\s]*[\d.]+(-[\d.]+)?x\*?", c)]
    assert not re.search(r"\b0\.\d+x\b", "\n".join(lines))
    assert "6.0x slower*" in cells and "whole-training: 100 us" in cells
    assert any(line.startswith("*: noisy") for line in lines)


def test_a_refused_model_is_a_row_with_the_operator():
    table = ps.zoo_table(zoo_rows()).set_index("model")
    refused = table.loc["ResNet-style CNN (small)"]
    assert refused["vs whole-training: portable step"] == "refused: ConvGrad"
    assert refused["peak MB: portable / whole-training / torch"] == "- / 556 / 365"
    trained = table.loc["CNN on images (small)"]
    assert trained["vs whole-training: portable step"] == "1.2x slower"
    assert trained["epoch loop"] == "1.1x slower"
    assert trained["torch eager"] == "1.2x faster"
    assert trained["peak MB: portable / whole-training / torch"] == "130 / 445 / 322"


def test_the_zoo_sentence_counts_the_models_and_names_the_refused_operators():
    said = ps.zoo_sentence(zoo_rows())
    assert said.startswith("The zoo (batch 64, 2 threads): 1 of 2 step models train")
    assert "(refused: ConvGrad)" in said
    assert "the runner peaks at 130 MB, torch eager at 322 MB (no higher for 1 of 1)" in said


def test_the_section_reads_the_files_beside_or_above_the_results_folder(tmp_path):
    results = tmp_path / "reference"
    results.mkdir()
    assert ps.portable_section(str(results)) == []
    speed_rows().to_csv(tmp_path / ps.PORTABLE_SPEED_CSV, index=False)
    lines = ps.portable_section(str(results))
    assert lines[0] == "## Training on the maintained onnxruntime"
    assert lines[2].startswith("With the epoch loop, a step of the linear regression")
    assert "onnxruntime 1.31.1, Python 3.13.0" in lines[-3] and "In the zoo" not in lines
    zoo_rows().to_csv(results / ps.PORTABLE_ZOO_CSV, index=False)
    section = ps.portable_section(str(results))
    assert section[4].startswith("In the zoo (batch 64, 2 threads), a portable step is no slower")
    assert section[-2].startswith("Tables: [details](details.md); rows: ")
    details = "\n".join(ps.portable_details(str(results)))
    assert "| ResNet-style CNN (small) | refused: ConvGrad | - |" in details
    assert "The zoo (batch 64, 2 threads): 1 of 2 step models train" in details


def test_the_summary_has_the_section_after_the_memory_of_the_zoo(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    speed_rows().to_csv(tmp_path / ps.PORTABLE_SPEED_CSV, index=False)
    zoo_rows().to_csv(tmp_path / ps.PORTABLE_ZOO_CSV, index=False)
    aggregate.summarize(str(tmp_path))
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    section = text.split("## Training on the maintained onnxruntime\n\n")[1]
    assert section.startswith("With the epoch loop, a step of the linear regression")
    assert text.index("## Training on the maintained") < text.index("## Glossary")
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "### Training on the maintained onnxruntime\n" in details


def test_the_section_links_the_files_it_was_read_from(tmp_path):
    results = tmp_path / "reference"
    results.mkdir()
    speed_rows().to_csv(tmp_path / ps.PORTABLE_SPEED_CSV, index=False)
    zoo_rows().to_csv(results / ps.PORTABLE_ZOO_CSV, index=False)
    last = ps.portable_section(str(results))[-2]  # no loop_floor.md, no step_engines.csv
    assert "[portable_speed.csv](../portable_speed.csv)" in last
    assert "[portable_zoo.csv](portable_zoo.csv)" in last


NEW, OLD = "onnxruntime 1.31.1", "onnxruntime 1.19.2"


def builder_rows(frame, group, steps, nodes=(58, 40)):
    """``frame`` with the builder columns, and the other steps: ``steps`` maps ``(builder,
    runtime)`` to a step in seconds, or to the note of a step that did not train."""
    portable = frame.framework.isin([STEP, LOOP])
    frame = frame.assign(
        builder=portable.map({True: "lowered", False: None}),
        runtime=portable.map({True: NEW, False: None}),
        nodes=portable.map({True: nodes[0], False: None}),
    )
    extra = []
    for name in frame[group].unique():
        for (builder, runtime), step in steps.items():
            untimed = isinstance(step, str)
            extra.append(
                {
                    group: name,
                    "framework": STEP,
                    "builder": builder,
                    "runtime": runtime,
                    "nodes": nodes[builder == "built"],
                    "threads": 2,
                    "batch_size": 64,
                    "step_s": math.nan if untimed else step,
                    "spread": 2.5 if runtime == OLD else 1.1,
                    "note": step if untimed else "",
                    "machine": "AMD EPYC",
                    "maintained": "onnxruntime 1.31.1, Python 3.13.0",
                }
            )
    return pd.concat([frame, pd.DataFrame(extra)], ignore_index=True)


def test_the_section_reads_the_lowered_step_on_the_maintained_runtime_only():
    """The other builder's and runtime's steps change none of the section's figures."""
    steps = {("built", NEW): 1.0, ("lowered", OLD): 2.0, ("built", OLD): 3.0}
    speed = builder_rows(speed_rows(), "case", steps)
    zoo = builder_rows(zoo_rows(), "model", steps)
    assert len(ps.section_rows(speed)) == len(speed_rows())
    assert ps.portable_markdown(speed, zoo) == ps.portable_markdown(speed_rows(), zoo_rows())


def test_the_builders_part_answers_per_model_and_tables_nodes_steps_and_ratios():
    from benchmarks.report import portable_builders as pbr

    mlp = {("built", NEW): 0.97e-4, ("lowered", OLD): 1.2e-4, ("built", OLD): 1.4e-4}
    speed = builder_rows(speed_rows().query("case == @MLP"), "case", mlp)  # lowered, NEW: 95 us
    failed = "failed: InvalidGraph: a node of /conv1/Conv"
    cnn = {("built", NEW): 0.0121, ("lowered", OLD): 0.01, ("built", OLD): failed}
    zoo = builder_rows(zoo_rows().query("model == 'image_cnn_small'"), "model", cnn, (165, 168))
    lines = pbr.builder_markdown(speed, zoo)
    assert lines[0].startswith('Per model, the step model built with gradient_builder="onnx"')
    assert (
        "on onnxruntime 1.31.1: as fast for MLP 100-50-1 (batch 100) and CNN on images (small). "
        "On onnxruntime 1.19.2: slower for MLP 100-50-1 (batch 100) by 1.2x*; not timed for 1 "
        "(the table says why)." in lines[0]
    )
    assert lines[0].endswith("fewer nodes for 1 of 2 (31% fewer) and more for 1 (2% more).")
    table = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert table[0] == (
        "| model or case | nodes: lowered / built | step on 1.31.1: lowered / built "
        "| built vs lowered, 1.31.1 | step on 1.19.2: lowered / built | built vs lowered, 1.19.2 |"
    )
    assert table[1] == (
        "| MLP 100-50-1 (batch 100) | 58 / 40 | 95 / 97 us | same | 120 / 140 us | 1.2x slower* |"
    )
    assert table[2] == (
        "| CNN on images (small) | 165 / 168 | 12 / 12 ms | same | 10 / - ms "
        "| built: failed: InvalidGraph: a node of /conv1/Conv |"
    )
    assert lines[-1].endswith("*: a timing's repeats spread over 2x.")


def test_files_without_the_builder_columns_have_no_builders_part():
    from benchmarks.report import portable_builders as pbr

    assert pbr.builder_markdown(speed_rows(), zoo_rows()) == []
    assert ps.section_rows(speed_rows()).equals(speed_rows())


def test_the_zoo_sentence_leaves_noisy_ratios_out_of_its_span():
    rows = pd.DataFrame(
        {
            "model": ["a"] * 3 + ["b"] * 3,
            "framework": ["ort whole-training", "torch eager", "portable step"] * 2,
            "batch_size": 64,
            "threads": 2,
            "step_s": [0.01, 0.01, 0.012, 0.01, 0.01, 0.05],
            "spread": [1.1, 1.1, 1.1, 1.1, 1.1, 4.0],  # b's portable step: a noisy timing
            "peak_mb": [400.0, 300, 100] * 2,
            "note": "",
        }
    )
    said = ps.zoo_sentence(rows)
    assert "5.0x" not in said, "a noisy ratio was quoted"
    assert (
        "a step 1.2x slower than whole-training's (epoch loop: not measured; 1 noisy omitted)"
        in said
    )
