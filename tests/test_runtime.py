import os

import onnx
import pytest

import helpers
from helpers.core.machine import runtime, runtime_output, sessions
from helpers.portable import runtime_support
from helpers.portable.runtime_support import runtime_accepts


def test_max_ir_version_is_what_the_runtime_loads():
    accepted = runtime.max_ir_version()
    assert runtime_accepts(accepted, 13, refusal="IR version")
    assert not runtime_accepts(accepted + 1, 13, refusal="IR version")


def test_max_opset_is_what_the_runtime_runs():
    accepted = runtime.max_opset()
    ir_version = runtime.max_ir_version()
    assert runtime_accepts(ir_version, accepted, refusal="ValidateOpsetForDomain")
    assert not runtime_accepts(ir_version, accepted + 1, refusal="ValidateOpsetForDomain")


def test_a_probe_failure_that_is_not_the_refusal_is_raised(monkeypatch):
    """The probe of the training layers is helpers.portable's: an unrelated failure surfaces."""

    def failing(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(runtime_support, "make_session", failing)
    with pytest.raises(RuntimeError, match="out of memory"):
        runtime_accepts(10, 13, refusal="IR version")
    assert not runtime_accepts(10, 13)  # without a refusal text, any failure means no


@pytest.mark.training_package
def test_check_onnx_compatible_passes_with_pinned_onnx():
    assert onnx.IR_VERSION <= runtime.max_ir_version()
    runtime.check_onnx_compatible()


def test_native_stderr_is_captured(capfd):
    with runtime_output.native_stderr_captured() as captured:
        os.write(2, b"C++ log line\n")
    assert captured == ["C++ log line\n"]
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_native_stderr_restored_after_error(capfd):
    with pytest.raises(RuntimeError):
        with runtime_output.native_stderr_captured():
            raise RuntimeError("boom")
    os.write(2, b"visible\n")
    assert "visible" in capfd.readouterr().err


def test_main_opset(linear_onnx):
    assert runtime.main_opset(linear_onnx) == linear_onnx.opset_import[0].version


def test_set_num_threads():
    try:
        helpers.set_num_threads(1)
        assert sessions.session_options().intra_op_num_threads == 1
        # an explicit count wins over the default set for the process
        assert sessions.session_options(3).intra_op_num_threads == 3
        with pytest.raises(ValueError, match="integer >= 1"):
            helpers.set_num_threads(0)
    finally:
        helpers.set_num_threads(None)
    assert sessions.session_options().intra_op_num_threads == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_session_options_rejects_bad_thread_counts(bad):
    with pytest.raises(ValueError, match="n_threads must be an integer >= 1 or None"):
        sessions.session_options(bad)
