"""The training artifacts: the files ``generate_artifacts`` writes, and the models it starts from.

``onnxruntime.training.artifacts.generate_artifacts`` turns a forward-only
ONNX model into a training model, an eval model, an optimizer model and a
checkpoint. :func:`generate_training_artifacts` writes them for a model
from :func:`helpers.add_loss_output` (what
:class:`helpers.OrtGradientOptimizer` trains); :func:`export_for_training`
exports a forward-only model from PyTorch with the settings training needs;
:func:`load_training_artifacts` loads the four files back into the objects
of ``onnxruntime.training.api``, and :func:`train_step` runs one step, so
that the notebooks about training artifacts can stay about the artifacts.
"""
import contextlib
import io
import logging
import os
import warnings
from collections import namedtuple

import numpy as np
import onnx
import onnxruntime
import pandas as pd
import torch
from onnxruntime.training import artifacts as ort_artifacts
from onnxruntime.training import onnxblock
from onnxruntime.training.api import CheckpointState, Module, Optimizer

from ..core.gradient_rewrites import count_rewrites, restore_rewrites, rewrite_for_training
from ..core.runtime import check_model_ir_version, native_stderr_captured, quiet_runtime_logs
from ..core.sessions import session_options

#: Default opset of :func:`export_for_training`: supported by the TorchScript
#: exporter of torch 2.13 and by onnxruntime 1.19.2.
DEFAULT_OPSET = 17

#: The logger of onnxruntime's ORT-format converter, which logs at INFO level.
_CONVERTER_LOGGER = "ort_format_model.utils"

#: What :func:`load_training_artifacts` returns.
TrainingArtifacts = namedtuple("TrainingArtifacts", ["state", "module", "optimizer"])


def export_for_training(
    module,
    example_input,
    input_names=("x",),
    output_names=("y",),
    opset_version=DEFAULT_OPSET,
    dynamic_batch=True,
    **export_options,
):
    """Export a torch module to a forward-only ONNX model fit for training.

    Calls the TorchScript exporter, ``torch.onnx.export(..., dynamo=False)``,
    with the settings onnxruntime's documentation asks for before
    ``generate_artifacts``: ``export_params=True`` (the weights become
    initializers, which are what can be trained), ``do_constant_folding=False``
    (a folded expression of a weight would become a new initializer with a
    generated name) and ``training=torch.onnx.TrainingMode.TRAINING`` (layers
    such as ``Dropout`` stay in the graph). torch 2.13 deprecates that
    exporter and the ``training`` argument; its deprecation warnings are
    silenced, other warnings pass through.

    Parameters
    ----------
    module : torch.nn.Module
        The model to export.
    example_input : torch.Tensor or tuple of torch.Tensor
        Inputs the exporter traces the model with.
    input_names, output_names : sequence of str
        Names of the graph inputs and outputs.
    opset_version : int
        Opset of the default ONNX domain.
    dynamic_batch : bool
        Make the first dimension of every input and output free, so that any
        batch size works.
    **export_options
        Override ``export_params``, ``do_constant_folding`` or ``training``
        (to show what goes wrong without them), or pass other options of
        ``torch.onnx.export``.

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    helpers.core.runtime.RuntimeCompatibilityError
        When the exported model has an IR version onnxruntime refuses.
    """
    if isinstance(example_input, torch.Tensor):
        example_input = (example_input,)
    options = {
        "export_params": True,
        "do_constant_folding": False,
        "training": torch.onnx.TrainingMode.TRAINING,
    }
    options.update(export_options)
    if dynamic_batch:
        options.setdefault(
            "dynamic_axes", {name: {0: "N"} for name in [*input_names, *output_names]}
        )
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            tuple(example_input),
            buffer,
            input_names=list(input_names),
            output_names=list(output_names),
            opset_version=opset_version,
            dynamo=False,
            **options,
        )
    model = onnx.load_from_string(buffer.getvalue())
    check_model_ir_version(model)
    return model


@contextlib.contextmanager
def converter_output_captured():
    """Capture what ``generate_artifacts(..., ort_format=True)`` prints in Python.

    The conversion to the ORT format prints its progress on ``sys.stdout``
    and logs one INFO line per model through the logger
    ``ort_format_model.utils``, which importing ``onnxruntime.training``
    sends to the root handler on stderr.
    :func:`helpers.core.runtime.native_stderr_captured` does not see either: it
    catches what C++ code writes. Use both around the call.

    Yields
    ------
    list
        Filled, once the block ends, with the captured text.
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
    """
    ext = "ort" if ort_format else "onnx"
    paths = {kind: f"{prefix}{kind}.{ext}" for kind in ("training_model", "eval_model", "optimizer_model")}
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
        paths["training_model"], state, paths["eval_model"], device=device, session_options=session_options()
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
    """
    names = sorted(os.listdir(directory))
    return pd.DataFrame(
        {"file": names, "bytes": [os.path.getsize(os.path.join(directory, n)) for n in names]}
    )


def generate_training_artifacts(onx_loss, weights_to_train, directory, solver="sgd", **adamw):
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
        (:class:`helpers.core.update_rules.AdamWRule`), the others an SGD one.
    **adamw
        ``betas``, ``eps``, ``weight_decay`` of the AdamW optimizer model.
    """
    frozen = [i.name for i in onx_loss.graph.initializer if i.name not in weights_to_train]
    optimizer = (
        onnxblock.optim.AdamW(**adamw) if solver == "adamw" else ort_artifacts.OptimType.SGD
    )
    quiet_runtime_logs()
    with native_stderr_captured():
        ort_artifacts.generate_artifacts(
            onx_loss,
            requires_grad=list(weights_to_train),
            frozen_params=frozen,
            loss=None,
            optimizer=optimizer,
            artifact_directory=directory,
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


def write_training_artifacts(onx_loss, names, folder, solver, adamw, fast_gradients):
    """Write the artifacts of ``onx_loss`` into ``folder``, its graph rewritten for fast gradients.

    The inputs that are not initializers hold one row per sample: their
    first dimension is named as the batch (see
    :func:`helpers.core.gradient_rewrites.rewrite_for_training`).
    """
    initializers = {i.name for i in onx_loss.graph.initializer}
    per_row = [i.name for i in onx_loss.graph.input if i.name not in initializers]
    training_model = rewrite_for_training(onx_loss, per_row) if fast_gradients else onx_loss
    generate_training_artifacts(training_model, names, folder, solver, **adamw)


def restore_eval_model(folder):
    """Put the plain ``Relu`` nodes back into the evaluation model of ``folder``."""
    path = os.path.join(folder, "eval_model.onnx")
    eval_model = onnx.load(path)
    if count_rewrites(eval_model):
        onnx.save(restore_rewrites(eval_model), path)
