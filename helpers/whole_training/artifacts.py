"""The training artifacts: the files ``generate_artifacts`` writes.

``onnxruntime.training.artifacts.generate_artifacts`` turns a forward-only
ONNX model (:mod:`helpers.core.model_graphs.from_torch` exports one from
PyTorch) into a training model, an eval model, an optimizer model and a
checkpoint. :func:`generate_training_artifacts` writes them for a model
from :func:`helpers.add_loss_output` (what
:class:`helpers.OrtGradientOptimizer` trains);
:func:`load_training_artifacts` loads the four files back into the objects
of ``onnxruntime.training.api``, and :func:`train_step` runs one step, so
that the notebooks about training artifacts can stay about the artifacts.
"""

import contextlib
import io
import logging
import os
from collections import namedtuple

import numpy as np
import onnx
import onnxruntime
import pandas as pd
from onnxruntime.training import artifacts as ort_artifacts
from onnxruntime.training import onnxblock
from onnxruntime.training.api import CheckpointState, Module, Optimizer

from ..core.machine.runtime_output import ForkSafeLock, quiet_runtime_logs
from ..core.machine.sessions import session_options

# onnxblock builds the gradient graph with sessions of its own, which log every graph
# transformation on the process's stderr, from C++. From this import on they log errors
# only: the artifacts this module writes, and those of a notebook that calls
# ``generate_artifacts`` itself, print nothing (no notebook needs to quiet the runtime).
quiet_runtime_logs()

#: onnxblock builds one model at a time: it keeps it in a global (``onnxblock.base``),
#: and two builds at once fail ("Base onnx model already exists").
_ONNXBLOCK_LOCK = ForkSafeLock()

#: What :func:`load_training_artifacts` returns.
TrainingArtifacts = namedtuple("TrainingArtifacts", ["state", "module", "optimizer"])
TrainingArtifacts.__doc__ = """What :func:`load_training_artifacts` returns: ``(state, module,
optimizer)``.

Examples
--------
>>> import tempfile
>>> from helpers import add_loss_output
>>> from helpers.teaching.model_factories import mlp_onnx
>>> onx = add_loss_output(mlp_onnx(3, hidden=(4,)))
>>> with tempfile.TemporaryDirectory() as folder:
...     generate_training_artifacts(onx, ["intercept1"], folder)
...     artifacts = load_training_artifacts(folder)
>>> artifacts._fields
('state', 'module', 'optimizer')
>>> [type(part).__name__ for part in artifacts]
['CheckpointState', 'Module', 'Optimizer']
"""


def artifact_paths(directory, prefix="", ort_format=False):
    """Paths of the files ``generate_artifacts`` writes.

    Parameters
    ----------
    directory : str
        The ``artifact_directory`` given to ``generate_artifacts``.
    prefix : str
        Its ``prefix``.
    ort_format : bool
        Return the ``.ort`` models instead of the ``.onnx`` ones (both are
        written when ``ort_format=True``).

    Returns
    -------
    dict
        ``training_model``, ``eval_model``, ``optimizer_model``,
        ``checkpoint`` and ``nominal_checkpoint`` to paths (which may not
        exist: the optimizer model and the nominal checkpoint are optional).

    Examples
    --------
    >>> paths = artifact_paths("artifacts", prefix="mlp_")
    >>> paths["training_model"], paths["checkpoint"]
    ('artifacts/mlp_training_model.onnx', 'artifacts/mlp_checkpoint')
    >>> artifact_paths("artifacts", ort_format=True)["eval_model"]
    'artifacts/eval_model.ort'
    """
    ext = "ort" if ort_format else "onnx"
    paths = {
        kind: f"{prefix}{kind}.{ext}"
        for kind in ("training_model", "eval_model", "optimizer_model")
    }
    paths["checkpoint"] = f"{prefix}checkpoint"
    paths["nominal_checkpoint"] = f"{prefix}nominal_checkpoint"
    return {kind: os.path.join(directory, name) for kind, name in paths.items()}


