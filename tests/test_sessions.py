"""The session layer: every onnxruntime session of helpers is made in ``core.machine.sessions``."""

import pathlib

import pytest

import helpers
from helpers.core.machine.devices import Device
from helpers.core.machine.sessions import make_session, providers
from helpers.core.updates import weight_updater

HELPERS = pathlib.Path(helpers.__file__).parent


def _makes_sessions(path):
    """Whether a module's code (not its docstrings' examples) makes an onnxruntime session."""
    lines = path.read_text(encoding="utf-8").splitlines()
    code = (line for line in lines if not line.lstrip().startswith((">>>", "...")))
    return any("InferenceSession(" in line for line in code)


def test_sessions_are_made_in_one_place():
    """One place in the training layers; one in helpers.portable, which imports nothing else."""
    makers = sorted(
        str(path.relative_to(HELPERS)) for path in HELPERS.rglob("*.py") if _makes_sessions(path)
    )
    assert makers == ["core/machine/sessions.py", "portable/runtime_support.py"]


def test_providers_carry_the_device_id():
    assert providers(Device("cuda", 3)) == [
        ("CUDAExecutionProvider", {"device_id": 3}),
        "CPUExecutionProvider",
    ]
    assert providers(Device("cuda", 1), cpu_fallback=False) == [
        ("CUDAExecutionProvider", {"device_id": 1})
    ]
    assert providers(Device("cpu")) == providers() == ["CPUExecutionProvider"]


def test_the_update_graph_runs_on_the_weights_device(monkeypatch):
    """cuda:1 reaches the session of the update (it used to run on GPU 0)."""
    seen = []

    class Stop(Exception):
        pass

    def recording(model, device=None, n_threads=None, label="session", **kwargs):
        seen.append((device, n_threads, label))
        raise Stop

    monkeypatch.setattr(weight_updater, "make_session", recording)
    with pytest.raises(Stop):
        weight_updater.WeightUpdater("adamw", [(2,)], Device("cuda", 1))
    assert seen == [(Device("cuda", 1), 1, "update")]


def test_make_session_takes_bytes_and_options(linear_onnx):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = make_session(linear_onnx.SerializeToString(), options=options)
    assert session.get_session_options().intra_op_num_threads == 1
    assert session.get_providers() == ["CPUExecutionProvider"]
