"""Read and rewrite the weights (initializers) of an ONNX graph."""

import onnx
from onnx import TensorProto, numpy_helper

from ...portable.node_attributes import subgraphs
from ..graphs.graph_nodes import nodes_reaching
from ..graphs.graph_shapes import tensor_dims
from ..layers.batch_norm import running_statistic_names

#: Element types onnxruntime can compute a gradient for.
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE)


def _type_name(elem_type):
    return TensorProto.DataType.Name(elem_type)


def get_train_initializer(onx):
    """Return the initializers that can be trained, in graph order.

    Only floating point initializers can be trained: integer ones (a shape
    for a ``Reshape``, an index) have no gradient. The running statistics of
    ``BatchNormalization`` nodes are float but not weights: they are updated
    from batch statistics (:mod:`helpers.core.layers.batch_norm`), never trained.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model.

    Returns
    -------
    dict
        Initializer name to :class:`numpy.ndarray`, in the order the graph
        stores them.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> {
    ...     name: value.shape
    ...     for name, value in get_train_initializer(mlp_onnx(3, hidden=(4,))).items()
    ... }
    {'coefficient0': (3, 4), 'intercept0': (4,), 'coefficient1': (4, 1), 'intercept1': (1,)}
    """
    statistics = set(running_statistic_names(onx))
    return {
        init.name: numpy_helper.to_array(init)
        for init in onx.graph.initializer
        if init.data_type in FLOAT_TYPES and init.name not in statistics
    }


def _ml_operators(onx):
    return sorted({n.op_type for n in onx.graph.node if n.domain == "ai.onnx.ml"})


def check_weights_to_train(onx, weights_to_train):
    """Validate the names of the weights to train and return them as a list.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model to train.
    weights_to_train : list of str or None
        Initializer names; None means every float initializer.

    Returns
    -------
    list of str
        The names, in the order given (graph order when None).

    Raises
    ------
    ValueError
        When the model has nothing to train, or a name is unknown, not float,
        or repeated.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> check_weights_to_train(mlp_onnx(3, hidden=(4,)), None)
    ['coefficient0', 'intercept0', 'coefficient1', 'intercept1']
    >>> check_weights_to_train(mlp_onnx(3, hidden=(4,)), ["bias"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: Weight 'bias' is not an initializer of the model. Trainable ones are
    ['coefficient0', 'intercept0', 'coefficient1', 'intercept1'].
    """
    trainable = get_train_initializer(onx)
    if not trainable:
        ml_ops = _ml_operators(onx)
        hint = (
            f" Its operators {ml_ops} (domain ai.onnx.ml) keep their weights as "
            "attributes and have no gradient. Convert a scikit-learn linear "
            "model with to_onnx(model, X[:1], black_op={'LinearRegressor'}) "
            "(or {'LinearClassifier'}) to get MatMul/Add with float initializers."
            if ml_ops
            else ""
        )
        raise ValueError("The model has no trainable float initializer." + hint)
    if weights_to_train is None:
        return list(trainable)
    if isinstance(weights_to_train, str):
        raise TypeError(
            f"weights_to_train must be a list of names, not the string "
            f"{weights_to_train!r}: write [{weights_to_train!r}]."
        )
    names = list(weights_to_train)
    if not names:
        raise ValueError("weights_to_train is empty: name at least one weight, or pass None.")
    if len(set(names)) != len(names):
        raise ValueError(f"weights_to_train repeats a name: {names}.")
    all_inits = {init.name: init for init in onx.graph.initializer}
    statistics = running_statistic_names(onx)
    for name in names:
        if name not in all_inits:
            raise ValueError(
                f"Weight {name!r} is not an initializer of the model. "
                f"Trainable ones are {list(trainable)}."
            )
        if name in statistics:
            raise ValueError(
                f"{name!r} is a running statistic of a BatchNormalization node: it is not trained "
                "but updated from the batch statistics after each step. Trainable weights are "
                f"{list(trainable)}."
            )
        if name not in trainable:
            raise ValueError(
                f"Weight {name!r} has type {_type_name(all_inits[name].data_type)}: "
                f"only float initializers can be trained. Trainable ones are "
                f"{list(trainable)}."
            )
    return names


def onnx_rename_weights(onx):
    """Rename the initializers so that alphabetical order equals graph order.

    Each initializer ``name`` becomes ``I<rank>_name`` where ``rank`` is its
    position in the graph, zero padded. Nodes of the main graph and of its
    subgraphs are updated.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model, left unchanged.

    Returns
    -------
    onnx.ModelProto
        A renamed copy.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> [i.name for i in onnx_rename_weights(mlp_onnx(3, hidden=(4,))).graph.initializer]
    ['I0_coefficient0', 'I1_intercept0', 'I2_coefficient1', 'I3_intercept1']
    """
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    inits = model.graph.initializer
    width = len(str(max(len(inits) - 1, 0)))
    mapping = {init.name: f"I{i:0{width}d}_{init.name}" for i, init in enumerate(inits)}
    for init in inits:
        init.name = mapping[init.name]
    _rename_in_graph(model.graph, mapping)
    return model


