"""Small ONNX networks built directly, for examples, profiles and benchmarks.

Converting a scikit-learn model needs a fit first; these functions write the
graph a converted ``MLPRegressor`` has (``MatMul``, ``Add``, an activation
per hidden layer), with Glorot-uniform weights drawn from a seeded generator,
for any size and in microseconds.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

#: Activation name (scikit-learn's) to ONNX operator; ``identity`` adds none.
ACTIVATIONS = {"relu": "Relu", "tanh": "Tanh", "logistic": "Sigmoid", "identity": None}


def mlp_onnx(n_features, hidden=(50,), n_outputs=1, activation="relu", random_state=0, opset=15):
    """Return a multi-layer perceptron ``n_features -> hidden... -> n_outputs`` as ONNX.

    Parameters
    ----------
    n_features : int
        Width of the input ``X`` (float32, any number of rows).
    hidden : int or tuple of int
        Widths of the hidden layers.
    n_outputs : int
        Width of the output ``variable``: raw scores, no final activation.
    activation : {'relu', 'tanh', 'logistic', 'identity'}
        The hidden layers' activation, named as in scikit-learn.
    random_state : int
        Seeds the Glorot-uniform weights (intercepts too, as scikit-learn does).
    opset : int
        Opset of the default domain.

    Returns
    -------
    onnx.ModelProto
        Weights ``coefficient<i>`` and ``intercept<i>`` per layer, all float
        initializers (trainable).

    Examples
    --------
    >>> model = mlp_onnx(4, hidden=(8,), random_state=0)
    >>> [n.op_type for n in model.graph.node]
    ['MatMul', 'Add', 'Relu', 'MatMul', 'Add']
    >>> [i.name for i in model.graph.initializer]
    ['coefficient0', 'intercept0', 'coefficient1', 'intercept1']
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}.")
    hidden = (hidden,) if isinstance(hidden, (int, np.integer)) else tuple(hidden)
    widths = [n_features, *hidden, n_outputs]
    rng = np.random.default_rng(random_state)
    nodes, initializers, current = [], [], "X"
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        bound = np.sqrt(6 / (fan_in + fan_out))
        coef = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32)
        intercept = rng.uniform(-bound, bound, fan_out).astype(np.float32)
        initializers += [
            numpy_helper.from_array(coef, f"coefficient{i}"),
            numpy_helper.from_array(intercept, f"intercept{i}"),
        ]
        last = i == len(widths) - 2
        nodes += [
            helper.make_node("MatMul", [current, f"coefficient{i}"], [f"matmul{i}"]),
            helper.make_node(
                "Add", [f"matmul{i}", f"intercept{i}"], ["variable" if last else f"linear{i}"]
            ),
        ]
        current = "variable" if last else f"linear{i}"
        if not last and ACTIVATIONS[activation]:
            nodes.append(helper.make_node(ACTIVATIONS[activation], [current], [f"hidden{i}"]))
            current = f"hidden{i}"
    graph = helper.make_graph(
        nodes,
        f"mlp_{'_'.join(map(str, widths))}",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, n_outputs])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model
