"""The pieces the graph rewrites share: which node is which operator, constants, copies (a
node's attributes are read with :func:`helpers.portable.node_attributes.node_attribute`).

The training graph (:mod:`helpers.core.model_graphs.training_graph`,
:mod:`helpers.core.layers.batch_norm`, :mod:`helpers.core.rewrites.gradient_rewrites`) and the
inference graph (:mod:`helpers.core.model_graphs.inference_mode`) are the model with some
of its nodes replaced: each rewrite finds nodes of the standard ONNX domain,
reads their attributes, adds constant nodes and returns a copy of the model
with its new list of nodes.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: The names of the standard ONNX domain in a node.
ONNX_DOMAINS = ("", "ai.onnx")

#: Prefix of the names of the nodes and values the training graph's rewrites add.
TRAINING_PREFIX = "training__"


def is_onnx_op(node, *op_types):
    """Whether ``node`` is one of ``op_types`` of the standard ONNX domain (any of its operators
    when none is given).

    Examples
    --------
    >>> is_onnx_op(helper.make_node("Relu", ["x"], ["y"]), "Relu", "Gelu")
    True
    >>> is_onnx_op(helper.make_node("Relu", ["x"], ["y"], domain="com.microsoft"), "Relu")
    False
    """
    return node.domain in ONNX_DOMAINS and (not op_types or node.op_type in op_types)


def constant_node(name, values, elem_type=TensorProto.FLOAT):
    """A ``Constant`` node named ``name`` whose output ``name`` holds ``values`` as ``elem_type``.

    Examples
    --------
    >>> node = constant_node("axes", [0, 2], TensorProto.INT64)
    >>> node.op_type, list(node.output), numpy_helper.to_array(node.attribute[0].t).tolist()
    ('Constant', ['axes'], [0, 2])
    """
    array = np.asarray(values, dtype=helper.tensor_dtype_to_np_dtype(elem_type))
    return helper.make_node(
        "Constant", [], [name], name=name, value=numpy_helper.from_array(array, name)
    )


def copy_with_nodes(model, nodes):
    """A copy of ``model`` whose graph holds ``nodes`` instead of its own (``model`` is left
    unchanged).

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> copy = copy_with_nodes(model, model.graph.node[:1])
    >>> len(copy.graph.node), len(model.graph.node) > 1
    (1, True)
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def reduce_mean(data, output, axes, opset, tag):
    """A ``ReduceMean`` of ``data`` over ``axes``, keeping dimensions, in the form of ``opset``.

    From opset 18 the axes are an input, before an attribute.

    Examples
    --------
    >>> [n.op_type for n in reduce_mean("x", "m", [0, 2], 18, "mean")]
    ['Constant', 'ReduceMean']
    >>> [n.op_type for n in reduce_mean("x", "m", [0, 2], 17, "mean")]
    ['ReduceMean']
    """
    if opset >= 18:
        return [
            constant_node(f"{tag}__axes", axes, TensorProto.INT64),
            helper.make_node("ReduceMean", [data, f"{tag}__axes"], [output], name=tag, keepdims=1),
        ]
    return [helper.make_node("ReduceMean", [data], [output], name=tag, axes=axes, keepdims=1)]


def nodes_reaching(graph, targets):
    """Return the nodes needed to compute the tensors ``targets``, in graph order.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> graph = mlp_onnx(3, hidden=(4,)).graph
    >>> [n.op_type for n in nodes_reaching(graph, {"hidden0"})]
    ['MatMul', 'Add', 'Relu']
    """
    producers = {out: node for node in graph.node for out in node.output}
    needed, stack = set(), list(targets)
    while stack:
        name = stack.pop()
        node = producers.get(name)
        if node is None or id(node) in needed:
            continue
        needed.add(id(node))
        stack.extend(node.input)
    return [node for node in graph.node if id(node) in needed]


def depends_on_weights(model):
    """The values of ``model``'s graph computed from a float initializer (which may need a
    gradient).

    Examples
    --------
    >>> from onnx import helper
    >>> w = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "w")
    >>> graph = helper.make_graph(
    ...     [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["x"], ["r"])],
    ...     "g", [], [], [w])
    >>> sorted(depends_on_weights(helper.make_model(graph)))
    ['h', 'w']
    """
    floats = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)
    reached = {i.name for i in model.graph.initializer if i.data_type in floats}
    for node in model.graph.node:
        if any(name in reached for name in node.input):
            reached.update(node.output)
    return reached
