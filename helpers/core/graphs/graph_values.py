"""What a graph fixes before it runs: values computed from constants, sizes inference misses.

The graph rewrites need some values as numbers: the scales of a
``Resize``, the size of the input it interpolates. ONNX shape inference
does not always find them: it follows the values of shapes through few
operators, and stops at the ``Reshape`` that ``nn.Unflatten`` exports
(its target shape goes through ``Mod`` and an empty ``Slice``). These
functions compute them: constants with onnx's reference evaluator, sizes by
running the nodes that compute a value on zeros.
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ..machine.sessions import ERROR_SEVERITY, make_session
from .graph_nodes import copy_with_nodes, nodes_reaching
from .graph_shapes import tensor_dims, value_shapes


def constant_value(model, name):
    """The value of ``name`` when constants and initializers alone compute it, else None.

    Examples
    --------
    >>> from helpers.core.graphs.graph_nodes import constant_node
    >>> nodes = [constant_node("one", [1.0]), constant_node("two", [2.0]),
    ...          helper.make_node("Concat", ["one", "two"], ["scales"], axis=0),
    ...          helper.make_node("Mul", ["x", "scales"], ["y"])]
    >>> x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in "xy")
    >>> graph = helper.make_graph(nodes, "g", [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> constant_value(model, "scales").tolist(), constant_value(model, "y")
    ([1.0, 2.0], None)
    """
    initializers = {i.name: i for i in model.graph.initializer}
    if name in initializers:
        return numpy_helper.to_array(initializers[name])
    nodes = nodes_reaching(model.graph, {name})
    produced = {output for node in nodes for output in node.output}
    needed = {i for node in nodes for i in node.input if i and i not in produced}
    if name not in produced or needed - set(initializers):
        return None  # a graph input is needed
    graph = helper.make_graph(
        nodes,
        "constant",
        [],
        [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None)],
        initializer=[initializers[i] for i in needed],
    )
    evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=model.opset_import))
    return evaluator.run(None, {})[0]


def model_computing(model, names, types=None):
    """``model`` reduced to the nodes that compute ``names``, which it returns.

    Its inputs are the graph inputs those nodes read (initializers stay initializers).

    Parameters
    ----------
    model : onnx.ModelProto
    names : list of str
    types : dict, optional
        The element type of each of ``names`` (``TensorProto`` enum); float when not given.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> run = model_computing(mlp_onnx(3, hidden=(4,)), ["hidden0"])
    >>> [n.op_type for n in run.graph.node], [i.name for i in run.graph.input]
    (['MatMul', 'Add', 'Relu'], ['X'])
    """
    nodes = nodes_reaching(model.graph, set(names))
    used = {name for node in nodes for name in node.input}
    used -= {i.name for i in model.graph.initializer}
    run = copy_with_nodes(model, nodes)
    del run.graph.input[:], run.graph.output[:]
    run.graph.input.extend(i for i in model.graph.input if i.name in used)
    types = types or {}
    run.graph.output.extend(
        helper.make_tensor_value_info(name, types.get(name, TensorProto.FLOAT), None)
        for name in names
    )
    return run


def shapes_of_a_run(model, names):
    """The shapes of the float values ``names`` when the nodes that compute them run on zeros.

    The run is made with batches of 1 and 2 rows (the inputs whose first
    dimension is free; the others, weights made inputs, keep their shape): a
    dimension that changes with the batch is None. Empty when an input the
    values need has another free dimension than the first, or when the run fails.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.graphs.graph_shapes import value_shapes
    >>> from helpers import export_for_training
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 12), nn.Unflatten(1, (4, 3)), nn.Tanh())
    >>> model = export_for_training(net, torch.zeros(2, 3))
    >>> name = "/1/Reshape_2_output_0"  # the output of Unflatten
    >>> value_shapes(model).get(name), shapes_of_a_run(model, [name])
    (None, {'/1/Reshape_2_output_0': [None, 4, 3]})
    """
    run = model_computing(model, names)
    inputs = list(run.graph.input)
    dims = [tensor_dims(i) for i in inputs]
    if any(d is None or None in d[1:] for d in dims):
        return {}
    options = onnxruntime.SessionOptions()  # not profiled, and not given the users' threads
    options.log_severity_level = ERROR_SEVERITY
    types = [helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type) for i in inputs]
    try:
        session = make_session(run, options=options)
        runs = [
            session.run(
                names,
                {
                    i.name: np.zeros([rows, *d[1:]] if d and d[0] is None else d, t)
                    for i, d, t in zip(inputs, dims, types)
                },
            )
            for rows in (1, 2)
        ]
    except Exception:  # noqa: BLE001 - what the runtime cannot run keeps what shape inference found
        return {}
    return {
        name: [a if a == b else None for a, b in zip(one.shape, two.shape)]
        for name, one, two in zip(names, *runs)
    }


def shapes_with_a_run(model, names):
    """The shapes of ``model``'s values, those of ``names`` completed by a run where inference
    fails.

    :func:`~helpers.core.graphs.graph_shapes.value_shapes`; where it leaves a size of one of
    ``names`` open (pads computed by a chain of nodes, as torch writes a reflection padding), the
    shape comes from :func:`shapes_of_a_run` when the model's inputs fix
    every size but the batch.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Conv1d(1, 2, 3, padding=1, padding_mode="reflect")
    >>> model = export_for_training(net, torch.zeros(1, 1, 8))
    >>> value_shapes(model)["y"], shapes_with_a_run(model, ["y"])["y"]
    ([None, 2, None], [None, 2, 8])
    """
    shapes = value_shapes(model)
    unknown = [
        name
        for name in dict.fromkeys(names)
        if shapes.get(name) is None or None in shapes[name][1:]
    ]
    if unknown:
        shapes.update(shapes_of_a_run(model, unknown))
    return shapes
