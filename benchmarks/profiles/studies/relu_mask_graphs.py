"""The candidate masks for Relu's gradient, as ONNX nodes, and the graphs they are tried on.

Each candidate writes ``Relu(x)`` as ``x * mask(x)`` with a mask the
gradient builder does not differentiate (:data:`MASKS`, :func:`with_mask`):
``Cast`` of a comparison, a quantization to uint8, or ``0 ** (0 ** x)``.
``where`` (the library's rewrite, :mod:`helpers.core.rewrites.gradient_rewrites`)
and ``relugrad`` (no rewrite) leave the graph to the optimizers.
:func:`relu_layer` is the single ``Relu`` they are checked and timed on
(``benchmarks/profiles/studies/relu_masks.py``).
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT


def _const(name, value, dtype=np.float32):
    tensor = numpy_helper.from_array(np.array(value, dtype), name)
    return helper.make_node("Constant", [], [name], name=name, value=tensor)


def cast_mask(x, tag):
    """Nodes of ``Cast(x > 0, float)``; the mask is ``tag + '_mask'``.

    Examples
    --------
    >>> [n.op_type for n in cast_mask("x", "t")], cast_mask("x", "t")[-1].output[0]
    (['Constant', 'Greater', 'Cast'], 't_mask')
    """
    return [
        _const(f"{tag}_zero", 0.0),
        helper.make_node("Greater", [x, f"{tag}_zero"], [f"{tag}_positive"]),
        helper.make_node("Cast", [f"{tag}_positive"], [f"{tag}_mask"], to=FLOAT),
    ]


def quantize_mask(x, tag):
    """Nodes of ``DequantizeLinear(Clip(QuantizeLinear(x * 2**100, 2**-49), 0, 1))`` in uint8.

    Examples
    --------
    >>> [n.op_type for n in quantize_mask("x", "t") if n.op_type != "Constant"]
    ['Mul', 'QuantizeLinear', 'Clip', 'DequantizeLinear']
    """
    return [
        _const(f"{tag}_scale_up", 2.0**100),
        _const(f"{tag}_step", 2.0**-49),
        _const(f"{tag}_one", 1.0),
        _const(f"{tag}_zero8", 0, np.uint8),
        _const(f"{tag}_one8", 1, np.uint8),
        helper.make_node("Mul", [x, f"{tag}_scale_up"], [f"{tag}_scaled"]),
        helper.make_node(
            "QuantizeLinear", [f"{tag}_scaled", f"{tag}_step", f"{tag}_zero8"], [f"{tag}_levels"]
        ),
        helper.make_node("Clip", [f"{tag}_levels", f"{tag}_zero8", f"{tag}_one8"], [f"{tag}_bits"]),
        helper.make_node(
            "DequantizeLinear", [f"{tag}_bits", f"{tag}_one", f"{tag}_zero8"], [f"{tag}_mask"]
        ),
    ]


def pow_mask(x, tag):
    """Nodes of ``0 ** (0 ** x)``: 1 where ``x > 0``, else 0, through exponents only.

    Examples
    --------
    >>> [n.op_type for n in pow_mask("x", "t")]
    ['Constant', 'Pow', 'Pow']
    """
    return [
        _const(f"{tag}_zero", 0.0),
        helper.make_node("Pow", [f"{tag}_zero", x], [f"{tag}_step"]),
        helper.make_node("Pow", [f"{tag}_zero", f"{tag}_step"], [f"{tag}_mask"]),
    ]


#: Candidate to the function making its mask nodes (None: made by the library, or no mask).
MASKS = {
    "where": None,
    "cast": cast_mask,
    "quantize": quantize_mask,
    "pow": pow_mask,
    "relugrad": None,
}


def with_mask(model, name):
    """``model`` with each ``Relu(x)`` written as ``x * mask(x)`` by the candidate ``name``.

    ``where`` and ``relugrad`` return ``model``: the optimizers rewrite it
    (``fast_gradients=True``) or not (``False``).

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> [n.op_type for n in with_mask(mlp_onnx(3, hidden=(4,)), "cast").graph.node]
    ['MatMul', 'Add', 'Constant', 'Greater', 'Cast', 'Mul', 'MatMul', 'Add']
    """
    if MASKS[name] is None:
        return model
    nodes = []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "Relu":
            nodes.append(node)
            continue
        tag = f"{name}_mask{index}"
        product = helper.make_node("Mul", [node.input[0], f"{tag}_mask"], node.output)
        nodes += [*MASKS[name](node.input[0], tag), product]
    masked = onnx.ModelProto()
    masked.CopyFrom(model)
    del masked.graph.node[:]
    masked.graph.node.extend(nodes)
    return masked


def relu_layer(shape, opset=15):
    """``Y = Relu(X)``, the input of a fixed ``shape`` (None: rows of any number).

    Examples
    --------
    >>> [n.op_type for n in relu_layer([None, 3]).graph.node]
    ['Relu']
    """
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])],
        "relu",
        [helper.make_tensor_value_info("X", FLOAT, list(shape))],
        [helper.make_tensor_value_info("Y", FLOAT, list(shape))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
