"""The session layer: every onnxruntime session of helpers is made by
``portable.runtime_support.make_session``; the training layers' come through
``core.machine.sessions``, which adds their options and providers."""

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
    """One place: helpers.portable's, which the training layers' make_session calls."""
    makers = sorted(
        str(path.relative_to(HELPERS)) for path in HELPERS.rglob("*.py") if _makes_sessions(path)
    )
    assert makers == ["portable/runtime_support.py"]


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


def test_the_training_layers_sessions_are_made_by_helpers_portable(linear_onnx, monkeypatch):
    """The core adds its options (no unfaithful fusion) and its device's providers only."""
    from helpers.core.machine import sessions
    from helpers.portable import runtime_support

    made = []
    portable_make_session = runtime_support.make_session

    def recording(model, providers, **kwargs):
        made.append((providers, kwargs["session_options"]))
        return portable_make_session(model, providers, **kwargs)

    monkeypatch.setattr(runtime_support, "make_session", recording)
    session = sessions.make_session(linear_onnx, n_threads=1, label="model")
    [(chosen, options)] = made
    assert chosen == ["CPUExecutionProvider"] == session.get_providers()
    assert options.intra_op_num_threads == 1
    assert options.get_session_config_entry("optimization.disable_specified_optimizers") == (
        "SkipLayerNormFusion"
    )
