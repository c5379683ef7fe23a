"""Forward-only models exported from PyTorch, fit for training.

Both training APIs start from a forward-only ONNX model: ``generate_artifacts``
(the whole-training API), the gradient builder (the forward/backward API) and
:class:`helpers.OrtTorchModule`. :func:`export_for_training` exports one from
a torch module with the settings training needs.
"""
import contextlib
import io
import warnings

import onnx
import torch
from onnx import numpy_helper

from .pooling import torch_padding_and_pooling
from .runtime import check_model_ir_version

#: Default opset of :func:`export_for_training`: supported by the TorchScript
#: exporter of torch 2.13 and by onnxruntime 1.19.2.
DEFAULT_OPSET = 17


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
    silenced, and so are the tracer's notes about batch normalization,
    other warnings pass through.

    Tracing runs the module once in training mode, which updates its
    buffers (``BatchNorm``'s running statistics, its batch counter): they
    are put back as they were, in the module and in the exported
    initializers, so that exporting changes nothing.

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

    The running variance starts at 1 in torch, in the ONNX model, and in the
    module after the export:

    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    >>> model = export_for_training(net, torch.zeros(4, 3))
    >>> exported = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    >>> exported["1.running_var"].tolist(), net[1].running_var.tolist()
    ([1.0, 1.0], [1.0, 1.0])
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
    with buffers_kept(module) as buffers, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
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
    for initializer in model.graph.initializer:
        if initializer.name in buffers:
            initializer.CopyFrom(numpy_helper.from_array(buffers[initializer.name].cpu().numpy(), initializer.name))
    check_model_ir_version(model)
    return torch_padding_and_pooling(model)


@contextlib.contextmanager
def buffers_kept(module):
    """Put ``module``'s buffers back as they were when the block ends (a forward in training mode changes them).

    Yields
    ------
    dict
        Buffer name to a copy of its value before the block.

    Examples
    --------
    >>> net = torch.nn.BatchNorm1d(2)
    >>> with buffers_kept(net):
    ...     _ = net(torch.ones(4, 2))
    >>> net.running_var.tolist(), int(net.num_batches_tracked)
    ([1.0, 1.0], 0)
    """
    saved = {name: value.detach().clone() for name, value in module.named_buffers()}
    try:
        yield saved
    finally:
        with torch.no_grad():
            for name, value in module.named_buffers():
                value.copy_(saved[name])
