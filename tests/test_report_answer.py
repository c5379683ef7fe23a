"""The answer of a sweep: each API against its peer per machine and threads, said in a sentence
and a table, with the caveats that keep a ratio out of it (noise, shared cores, a busy machine)."""

import pytest
from bench_records import timed_rows, torch_rows, write_record

from benchmarks.report import aggregate
from benchmarks.report.answer import answer_details, answer_ratios
from benchmarks.report.ratios import speed_phrase


def _texts(folder):
    """The summary's text and the details' answer tables (each configuration's ratios)."""
    df = aggregate.load_rows(str(folder))
    return aggregate.summary_text(df, str(folder), []), "\n".join(answer_details(df))


def test_speed_phrases():
    assert speed_phrase(0.25) == "4.0x faster"
    assert speed_phrase(2.0) == "2.0x slower"
    assert speed_phrase(0.98) == "same"


def test_answer_never_mixes_machines(tmp_path):
    times = {"torch eager": 1.0, "ort whole-training": 0.5, "ort forward-backward": 2.0}
    write_record(tmp_path, "torch-a", "fast machine", torch_rows(50, times))
    slow = {k: v * 3 for k, v in times.items()}
    slow["torch eager"] = 1.0
    write_record(tmp_path, "torch-b", "slow machine", torch_rows(50, slow))
    ratios = answer_ratios(aggregate.load_rows(str(tmp_path))).set_index(["machine", "api"])
    assert ratios.loc[("fast machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(
        0.5
    )
    assert ratios.loc[("slow machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(
        1.5
    )
    text, tables = _texts(tmp_path)
    assert text.index("## fast machine, 2 cores, 2 threads") < text.index(
        "## slow machine, 2 cores, 2 threads"
    )
    assert text.index("Measured on fast machine, 2 cores:") < text.index("Measured on slow machine")
    assert tables.index("### fast machine, 2 cores, 2 threads") < tables.index("### slow machine")
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.0x faster | 2.0x slower |" in tables
    assert "| MLP 10-50-1, batch 100 | torch eager | 1.5x slower | 6.0x slower |" in tables


def test_torch_module_row_has_its_column_and_sentence(tmp_path):
    """OrtTorchModule, the row ORTModule had, is answered against torch like the two APIs."""
    times = {
        "torch eager": 1.0,
        "ort whole-training": 0.5,
        "ort forward-backward": 0.8,
        "ort torch module": 1.3,
    }
    write_record(tmp_path, "torch-a", "m", torch_rows(50, times))
    write_record(tmp_path, "torch-b", "m", torch_rows(500, {**times, "ort torch module": 1.6}))
    text, tables = _texts(tmp_path)
    assert "| model, batch | against | whole-training | forward/backward | OrtTorchModule |" in (
        tables
    )
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.0x faster | 1.2x faster | 1.3x slower |" in (
        tables
    )
    assert (
        "OrtTorchModule against torch eager: slower in all 2 configurations (1.3x to 1.6x)." in text
    )


def test_a_tie_is_said_as_a_tie_not_as_faster_in_none(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort torch module": 1.01})
    )
    write_record(
        tmp_path, "torch-b", "m", torch_rows(500, {"torch eager": 1.0, "ort torch module": 1.5})
    )
    write_record(
        tmp_path, "torch-c", "m", torch_rows(100, {"torch eager": 1.0, "ort torch module": 1.4})
    )
    text = aggregate.summary_text(aggregate.load_rows(str(tmp_path)), str(tmp_path), [])
    assert (
        "OrtTorchModule against torch eager: slower in 2 of 3 configurations (1.4x to 1.5x), "
        "about the same in 1."
    ) in text
    assert "faster in 0" not in text


def test_a_quiet_sweep_answers_without_caveats(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.25})
    )
    text, tables = _texts(tmp_path)
    assert (
        "The whole-training API against torch eager: faster in 1 of 1 configurations (4.0x)."
        in text
    )
    assert "| MLP 10-50-1, batch 100 | torch eager | 4.0x faster |" in tables
    answer = text.split("Ratios of time")[0]
    assert "noisy" not in answer and "shared" not in answer and "more left out" not in answer


def test_a_noisy_ratio_is_said_beside_the_number_and_left_out_of_the_answer(tmp_path):
    write_record(
        tmp_path,
        "torch-a",
        "m",
        timed_rows(
            50, {"torch eager": 17.0, "ort whole-training": 0.1}, spreads={"torch eager": 3.1}
        ),
    )
    write_record(
        tmp_path, "torch-b", "m", timed_rows(500, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    text, tables = _texts(tmp_path)
    noisy = "| MLP 10-50-1, batch 100 | torch eager | 170.0x faster (noisy) |"
    assert noisy in tables
    # the answer rests on the clean ratio only, and says one was left out
    assert (
        "The whole-training API against torch eager: faster in 1 of 1 configurations (2.0x); "
        "1 more left out as not clean."
    ) in text
    assert "170" not in text


def test_runs_that_shared_the_cores_are_said_first_and_kept_apart(tmp_path):
    shared = "2 runs at once, 2 threads each, on 2 cores: the runs shared the cores"
    write_record(
        tmp_path,
        "torch-a",
        "m",
        timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.01}),
        shared=shared,
    )
    write_record(
        tmp_path, "torch-b", "m", timed_rows(500, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    text, tables = _texts(tmp_path)
    first_lines = text.split("\n## ")[0]
    assert "**1 of 2 runs shared the machine's cores with other runs**" in first_lines
    clean, apart = tables.split("(runs that shared the cores: not findings)")
    assert "MLP 10-500-1" in clean and "MLP 10-50-1, batch 100" not in clean
    assert "100.0x faster (shared cores)" in apart
    assert "faster in 1 of 1 configurations (2.0x)" in text.split("(runs that shared the cores")[0]
    assert "100.0x" not in text  # a shared run's ratio is no finding: out of the suite's line too


def test_a_busy_machine_and_an_unmeasurable_time_are_said_in_words(tmp_path):
    rows = timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    rows[1]["timing_note"] = (
        "set-up not measurable: its estimate was negative (the machine's noise was larger)"
    )
    write_record(
        tmp_path,
        "torch-a",
        "m",
        rows,
        busy="load average 3.2 on 2 cores, this run used 2 thread(s)",
    )
    text, tables = _texts(tmp_path)
    assert "(set-up not measurable; busy machine)" in tables  # in short beside the number
    assert "no finding" in text
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(
        encoding="utf-8"
    )  # and in whole words in the details
    assert (
        "its estimate was negative" in details
        and "busy machine: load average 3.2 on 2 cores" in details
    )


def test_the_summary_names_torch_compile_and_its_compilation_apart(tmp_path):
    rows = timed_rows(50, {"torch eager": 1.0, "torch.compile": 0.8, "ort whole-training": 0.4})
    rows[1]["compile_time_s"] = 12.5
    write_record(tmp_path, "torch-a", "m", rows)
    text, tables = _texts(tmp_path)
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.5x faster |" in tables
    assert "| MLP 10-50-1, batch 100 | torch.compile | 2.0x faster |" in tables
    assert tables.index("| torch eager | 2.5x") < tables.index("| torch.compile | 2.0x")
    assert "compiled for 12.5 to 12.5 s, outside its steps" in text
