"""The sessions of the training layers: their options and their devices' providers.

Every ``InferenceSession`` of the training layers (models, losses, updates, batch
gathers, predictions, probes) comes from :func:`make_session`, which gives
it its providers (with the GPU's device id), its thread count and its
options: errors-only logs, the threads of :func:`helpers.set_num_threads`, a
profile when :func:`profiling_sessions` is active, and none of the graph
fusions that change what a model computes (:data:`UNFAITHFUL_FUSIONS`). The session
itself is made by :func:`helpers.portable.runtime_support.make_session`, the one place
the project makes one.
The training sessions of onnxruntime's own classes (``Module``,
``TrainingAgent``) take their options from :func:`session_options`.
"""

import contextlib
import itertools
import os

import onnxruntime

from ...portable import runtime_support
from ...portable.module_names import moved_names
from .threads import check_n_threads, resolved_threads

#: Severity of onnxruntime's C++ logger in the sessions made here (3 = errors only).
ERROR_SEVERITY = 3

#: Graph optimizers of onnxruntime 1.19.2 that turn some valid models into
#: others, turned off in every session made here. ``SkipLayerNormFusion``
#: fuses ``Add`` + ``LayerNormalization`` over two or more axes (torch's
#: ``LayerNorm([2, 8])`` after a residual sum) into ``SkipLayerNormalization``,
#: whose kernel takes one axis only: the session fails at its first run
#: ("gamma is expected to have 1 dimension, got 2") and logs the error.
UNFAITHFUL_FUSIONS = ("SkipLayerNormFusion",)

#: The session configuration entry that turns graph optimizers off by name (``;``-separated).
_DISABLED_OPTIMIZERS = "optimization.disable_specified_optimizers"

#: Where sessions write their profiles while :func:`profiling_sessions` is
#: active (None: no profiling).
_PROFILING = {"folder": None}

#: Numbers the profiles' file names (onnxruntime adds only the date and the second).
_PROFILE_NUMBERS = itertools.count()


@contextlib.contextmanager
def profiling_sessions(folder):
    """Make the sessions created inside the block write onnxruntime profiles.

    Each session writes a JSON trace named after its ``label`` (see
    :func:`session_options`) and a number into ``folder`` when it ends.
    :func:`helpers.measure.profiling.profile_training` uses it.

    Parameters
    ----------
    folder : str
        An existing folder.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, profiling_sessions(folder):
    ...     session_options(1, "model").enable_profiling
    True
    """
    previous = _PROFILING["folder"]
    _PROFILING["folder"] = folder
    try:
        yield folder
    finally:
        _PROFILING["folder"] = previous


def is_profiling():
    """Whether sessions created now write profiles (their objects must not be cached).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, profiling_sessions(folder):
    ...     inside = is_profiling()
    >>> inside, is_profiling()
    (True, False)
    """
    return _PROFILING["folder"] is not None


def session_options(n_threads=None, label="session", spin=True):
    """Return :class:`onnxruntime.SessionOptions` that log errors only, without unfaithful fusions.

    Parameters
    ----------
    label : str
        What the session runs (``'model'``, ``'loss'``, ``'update'``...):
        the name of its trace inside :func:`profiling_sessions`.
    n_threads : int, optional
        Intra-op threads of the session; None takes the count of
        :func:`helpers.set_num_threads`, or onnxruntime's default (one per core).
        Idle threads spin a while before sleeping, onnxruntime's default:
        a training step runs many small kernels in a row, and waking a
        sleeping thread for each costs a quarter of a small network's step.
    spin : bool
        False makes idle threads sleep at once: where another thread pool
        (torch's) works between two onnxruntime calls, spinning threads
        take its cores (:class:`helpers.OrtTorchModule` ran 3 times slower
        than onnxruntime's passes alone with them, on 2 cores).

    Examples
    --------
    >>> session_options(1).intra_op_num_threads
    1
    >>> session_options(spin=False).get_session_config_entry("session.intra_op.allow_spinning")
    '0'
    """
    check_n_threads(n_threads)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = ERROR_SEVERITY
    threads = resolved_threads(n_threads)
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if _PROFILING["folder"] is not None:
        options.enable_profiling = True
        # numbered: two sessions of one label ending in the same second would write one file
        number = next(_PROFILE_NUMBERS)
        options.profile_file_prefix = os.path.join(_PROFILING["folder"], f"{label}-{number}")
    return without_unfaithful_fusions(options)


