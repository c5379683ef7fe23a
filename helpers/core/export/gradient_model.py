"""The training model of a loss model, and the gradient of each weight in it.

``generate_artifacts`` (without an optimizer model) writes the graph both optimizers' step
models start from: the loss model's training graph
(:func:`helpers.core.model_graphs.training_graph.training_graph`: the layer rewrites, the batch
statistics of batch normalization as extra outputs, the speed rewrites of ``fast_gradients``),
its forward pass, loss and gradients. Each gradient ends in an ``InPlaceAccumulatorV2`` node that
adds it to a buffer of the runtime; :func:`gradients_of_accumulators` takes the gradients before
they reach it and drops the accumulators, their buffers and the flag that resets them.
"""

import functools
import os
from collections import namedtuple

import onnx
import onnxruntime

from ...portable.gradients import build_gradients
from ..graphs.graph_shapes import value_shapes, value_types
from ..graphs.graph_values import shapes_of_a_run
from ..machine.backends import default_backend
from ..machine.runtime import explain_untrainable
from ..machine.runtime_output import ForkSafeLock, quiet_runtime_logs
from ..machine.training_cache import cached_artifact_folder, content_key
from ..model_graphs.training_graph import training_graph

#: onnxblock builds one model at a time (a global of ``onnxblock.base``).
_ONNXBLOCK_LOCK = ForkSafeLock()

#: Suffix of the graph inputs holding the gradient buffers, after ``NAME_grad``.
ACCUMULATION_SUFFIX = "_grad.accumulation.buffer"
#: The flag input of the accumulators (overwrite the buffer rather than add to it).
RESET_INPUT = "lazy_reset_grad"

GradientModel = namedtuple("GradientModel", ["model", "gradients", "statistics", "draws"])
GradientModel.__doc__ = """What :func:`gradient_model` returns: ``(model, gradients, statistics,
draws)``.

``model`` computes the loss (its first output), the batch statistics of batch normalization
(the next outputs) and, as values of its graph, the gradients; ``gradients`` maps each trained
weight, in the order given, to its gradient's name; ``statistics`` is the
:class:`~helpers.core.layers.running_statistics.RunningStatistics` of the training graph;
``draws`` the :class:`~helpers.core.model_graphs.random_draws.RandomDraws` its random inputs
take (after the batch's).

Examples
--------
>>> GradientModel._fields
('model', 'gradients', 'statistics', 'draws')
"""


def _write_artifacts(graph, weights, folder):
    from onnxruntime.training import artifacts  # noqa: PLC0415 - imports torch

    frozen = [i.name for i in graph.model.graph.initializer if i.name not in weights]
    quiet_runtime_logs()
    with _ONNXBLOCK_LOCK:
        artifacts.generate_artifacts(
            graph.model,
            requires_grad=list(weights),
            frozen_params=frozen,
            loss=None,
            optimizer=None,
            artifact_directory=folder,
            additional_output_names=graph.statistics.output_names or None,
        )


def gradients_of_accumulators(model):
    """Return a copy of ``model`` without its gradient accumulators, and each weight's gradient.

    Parameters
    ----------
    model : onnx.ModelProto
        A training model of ``generate_artifacts``.

    Returns
    -------
    tuple
        ``(model, gradients)``: the copy, without ``InPlaceAccumulatorV2`` nodes, their buffer
        inputs, the reset flag and their outputs; weight name to the name of its gradient.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> node = helper.make_node(
    ...     "InPlaceAccumulatorV2", ["w_grad.accumulation.buffer", "w_grad", "lazy_reset_grad"],
    ...     ["w_grad.accumulation.out"], domain="com.microsoft")
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Neg", ["w"], ["w_grad"]), node], "g",
    ...     [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1])
    ...      for n in ("w", "w_grad.accumulation.buffer", "lazy_reset_grad")],
    ...     [helper.make_tensor_value_info("w_grad.accumulation.out", TensorProto.FLOAT, [1])])
    >>> copy, gradients = gradients_of_accumulators(helper.make_model(graph))
    >>> gradients, [i.name for i in copy.graph.input], len(copy.graph.node)
    ({'w': 'w_grad'}, ['w'], 1)
    """
    gradients, dropped = {}, {RESET_INPUT}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "InPlaceAccumulatorV2":
            nodes.append(node)
            continue
        buffer = node.input[0]
        if not buffer.endswith(ACCUMULATION_SUFFIX):
            raise RuntimeError(f"Unexpected gradient accumulator {node.name!r}: buffer {buffer}.")
        gradients[buffer[: -len(ACCUMULATION_SUFFIX)]] = node.input[1]
        dropped.update([buffer, *node.output])
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    for field in (copy.graph.input, copy.graph.output):
        kept = [v for v in field if v.name not in dropped]
        del field[:]
        field.extend(kept)
    return copy, gradients


#: Who writes the gradients of a step: this project's builder, in standard ONNX, or
#: onnxruntime-training 1.19.2's (``generate_artifacts``).
GRADIENT_BUILDERS = ("onnx", "onnxruntime-training")


