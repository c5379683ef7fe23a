"""Forward-only models exported from PyTorch, fit for ``generate_artifacts``.

``onnxruntime.training.artifacts.generate_artifacts`` starts from a
forward-only ONNX model. :func:`export_for_training` exports one from a torch
module with the settings training needs; :func:`converter_output_captured`
keeps the log lines of onnxruntime's ORT-format converter out of the output.
"""
import contextlib
import io
import logging
import warnings

import onnx
import torch

from ..core.runtime import check_model_ir_version

#: Default opset of :func:`export_for_training`: supported by the TorchScript
#: exporter of torch 2.13 and by onnxruntime 1.19.2.
DEFAULT_OPSET = 17

#: The logger of onnxruntime's ORT-format converter, which logs at INFO level.
_CONVERTER_LOGGER = "ort_format_model.utils"


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

    Examples
    --------
    >>> import torch
    >>> model = export_for_training(torch.nn.Linear(3, 1), torch.zeros(2, 3))
    >>> [i.name for i in model.graph.input], [o.name for o in model.graph.output]
    (['x'], ['y'])
    >>> [i.name for i in model.graph.initializer], [n.op_type for n in model.graph.node]
    (['weight', 'bias'], ['Gemm'])
    >>> model.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    'N'
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

    Examples
    --------
    >>> import tempfile
    >>> from onnxruntime.training import artifacts
    >>> from helpers import add_loss_output
    >>> from helpers.core.runtime import native_stderr_captured
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
