"""Where training runs: parse ``device`` and check that it really works.

The GPU package of onnxruntime-training lists ``CUDAExecutionProvider`` even
on a machine without a GPU, so the provider list proves nothing: a small
model is run on the GPU before ``'auto'`` chooses it.
"""

import platform
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

import numpy as np
import onnxruntime
from onnxruntime.capi import _pybind_state as C

from ...portable.runtime_support import probe_model
from . import cuda_libraries
from .sessions import make_session

#: Every package that provides the import name ``onnxruntime``; only one may be installed.
RUNTIME_PACKAGES = (
    "onnxruntime-training",
    "onnxruntime-training-cpu",
    "onnxruntime",
    "onnxruntime-gpu",
)
#: The GPU package and its CUDA version.
GPU_PACKAGE = "onnxruntime-training==1.19.2"


def installed_runtime_packages():
    """The packages that provide ``onnxruntime`` in this environment (one, when all is well).

    Examples
    --------
    >>> len(installed_runtime_packages())  # more than one overwrite each other's files
    1
    """
    found = []
    for name in RUNTIME_PACKAGES:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


class DeviceError(RuntimeError):
    """The requested device cannot be used.

    Examples
    --------
    >>> try:
    ...     resolve_device("cuda:7")
    ... except DeviceError as error:
    ...     print(str(error).split(": ")[0])
    device='cuda:7' cannot be used
    """


@dataclass(frozen=True)
class Device:
    """A training device: ``type`` is ``'cpu'`` or ``'cuda'``, ``index`` the GPU.

    Examples
    --------
    >>> str(Device("cpu")), str(Device("cuda", 1))
    ('cpu', 'cuda:1')
    """

    type: str
    index: int = 0

    def ort_device(self):
        """The ``OrtDevice`` the runtime's C API expects."""
        kind = C.OrtDevice.cuda() if self.type == "cuda" else C.OrtDevice.cpu()
        return C.OrtDevice(kind, C.OrtDevice.default_memory(), self.index)

    def __str__(self):
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"


