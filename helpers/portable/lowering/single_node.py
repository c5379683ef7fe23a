"""A model of one contrib node, to compare a lowering with the kernel it replaces."""

import numpy as np
from onnx import helper, numpy_helper

#: The standard opset of single-node models (the training graphs' one).
OPSET = 17


def single_node_model(
    op_type, feeds, outputs, domain="com.microsoft", constants=None, **attributes
):
    """A model of one ``domain:op_type`` node.

    Parameters
    ----------
    op_type, domain : str
    feeds : dict
        Each input name, in order (``""``: an optional input left out), to a numpy array: its
        type (its shape is left free, its rank kept).
    outputs : dict
        Each output name (``""``: left out) to its numpy dtype.
    constants : dict, optional
        Inputs given as initializers instead, after ``feeds``.
    **attributes
        The node's attributes.

    Examples
    --------
    >>> model = single_node_model("ReluGrad", {"dy": np.ones(3, np.float32),
    ...                            "x": np.ones(3, np.float32)}, {"dx": np.float32})
    >>> [(n.domain, n.op_type) for n in model.graph.node], model.graph.input[0].name
    ([('com.microsoft', 'ReluGrad')], 'dy')
    """
    constants = constants or {}
    names = list(feeds) + [n for n in constants if n not in feeds]
    node = helper.make_node(op_type, names, list(outputs), domain=domain, **attributes)
    graph = helper.make_graph(
        [node],
        op_type,
        [
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), [None] * value.ndim
            )
            for name, value in feeds.items()
            if name
        ],
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
            for name, t in outputs.items()
            if name
        ],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(domain, 1)]
    )
    model.ir_version = 8
    return model