def without_unfaithful_fusions(options):
    """Turn off the optimizers of :data:`UNFAITHFUL_FUSIONS` in ``options``; return ``options``.

    The configuration entry reaches every session made from the options,
    also those onnxruntime's own classes (``Module``, onnxblock) make.

    Examples
    --------
    >>> options = without_unfaithful_fusions(onnxruntime.SessionOptions())
    >>> options.get_session_config_entry("optimization.disable_specified_optimizers")
    'SkipLayerNormFusion'
    """
    try:
        disabled = options.get_session_config_entry(_DISABLED_OPTIMIZERS).split(";")
    except RuntimeError:  # not set yet
        disabled = []
    missing = [name for name in UNFAITHFUL_FUSIONS if name not in disabled]
    if missing:
        names = [*filter(None, disabled), *missing]
        options.add_session_config_entry(_DISABLED_OPTIMIZERS, ";".join(names))
    return options


def providers(device=None, cpu_fallback=True):
    """The execution providers of a session on ``device``.

    Parameters
    ----------
    device : helpers.core.machine.devices.Device, optional
        None or a CPU device gives the CPU provider; a GPU gives CUDA on
        that GPU's index, with the CPU behind it for the operators CUDA
        lacks unless ``cpu_fallback`` is False.

    Examples
    --------
    >>> providers()
    ['CPUExecutionProvider']
    >>> from helpers.core.machine.devices import Device
    >>> providers(Device("cuda", 1))
    [('CUDAExecutionProvider', {'device_id': 1}), 'CPUExecutionProvider']
    """
    if device is None or device.type == "cpu":
        return ["CPUExecutionProvider"]
    cuda = [("CUDAExecutionProvider", {"device_id": device.index})]
    return cuda + (["CPUExecutionProvider"] if cpu_fallback else [])


def make_session(
    model, device=None, n_threads=None, label="session", options=None, cpu_fallback=True, spin=True
):
    """Make an ``onnxruntime.InferenceSession`` with the training layers' options, on ``device``.

    The options (:func:`session_options`) and the providers (:func:`providers`) are this
    layer's; :func:`helpers.portable.runtime_support.make_session` makes the session.

    Parameters
    ----------
    model : onnx.ModelProto or bytes
    device : helpers.core.machine.devices.Device, optional
        Where it runs (see :func:`providers`); the CPU by default.
    n_threads : int, optional
        Intra-op threads (see :func:`session_options`).
    label : str
        Name of its profile inside :func:`profiling_sessions`.
    options : onnxruntime.SessionOptions, optional
        Options to use instead of :func:`session_options` (probes that must
        not be profiled nor take the user's thread count); the fusions of
        :data:`UNFAITHFUL_FUSIONS` are turned off in them too.
    cpu_fallback : bool
        Whether operators the GPU lacks may run on the CPU.
    spin : bool
        Whether idle threads spin (see :func:`session_options`).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "neg",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    >>> make_session(model, n_threads=1).run(None, {"x": np.ones(2, dtype=np.float32)})[0]
    array([-1., -1.], dtype=float32)
    """
    if options is None:
        options = session_options(n_threads, label, spin)
    return runtime_support.make_session(
        model,
        providers(device, cpu_fallback),
        session_options=without_unfaithful_fusions(options),
    )


# ``set_num_threads`` moved to :mod:`helpers.core.machine.threads` (import it from ``helpers``).
__getattr__ = moved_names(
    __name__, {"set_num_threads": ("helpers", "helpers.core.machine.threads")}
)
