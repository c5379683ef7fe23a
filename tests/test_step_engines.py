"""The step_engines study: its page (the fastest engine per model from the rows, refusals and loss
mismatches never fastest, the answer first, the machine named), the runtime's reason in one line,
the one place a step is prepared, the trainers on given providers, and one real run of the CPU
provider and torch on a small model without OpenVINO's environment (no timing asserted).

The processes of the other environments run here with this environment's interpreter:
``helpers.portable`` runs on onnxruntime 1.19.2 as on 1.31.1.
"""

import math
import sys

import pandas as pd
import pytest

from benchmarks.report import step_engines as report
from benchmarks.studies import step_engines, step_engines_process

NAN = math.nan
REFUSED = "refused: ReduceSum: The axes tensor's shape needs to be known(static)."
#: OpenVINO's error for a step with a LayerNormalization of three outputs, as its process reports
#: it (shortened: the runtime's first line names a source file of its own).
OPENVINO_ERROR = (
    "The maintained process failed: Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during "
    "initialization: basic_backend.cc:136 onnxruntime::openvino_ep::BasicBackend::BasicBackend\n"
    "FrontEnd API failed with GeneralFailure:\nErrors during ONNX translation:\n"
    "Check '(node.get_outputs_size() == 1)' failed at op/layer_normalization.cpp:41:\n"
    "While validating ONNX node '<Node(LayerNormalization): /1/LayerNormalization>':\n"
    "LayerNormalization expects 1 output tensor to be used in a model, other configurations are "
    "used for training and are not supported. Got: 3 outputs.\n"
)


def rows(spread=1.1, note=""):
    """Three models: the CPU provider fastest for one, torch for one (OpenVINO refused, though
    its row has a smaller step), OpenVINO for one whose torch loss differs."""
    engines = [report.CPU, report.OPENVINO, report.TORCH]
    return pd.DataFrame(
        {
            "model": ["layernorm_mlp_large"] * 3 + ["image_cnn_large"] * 3 + ["resnet_large"] * 3,
            "engine": engines * 3,
            "runtime": ["onnxruntime 1.31.1", "onnxruntime-openvino 1.24.1", "torch 2.13.0"] * 3,
            "trainer_lean": [True, True, None] * 3,
            "threads": 2,
            "batch_size": 64,
            "step_s": [0.002, 0.003, 0.004, 0.03, 0.001, 0.02, 0.2, 0.1, NAN],
            "spread": [1.1, 1.1, 1.1, 1.1, NAN, spread, 1.1, 1.1, NAN],
            "loss": [0.5, 0.5, 0.5, 2.3, NAN, 2.3, 2.2, 2.2, 2.5],
            "status": ["", "", "", "", REFUSED, "", "", "", "loss mismatch: 2.5 against 2.2"],
            "note": ["", "", "", "", "", note, "", "", ""],
            "machine": "Intel(R) Xeon(R) Processor",
            "cores": 2,
        }
    )


def test_the_fastest_engine_of_each_model_comes_from_its_timed_rows():
    assert report.fastest(rows()).to_dict() == {
        "layernorm_mlp_large": report.CPU,
        "image_cnn_large": report.TORCH,
        "resnet_large": report.OPENVINO,
    }


def test_a_refused_engine_is_written_refused_and_never_fastest():
    table = report.engines_table(rows()).set_index("model")
    cnn = table.loc["CNN on images (large)"]
    assert cnn["OpenVINO ms"] == REFUSED
    assert cnn["fastest"] == "torch eager"  # not OpenVINO, whose row says 1 ms
    assert cnn["CPU provider ms"] == "30" and cnn["torch eager ms"] == "20"


def test_a_loss_mismatch_is_flagged_and_not_timed():
    table = report.engines_table(rows()).set_index("model")
    assert table.loc["ResNet-style CNN (large)", "torch eager ms"].startswith("loss mismatch")

    def refused(epochs):
        raise RuntimeError(OPENVINO_ERROR)

    fits = {report.CPU: lambda e: 2.0, report.OPENVINO: refused, report.TORCH: lambda e: 2.1}
    losses, status = step_engines.checked(fits)
    assert status[report.CPU] == ""
    assert status[report.OPENVINO].startswith("refused: LayerNormalization expects 1 output")
    assert status[report.TORCH] == "loss mismatch: 2.1 against the CPU provider's 2"
    assert math.isnan(losses[report.OPENVINO])
    close = {report.CPU: lambda e: 2.0, report.TORCH: lambda e: 2.0 * (1 + 1e-6)}
    assert step_engines.checked(close)[1] == {report.CPU: "", report.TORCH: ""}


