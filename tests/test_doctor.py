"""python -m helpers.doctor on this machine, and its exit status."""

import importlib.util
import re
import subprocess
import sys

import onnxruntime

from helpers import doctor
from helpers.core.machine import devices

#: Whether the training package is installed: the CPU or GPU variant, else the maintained one.
TRAINING = importlib.util.find_spec("onnxruntime.training") is not None
GPU_PACKAGE = TRAINING and "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def report(out):
    """The report's lines as {name: value} (the names are padded to the longest)."""
    return dict(re.match(r"(\S+(?: \S+)*)\s{2,}(.*)", line).groups() for line in out.splitlines())


def test_report_on_this_machine(capsys):
    status = doctor.main(["--variant", "cpu"])
    out = capsys.readouterr().out
    lines = report(out)
    names = list(lines)
    assert names == [
        "Python",
        "onnxruntime",
        "Backend",
        "providers",
        "CPU training",
        "NVIDIA driver",
    ] + (["CUDA libraries"] if GPU_PACKAGE else []) + [
        name for name in names if name.startswith("GPU")
    ] + ["threads", "torch", "verdict"]
    assert any(name.startswith("GPU") for name in names)
    assert lines["CPU training"] == "yes: both APIs ran two epochs"
    assert status == 0 and lines["verdict"] == "the CPU variant trains"


def test_backend_line_says_what_trains_and_why(capsys):
    """The backend "auto" picks, the package it runs on and why; here, the variant asked for."""
    doctor.main(["--variant", "cpu"])
    line = report(capsys.readouterr().out)["Backend"]
    (package,) = devices.installed_runtime_packages()
    if TRAINING:
        expected = (
            f"onnxruntime-training ({package} {onnxruntime.__version__}, gradients from its "
            "gradient builder), as the training package is installed (the CPU variant)"
        )
    else:
        expected = (
            f"onnx ({package} {onnxruntime.__version__}, gradients in standard ONNX), as no "
            "training package (onnxruntime.training) is installed (the CPU variant)"
        )
    assert line == expected


def test_without_the_training_package_it_is_the_maintained_variant(capsys, monkeypatch):
    """An onnxruntime without training module: backend onnx, the maintained variant by default,
    which trains when the CPU step does; its GPU line names onnxruntime-gpu."""
    from helpers.core.machine import backends

    for module in (doctor, backends):
        monkeypatch.setattr(module, "has_training_package", lambda: False)
    monkeypatch.setattr(doctor, "training_step_problem", lambda device: None)
    monkeypatch.setattr(
        doctor.onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"]
    )
    assert doctor.installed_variant() == "maintained"
    assert doctor.backend_summary().startswith("onnx (")
    assert doctor.main([]) == 0
    lines = report(capsys.readouterr().out)
    assert lines["Backend"].endswith(
        "gradients in standard ONNX), as no training package (onnxruntime.training) is "
        "installed (the maintained variant)"
    )
    assert lines["GPU training"].startswith(
        f"no: onnxruntime {onnxruntime.__version__} has no CUDA provider; "
        f"onnxruntime-gpu=={onnxruntime.__version__} in its place has one"
    )
    assert "CUDA libraries" not in lines
    assert lines["verdict"] == "the maintained variant trains"


def test_the_maintained_variant_fails_when_its_cpu_step_fails(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "training_step_problem", lambda device: "RuntimeError: boom")
    assert doctor.main(["--variant", "maintained"]) == 1
    assert report(capsys.readouterr().out)["verdict"] == "the maintained variant does not train"


def test_gpu_variant_fails_with_the_reason_where_no_gpu_trains(capsys, monkeypatch):
    monkeypatch.setattr(
        doctor.devices, "gpu_setup_problem", lambda: "no NVIDIA driver is installed"
    )
    assert doctor.main(["--variant", "gpu"]) == 1
    lines = report(capsys.readouterr().out)
    assert lines["GPU training"] == "no: no NVIDIA driver is installed"
    assert lines["verdict"] == "the GPU variant does not train"


def test_a_failing_cpu_step_fails_the_cpu_variant(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "training_step_problem", lambda device: "RuntimeError: boom")
    assert doctor.main(["--variant", "cpu"]) == 1
    assert report(capsys.readouterr().out)["CPU training"] == "no: RuntimeError: boom"


def test_two_runtime_packages_fail_and_say_so(capsys, monkeypatch):
    monkeypatch.setattr(
        doctor.devices,
        "installed_runtime_packages",
        lambda: ["onnxruntime-training-cpu", "onnxruntime"],
    )
    assert doctor.main(["--variant", "cpu"]) == 1
    assert "overwrite each other's files" in capsys.readouterr().out


def test_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "helpers.doctor", "--variant", "cpu"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict" in result.stdout


def test_cuda_libraries_line_counts_what_loaded(monkeypatch):
    """The doctor says which pip libraries failed to load, and the loader's words, not only that
    files exist."""
    from helpers.core.machine import cuda_libraries

    monkeypatch.delenv(cuda_libraries.SOURCE_VARIABLE, raising=False)
    found = {"libcudart.so.11.0": "a", "libcudnn.so.8": "b"}
    monkeypatch.setattr(
        cuda_libraries,
        "find_cuda_libraries",
        lambda: (found, {"libcufft.so.10": "nvidia-cufft-cu11"}),
    )
    monkeypatch.setattr(
        cuda_libraries,
        "load_cuda_libraries",
        lambda: {"libcudart.so.11.0": "a", "libcudnn.so.8": "error: libz.so.1: cannot open"},
    )
    line = doctor._cuda_libraries_line()
    assert line.startswith("1 of 3 loaded") and "not installed: nvidia-cufft-cu11" in line
    assert "failed to load: libcudnn.so.8 (libz.so.1: cannot open)" in line
