"""The machine in full atop every results page: one renderer, fed by the records or this machine."""

import json
import os

import pandas as pd

from benchmarks.profiles import report
from benchmarks.report import aggregate
from benchmarks.studies import step_targets, thread_scaling
from benchmarks.sweep import records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = {
    "cpu": "Intel(R) Xeon(R) Platinum 8480+",
    "logical_cores": 16,
    "usable_cores": 8,
    "cpu_flags": ["amx_tile", "avx2", "avx512_vnni", "avx512f"],
    "memory_gib": 125.7,
    "platform": "Linux-6.8-x86_64-with-glibc2.39",
    "python": "3.11.7",
}
VERSIONS = {
    "onnxruntime-training-cpu": "1.19.2",
    "onnx": "1.17.0",
    "torch": "2.13.0+cpu",
    "scikit-learn": "1.9.1",
    "numpy": "2.4.6",
    "skl2onnx": "1.20.0",
}


def test_every_field_of_a_full_record():
    assert records.machine_lines(FULL, VERSIONS, [2, 1, 2]) == [
        (
            "- **Processor**: Intel(R) Xeon(R) Platinum 8480+, 16 logical cores (8 usable); "
            "threads used: 1 and 2"
        ),
        "- **Instruction sets**: AVX2, AVX-512 (avx512f), AVX-512 VNNI, AMX",
        "- **Memory**: 125.7 GiB",
        "- **System**: Linux-6.8-x86_64-with-glibc2.39, Python 3.11.7",
        (
            "- **Versions**: onnxruntime-training 1.19.2, onnx 1.17.0, torch 2.13.0+cpu, "
            "scikit-learn 1.9.1, numpy 2.4.6"
        ),
    ]


def test_a_field_an_older_record_lacks_is_said_not_guessed():
    lines = records.machine_lines(
        {"cpu": "AMD EPYC", "logical_cores": 2, "cpu_flags": ["avx2"]},
        {"onnxruntime-training": "1.19.2"},
    )
    assert lines[0] == "- **Processor**: AMD EPYC, 2 logical cores"
    assert lines[1] == "- **Instruction sets**: AVX2; not AVX-512 (avx512f), AVX-512 VNNI or AMX"
    assert lines[2] == "- **Memory**: not recorded in these runs"
    assert (
        lines[3] == "- **System**: operating system not recorded in these runs, "
        "Python not recorded in these runs"
    )
    assert lines[4].startswith(
        "- **Versions**: onnxruntime-training 1.19.2, onnx not recorded in these runs"
    )
    assert records.machine_lines({}, {})[4] == "- **Versions**: not recorded in these runs"


def test_machine_info_records_instruction_sets_and_memory(monkeypatch):
    info = records.machine_info()
    if os.path.exists("/proc/cpuinfo"):
        assert set(info["cpu_flags"]) <= set(records.INSTRUCTION_SETS) and info["memory_gib"] > 0
    # off Linux (no /proc): None, and the page says so
    monkeypatch.setattr(records, "_proc_lines", lambda path: [])
    assert records._cpu_flags() is None and records._memory_gib() is None


def _starts_with_the_machine(text, title):
    head = f"{title}\n\nMeasured on:\n\n- **Processor**: "
    assert text.startswith(head), text[:200]
    # the runtime of the run: onnxruntime-training, or the maintained onnxruntime
    assert "\n- **Instruction sets**: " in text and "\n- **Versions**: onnxruntime" in text


def test_step_targets_page_starts_with_the_machine():
    table = pd.DataFrame(
        {
            "target": ["small MLP"],
            "configuration": ["100-50-1@100"],
            "measured": ["0.2x"],
            "goal": ["<= 0.3x"],
            "verdict": ["met"],
        }
    )
    text = step_targets.markdown(table, None, 2, (1.0, 1.5))
    _starts_with_the_machine(text, "# Training-speed targets")
    assert "; threads used: 2\n" in text and text.endswith(
        "Load average 1.0 -> 1.5 during the run.\n"
    )


