"""What the installed onnxruntime runs: the model's IR version and opset, the execution providers.

Both are checked before the trainer creates its session, so that a step model written by a
newer onnx, or a provider this build lacks, is refused with a sentence naming the fix rather
than a runtime message. The IR version and the opset are tried on a one-node model stamped
like the step model (:func:`probe_model`, :func:`runtime_accepts`; no table of versions: true for
any build of onnxruntime); the training layers probe the runtime, and a GPU, with the same model.
:func:`make_session` makes every onnxruntime session of the project (``helpers.core`` adds its
options and its devices' providers, :func:`helpers.core.machine.sessions.make_session`).
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper


class RuntimeSupportError(RuntimeError):
    """The installed onnxruntime cannot run this model, or not with these providers.

    Examples
    --------
    >>> issubclass(RuntimeSupportError, RuntimeError)
    True
    """


def probe_model(ir_version=8, opset=13):
    """The model the runtime is probed with: ``y = x + x`` on two floats, stamped with
    ``ir_version`` and ``opset``.

    What a runtime loads (:func:`runtime_accepts`), and whether a device computes (its ``y`` is
    ``2 * x``: :func:`helpers.core.machine.devices.cuda_problem`), is tried on it.

    Examples
    --------
    >>> model = probe_model(10, 17)
    >>> [n.op_type for n in model.graph.node], model.ir_version, model.opset_import[0].version
    (['Add'], 10, 17)
    >>> make_session(model, ["CPUExecutionProvider"]).run(None, {"x": np.ones(2, np.float32)})
    [array([2., 2.], dtype=float32)]
    """
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "runtime_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def runtime_accepts(ir_version, opset, refusal=None):
    """Whether the installed onnxruntime loads and runs :func:`probe_model` stamped with these
    versions, on the CPU.

    Parameters
    ----------
    ir_version, opset : int
    refusal : str or None
        Text of the runtime's error that means no (``"IR version"``); another error is raised.
        None: any error means no.

    Examples
    --------
    >>> runtime_accepts(8, 13), runtime_accepts(99, 13)
    (True, False)
    >>> runtime_accepts(99, 13, refusal="no such text")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    onnxruntime.capi.onnxruntime_pybind11_state...
    """
    try:
        probe = probe_model(ir_version, opset)
        # log_severity 4: a refusal is the answer, not a message to log
        session = make_session(probe, ["CPUExecutionProvider"], log_severity=4)
        session.run(None, {"x": np.zeros(2, dtype=np.float32)})
    except Exception as error:  # the runtime raises its own Fail/InvalidGraph/InvalidArgument
        if refusal is None or refusal in str(error):
            return False
        raise
    return True


def make_session(model, providers, log_severity=3, n_threads=None, session_options=None):
    """The one place the project makes an onnxruntime session.

    Parameters
    ----------
    model : onnx.ModelProto or bytes
        The model, or the model serialized.
    providers : list
        Execution providers, as :func:`resolve_providers` returns them.
    log_severity : int
        The runtime's log level: 3 logs errors only (a probe passes 4: its refusal is the answer,
        not a message to show). Not applied to ``session_options``, which keep their own.
    n_threads : int or None
        The threads of an operator (``intra_op_num_threads``); None: ``session_options``'
        count, or onnxruntime's default.
    session_options : onnxruntime.SessionOptions or None
        The user's options, used as they are but for ``n_threads`` when it is given (the object
        itself is left as it was).

    Examples
    --------
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Neg", ["x"], ["y"])], "neg",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> model.ir_version = 10
    >>> make_session(model, ["CPUExecutionProvider"]).run(None, {"x": np.ones(1, np.float32)})
    [array([-1.], dtype=float32)]
    >>> session = make_session(model.SerializeToString(), ["CPUExecutionProvider"], n_threads=1)
    >>> session.get_session_options().intra_op_num_threads
    1
    """
    if session_options is None:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = log_severity
    else:
        options = session_options
    kept = options.intra_op_num_threads
    if n_threads is not None:
        options.intra_op_num_threads = int(n_threads)
    data = model if isinstance(model, bytes) else model.SerializeToString()
    try:  # the session copies the options it is made with
        return onnxruntime.InferenceSession(data, options, providers=list(providers))
    finally:
        options.intra_op_num_threads = kept


def check_threads(n_threads, session_options):
    """Raise unless ``n_threads`` is None or a positive int and ``session_options`` None or an
    ``onnxruntime.SessionOptions``.

    Examples
    --------
    >>> check_threads(2, onnxruntime.SessionOptions())
    >>> check_threads(0, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: n_threads must be None or an integer >= 1, got 0.
    """
    if n_threads is not None and (
        isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1
    ):
        raise ValueError(f"n_threads must be None or an integer >= 1, got {n_threads!r}.")
    if session_options is not None and not isinstance(session_options, onnxruntime.SessionOptions):
        raise TypeError(
            f"session_options must be None or an onnxruntime.SessionOptions, got "
            f"{type(session_options).__name__}."
        )


def default_opset(model):
    """The version of the default ONNX domain ``model`` imports.

    Examples
    --------
    >>> model = helper.make_model(helper.make_graph([], "g", [], []),
    ...                           opset_imports=[helper.make_opsetid("", 17)])
    >>> default_opset(model)
    17
    """
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    raise ValueError(
        "The model imports no opset of the default ONNX domain: it is not a step model."
    )


def check_runtime_loads(model, name="model"):
    """Raise :class:`RuntimeSupportError` when the installed onnxruntime refuses ``model``'s IR
    version or opset.

    Parameters
    ----------
    model : onnx.ModelProto
    name : str
        What the model is, in the message (``"step model"``).

    Examples
    --------
    >>> model = helper.make_model(helper.make_graph([], "g", [], []),
    ...                           opset_imports=[helper.make_opsetid("", 17)])
    >>> model.ir_version = 8
    >>> check_runtime_loads(model)
    >>> model.ir_version = 99
    >>> check_runtime_loads(model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helpers.portable.runtime_support.RuntimeSupportError: The model has IR version 99, which ...
    """
    version = onnxruntime.__version__
    if not runtime_accepts(model.ir_version, 13):
        raise RuntimeSupportError(
            f"The {name} has IR version {model.ir_version}, which onnxruntime {version} does not "
            "load. Export the step with onnx 1.17 (IR 10), or set model.ir_version = 10 before "
            "saving (onnx 1.18 and later stamp new models with IR 11 and keep a loaded model's "
            "version); or install a newer onnxruntime."
        )
    opset = default_opset(model)
    if not runtime_accepts(min(model.ir_version, 10), opset):
        raise RuntimeSupportError(
            f"The {name} imports opset {opset} of the ONNX domain, which onnxruntime {version} "
            f"does not run. Export the step with a lower opset, or install a newer onnxruntime."
        )


def resolve_providers(providers):
    """The execution providers a session is given: CPU by default, each one checked.

    Parameters
    ----------
    providers : None, str or list
        Names of execution providers (``"CUDAExecutionProvider"``), or ``(name, options)``
        pairs as onnxruntime takes them; ``None``: the CPU.

    Returns
    -------
    list

    Examples
    --------
    >>> resolve_providers(None)
    ['CPUExecutionProvider']
    >>> resolve_providers("NoSuchExecutionProvider")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helpers.portable.runtime_support.RuntimeSupportError: NoSuchExecutionProvider is not ...
    """
    if providers is None:
        return ["CPUExecutionProvider"]
    if isinstance(providers, (str, tuple)):
        providers = [providers]
    available = onnxruntime.get_available_providers()
    for provider in providers:
        name = provider[0] if isinstance(provider, tuple) else provider
        if name not in available:
            raise RuntimeSupportError(
                f"{name} is not available in this onnxruntime ({onnxruntime.__version__}, "
                f"{', '.join(available)}). Choose one of those, or install the onnxruntime "
                "package that has it (onnxruntime-gpu for CUDAExecutionProvider)."
            )
    return list(providers)


def device_of(providers):
    """Where the state lives: ``"cuda"`` when the first provider is CUDA's, else ``"cpu"``.

    Examples
    --------
    >>> device_of(["CPUExecutionProvider"]), device_of([("CUDAExecutionProvider", {})])
    ('cpu', 'cuda')
    """
    first = providers[0][0] if isinstance(providers[0], tuple) else providers[0]
    return "cuda" if first == "CUDAExecutionProvider" else "cpu"