def _rename_in_graph(graph, mapping):
    for node in graph.node:
        node.input[:] = [mapping.get(name, name) for name in node.input]
        for sub in subgraphs(node):
            _rename_in_graph(sub, mapping)
    for value in list(graph.input) + list(graph.value_info):
        value.name = mapping.get(value.name, value.name)


def replace_initializers(onx, values):
    """Return a copy of ``onx`` whose initializers ``values`` are replaced.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model, left unchanged.
    values : dict
        Initializer name to array; the array is cast to the initializer's type.

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = replace_initializers(mlp_onnx(3, hidden=(4,)), {"intercept1": np.array([5.0])})
    >>> get_train_initializer(model)["intercept1"]
    array([5.], dtype=float32)
    """
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    inits = {init.name: init for init in model.graph.initializer}
    for name, value in values.items():
        old = inits[name]
        dtype = numpy_helper.to_array(old).dtype
        old.CopyFrom(numpy_helper.from_array(value.astype(dtype).reshape(tuple(old.dims)), name))
    return model


def initializers_to_inputs(onx, names):
    """Return a copy of ``onx`` whose initializers ``names`` become inputs.

    The weights can then be fed at each run, as the training sessions do,
    instead of being frozen into the graph.

    Parameters
    ----------
    onx : onnx.ModelProto
    names : list of str
        Initializers to turn into inputs, appended in this order.

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = initializers_to_inputs(mlp_onnx(3, hidden=(4,)), ["coefficient1"])
    >>> [i.name for i in model.graph.input], len(model.graph.initializer)
    (['X', 'coefficient1'], 3)
    """
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    inits = {i.name: i for i in model.graph.initializer}
    kept = [i for i in model.graph.initializer if i.name not in names]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    for name in names:
        init = inits[name]
        model.graph.input.append(
            onnx.helper.make_tensor_value_info(name, init.data_type, list(init.dims))
        )
    return model


def with_outputs(onx, names):
    """Return a copy of ``onx`` that also returns the float values ``names`` (``onx`` when empty).

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> [o.name for o in with_outputs(mlp_onnx(3, hidden=(4,)), ["hidden0"]).graph.output]
    ['variable', 'hidden0']
    """
    if not names:
        return onx
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    model.graph.output.extend(
        onnx.helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names
    )
    return model


def select_outputs(onx, output_names):
    """Return the part of ``onx`` that computes the tensors ``output_names``.

    Use it to train a classifier on its raw scores: cut the graph before its
    ``Sigmoid``/``Softmax`` and ``ArgMax``.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model, left unchanged.
    output_names : list of str
        Tensors of the graph (outputs of any node) to make the outputs.

    Returns
    -------
    onnx.ModelProto
        Only the nodes, initializers and inputs these outputs need, with the
        outputs typed by shape inference.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> hidden = select_outputs(mlp_onnx(3, hidden=(4,)), ["hidden0"])
    >>> [o.name for o in hidden.graph.output], [n.op_type for n in hidden.graph.node]
    (['hidden0'], ['MatMul', 'Add', 'Relu'])
    """
    inferred = onnx.shape_inference.infer_shapes(onx)
    known = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
    produced = {out for node in onx.graph.node for out in node.output}
    missing = [name for name in output_names if name not in produced]
    if missing:
        raise ValueError(
            f"{missing} are not computed by any node. Tensors of the graph include "
            f"{sorted(produced)[:20]}."
        )
    nodes = nodes_reaching(onx.graph, output_names)
    used = {name for node in nodes for name in node.input}
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    graph = model.graph
    del graph.node[:]
    graph.node.extend(nodes)
    kept_inits = [i for i in onx.graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    kept_inputs = [i for i in onx.graph.input if i.name in used]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    del graph.output[:]
    for name in output_names:
        graph.output.append(
            known[name] if name in known else onnx.helper.make_empty_tensor_value_info(name)
        )
    del graph.value_info[:]
    return model


def static_dims(value_info):
    """The dimensions of a tensor's type: an int where fixed, None where not; ``[]`` when its rank
    is unknown.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> static_dims(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]))
    [None, 3]
    """
    return tensor_dims(value_info) or []


def describe_model(onx):
    """A one-line summary of a model: inputs, outputs and trainable weights.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> describe_model(mlp_onnx(3, hidden=(4,)))
    'ONNX model X[N,3] -> variable[N,1], 4 float weights (21 values)'
    """

    def tensors(values):
        shown = []
        for value in values:
            dims = ",".join("N" if d is None else str(d) for d in static_dims(value))
            shown.append(f"{value.name}[{dims}]")
        return ", ".join(shown)

    initializers = {i.name for i in onx.graph.initializer}
    inputs = [i for i in onx.graph.input if i.name not in initializers]
    weights = get_train_initializer(onx)
    size = sum(int(w.size) for w in weights.values())
    return (
        f"ONNX model {tensors(inputs)} -> {tensors(onx.graph.output)}, "
        f"{len(weights)} float weights ({size} values)"
    )
