"""The GPU variant's CUDA 11.8 libraries from pip packages, and the causes a GPU cannot be used.

Everything here runs without a GPU: the packages are a fake folder, the
driver and the provider list are replaced where a cause needs them.
"""

import onnxruntime
import pytest

from helpers.core.machine import cuda_libraries, devices
from helpers.core.machine.cuda_libraries import (
    CUDA_PACKAGES,
    find_cuda_libraries,
    load_cuda_libraries,
)

ALL_LIBRARIES = [library for _, _, libraries in CUDA_PACKAGES for library in libraries]


def fake_site_packages(tmp_path, packages):
    """A site-packages folder holding the libraries of ``packages`` as nvidia/<folder>/lib/<name>
    files."""
    for package, folder, libraries in CUDA_PACKAGES:
        if package in packages:
            lib = tmp_path / "nvidia" / folder / "lib"
            lib.mkdir(parents=True)
            for library in libraries:
                (lib / library).write_bytes(b"")
    return [str(tmp_path)]


def test_finds_each_library_in_its_package_folder(tmp_path):
    path = fake_site_packages(tmp_path, {"nvidia-cudnn-cu11", "nvidia-cublas-cu11"})
    found, missing = find_cuda_libraries(path)
    assert found["libcudnn.so.8"] == str(tmp_path / "nvidia" / "cudnn" / "lib" / "libcudnn.so.8")
    assert found["libcublasLt.so.11"].endswith("nvidia/cublas/lib/libcublasLt.so.11")
    assert missing == {
        "libcudart.so.11.0": "nvidia-cuda-runtime-cu11",
        "libcufft.so.10": "nvidia-cufft-cu11",
        "libcurand.so.10": "nvidia-curand-cu11",
        "libnvrtc.so.11.2": "nvidia-cuda-nvrtc-cu11",
        "libnvrtc-builtins.so.11.8": "nvidia-cuda-nvrtc-cu11",
    }


def test_loads_by_full_path_in_dependency_order_once(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_libraries, "_LOADED", {})
    monkeypatch.delenv(cuda_libraries.SOURCE_VARIABLE, raising=False)
    path = fake_site_packages(tmp_path, {package for package, _, _ in CUDA_PACKAGES})
    calls = []
    loaded = load_cuda_libraries(path, loader=calls.append)
    names = [p.rsplit("/", 1)[1] for p in calls]
    assert names == ALL_LIBRARIES
    assert (
        names.index("libcudart.so.11.0")
        < names.index("libcublasLt.so.11")
        < names.index("libcublas.so.11")
    )
    assert names.index("libcudnn_ops_infer.so.8") < names.index("libcudnn_cnn_infer.so.8")
    assert names.index("libnvrtc.so.11.2") < names.index("libcudnn.so.8")
    assert all(p.startswith(str(tmp_path)) for p in calls) and set(loaded) == set(ALL_LIBRARIES)
    load_cuda_libraries(path, loader=calls.append)
    assert len(calls) == len(ALL_LIBRARIES), "a library is loaded once per process"


def test_a_library_that_fails_to_load_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_libraries, "_LOADED", {})
    monkeypatch.delenv(cuda_libraries.SOURCE_VARIABLE, raising=False)
    path = fake_site_packages(tmp_path, {"nvidia-curand-cu11"})
    # the real loader on an empty file: the loader's own error comes back
    loaded = load_cuda_libraries(path)
    assert (
        loaded["libcurand.so.10"].startswith("error: ")
        and "libcurand.so.10" in loaded["libcurand.so.10"]
    )


def test_system_cuda_skips_the_pip_libraries(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_libraries, "_LOADED", {})
    monkeypatch.setenv(cuda_libraries.SOURCE_VARIABLE, "system")
    path = fake_site_packages(tmp_path, {"nvidia-curand-cu11"})
    calls = []
    assert load_cuda_libraries(path, loader=calls.append) == {} and calls == []