def load_training_artifacts(directory, prefix="", checkpoint=None, ort_format=False, device="cpu"):
    """Load the artifacts of ``generate_artifacts`` into the training API.

    Parameters
    ----------
    directory : str
        The folder the artifacts were written to.
    prefix : str
        The ``prefix`` they were written with.
    checkpoint : str, optional
        Start from this checkpoint file instead of the initial one.
    ort_format : bool
        Load the ``.ort`` models instead of the ``.onnx`` ones. Only the
        ``.onnx`` eval model supports ``Module.export_model_for_inferencing``.
    device : str
        Passed to :class:`onnxruntime.training.api.Module`.

    Returns
    -------
    TrainingArtifacts
        ``(state, module, optimizer)``: a
        :class:`~onnxruntime.training.api.CheckpointState`, a
        :class:`~onnxruntime.training.api.Module` in training mode and an
        :class:`~onnxruntime.training.api.Optimizer`, or None for the
        optimizer when no optimizer model was generated.

    Raises
    ------
    FileNotFoundError
        When the training model, the eval model or the checkpoint is missing.

    Examples
    --------
    >>> import tempfile
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     generate_training_artifacts(
    ...         add_loss_output(mlp_onnx(3, hidden=(4,))), ["intercept1"], folder
    ...     )
    ...     state, module, optimizer = load_training_artifacts(folder)
    >>> module.input_names(), module.output_names()
    (['X', 'label'], ['loss'])
    >>> state.parameters["intercept1"].requires_grad, state.parameters["coefficient0"].requires_grad
    (True, False)
    """
    paths = artifact_paths(directory, prefix, ort_format)
    checkpoint = checkpoint or paths["checkpoint"]
    for path in (paths["training_model"], paths["eval_model"], checkpoint):
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path} does not exist: check the folder, the prefix ({prefix!r}) and "
                f"ort_format ({ort_format}) given to generate_artifacts."
            )
    state = CheckpointState.load_checkpoint(checkpoint)
    module = Module(
        paths["training_model"],
        state,
        paths["eval_model"],
        device=device,
        session_options=session_options(),
    )
    optimizer = None
    if os.path.exists(paths["optimizer_model"]):
        optimizer = Optimizer(paths["optimizer_model"], module)
    module.train()
    return TrainingArtifacts(state, module, optimizer)


def train_step(module, optimizer, *inputs):
    """One training step: forward and backward, weight update, gradient reset.

    Parameters
    ----------
    module : onnxruntime.training.api.Module
        In training mode.
    optimizer : onnxruntime.training.api.Optimizer
    *inputs : numpy.ndarray
        The user inputs of the training model, in ``module.input_names()``
        order (features, then targets).

    Returns
    -------
    float
        The loss, the first output of the training model, before the update.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> weights = ["coefficient0", "intercept0", "coefficient1", "intercept1"]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     generate_training_artifacts(add_loss_output(mlp_onnx(3, hidden=(4,))), weights, folder)
    ...     state, module, optimizer = load_training_artifacts(folder)

    Three steps of SGD on two rows: the loss decreases.

    >>> optimizer.set_learning_rate(0.1)
    >>> X = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    >>> y = np.array([[1.0], [0.0]], dtype=np.float32)
    >>> [round(train_step(module, optimizer, X, y), 4) for _ in range(3)]
    [1.4837, 0.6732, 0.5957]
    """
    outputs = module(*inputs)
    loss = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    optimizer.step()
    module.lazy_reset_grad()
    loss = loss.numpy() if isinstance(loss, onnxruntime.OrtValue) else loss
    return float(np.asarray(loss).reshape(-1)[0])


def list_artifacts(directory):
    """The files in ``directory`` with their sizes, sorted by name.

    Parameters
    ----------
    directory : str

    Returns
    -------
    pandas.DataFrame
        Columns ``file`` and ``bytes``.

    Examples
    --------
    >>> import tempfile
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     generate_training_artifacts(
    ...         add_loss_output(mlp_onnx(3, hidden=(4,))), ["intercept1"], folder
    ...     )
    ...     table = list_artifacts(folder)
    >>> table["file"].tolist()
    ['checkpoint', 'eval_model.onnx', 'optimizer_model.onnx', 'training_model.onnx']
    >>> bool((table["bytes"] > 0).all())
    True
    """
    names = sorted(os.listdir(directory))
    return pd.DataFrame(
        {"file": names, "bytes": [os.path.getsize(os.path.join(directory, n)) for n in names]}
    )


