"""Forward-only models exported from PyTorch, fit for training.

Both training APIs start from a forward-only ONNX model: ``generate_artifacts``
(the whole-training API), the gradient builder (the forward/backward API) and
:class:`helpers.OrtTorchModule`. :func:`export_for_training` exports one from
a torch module with the settings training needs (import it from ``helpers``:
``from helpers import export_for_training``).
"""

import contextlib
import io
import json
import warnings

import onnx
import torch
from onnx import numpy_helper

from ..layers.embedding_padding import PADDING_METADATA_KEY
from ..layers.pooling import torch_padding_and_pooling
from ..layers.running_statistics import CUMULATIVE_METADATA_KEY
from ..machine.runtime import check_model_ir_version
from .torch_symbolics import exact_activation_exports, hardtanh_marks_to_metadata

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

    Options torch's exporter drops are carried in the model's metadata:
    ``momentum=None`` of batch normalization
    (:func:`helpers.core.layers.running_statistics.cumulative_layers`), ``padding_idx``
    of embeddings (:mod:`helpers.core.layers.embedding_padding`). A batch
    normalization with ``track_running_stats=False``, which the exporter
    cannot export with a free batch size, is exported as the same
    computation written with means (it always normalizes with the batch's
    statistics, in eval mode too).

    Raises
    ------
    helpers.core.machine.runtime.RuntimeCompatibilityError
        When the exported model has an IR version onnxruntime refuses.
    ValueError
        When the exporter fails (the message names the module it failed
        on, the original exception is its cause), or for an embedding with
        ``max_norm``, which the export would silently drop.

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
    _refuse_untrainable_options(module)
    buffer = io.BytesIO()
    exact = exact_activation_exports(opset_version)
    with buffers_kept(module) as buffers, exact, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings(
            "ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning
        )
        _export_layers(
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
            initializer.CopyFrom(
                numpy_helper.from_array(buffers[initializer.name].cpu().numpy(), initializer.name)
            )
    _record_cumulative_averages(module, model)
    _record_padding_rows(module, model)
    check_model_ir_version(model)
    return torch_padding_and_pooling(model)


def _export_layers(module, *args, **kwargs):
    """``torch.onnx.export(module, *args, **kwargs)`` for the layers the exporter mishandles.

    Batch normalizations without running statistics are swapped for
    :class:`BatchStatisticsNorm`, a failure names its module
    (:func:`export_errors_named`), and the exporter's warning about
    ``padding_idx`` is silenced: the metadata carries it
    (:mod:`helpers.core.layers.embedding_padding`).
    """
    with batch_statistics_swapped(module) as exported, export_errors_named(exported):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*embedding with padding_idx", UserWarning)
            torch.onnx.export(exported, *args, **kwargs)


def _record_cumulative_averages(module, model):
    """Record in ``model``'s metadata the batch normalizations of ``module`` with ``momentum=None``.

    torch exports them with a momentum of 0; the training graph reads the
    record (:func:`helpers.core.layers.running_statistics.cumulative_layers`).
    """
    layers = {}
    for name, layer in module.named_modules():
        if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm) and layer.track_running_stats:
            if layer.momentum is None:
                prefix = f"{name}." if name else ""
                count = int(layer.num_batches_tracked)
                counter = f"{prefix}num_batches_tracked"
                layers[f"{prefix}running_mean"] = {"counter": counter, "count": count}
    if layers:
        model.metadata_props.add(key=CUMULATIVE_METADATA_KEY, value=json.dumps(layers))


@contextlib.contextmanager
def buffers_kept(module):
    """Put ``module``'s buffers back as they were when the block ends (a forward in training mode
    changes them).

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


def _record_padding_rows(module, model):
    """Record in ``model``'s metadata the padding row of each embedding of ``module`` having one."""
    initializers = {i.name for i in model.graph.initializer}
    rows = {}
    for name, layer in module.named_modules():
        if isinstance(layer, torch.nn.Embedding) and layer.padding_idx is not None:
            table = f"{name}.weight" if name else "weight"
            if table in initializers:
                rows[table] = int(layer.padding_idx) % layer.num_embeddings
    if rows:
        model.metadata_props.add(key=PADDING_METADATA_KEY, value=json.dumps(rows))


def _refuse_untrainable_options(module):
    """Refuse layer options whose export cannot train as torch trains them, naming the layer.

    ``Embedding`` and ``EmbeddingBag`` with ``max_norm`` (torch rescales rows in
    place, the export drops it), and ``InstanceNorm`` with
    ``track_running_stats=True`` (torch's exporter refuses it with a free batch
    size and writes a node the ONNX checker rejects with a fixed one).
    """
    for name, layer in module.named_modules():
        embedding = isinstance(layer, (torch.nn.Embedding, torch.nn.EmbeddingBag))
        if embedding and layer.max_norm is not None:
            raise ValueError(
                f"{_describe(name, layer)} has max_norm={layer.max_norm}: at each forward torch "
                "rescales, in place, the rows it looks up whose norm exceeds it, which the "
                "exported graph (a Gather) does not do and no training graph can write back "
                "into the weights. Remove max_norm, and if needed bound the rows another way (a "
                "normalization layer after the embedding, or rescaling the table between steps)."
            )
        instance_norm = isinstance(layer, torch.nn.modules.instancenorm._InstanceNorm)
        if instance_norm and layer.track_running_stats:
            raise ValueError(
                f"{_describe(name, layer)} has track_running_stats=True: torch's ONNX exporter "
                "does not export its running statistics for training with a free batch size. "
                "Use track_running_stats=False (the default), or GroupNorm(C, C) (the same "
                "normalization, without running statistics)."
            )


