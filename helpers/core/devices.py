"""Where training runs: parse ``device`` and check that it really works.

The GPU package of onnxruntime-training lists ``CUDAExecutionProvider`` even
on a machine without a GPU, so the provider list proves nothing: a small
model is run on the GPU before ``'auto'`` chooses it.
"""
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnxruntime
from onnx import TensorProto, helper
from onnxruntime.capi import _pybind_state as C

from .sessions import make_session

_GPU_FIX = (
    "Training on a GPU needs the GPU package onnxruntime-training==1.19.2 (instead of "
    "onnxruntime-training-cpu: `make setup GPU=1`), an NVIDIA GPU, CUDA 11.8 and cuDNN 8."
)


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


def _probe_model():
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "cuda_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@lru_cache(maxsize=None)
def cuda_problem(index=0):
    """Return why CUDA device ``index`` cannot train, or None when it can.

    A one-node model runs on the GPU and its result is checked.
    """
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return f"the installed onnxruntime ({onnxruntime.__version__}) has no CUDA provider"
    try:
        sess = make_session(_probe_model(), Device("cuda", index), cpu_fallback=False)
        if "CUDAExecutionProvider" not in sess.get_providers():
            return "the CUDA provider could not start (no GPU, or CUDA/cuDNN libraries missing)"
        x = onnxruntime.OrtValue.ortvalue_from_numpy(np.array([1.0, 2.0], dtype=np.float32), "cuda", index)
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
        raise DeviceError(f"device={device!r} cannot be used: {problem}. {_GPU_FIX}")
    return Device("cuda", index)
