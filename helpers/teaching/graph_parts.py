"""The nodes of a training graph, each named by the part of a training step it computes.

A training graph, whichever API built it, is the model's forward pass with
more nodes around it: the loss, the gradients, the buffers that accumulate
them, the update. :func:`operators_by_part` labels every node with its part,
so that a notebook shows the graph instead of telling it;
:func:`summarize_parts` counts them, one row per part; :func:`gradient_graph_parts` labels
the graphs of the forward/backward API, whichever backend built them.
"""

import pandas as pd

#: The parts of a training step, in the order a step computes them.
PARTS = ("forward", "loss", "YieldOp", "gradient", "backward", "accumulation", "optimizer")


def _outputs(model):
    return {name for node in model.graph.node for name in node.output}


def _part(node, forward, loss, after_yield):
    """The part of ``node``: known forward or loss outputs first, then its place."""
    outputs = set(node.output)
    if outputs <= forward:
        return "forward"
    if outputs <= loss:
        return "loss"
    if node.op_type == "YieldOp":
        return "YieldOp"
    if node.op_type.startswith("InPlaceAccumulator"):
        return "accumulation"
    if after_yield is None:
        return "gradient"
    return "backward" if after_yield else "forward"


def operators_by_part(training_model, forward_model, loss_model=None, optimizer_model=None):
    """One row per node of a training graph, with the part of the step it belongs to.

    A node is ``forward`` when it computes outputs of ``forward_model``,
    ``loss`` when it computes outputs that ``loss_model`` adds to the forward
    model, ``accumulation`` for the gradient buffers of the whole-training API
    (``InPlaceAccumulatorV2``) and ``YieldOp`` for the node where the
    forward/backward API hands the predictions over. In a graph with a
    ``YieldOp``, the other nodes before it are ``forward`` (shapes the backward
    pass keeps) and those after it ``backward``; without one, they are
    ``gradient``. The nodes of ``optimizer_model`` come last, as ``optimizer``.

    Parameters
    ----------
    training_model : onnx.ModelProto
        The training model of ``generate_artifacts``, or the gradient graph of
        the forward/backward API.
    forward_model : onnx.ModelProto
        The model that only predicts, whose node outputs the training graph keeps.
    loss_model : onnx.ModelProto, optional
        ``forward_model`` with its loss appended (:func:`helpers.add_loss_output`).
    optimizer_model : onnx.ModelProto, optional
        The optimizer model of ``generate_artifacts``.

    Returns
    -------
    pandas.DataFrame
        Columns ``part``, ``op_type``, ``domain``, ``inputs``, ``outputs``.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> def model(*nodes):
    ...     graph = helper.make_graph(list(nodes), "g", [], [])
    ...     return helper.make_model(graph)
    >>> relu = helper.make_node("Relu", ["x"], ["y"])
    >>> yield_op = helper.make_node("YieldOp", ["y"], ["y_grad"], domain="com.microsoft")
    >>> grad = helper.make_node("ReluGrad", ["y_grad", "y"], ["x_grad"], domain="com.microsoft")
    >>> table = operators_by_part(model(relu, yield_op, grad), model(relu))
    >>> table[["part", "op_type"]].values.tolist()
    [['forward', 'Relu'], ['YieldOp', 'YieldOp'], ['backward', 'ReluGrad']]
    """
    forward = _outputs(forward_model)
    loss = _outputs(loss_model) - forward if loss_model is not None else set()
    ops = [node.op_type for node in training_model.graph.node]
    yield_at = ops.index("YieldOp") if "YieldOp" in ops else None
    rows = []
    for i, node in enumerate(training_model.graph.node):
        after_yield = None if yield_at is None else i > yield_at
        rows.append((_part(node, forward, loss, after_yield), node))
    if optimizer_model is not None:
        rows += [("optimizer", node) for node in optimizer_model.graph.node]
    return _table(rows)


def gradient_graph_parts(gradient, forward_model):
    """:func:`operators_by_part` for the graphs of the forward/backward API, whichever backend
    built them.

    With the backend ``"onnxruntime-training"``, ``gradient.gradient_model_`` is one graph, cut
    by its ``YieldOp``: its nodes are ``forward``, ``YieldOp`` or ``backward``. With the backend
    ``"onnx"``, two sessions run two graphs (``gradient.split_graphs_``): the nodes of the
    forward graph are ``forward``, those of the backward graph ``backward``, and there is no
    ``YieldOp``: the forward graph returns, besides the outputs, the values the backward graph
    reads (``split_graphs_.frontier``).

    Parameters
    ----------
    gradient : helpers.OrtGradientForwardBackward
    forward_model : onnx.ModelProto
        The model that only predicts (``gradient.onnx_model``).

    Returns
    -------
    pandas.DataFrame
        As :func:`operators_by_part`.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackward
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> table = gradient_graph_parts(OrtGradientForwardBackward(model, backend="onnx"), model)
    >>> table["part"].unique().tolist()
    ['forward', 'backward']
    """
    if gradient.backend != "onnx":
        return operators_by_part(gradient.gradient_model_, forward_model)
    split = gradient.split_graphs_
    return _table(
        [("forward", node) for node in split.forward.graph.node]
        + [("backward", node) for node in split.backward.graph.node]
    )


def _table(rows):
    """The table of :func:`operators_by_part` from (part, node) pairs."""
    return pd.DataFrame(
        [
            {
                "part": part,
                "op_type": node.op_type,
                "domain": node.domain or "ai.onnx",
                "inputs": ", ".join(node.input),
                "outputs": ", ".join(node.output),
            }
            for part, node in rows
        ],
        columns=["part", "op_type", "domain", "inputs", "outputs"],
    )


def summarize_parts(table):
    """One row per part of :func:`operators_by_part`'s table: its node count and operators.

    Parameters
    ----------
    table : pandas.DataFrame
        The table :func:`operators_by_part` returns.

    Returns
    -------
    pandas.DataFrame
        Indexed by part, in the order of :data:`PARTS`: ``nodes`` and
        ``operators`` (each distinct operator once, with its count when above one).

    Examples
    --------
    >>> table = pd.DataFrame({"part": ["gradient", "forward", "gradient"],
    ...                       "op_type": ["Mul", "MatMul", "Mul"]})
    >>> summarize_parts(table)["operators"].to_dict()
    {'forward': 'MatMul', 'gradient': 'Mul ×2'}
    """
    rows = {}
    for part in PARTS:
        ops = table.loc[table["part"] == part, "op_type"]
        if ops.empty:
            continue
        counts = ops.value_counts(sort=False)
        rows[part] = {
            "nodes": len(ops),
            "operators": ", ".join(
                op if n == 1 else f"{op} ×{n}" for op, n in counts[ops.unique()].items()
            ),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("part")
