"""The attributes of an ONNX node as Python values, text as ``str``.

``onnx.helper.get_attribute_value`` gives a string attribute (``auto_pad``, ``mode``,
``direction``...) as ``bytes``; every reader of the project compares it with text, so both
readers here decode it, and the strings of a list (an RNN's ``activations``) too. The graphs a
node holds as attributes (a ``Loop``'s body, an ``If``'s branches) are :func:`subgraphs`, and
:func:`names_read` walks them.
"""

from onnx import AttributeProto, helper


def _value(attribute):
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [item.decode("utf-8") for item in value]
    return value


def node_attribute(node, name, default=None):
    """The value of ``node``'s attribute ``name`` (text as ``str``), or ``default`` when the node
    does not set it.

    Parameters
    ----------
    node : onnx.NodeProto
    name : str
    default : object
        What a node without the attribute gives (ONNX's default for the operator, say).

    Examples
    --------
    >>> node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], auto_pad="VALID")
    >>> node_attribute(node, "strides"), node_attribute(node, "auto_pad")
    ([2, 2], 'VALID')
    >>> node_attribute(node, "group", 1), node_attribute(node, "pads") is None
    (1, True)
    """
    for attribute in node.attribute:
        if attribute.name == name:
            return _value(attribute)
    return default


def node_attributes(node):
    """Every attribute ``node`` sets, name to value (text as ``str``): what a copy of the node
    with other inputs is made with (``helper.make_node(op_type, inputs, outputs, **attributes)``).

    Examples
    --------
    >>> lstm = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4,
    ...                         activations=["Sigmoid", "Tanh", "Tanh"])
    >>> node_attributes(lstm)
    {'activations': ['Sigmoid', 'Tanh', 'Tanh'], 'hidden_size': 4}
    >>> helper.make_node("LSTM", ["x2", "w", "r"], ["y"], **node_attributes(lstm)).attribute == (
    ...     lstm.attribute)
    True
    """
    return {attribute.name: _value(attribute) for attribute in node.attribute}


def subgraphs(node):
    """The graphs ``node`` holds as attributes: a ``Loop``'s or a ``Scan``'s body, an ``If``'s
    branches.

    Examples
    --------
    >>> body = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "body", [], [])
    >>> [g.name for g in subgraphs(helper.make_node("Loop", ["n", ""], ["z"], body=body))]
    ['body']
    >>> list(subgraphs(helper.make_node("Neg", ["x"], ["y"])))
    []
    """
    for attribute in node.attribute:
        yield from [attribute.g] if attribute.type == AttributeProto.GRAPH else attribute.graphs


def names_read(graph):
    """The names the nodes of ``graph`` read, those of its subgraphs included.

    Examples
    --------
    >>> body = helper.make_graph([helper.make_node("Add", ["x", "outer"], ["y"])], "b", [], [])
    >>> loop = helper.make_node("Loop", ["n", ""], ["z"], body=body)
    >>> sorted(names_read(helper.make_graph([loop], "g", [], [])))
    ['', 'n', 'outer', 'x']
    """
    names = set()
    for node in graph.node:
        names.update(node.input)
        for subgraph in subgraphs(node):
            names |= names_read(subgraph)
    return names