def test_the_page_starts_with_the_answer_and_names_the_machine():
    text = report.engines_markdown(rows())
    assert text.startswith(
        "The CPU provider trains LayerNorm + GELU MLP (large) fastest; OpenVINO trains "
        "ResNet-style CNN (large) fastest; torch eager trains CNN on images (large) fastest. "
        "OpenVINO refused 1 of 3 step models.\n"
    )
    assert "| model | CPU provider ms | OpenVINO ms | torch eager ms | fastest |" in text
    assert "Machine: Intel(R) Xeon(R) Processor, 2 cores." in text
    assert "OpenVINO on onnxruntime-openvino 1.24.1" in text
    assert "/" not in text.split("Machine: ")[1].split(".")[0]  # no path, only the processor
    assert "which the trainer specialises to the batch size" in text
    assert "noisy" not in text


def test_noisy_figures_are_marked_as_the_other_pages_mark_them():
    busy = "busy machine: load average 4.2 on 2 cores, this run used 2 thread(s)"
    text = report.engines_markdown(rows(spread=3.0, note=f"noisy: repeats spread 3.0x; {busy}"))
    assert "| CNN on images (large) | 30 | " + REFUSED + " | 20* | torch eager |" in text
    assert "torch eager trains CNN on images (large)* fastest" in text
    assert "The machine was busy meanwhile (load average up to 4.2 on 2 cores): noisy" in text
    assert "*: noisy (a timing's repeats spread over 2x)." in text


def test_the_runtimes_reason_is_one_line():
    assert step_engines.refusal(OPENVINO_ERROR) == (
        "LayerNormalization expects 1 output tensor to be used in a model, other configurations "
        "are used for training and are not supported. Got: 3 outputs."
    )
    assert step_engines.refusal("RuntimeError: the process stopped") == (
        "RuntimeError: the process stopped"
    )


def test_the_trainers_take_the_providers_given_and_only_those():
    from helpers.portable import trainer

    made = step_engines_process.default_providers([("CPUExecutionProvider", {})])
    try:
        assert trainer.PortableTrainer("step.onnx").providers == [("CPUExecutionProvider", {})]
        assert trainer.PortableTrainer("s", providers="X").providers == "X"
        again = step_engines_process.default_providers(["CPUExecutionProvider"])
        assert again.unchanged is made.unchanged  # no stacking
    finally:
        trainer.PortableTrainer = made.unchanged
    assert step_engines_process.provider_list(step_engines.OPENVINO_PROVIDERS) == (
        step_engines.OPENVINO_PROVIDERS
    )


@pytest.mark.training_package  # the study exports its steps where the training package is
def test_a_run_measures_the_cpu_provider_and_torch_and_says_openvino_is_missing(
    tmp_path, monkeypatch
):
    """A small model, short fits (epochs of 8 steps): a row per engine, the same loss, OpenVINO
    not measured."""
    from benchmarks.studies import portable_speed

    monkeypatch.setattr(portable_speed, "zoo_steps", lambda name: 8)
    argv = ["--quick", "--models", "layernorm_mlp_small", "--out", str(tmp_path)]
    argv += ["--maintained-python", sys.executable, "--openvino-python", "no/such/python"]
    assert step_engines.main(argv) == 0
    found = pd.read_csv(tmp_path / "step_engines.csv")
    assert list(found.columns) == step_engines.COLUMNS
    found = found.set_index("engine")
    assert sorted(found.index) == sorted([report.CPU, report.OPENVINO, report.TORCH])
    assert found.loc[report.OPENVINO, "status"] == step_engines.OPENVINO_MISSING
    assert pd.isna(found.loc[report.CPU, "status"])  # no status: checked and timed
    assert found.loc[report.TORCH, "loss"] == pytest.approx(found.loc[report.CPU, "loss"], 1e-4)
    assert (found.threads == 2).all() and (found.batch_size == 64).all()
    assert (found.steps_per_epoch == 8).all()
    text = (tmp_path / "step_engines.md").read_text(encoding="utf-8")
    assert "LayerNorm + GELU MLP (small)" in text.splitlines()[0]
    assert "not measured: no OpenVINO environment" in text


def test_make_setup_openvino_names_the_python_it_needs(tmp_path):
    """Without Python 3.11, or with another Python (the maintained environment's, where it
    exists), the environment is not built, and make says why."""
    import os

    from make_runs import run_make

    from helpers.teaching import MAINTAINED_PYTHON

    venv = tmp_path / "openvino"
    common = [f"OPENVINO_VENV={venv}", f"{venv}/bin/python"]
    pythons = {"": "no Python 3.11 found"}
    if os.path.exists(MAINTAINED_PYTHON):
        pythons[MAINTAINED_PYTHON] = "onnxruntime-openvino 1.24.1 needs Python 3.11"
    for python, said in pythons.items():
        run = run_make(*common, f"OPENVINO_PYTHON={python}")
        assert run.returncode != 0 and said in run.stderr
    assert not venv.exists()