def test_driver_probes_without_a_driver():
    assert cuda_libraries.driver_cuda_version("libnot-a-driver.so.1") is None
    count, reason = cuda_libraries.visible_gpus("libnot-a-driver.so.1")
    assert count == 0 and "no NVIDIA driver" in reason


@pytest.fixture
def gpu_package(monkeypatch):
    """The GPU package's provider list on Linux x86-64, with a driver for CUDA 12.4 and one GPU."""
    monkeypatch.setattr(
        onnxruntime,
        "get_available_providers",
        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"],
    )
    monkeypatch.setattr(devices.sys, "platform", "linux")
    monkeypatch.setattr(devices.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cuda_libraries, "driver_cuda_version", lambda library="libcuda.so.1": 12040)
    monkeypatch.setattr(cuda_libraries, "visible_gpus", lambda library="libcuda.so.1": (1, None))
    monkeypatch.setattr(cuda_libraries, "load_cuda_libraries", lambda *a, **k: {})
    monkeypatch.setattr(cuda_libraries, "missing_cuda_libraries", lambda *a, **k: {})
    devices.cuda_problem.cache_clear()
    yield monkeypatch
    devices.cuda_problem.cache_clear()


def test_cause_cpu_package(monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(devices, "installed_runtime_packages", lambda: ["onnxruntime-training-cpu"])
    problem = devices.gpu_setup_problem()
    assert (
        "onnxruntime-training-cpu" in problem
        and "no CUDA provider" in problem
        and "make setup GPU=1" in problem
    )


def test_cause_platform(gpu_package):
    gpu_package.setattr(devices.sys, "platform", "darwin")
    gpu_package.setattr(devices.platform, "machine", lambda: "arm64")
    assert "Linux x86-64 only, not darwin arm64" in devices.gpu_setup_problem()


def test_cause_no_driver(gpu_package):
    gpu_package.setattr(cuda_libraries, "driver_cuda_version", lambda library="libcuda.so.1": None)
    problem = devices.gpu_setup_problem()
    assert "no NVIDIA driver" in problem and "450.80.02" in problem


def test_cause_old_driver(gpu_package):
    gpu_package.setattr(cuda_libraries, "driver_cuda_version", lambda library="libcuda.so.1": 10020)
    problem = devices.gpu_setup_problem()
    assert "supports CUDA 10.2 only" in problem and "update the driver" in problem


def test_cause_no_visible_gpu(gpu_package):
    gpu_package.setattr(
        cuda_libraries,
        "visible_gpus",
        lambda library="libcuda.so.1": (0, "the NVIDIA driver sees no GPU"),
    )
    assert devices.gpu_setup_problem() == "the NVIDIA driver sees no GPU"


def test_cause_missing_library_names_it_and_its_package(gpu_package):
    gpu_package.setattr(
        cuda_libraries,
        "missing_cuda_libraries",
        lambda *a, **k: {"libcudnn.so.8": "nvidia-cudnn-cu11"},
    )
    problem = devices.gpu_setup_problem()
    assert "libcudnn.so.8 cannot be found" in problem and "nvidia-cudnn-cu11" in problem
    assert "make setup GPU=1" in problem and "ORT_TRAINING_CUDA=system" in problem
    with pytest.raises(
        devices.DeviceError,
        match="device='cuda' cannot be used: the CUDA 11.8 libraries libcudnn.so.8",
    ):
        devices.resolve_device("cuda")


def test_cause_gpu_index_beyond_those_visible(gpu_package):
    assert devices.gpu_setup_problem() is None
    assert devices.cuda_problem(3) == "there is no GPU cuda:3: the driver sees 1 (cuda:0 to cuda:0)"


def test_libraries_are_loaded_before_the_provider(gpu_package):
    calls = []
    gpu_package.setattr(
        cuda_libraries, "load_cuda_libraries", lambda *a, **k: calls.append("load") or {}
    )
    gpu_package.setattr(
        cuda_libraries, "missing_cuda_libraries", lambda *a, **k: calls.append("check") or {}
    )
    devices.gpu_setup_problem()
    assert calls == ["load", "check"]


def test_real_loader_finds_system_libraries_by_name():
    assert cuda_libraries.loadable_by_name("libc.so.6")
    assert not cuda_libraries.loadable_by_name("libcudnn.so.0.not-a-version")


def test_missing_libraries_with_pip_packages(tmp_path, monkeypatch):
    """With the pip packages, only what no package holds is looked up by name; cuDNN's own needs are
    not checked."""
    monkeypatch.delenv(cuda_libraries.SOURCE_VARIABLE, raising=False)
    everything = {package for package, _, _ in CUDA_PACKAGES}
    asked = []
    by_name = lambda name: asked.append(name) or False  # noqa: E731
    path = fake_site_packages(tmp_path / "all", everything)
    assert cuda_libraries.missing_cuda_libraries(path, by_name=by_name) == {} and asked == []
    path = fake_site_packages(
        tmp_path / "some", everything - {"nvidia-cufft-cu11", "nvidia-cuda-nvrtc-cu11"}
    )
    assert cuda_libraries.missing_cuda_libraries(path, by_name=by_name) == {
        "libcufft.so.10": "nvidia-cufft-cu11"
    }


def test_system_cuda_checks_every_provider_library_by_name(tmp_path, monkeypatch):
    """ORT_TRAINING_CUDA=system ignores the pip packages, also when they are installed."""
    monkeypatch.setenv(cuda_libraries.SOURCE_VARIABLE, "system")
    path = fake_site_packages(tmp_path, {package for package, _, _ in CUDA_PACKAGES})
    missing = cuda_libraries.missing_cuda_libraries(
        path, by_name=lambda name: name != "libcudart.so.11.0"
    )
    assert missing == {"libcudart.so.11.0": "nvidia-cuda-runtime-cu11"}
    missing = cuda_libraries.missing_cuda_libraries(path, by_name=lambda name: False)
    assert sorted(missing) == sorted(cuda_libraries.PROVIDER_LIBRARIES)


def test_cause_library_that_fails_to_load(gpu_package):
    gpu_package.setattr(
        cuda_libraries,
        "load_cuda_libraries",
        lambda *a, **k: {
            "libcudart.so.11.0": "/x/libcudart.so.11.0",
            "libcudnn_cnn_infer.so.8": (
                "error: libz.so.1: cannot open shared object file: No such file"
            ),
        },
    )
    problem = devices.gpu_setup_problem()
    assert "libcudnn_cnn_infer.so.8" in problem and "libz.so.1" in problem
    assert "make setup GPU=1" in problem and "install the system library it names" in problem


def test_provider_load_error_gives_the_loaders_message(tmp_path, monkeypatch):
    """onnxruntime falls back to the CPU silently; the provider library loaded by path says why."""
    capi = tmp_path / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (capi / "libonnxruntime_providers_cuda.so").write_bytes(b"not a library")
    monkeypatch.setattr(onnxruntime, "__file__", str(tmp_path / "onnxruntime" / "__init__.py"))
    message = cuda_libraries.provider_load_error()
    assert "libonnxruntime_providers_cuda.so" in message
    (capi / "libonnxruntime_providers_cuda.so").unlink()
    assert cuda_libraries.provider_load_error() is None  # the CPU package has no provider library


def test_a_device_object_is_checked_like_a_name(monkeypatch):
    """Device('cuda', 0) given directly goes through the same checks as 'cuda:0' (the provider must
    not load unchecked)."""
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    devices.cuda_problem.cache_clear()
    try:
        with pytest.raises(
            devices.DeviceError, match="device='cuda:0' cannot be used: the installed onnxruntime"
        ):
            devices.resolve_device(devices.Device("cuda", 0))
        assert devices.resolve_device(devices.Device("cpu")) == devices.Device("cpu")
    finally:
        devices.cuda_problem.cache_clear()
