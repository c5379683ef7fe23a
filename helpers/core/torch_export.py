"""Forward-only models exported from PyTorch, fit for training.

Both training APIs start from a forward-only ONNX model: ``generate_artifacts``
(the whole-training API), the gradient builder (the forward/backward API) and
:class:`helpers.OrtTorchModule`. :func:`export_for_training` exports one from
a torch module with the settings training needs.
"""
import contextlib
import io
import json
import warnings

import onnx
import torch
from onnx import numpy_helper
from torch.onnx import symbolic_helper, symbolic_opset11

from .activations import HARDTANH_METADATA_KEY
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
    other warnings pass through. ``Softplus`` and ``LogSigmoid`` are written
    as torch computes them, and the ``Clip`` nodes of ``Hardtanh`` and
    ``ReLU6`` are listed in the model's metadata (:func:`exact_activation_exports`).

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
    exact = exact_activation_exports(opset_version)
    with buffers_kept(module) as buffers, exact, warnings.catch_warnings():
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
    hardtanh_marks_to_metadata(model)
    for initializer in model.graph.initializer:
        if initializer.name in buffers:
            initializer.CopyFrom(numpy_helper.from_array(buffers[initializer.name].cpu().numpy(), initializer.name))
    check_model_ir_version(model)
    return model


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


#: At and above this ``threshold``, torch's ``Softplus`` (linear where ``beta * x > threshold``)
#: and the plain function agree to float32 rounding: ``exp(-17) < 2**-24``.
SOFTPLUS_NEGLIGIBLE_THRESHOLD = 17.0


def _softplus(g, x, beta, threshold):
    """``aten::softplus`` with its ``threshold``, which torch's exporter leaves out."""
    scaled = x if symbolic_helper._maybe_get_const(beta, "f") == 1 else g.op("Mul", x, beta)
    value = g.op("Softplus", scaled)
    if scaled is not x:
        value = g.op("Div", value, beta)
    if symbolic_helper._maybe_get_const(threshold, "f") >= SOFTPLUS_NEGLIGIBLE_THRESHOLD:
        return value
    return g.op("Where", g.op("Greater", scaled, threshold), x, value)


def _log_sigmoid(g, x):
    """``aten::log_sigmoid`` as ``-softplus(-x)``.

    ``Log(Sigmoid(x))``, torch's export, is ``-inf`` below about -88 in float32.
    """
    return g.op("Neg", g.op("Softplus", g.op("Neg", x)))


#: The attribute the export gives the ``Clip`` nodes of torch's ``hardtanh`` and ``relu6``,
#: until :func:`hardtanh_marks_to_metadata` removes it.
_HARDTANH_MARK = "helpers_hardtanh"


def _marked(symbolic):
    """torch's ``symbolic`` of ``hardtanh`` or ``relu6``, its ``Clip`` node marked."""

    def marked(g, *args):
        value = symbolic(g, *args)
        if value.node().kind() == "onnx::Clip":
            value.node().s_(_HARDTANH_MARK, "1")
        return value

    return marked


def hardtanh_marks_to_metadata(model):
    """Move the marks of the ``Clip`` nodes of ``Hardtanh`` and ``ReLU6`` to the metadata, in place.

    torch's ``hardtanh`` (``Hardtanh``, ``ReLU6``, ``relu6``) and ``clamp``
    both export to ``Clip``, but their gradients differ at the bounds: 0 for
    the first, 1 for ``clamp`` and for onnxruntime's ``Clip``. The export
    marks the nodes of the first; their names are listed under
    :data:`helpers.core.activations.HARDTANH_METADATA_KEY`, which the
    training graph reads (:mod:`helpers.core.activations`), and the marks,
    which no runtime knows, are removed.

    Examples
    --------
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU6())
    >>> model = export_for_training(net, torch.zeros(1, 2))  # calls it
    >>> [(p.key, p.value) for p in model.metadata_props]
    [('helpers.hardtanh_clips', '["/1/Clip"]')]
    """
    names = []
    for node in model.graph.node:
        marks = [a for a in node.attribute if a.name == _HARDTANH_MARK]
        if marks:
            node.attribute.remove(marks[0])
            names.append(node.name)
    if names:
        model.metadata_props.add(key=HARDTANH_METADATA_KEY, value=json.dumps(names))


def _exact_symbolics(opset_version):
    """The symbolics :func:`exact_activation_exports` puts in place of torch's, by name."""
    symbolics = {"aten::softplus": _softplus, "aten::log_sigmoid": _log_sigmoid}
    if opset_version >= 11:  # Clip takes its bounds as inputs
        symbolics["aten::hardtanh"] = _marked(symbolic_opset11.hardtanh)
        symbolics["aten::relu6"] = _marked(symbolic_opset11.relu6)
    return symbolics


@contextlib.contextmanager
def exact_activation_exports(opset_version):
    """Export ``Softplus`` and ``LogSigmoid`` as torch computes them, for the duration of the block.

    torch 2.13's TorchScript exporter writes ``Softplus(beta=b, threshold=t)``
    as ``Softplus(b * x) / b``, without the threshold above which torch
    returns ``x``: a threshold below :data:`SOFTPLUS_NEGLIGIBLE_THRESHOLD`
    changes the values and the gradients (``threshold=5``: 0.0067 at
    ``x = 5``). It is written with a ``Where`` (the default, 20, is left
    out as before). It writes ``LogSigmoid`` as ``Log(Sigmoid(x))``, which
    is ``-inf`` (and its gradient NaN) where the sigmoid underflows, below
    about -88 in float32; it is written ``-Softplus(-x)``, exact everywhere.
    The ``Clip`` nodes of ``hardtanh`` and ``relu6`` are marked
    (:func:`hardtanh_marks_to_metadata`).

    Examples
    --------
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Softplus(beta=2.0, threshold=5.0))
    >>> model = export_for_training(net, torch.zeros(1, 2))  # within exact_activation_exports
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Gemm', 'Mul', 'Softplus', 'Div', 'Greater', 'Where']
    """
    symbolics = _exact_symbolics(opset_version)
    for name, symbolic in symbolics.items():
        torch.onnx.register_custom_op_symbolic(name, symbolic, opset_version)
    try:
        yield
    finally:
        for name in symbolics:
            torch.onnx.unregister_custom_op_symbolic(name, opset_version)
