"""helpers.teaching.notebook.use_device: the device string and the sentence about the CPU."""

import pytest

from helpers.core.machine import devices
from helpers.teaching.notebook import use_device


@pytest.fixture(autouse=True)
def fresh_auto_choice():
    """'auto' decides once per process: let each test decide again."""
    devices._auto_device.cache_clear()
    yield
    devices._auto_device.cache_clear()


def test_no_gpu(monkeypatch, capsys):
    monkeypatch.setattr(devices, "cuda_problem", lambda index=0: "no CUDA provider")
    assert use_device("auto") == "cpu"
    out = capsys.readouterr().out
    assert "device='auto': training on cpu" in out
    assert "runs on the CPU because no GPU is available: no CUDA provider." in out
    with pytest.raises(devices.DeviceError):
        use_device("cuda")


def test_gpu_present(monkeypatch, capsys):
    monkeypatch.setattr(devices, "cuda_problem", lambda index=0: None)
    assert use_device("auto") == "cuda:0"
    assert "CPU" not in capsys.readouterr().out
    assert use_device("cuda:1") == "cuda:1"
    assert use_device("cpu") == "cpu"
    assert "device='cpu' was asked for" in capsys.readouterr().out
