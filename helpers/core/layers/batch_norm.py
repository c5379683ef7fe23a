"""``BatchNormalization`` trained as torch trains it.

onnxruntime-training 1.19.2 cannot train the ``BatchNormalization`` node a
torch export writes. Its gradient builder reads two outputs the node of
opset 15 does not have (the saved mean and inverse standard deviation), and
the running mean and variance, initializers like the weights, are taken for
weights: ``failed to find NodeArg by name ...running_mean_grad``. Its CPU
kernel would also update the running variance with the biased batch
variance, where torch uses the unbiased one.

So the training graph computes batch normalization from operators whose
gradients onnxruntime has (``ReduceMean``, ``Sub``, ``Mul``, ``Sqrt``,
``Div``, ``Add``), exactly as torch's training mode does, and returns each
layer's batch mean and unbiased batch variance as extra outputs. The running
statistics are not trained: :class:`RunningStatistics` holds them and
updates them after every step with torch's formula,
``running = (1 - momentum) * running + momentum * batch``, ``momentum`` being
torch's (one minus the ONNX attribute). The inference model keeps the plain
``BatchNormalization`` node in inference mode, fed with the running
statistics (:func:`helpers.core.model_graphs.inference_mode.inference_graph`).

A ``BatchNormalization`` already in inference mode (a module exported after
``.eval()``) normalizes with its running statistics, constants of the
training graph, as torch's eval mode does: its scale and bias still train.

The running statistics are those of torch's ``momentum=None`` (a cumulative
average) for the layers the model's metadata names
(:mod:`helpers.core.layers.running_statistics`).

The formula stays ``(x - mean) / std * scale + bias``. On the zoo's
``batchnorm_mlp_large`` (batches of 64 x 512) a step runs about 190 small
kernels of a few microseconds each, and the sessions' fixed cost per kernel
is 30% of the profiled step (``benchmarks/profiles/studies/step_fixed_cost.py``): a
formula pays for the kernels it adds to the gradient graph more than it
saves on 64 x 512 values. Two other exact formulas (they differ from this
one by rounding) gave steps whose ratios to this one's changed side from one
run to the next, both APIs, one and two threads: ``(x - mean) * (scale / std)
+ bias`` (one full-size division less) 1.03 to 1.12 in a run of two rounds,
0.88 to 0.95 in a run of four; ``x * a + (bias - mean * a)`` with ``a = scale
/ std`` (torch's CPU kernel) 0.91 to 1.04, then 0.96 to 0.98. Neither gain
stands above the spread of the shared machine: neither was kept.
"""

from onnx import TensorProto, helper, numpy_helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import (
    constant_node,
    copy_with_nodes,
    is_onnx_op,
    reduce_mean,
)
from ..graphs.graph_values import shapes_with_a_run
from ..machine.runtime import main_opset
from .running_statistics import BatchNormLayer, RunningStatistics, cumulative_layers

#: Prefix of the names of the nodes and values the decomposition adds.
BATCH_NORM_PREFIX = "batch_norm__"