class BatchStatisticsNorm(torch.nn.Module):
    """Batch normalization with the batch's statistics, written with means: torch exports it.

    It is what a ``_BatchNorm`` with ``track_running_stats=False`` computes,
    in training and in eval mode alike, with the same parameters
    (``weight`` and ``bias``, or none for ``affine=False``).

    Examples
    --------
    >>> layer = torch.nn.BatchNorm1d(3, track_running_stats=False)
    >>> x = torch.randn(8, 3, 5)
    >>> torch.allclose(BatchStatisticsNorm(layer)(x), layer(x), atol=1e-6)
    True
    """

    def __init__(self, layer):
        super().__init__()
        self.weight, self.bias, self.eps = layer.weight, layer.bias, layer.eps

    def forward(self, x):
        axes = [0, *range(2, x.dim())]
        centered = x - x.mean(axes, keepdim=True)
        variance = (centered * centered).mean(axes, keepdim=True)
        normalized = centered / torch.sqrt(variance + self.eps)
        if self.weight is None:
            return normalized
        shape = [-1] + [1] * (x.dim() - 2)
        return normalized * self.weight.reshape(shape) + self.bias.reshape(shape)


def _batch_statistics_only(layer):
    return isinstance(layer, torch.nn.modules.batchnorm._BatchNorm) and layer.running_mean is None


@contextlib.contextmanager
def batch_statistics_swapped(module):
    """Put a :class:`BatchStatisticsNorm` in place of each batch normalization without statistics.

    Yields the module to export (``module`` itself, or the replacement when
    it is such a layer); the layers are put back when the block ends.

    Examples
    --------
    >>> norm = torch.nn.BatchNorm1d(3, track_running_stats=False)
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), norm)
    >>> with batch_statistics_swapped(net) as exported:
    ...     type(exported[1]).__name__
    'BatchStatisticsNorm'
    >>> type(net[1]).__name__
    'BatchNorm1d'
    """
    if _batch_statistics_only(module):
        yield BatchStatisticsNorm(module)
        return
    swapped = []
    for name, layer in list(module.named_modules()):
        if name and _batch_statistics_only(layer):
            parent, _, child = name.rpartition(".")
            swapped.append((module.get_submodule(parent), child, layer))
    try:
        for parent, child, layer in swapped:
            setattr(parent, child, BatchStatisticsNorm(layer))
        yield module
    finally:
        for parent, child, layer in swapped:
            setattr(parent, child, layer)


def _describe(name, layer):
    kind = type(layer).__name__
    return f"module {name!r} ({kind})" if name else f"the module itself ({kind})"


def _failing_node_scope(error):
    """The scope of the TorchScript node whose conversion raised ``error``, or None."""
    traceback = error.__traceback__
    scope = None
    while traceback is not None:
        for value in list(traceback.tb_frame.f_locals.values()):
            if isinstance(value, torch._C.Node):
                scope = value.scopeName()
        traceback = traceback.tb_next
    return scope


@contextlib.contextmanager
def export_errors_named(module):
    """Turn an exporter failure into a ``ValueError`` naming the module it failed on.

    A failure while tracing is in the innermost module running (forward
    hooks keep the stack); a failure while converting a traced node is in
    the module of the node's scope. The original exception is the cause.

    Examples
    --------
    >>> class Failing(torch.nn.Module):
    ...     def forward(self, x):
    ...         raise RuntimeError("no way")
    >>> with export_errors_named(torch.nn.Sequential(torch.nn.Linear(2, 2), Failing())) as net:
    ...     net(torch.zeros(1, 2))
    Traceback (most recent call last):
    ...
    ValueError: torch's ONNX exporter failed on module '1' (Failing) of Sequential: ...
    """
    names = {layer: name for name, layer in module.named_modules()}
    running = []

    def enter(layer, args):
        running.append(layer)

    def leave(layer, args, output):
        running.pop()

    hooks = [
        hook
        for layer in names
        for hook in (layer.register_forward_pre_hook(enter), layer.register_forward_hook(leave))
    ]
    try:
        yield module
    except Exception as exc:
        scope = _failing_node_scope(exc)
        if scope is not None:  # "Sequential::/Sequential::1/BatchNorm1d::1.1": the last name
            name = scope.rsplit("/", 1)[-1].rpartition("::")[2]
        else:
            name = names[running[-1]] if running else ""
        layer = dict(module.named_modules()).get(name, module)
        message = str(exc).split("\n", 1)[0]
        raise ValueError(
            f"torch's ONNX exporter failed on {_describe(name, layer)} of {type(module).__name__}: "
            f"{type(exc).__name__}: {message}"
        ) from exc
    finally:
        for hook in hooks:
            hook.remove()