def generate_training_artifacts(
    onx_loss, weights_to_train, directory, solver="sgd", additional_output_names=(), **adamw
):
    """Write the training artifacts of a model whose only output is its loss.

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model from :func:`helpers.add_loss_output` (or any model whose
        single output is a scalar loss).
    weights_to_train : list of str
        Float initializers to train; the other initializers are frozen.
    directory : str
        Existing folder that receives ``training_model.onnx``,
        ``eval_model.onnx``, ``optimizer_model.onnx`` and ``checkpoint``.
    solver : str
        ``'adamw'`` writes an AdamW optimizer model with torch's formulas
        (:class:`helpers.core.updates.update_rules.AdamWRule`), the others an SGD one.
    additional_output_names : sequence of str
        Values of the graph the training model returns after the loss (the
        batch statistics of batch normalization layers, say).
    **adamw
        ``betas``, ``eps``, ``weight_decay`` of the AdamW optimizer model.

    Examples
    --------
    >>> import os, tempfile
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx_loss = add_loss_output(mlp_onnx(3, hidden=(4,)))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     generate_training_artifacts(
    ...         onx_loss, ["coefficient1", "intercept1"], folder, solver="adamw"
    ...     )
    ...     files = sorted(os.listdir(folder))
    >>> files
    ['checkpoint', 'eval_model.onnx', 'optimizer_model.onnx', 'training_model.onnx']
    """
    frozen = [i.name for i in onx_loss.graph.initializer if i.name not in weights_to_train]
    optimizer = onnxblock.optim.AdamW(**adamw) if solver == "adamw" else ort_artifacts.OptimType.SGD
    with _ONNXBLOCK_LOCK:  # onnxblock keeps the model being built in a global: one build at a time
        ort_artifacts.generate_artifacts(
            onx_loss,
            requires_grad=list(weights_to_train),
            frozen_params=frozen,
            loss=None,
            optimizer=optimizer,
            artifact_directory=directory,
            additional_output_names=list(additional_output_names) or None,
        )
    if solver == "adamw":
        _use_torch_adamw(os.path.join(directory, "optimizer_model.onnx"))


def _use_torch_adamw(path):
    """Switch the AdamW optimizer model to torch's formulas.

    onnxblock writes its ``AdamWOptimizer`` node with ``adam_mode=1``, the
    Hugging Face variant (``eps`` added before the bias correction, the
    weight decay applied after the step); ``adam_mode=0`` is
    ``torch.optim.AdamW``, the formula the forward/backward API runs too.
    """
    model = onnx.load(path)
    for node in model.graph.node:
        if node.op_type == "AdamWOptimizer":
            for attribute in node.attribute:
                if attribute.name == "adam_mode":
                    attribute.i = 0
    onnx.save(model, path)


#: The logger of onnxruntime's ORT-format converter, which logs at INFO level.
_CONVERTER_LOGGER = "ort_format_model.utils"


@contextlib.contextmanager
def converter_output_captured():
    """Capture what ``generate_artifacts(..., ort_format=True)`` prints in Python.

    The conversion to the ORT format prints its progress on ``sys.stdout``
    and logs one INFO line per model through the logger
    ``ort_format_model.utils``, which importing ``onnxruntime.training``
    sends to the root handler on stderr.
    :func:`helpers.core.machine.runtime_output.native_stderr_captured` does not see either: it
    catches what C++ code writes. Use both around the call.

    Yields
    ------
    list
        Filled, once the block ends, with the captured text.

    Examples
    --------
    >>> import tempfile
    >>> from onnxruntime.training import artifacts
    >>> from helpers import add_loss_output
    >>> from helpers.core.machine.runtime_output import native_stderr_captured
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx_loss = add_loss_output(mlp_onnx(3, hidden=(4,)))

    Without an optimizer, ``generate_artifacts`` converts two models:

    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with native_stderr_captured(), converter_output_captured() as captured:
    ...         artifacts.generate_artifacts(
    ...             onx_loss, requires_grad=["intercept1"], loss=None,
    ...             artifact_directory=folder, ort_format=True)
    >>> captured[0].count("Converted 1/1 models successfully.")
    2
    """
    captured = []
    sink = io.StringIO()
    logger = logging.getLogger(_CONVERTER_LOGGER)
    handler = logging.StreamHandler(sink)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with contextlib.redirect_stdout(sink):
            yield captured
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        captured.append(sink.getvalue())