def running_statistic_names(model):
    """The initializers that hold running statistics of ``BatchNormalization`` nodes, in graph
    order.

    They are not weights: the optimizers never train them (they are left
    out of the default ``weights_to_train``) and update them from the batch
    statistics instead.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    >>> running_statistic_names(export_for_training(net, torch.zeros(2, 3)))
    ['1.running_mean', '1.running_var']
    """
    initializers = {i.name for i in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if is_onnx_op(node, "BatchNormalization"):
            names.extend(
                name for name in node.input[3:5] if name in initializers and name not in names
            )
    return names


def batch_norm_in_training_mode(node):
    """Whether the ``BatchNormalization`` ``node`` normalizes with the batch's statistics (torch's
    training mode).

    It does when its ``training_mode`` attribute is set, or when it has
    more than one output (the statistics only training mode writes).

    Examples
    --------
    >>> node = helper.make_node("BatchNormalization", list("xsbmv"), ["y"])
    >>> batch_norm_in_training_mode(node)
    False
    >>> _ = node.attribute.append(helper.make_attribute("training_mode", 1))
    >>> batch_norm_in_training_mode(node)
    True
    """
    return bool(node_attribute(node, "training_mode", 0)) or len([o for o in node.output if o]) > 1


def decompose_batch_norm_node(node, rank, opset, index, counter):
    """The nodes computing one ``BatchNormalization`` node from primitives, and its layer.

    :func:`decompose_batch_norm` calls it for each such node of a model. The output
    is ``(x - mean) / sqrt(var + epsilon) * scale + bias``, its last three nodes a
    ``Div``, a ``Mul`` and an ``Add`` (a study replaces them with other formulas).

    Parameters
    ----------
    node : onnx.NodeProto
        The ``BatchNormalization`` node.
    rank : int
        Rank of its input ``x`` (2 for ``(N, C)``, 4 for images).
    opset : int
        Opset of the default domain (``ReduceMean`` changed at 18).
    index : int
        Position of the node in the graph: it names the new nodes, with the node's name.
    counter : str or None
        Name of the batch counter of a cumulative average (``momentum=None``), or None.

    Returns
    -------
    nodes : list of onnx.NodeProto
    layer : BatchNormLayer or None
        The running statistics the layer updates; None in inference mode.

    Examples
    --------
    >>> node = helper.make_node("BatchNormalization", list("xsbmv"), ["y"], training_mode=1)
    >>> nodes, layer = decompose_batch_norm_node(node, 2, 15, 0, None)
    >>> [n.op_type for n in nodes[-3:]], layer.running_mean, round(layer.momentum, 6)
    (['Div', 'Mul', 'Add'], 'm', 0.1)
    """
    x, scale, bias, running_mean, running_var = node.input[:5]
    y = node.output[0]
    tag = f"{BATCH_NORM_PREFIX}{index}__{node.name or y}"
    epsilon = node_attribute(node, "epsilon", 1e-5)
    training = batch_norm_in_training_mode(node)
    broadcast = [-1] + [1] * (rank - 2)  # (C,) -> (C, 1, ..., 1) against (N, C, ...)
    nodes = [
        constant_node(f"{tag}__epsilon", epsilon),
        constant_node(f"{tag}__channel_shape", broadcast, TensorProto.INT64),
        helper.make_node(
            "Reshape", [scale, f"{tag}__channel_shape"], [f"{tag}__scale"], name=f"{tag}__scale"
        ),
        helper.make_node(
            "Reshape", [bias, f"{tag}__channel_shape"], [f"{tag}__bias"], name=f"{tag}__bias"
        ),
    ]
    layer = None
    if training:
        axes = [0, *range(2, rank)]
        mean, var = f"{tag}__mean", f"{tag}__var"
        nodes += reduce_mean(x, mean, axes, opset, f"{tag}__reduce_mean")
        nodes += [
            helper.make_node("Sub", [x, mean], [f"{tag}__centered"], name=f"{tag}__centered"),
            helper.make_node(
                "Mul", [f"{tag}__centered"] * 2, [f"{tag}__squares"], name=f"{tag}__squares"
            ),
        ]
        nodes += reduce_mean(f"{tag}__squares", var, axes, opset, f"{tag}__reduce_var")
        layer = BatchNormLayer(
            running_mean,
            running_var,
            1.0 - float(node_attribute(node, "momentum", 0.9)),
            f"{tag}__batch_mean",
            f"{tag}__batch_var",
            counter,
        )
        nodes += _batch_statistics(x, scale, mean, var, layer, tag)
    else:
        mean, var = f"{tag}__running_mean", f"{tag}__running_var"
        nodes += [
            helper.make_node("Reshape", [running_mean, f"{tag}__channel_shape"], [mean], name=mean),
            helper.make_node("Reshape", [running_var, f"{tag}__channel_shape"], [var], name=var),
            helper.make_node("Sub", [x, mean], [f"{tag}__centered"], name=f"{tag}__centered"),
        ]
    nodes += [
        helper.make_node(
            "Add", [var, f"{tag}__epsilon"], [f"{tag}__var_eps"], name=f"{tag}__var_eps"
        ),
        helper.make_node("Sqrt", [f"{tag}__var_eps"], [f"{tag}__std"], name=f"{tag}__std"),
        helper.make_node(
            "Div",
            [f"{tag}__centered", f"{tag}__std"],
            [f"{tag}__normalized"],
            name=f"{tag}__normalized",
        ),
        helper.make_node(
            "Mul",
            [f"{tag}__normalized", f"{tag}__scale"],
            [f"{tag}__scaled"],
            name=f"{tag}__scaled",
        ),
        helper.make_node("Add", [f"{tag}__scaled", f"{tag}__bias"], [y], name=f"{tag}__output"),
    ]
    return nodes, layer


def _batch_statistics(x, scale, mean, var, layer, tag):
    """Nodes returning the batch mean and the unbiased batch variance, one value per channel.

    The count of values per channel is ``Size(x) / Size(scale)``, read at
    run time (the last batch of an epoch is smaller).
    """
    return [
        constant_node(f"{tag}__flat", [-1], TensorProto.INT64),
        constant_node(f"{tag}__one", 1.0),
        helper.make_node(
            "Reshape", [mean, f"{tag}__flat"], [layer.mean_output], name=layer.mean_output
        ),
        helper.make_node("Size", [x], [f"{tag}__size"], name=f"{tag}__size"),
        helper.make_node("Size", [scale], [f"{tag}__channels"], name=f"{tag}__channels"),
        helper.make_node(
            "Div",
            [f"{tag}__size", f"{tag}__channels"],
            [f"{tag}__count_int"],
            name=f"{tag}__count_int",
        ),
        helper.make_node(
            "Cast",
            [f"{tag}__count_int"],
            [f"{tag}__count"],
            name=f"{tag}__count",
            to=TensorProto.FLOAT,
        ),
        helper.make_node(
            "Sub", [f"{tag}__count", f"{tag}__one"], [f"{tag}__count_1"], name=f"{tag}__count_1"
        ),
        helper.make_node(
            "Div", [f"{tag}__count", f"{tag}__count_1"], [f"{tag}__bessel"], name=f"{tag}__bessel"
        ),
        helper.make_node(
            "Reshape", [var, f"{tag}__flat"], [f"{tag}__var_flat"], name=f"{tag}__var_flat"
        ),
        helper.make_node(
            "Mul", [f"{tag}__var_flat", f"{tag}__bessel"], [layer.var_output], name=layer.var_output
        ),
    ]


def decompose_batch_norm(model):
    """Return a copy of ``model`` whose ``BatchNormalization`` nodes train as in torch, and their
    statistics.

    Each node in training mode becomes the batch normalization of torch's
    training mode, written with primitives, and returns its batch mean and
    unbiased variance (values named in :attr:`RunningStatistics.output_names`,
    not graph outputs). Its running statistics, which it no longer reads,
    stay initializers of the graph (a checkpoint of the whole-training API
    carries them) and start the returned :class:`RunningStatistics`. A node
    in inference mode becomes the same affine map of its running statistics.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.

    Returns
    -------
    model : onnx.ModelProto
        The copy (the same object when the model has no ``BatchNormalization``).
    statistics : RunningStatistics
        Empty when no node is in training mode.

    Raises
    ------
    ValueError
        When the rank of a node's input cannot be inferred.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 1), torch.nn.BatchNorm1d(3))
    >>> model, statistics = decompose_batch_norm(export_for_training(net, torch.zeros(4, 2, 5)))
    >>> "BatchNormalization" in {n.op_type for n in model.graph.node}, statistics.names
    (False, ['1.running_mean', '1.running_var'])
    >>> statistics.values["1.running_var"].tolist()
    [1.0, 1.0, 1.0]
    """
    if not any(is_onnx_op(n, "BatchNormalization") for n in model.graph.node):
        return model, RunningStatistics([], {})
    cumulative = cumulative_layers(model)
    inputs = [n.input[0] for n in model.graph.node if is_onnx_op(n, "BatchNormalization")]
    shapes = shapes_with_a_run(model, inputs)
    opset = main_opset(model)
    nodes, layers = [], []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "BatchNormalization"):
            nodes.append(node)
            continue
        rank = len(shapes[node.input[0]]) if shapes.get(node.input[0]) is not None else None
        if rank is None:
            raise ValueError(
                f"The rank of the input of BatchNormalization {node.name!r} cannot be inferred: "
                "give the model's inputs a shape (torch exports do)."
            )
        counter = cumulative.get(node.input[3], {}).get("counter")
        decomposed, layer = decompose_batch_norm_node(node, rank, opset, index, counter)
        nodes.extend(decomposed)
        if layer is not None:
            layers.append(layer)
    copy = copy_with_nodes(model, nodes)
    names = {name for layer in layers for name in (layer.running_mean, layer.running_var)}
    initial = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if i.name in names}
    counts = {
        layer.counter: cumulative[layer.running_mean]["count"] for layer in layers if layer.counter
    }
    return copy, RunningStatistics(layers, initial, counts)
