"""python -m helpers.doctor on this machine, and its exit status."""
import subprocess
import sys

import onnxruntime

from helpers import doctor

GPU_PACKAGE = "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def test_report_on_this_machine(capsys):
    status = doctor.main(["--variant", "cpu"])
    out = capsys.readouterr().out
    names = [line.split("  ")[0] for line in out.splitlines()]
    assert names == ["Python", "onnxruntime", "providers", "CPU training", "NVIDIA driver"] + (
        ["CUDA libraries"] if GPU_PACKAGE else []
    ) + [name for name in names if name.startswith("GPU")] + ["threads", "torch", "verdict"]
    assert any(name.startswith("GPU") for name in names)
    assert "CPU training   yes" in out
    assert status == 0 and out.rstrip().endswith("the CPU variant trains")


def test_gpu_variant_fails_with_the_reason_where_no_gpu_trains(capsys, monkeypatch):
    monkeypatch.setattr(doctor.devices, "gpu_setup_problem", lambda: "no NVIDIA driver is installed")
    assert doctor.main(["--variant", "gpu"]) == 1
    out = capsys.readouterr().out
    assert "GPU training   no: no NVIDIA driver is installed" in out
    assert out.rstrip().endswith("the GPU variant does not train")


def test_a_failing_cpu_step_fails_the_cpu_variant(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "training_step_problem", lambda device: "RuntimeError: boom")
    assert doctor.main(["--variant", "cpu"]) == 1
    assert "CPU training   no: RuntimeError: boom" in capsys.readouterr().out


def test_two_runtime_packages_fail_and_say_so(capsys, monkeypatch):
    monkeypatch.setattr(doctor.devices, "installed_runtime_packages", lambda: ["onnxruntime-training-cpu", "onnxruntime"])
    assert doctor.main(["--variant", "cpu"]) == 1
    assert "overwrite each other's files" in capsys.readouterr().out


def test_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "helpers.doctor", "--variant", "cpu"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict" in result.stdout