def test_thread_scaling_page_starts_with_the_machine():
    rows = [
        {
            "size": "4-8-1@16",
            "n_features": 4,
            "hidden": 8,
            "batch_size": 16,
            "n_samples": 128,
            "threads": threads,
            "framework": framework,
            "ms_per_step": 1.0,
            "fixed_ms": 3.0,
            "note": "",
        }
        for threads in (1, 2)
        for framework in thread_scaling.FRAMEWORKS
    ]
    text = thread_scaling.markdown(thread_scaling.add_ratios(pd.DataFrame(rows)), (1, 4), 3)
    _starts_with_the_machine(text, "# Thread scaling of a training step")
    assert "; threads used: 1 and 2\n" in text and "Machine:" not in text


def test_kernel_survey_page_starts_with_the_machine(tmp_path):
    path = tmp_path / "kernel_survey.md"
    report.write_section(str(path), "a", "first")
    report.write_section(str(path), "b", "second", machine=["- **Processor**: another machine"])
    text = path.read_text(encoding="utf-8")
    assert text.startswith(
        "# Kernel survey\n\n<!-- machine: begin -->\nThe last section written was measured on"
    )
    assert (
        text.count("- **Processor**: ") == 1 and "another machine" in text
    )  # one block, the latest machine's
    assert (
        text.index("<!-- machine: end -->")
        < text.index("<!-- a: begin -->")
        < text.index("<!-- b: begin -->")
    )


def test_summary_and_details_start_with_the_machine_of_their_records(tmp_path):
    os.makedirs(tmp_path / "records")
    rows = [
        {
            "benchmark": "torch",
            "model": "mlp",
            "optimizer": "sgd",
            "n_features": 10,
            "hidden": 50,
            "batch_size": 100,
            "threads": 2,
            "framework": f,
            "time_per_update_s": t,
        }
        for f, t in (("torch eager", 1.0), ("ort whole-training", 0.5))
    ]
    record = {
        "notebook": "bench_torch",
        "parameters": {},
        "rows": rows,
        "versions": VERSIONS,
        "machine": {"cpu": "AMD EPYC", "logical_cores": 2, "torch_threads": 2},
    }  # an older record
    (tmp_path / "records" / "torch-a.json").write_text(json.dumps(record), encoding="utf-8")
    aggregate.summarize(str(tmp_path))
    for page, title in (
        ("summary.md", "# Is onnxruntime training faster than torch and scikit-learn?"),
        ("details.md", "# Every measured configuration"),
    ):
        text = (tmp_path / page).read_text(encoding="utf-8")
        _starts_with_the_machine(text, title)
        assert "- **Memory**: not recorded in these runs" in text
        assert "- **Processor**: AMD EPYC, 2 logical cores; threads used: 2" in text


def test_committed_results_pages_start_with_the_machine():
    for name, title in (
        ("step_targets.md", "# Training-speed targets"),
        ("thread_scaling.md", "# Thread scaling of a training step"),
        ("reference/summary.md", "# Is onnxruntime training faster than torch and scikit-learn?"),
        ("reference/details.md", "# Every measured configuration"),
    ):
        with open(os.path.join(ROOT, "results", name), encoding="utf-8") as f:
            _starts_with_the_machine(f.read(), title)
    with open(os.path.join(ROOT, "results", "thread_scaling_16_cores.md"), encoding="utf-8") as f:
        text = f.read()
    assert "torch 2.11.0, not the pinned 2.13.0" in text.split("\n\n")[1]
    assert (
        "- **Processor**: Intel(R) Xeon(R) Processor, 16 logical cores"
        in text.split("How do both")[0]
    )
    with open(os.path.join(ROOT, "results", "kernel_survey.md"), encoding="utf-8") as f:
        assert f.read().startswith("# Kernel survey\n\n<!-- machine: begin -->")
