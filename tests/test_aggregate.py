"""The sweep summary answers first, never mixes machines, and stays short."""
import json
import os

import pytest

from benchmarks import aggregate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(folder, run, machine, rows, threads=2):
    os.makedirs(os.path.join(folder, "records"), exist_ok=True)
    record = {
        "notebook": "bench_torch", "parameters": {}, "rows": rows,
        "versions": {"onnxruntime-training-cpu": "1.19.2", "torch": "2.13.0"},
        "machine": {"cpu": machine, "logical_cores": 2, "torch_threads": threads},
    }
    with open(os.path.join(folder, "records", f"{run}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


def _torch_rows(hidden, times, threads=2):
    base = dict(benchmark="torch", model="mlp", optimizer="sgd", n_features=10, hidden=hidden,
                batch_size=100, threads=threads)
    return [{**base, "framework": f, "time_per_update_s": t} for f, t in times.items()]


def test_speed_phrases():
    assert aggregate.speed_phrase(0.25) == "4.0x faster"
    assert aggregate.speed_phrase(2.0) == "2.0x slower"
    assert aggregate.speed_phrase(0.98) == "same"


def test_answer_never_mixes_machines(tmp_path):
    times = {"torch eager": 1.0, "ort whole-training": 0.5, "ort forward-backward": 2.0}
    _record(tmp_path, "torch-a", "fast machine", _torch_rows(50, times))
    slow = {k: v * 3 for k, v in times.items()}
    slow["torch eager"] = 1.0
    _record(tmp_path, "torch-b", "slow machine", _torch_rows(50, slow))
    ratios = aggregate.answer_ratios(aggregate.load_rows(str(tmp_path))).set_index(["machine", "api"])
    assert ratios.loc[("fast machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(0.5)
    assert ratios.loc[("slow machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(1.5)
    text = aggregate.summary_text(aggregate.load_rows(str(tmp_path)), str(tmp_path), [])
    assert text.index("## fast machine, 2 cores, 2 threads") < text.index("## slow machine, 2 cores, 2 threads")
    assert "| MLP 10-50-1, batch 100 | 2.0x faster | 2.0x slower |" in text
    assert "| MLP 10-50-1, batch 100 | 1.5x slower | 6.0x slower |" in text


def test_summary_of_selected_runs_only(tmp_path):
    _record(tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5}))
    _record(tmp_path, "torch-b", "m", _torch_rows(500, {"torch eager": 1.0, "ort whole-training": 3.0}))
    paths = aggregate.summarize(str(tmp_path), run_ids=["torch-a"])
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "MLP 10-50-1" in text and "MLP 10-500-1" not in text
    assert {os.path.basename(p) for p in paths} >= {"summary.md", "details.md", "summary.csv", "torch.png"}


def test_empty_folder_says_so(tmp_path):
    aggregate.summarize(str(tmp_path))
    assert "No complete run" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_targets_come_from_step_targets_with_their_configuration(tmp_path):
    _record(tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5}))
    (tmp_path / "step_targets.csv").write_text(
        "target,configuration,measured,goal,verdict\nsmall MLP,100-50-1@100,0.25x,<= 0.3x,met\n", encoding="utf-8"
    )
    aggregate.summarize(str(tmp_path))
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## Targets" in text and "| small MLP | 100-50-1@100 | 0.25x | <= 0.3x | met |" in text


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "results", "reference", "records")),
                    reason="the committed reference sweep is not in this checkout")
def test_committed_reference_summary_is_short_and_answers_first():
    text = open(os.path.join(ROOT, "results", "reference", "summary.md"), encoding="utf-8").read()
    assert len(text.split()) <= 1500
    assert text.startswith("# Is onnxruntime training faster")
    assert "faster" in text.split("##")[1]  # the first section holds the answer
    assert "ORTModule" in text and "| ORTModule |" not in text
    assert "/home/" not in text and ".venv" not in text and "/tmp/" not in text


def test_torch_module_row_has_its_column_and_sentence(tmp_path):
    """OrtTorchModule, the row ORTModule had, is answered against torch like the two APIs."""
    times = {"torch eager": 1.0, "ort whole-training": 0.5, "ort forward-backward": 0.8, "ort torch module": 1.3}
    _record(tmp_path, "torch-a", "m", _torch_rows(50, times))
    _record(tmp_path, "torch-b", "m", _torch_rows(500, {**times, "ort torch module": 1.6}))
    text = aggregate.summary_text(aggregate.load_rows(str(tmp_path)), str(tmp_path), [])
    assert "| model, batch | whole-training vs torch | forward/backward vs torch | OrtTorchModule vs torch |" in text
    assert "| MLP 10-50-1, batch 100 | 2.0x faster | 1.2x faster | 1.3x slower |" in text
    assert "OrtTorchModule against torch: slower in all 2 configurations (1.3x to 1.6x)." in text