def gpu_setup_problem():
    """Why this environment cannot train on any GPU, with the fix, or None.

    The package, the platform, the NVIDIA driver, the visible GPUs and the
    CUDA 11.8 libraries are checked, in that order; :func:`cuda_problem`
    then runs a model on one GPU.

    Examples
    --------
    >>> problem = gpu_setup_problem()
    >>> problem is None or problem.count(";") + problem.count(":") >= 1  # a cause, then its fix
    True
    """
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        installed = installed_runtime_packages()
        packages = ", ".join(installed) or "an onnxruntime package"
        fix = (
            f"the GPU variant installs {GPU_PACKAGE} instead: make setup GPU=1"
            if any(p.startswith("onnxruntime-training") for p in installed)
            # the maintained variant: onnxruntime-gpu of the same release (docs/guide/install.md)
            else f"onnxruntime-gpu=={onnxruntime.__version__} in its place has one (CUDA 13)"
        )
        return (
            f"the installed onnxruntime is {packages} {onnxruntime.__version__}, which has no CUDA "
            f"provider; {fix}"
        )
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return (
            f"the GPU package {GPU_PACKAGE} exists for Linux x86-64 only, not {sys.platform} "
            f"{platform.machine()}"
        )
    version = cuda_libraries.driver_cuda_version()
    if version is None:
        return (
            "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded); install the NVIDIA "
            f"driver for your GPU: CUDA 11.8 code needs {cuda_libraries.minimum_driver_text()}"
        )
    if version < cuda_libraries.MINIMUM_DRIVER_CUDA:
        major, minor = divmod(version // 10, 100)
        return (
            f"the NVIDIA driver supports CUDA {major}.{minor} only; CUDA 11.8 code needs "
            f"{cuda_libraries.minimum_driver_text()}: update the driver"
        )
    count, reason = cuda_libraries.visible_gpus()
    if count == 0:
        return reason
    failed = cuda_libraries.load_errors(cuda_libraries.load_cuda_libraries())
    if failed:
        library, message = next(iter(failed.items()))
        return (
            f"the CUDA library {library} of its pip package cannot be loaded ({message}); "
            "reinstall the GPU variant (make clean && make setup GPU=1)"
            + (
                ", and install the system library it names"
                if "cannot open shared object" in message
                else ""
            )
        )
    missing = cuda_libraries.missing_cuda_libraries()
    if missing:
        packages = " ".join(sorted(set(missing.values())))
        return (
            f"the CUDA 11.8 libraries {', '.join(missing)} cannot be found; make setup GPU=1 "
            f"installs them from requirements/gpu.txt (pip packages {packages}), or set "
            "ORT_TRAINING_CUDA=system with a system CUDA 11.8 and cuDNN 8 on LD_LIBRARY_PATH"
        )
    return None


@lru_cache(maxsize=None)
def cuda_problem(index=0):
    """Return why CUDA device ``index`` cannot train, with the fix, or None when it can.

    The causes are checked in order: the CPU package installed, a platform
    without GPU package, no NVIDIA driver, a driver too old for CUDA 11.8, no
    GPU visible, no such GPU index, a CUDA 11.8 or cuDNN 8 library missing
    (:mod:`~helpers.core.machine.cuda_libraries` loads them from their pip packages
    first). Then a one-node model runs on the GPU and its result is checked.

    Examples
    --------
    >>> problem = cuda_problem(0)
    >>> problem is None or problem == gpu_setup_problem() or problem.startswith(
    ...     ("there is no GPU", "running a model")
    ... )
    True
    """
    problem = gpu_setup_problem()
    if problem:
        return problem
    count, _ = cuda_libraries.visible_gpus()
    if index >= count:
        return f"there is no GPU cuda:{index}: the driver sees {count} (cuda:0 to cuda:{count - 1})"
    try:
        sess = make_session(probe_model(), Device("cuda", index), cpu_fallback=False)
        if "CUDAExecutionProvider" not in sess.get_providers():
            reason = cuda_libraries.provider_load_error()
            return "onnxruntime's CUDA provider could not start" + (
                f": {reason}"
                if reason
                else " (onnxruntime fell back to the CPU without saying why)"
            )
        x = onnxruntime.OrtValue.ortvalue_from_numpy(
            np.array([1.0, 2.0], dtype=np.float32), "cuda", index
        )
        y = sess.run_with_ortvalues(["y"], {"x": x})[0].numpy()
    except Exception as exc:  # any failure means: not usable
        return f"running a model on cuda:{index} failed: {str(exc).splitlines()[0]}"
    if not np.allclose(y, [2.0, 4.0]):
        return f"cuda:{index} returned a wrong result"
    return None


@lru_cache(maxsize=None)
def _auto_device():
    """The choice of ``'auto'``, made and printed once per process."""
    problem = cuda_problem(0)
    chosen = Device("cpu") if problem else Device("cuda", 0)
    print(f"device='auto': training on {chosen}" + (f" ({problem})." if problem else "."))
    return chosen


def resolve_device(device):
    """Parse ``device`` and check it can be used.

    Parameters
    ----------
    device : str or Device
        ``'cpu'``, ``'cuda'`` (GPU 0), ``'cuda:N'``, or ``'auto'`` (the first
        GPU if one really works, else the CPU; a message says which, once
        per process).

    Returns
    -------
    Device

    Raises
    ------
    DeviceError
        When a GPU is asked for and cannot be used; the message names the fix.

    Examples
    --------
    >>> resolve_device("cpu")
    Device(type='cpu', index=0)
    >>> resolve_device("tpu")
    Traceback (most recent call last):
    ...
    ValueError: Unknown device 'tpu': use 'cpu', 'cuda', 'cuda:N' or 'auto'.
    """
    if isinstance(device, Device):
        if device.type == "cuda":
            problem = cuda_problem(device.index)
            if problem:
                raise DeviceError(f"device={str(device)!r} cannot be used: {problem}.")
        return device
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}.")
    name = device.strip().lower()
    if name == "cpu":
        return Device("cpu")
    if name == "auto":
        return _auto_device()
    match = re.fullmatch(r"cuda(?::(\d+))?", name)
    if not match:
        raise ValueError(f"Unknown device {device!r}: use 'cpu', 'cuda', 'cuda:N' or 'auto'.")
    index = int(match.group(1) or 0)
    problem = cuda_problem(index)
    if problem:
        raise DeviceError(f"device={device!r} cannot be used: {problem}.")
    return Device("cuda", index)
