"""A small model's nodes copied into a larger graph, its names bound or prefixed.

The step model reuses the graphs the optimizers run as they are: the update rule's
(:func:`helpers.core.updates.weight_updater.build_update_graph`), the forward/backward API's
loss and penalty. :func:`inline_graph` copies their nodes, each input and output bound to a
value of the step's graph, every other name prefixed so that nothing collides.
"""

from onnx import numpy_helper


def inline_graph(model, bindings, prefix):
    """The nodes and initializers of ``model``, renamed for another graph.

    Parameters
    ----------
    model : onnx.ModelProto
        A graph without subgraphs (no ``Loop``, ``If``, ``Scan``).
    bindings : dict
        Name in ``model`` to its name in the other graph (its inputs and outputs, typically).
    prefix : str
        Put before every other name (values, node names).

    Returns
    -------
    tuple
        ``(nodes, initializers)``, renamed copies.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.core.graphs.onnx_function import make_model
    >>> model = make_model(
    ...     [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Abs", ["n"], ["y"])],
    ...     [("x", None)], [("y", None)], "g")
    >>> nodes, _ = inline_graph(model, {"x": "weight", "y": "result"}, "sub__")
    >>> [(list(n.input), list(n.output)) for n in nodes]
    [(['weight'], ['sub__n']), (['sub__n'], ['result'])]
    """

    def rename(name):
        return name if not name else bindings.get(name, prefix + name)

    nodes = []
    for node in model.graph.node:
        if any(a.g.node or a.graphs for a in node.attribute):
            raise ValueError(f"{node.op_type} {node.name!r} has a subgraph: it cannot be inlined.")
        copy = type(node)()
        copy.CopyFrom(node)
        copy.name = prefix + (node.name or node.output[0])
        del copy.input[:], copy.output[:]
        copy.input.extend(rename(n) for n in node.input)
        copy.output.extend(rename(n) for n in node.output)
        nodes.append(copy)
    initializers = [
        numpy_helper.from_array(numpy_helper.to_array(i), rename(i.name))
        for i in model.graph.initializer
    ]
    return nodes, initializers
