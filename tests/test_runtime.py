import os

import onnx
import pytest

import helpers
from helpers.core.machine import runtime, runtime_output, sessions


def test_max_ir_version_is_what_the_runtime_loads():
    accepted = runtime.max_ir_version()
    assert runtime._runtime_accepts(accepted)
    assert not runtime._runtime_accepts(accepted + 1)


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
