"""The runtime's own output: its C++ log lines kept quiet, its stderr captured in a notebook."""

import contextlib
import importlib.util
import os
import sys
import tempfile
import threading

import onnxruntime

from .sessions import ERROR_SEVERITY, without_unfaithful_fusions


def _quiet_session_options():
    """Options that log errors only, without unfaithful fusions (for onnxblock's own sessions)."""
    options = onnxruntime.SessionOptions()
    options.log_severity_level = ERROR_SEVERITY
    return without_unfaithful_fusions(options)


def quiet_runtime_logs():
    """Keep onnxruntime's info and warning lines out of the output, without touching stderr.

    The default logger (training sessions, the gradient builder of the
    forward/backward API) is set to errors only. ``generate_artifacts``
    builds its gradient graph with sessions whose options onnxblock makes
    itself, with the default log level: one info line per graph transformer
    on the process's stderr. onnxblock's graph utilities are given session
    options that log errors only instead. Nothing redirects the process's
    file descriptors: other threads' output, and errors, still reach stderr.

    Importing :mod:`helpers.whole_training.artifacts` (which
    ``from helpers import OrtGradientOptimizer`` does) calls it, and the
    forward/backward API calls it before it builds a gradient graph: a
    notebook never needs to.

    Examples
    --------
    >>> quiet_runtime_logs()  # from now on, onnxruntime logs errors only
    >>> import importlib.util
    >>> if importlib.util.find_spec("onnxruntime.training"):  # and onnxblock's sessions
    ...     from onnxruntime.training.onnxblock import _training_graph_utils
    ...     assert _training_graph_utils.SessionOptions().log_severity_level == ERROR_SEVERITY
    """
    onnxruntime.set_default_logger_severity(ERROR_SEVERITY)
    if importlib.util.find_spec("onnxruntime.training") is None:
        return  # the maintained onnxruntime: no onnxblock
    # imported here: onnxblock imports torch
    from onnxruntime.training.onnxblock import _training_graph_utils  # noqa: PLC0415

    _training_graph_utils.SessionOptions = _quiet_session_options


class ForkSafeLock:
    """A lock that a forked child gets free, whatever a thread of its parent held when it forked.

    Examples
    --------
    >>> lock = ForkSafeLock()
    >>> with lock:
    ...     held = lock.locked()
    >>> held, lock.locked()
    (True, False)
    """

    def __init__(self):
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self):
        self._lock = threading.Lock()

    def locked(self):
        """Whether a thread holds the lock."""
        return self._lock.locked()

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()
        return False


#: One capture of the process's stderr at a time (see :func:`native_stderr_captured`).
_CAPTURE_LOCK = ForkSafeLock()


@contextlib.contextmanager
def native_stderr_captured():
    """Capture what C++ code writes on the process's stderr, in a notebook cell.

    The notebooks use it to show, or hide, what the runtime prints from C++
    when it is called directly (``generate_artifacts`` with the runtime's
    default log level, an error the runtime also logs). It swaps
    the process's file descriptor 2 for the duration of the block: anything
    another thread writes meanwhile is captured too. The optimizers never
    use it (:func:`quiet_runtime_logs` keeps their output quiet); one
    capture runs at a time, and fd 2 is put back whatever happens.

    Yields
    ------
    list
        Filled, once the block ends, with the captured text.

    Examples
    --------
    >>> import os
    >>> with native_stderr_captured() as captured:
    ...     _ = os.write(2, b"from C++\\n")
    >>> captured
    ['from C++\\n']
    """
    captured = []
    with _CAPTURE_LOCK:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with tempfile.TemporaryFile(mode="w+b") as sink:
                os.dup2(sink.fileno(), 2)
                try:
                    yield captured
                finally:
                    os.dup2(saved, 2)
                    sink.seek(0)
                    captured.append(sink.read().decode(errors="replace"))
        finally:
            os.close(saved)