def gradient_model(
    loss_model,
    weights,
    fast_gradients=True,
    random_draws=False,
    builder=None,
    named=(),
):
    """The training model of ``loss_model``, its gradients and its running statistics.

    With ``builder="onnxruntime-training"`` the artifacts come from the process's cache
    (:mod:`helpers.core.machine.training_cache`), keyed by the model and the settings; with
    ``builder="onnx"``, :func:`helpers.portable.gradients.build_gradients` writes the gradients
    of the same training graph in standard ONNX (no training package needed).

    Parameters
    ----------
    loss_model : onnx.ModelProto
        A model whose first output is a scalar loss; its inputs that are not initializers hold
        one row per sample.
    weights : list of str
        The float initializers to train.
    fast_gradients : bool
        Apply the speed rewrites of the training graph too.
    random_draws : bool
        Make the random operators (``Dropout``...) inputs drawn by the runner
        (:mod:`helpers.core.model_graphs.random_draws`).
    builder : {"onnxruntime-training", "onnx"}, optional
        Who writes the gradients (:data:`GRADIENT_BUILDERS`); by default, the backend ``"auto"``
        picks (:func:`helpers.core.machine.backends.default_backend`): the training package's
        builder where it is installed.
    named : sequence of str
        Values of the loss model whose gradient must be a value ``NAME_grad`` of the result
        (onnxruntime-training's builder names every gradient so; this project's only these).

    Returns
    -------
    GradientModel

    Examples
    --------
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> built = gradient_model(add_loss_output(mlp_onnx(3, hidden=(4,))), ["intercept1"])
    >>> built.gradients, [o.name for o in built.model.graph.output]
    ({'intercept1': 'intercept1_grad'}, ['loss'])
    """
    builder = builder or default_backend()
    if builder not in GRADIENT_BUILDERS:
        raise ValueError(f"builder must be one of {GRADIENT_BUILDERS}, not {builder!r}.")
    initializers = {i.name for i in loss_model.graph.initializer}
    per_row = [i.name for i in loss_model.graph.input if i.name not in initializers]
    graph = training_graph(loss_model, per_row, fast_gradients, random_draws)
    if builder == "onnx":
        return _standard_gradient_model(graph, list(weights), named)
    key = content_key(
        "step",
        loss_model,
        list(weights),
        fast_gradients,
        random_draws,
        onnx.__version__,
        onnxruntime.__version__,
    )
    write = functools.partial(_write_artifacts, graph, list(weights))
    try:
        with cached_artifact_folder(key, write) as folder:
            model = onnx.load(os.path.join(folder, "training_model.onnx"))
    except Exception as error:  # the runtime's own types: a layer without gradient, named
        clear = explain_untrainable(loss_model, error)
        if clear is None:
            raise
        raise clear from None
    model, found = gradients_of_accumulators(model)
    missing = [name for name in weights if name not in found]
    if missing:
        raise RuntimeError(f"generate_artifacts wrote no gradient for {missing}.")
    gradients = {name: found[name] for name in weights}  # in the order of ``weights``
    return GradientModel(model, gradients, graph.statistics, graph.draws)


def with_shapes_of_a_run(model):
    """``model`` whose float values that shape inference leaves without a rank (after a reshape
    to a computed shape, say) have the shape a run on zeros gives them, as ``value_info``.

    The gradients of some operators need the rank of their input (a reduction over negative
    axes); onnxruntime-training's builder finds it as its session runs.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(
    ...     torch.nn.Linear(3, 12), torch.nn.Unflatten(1, (4, 3)), torch.nn.Tanh())
    >>> model = export_for_training(net, torch.zeros(2, 3))
    >>> [(v.name, len(v.type.tensor_type.shape.dim))
    ...  for v in with_shapes_of_a_run(model).graph.value_info]
    [('/1/Reshape_2_output_0', 3)]
    """
    shapes, types = value_shapes(model), value_types(model)
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, None)
    missing = [
        name
        for node in model.graph.node
        for name in node.output
        if name and shapes.get(name) is None and types.get(name) in floats
    ]
    found = shapes_of_a_run(model, missing) if missing else {}
    if not found:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.value_info.extend(
        onnx.helper.make_tensor_value_info(name, types.get(name) or onnx.TensorProto.FLOAT, shape)
        for name, shape in found.items()
    )
    return copy


def _standard_gradient_model(graph, weights, named):
    """:func:`gradient_model`'s result with the gradients of this project's builder."""
    built = build_gradients(with_shapes_of_a_run(graph.model), weights, named=named)
    model = built.model
    outputs = {o.name for o in model.graph.output}
    model.graph.output.extend(
        onnx.helper.make_empty_tensor_value_info(name)
        for name in graph.statistics.output_names
        if name not in outputs
    )
    return GradientModel(model, built.gradients, graph.statistics, graph.draws)
