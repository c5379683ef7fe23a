"""Append a loss to an ONNX graph: the model the whole-training API trains.

The loss is the mean over the batch of a per-sample loss
(:mod:`helpers.core.graphs.loss_graphs` gives the names and formulas), optionally
weighted per sample, plus a penalty on the weights
(:mod:`helpers.core.updates.penalties`):
``loss = mean_i(w_i * loss_i) + sum_W (l1 * sum|W| + l2 * sum W**2)``.
"""

import json

import onnx
from onnx import TensorProto, helper

from ..core.graphs.graph_nodes import nodes_reaching
from ..core.graphs.loss_graphs import (
    GraphAppender,
    canonical_loss_name,
    loss_kwargs,
    per_sample_loss,
)
from ..core.model_graphs.onnx_graph import get_train_initializer
from ..core.updates.penalties import make_learning_penalty

#: Key of the model metadata where :func:`add_loss_output` records what it did.
LOSS_METADATA_KEY = "helpers.loss"


def _output_info(onx, output_index):
    outputs = list(onx.graph.output)
    if output_index is None:
        if len(outputs) != 1:
            raise ValueError(
                f"The model has {len(outputs)} outputs {[o.name for o in outputs]}: "
                "choose the one the loss applies to with output_index."
            )
        output_index = 0
    if not 0 <= output_index < len(outputs):
        raise ValueError(f"output_index={output_index} but the model has {len(outputs)} outputs.")
    out = outputs[output_index]
    elem_type = out.type.tensor_type.elem_type
    if elem_type != TensorProto.FLOAT:
        raise ValueError(
            f"Output {out.name!r} has type {TensorProto.DataType.Name(elem_type)}: "
            "the loss needs a float output. For a classifier, choose the "
            "probabilities with output_index and convert with options={'zipmap': False}."
        )
    return output_index, out


def _penalty_term(app, coefficients):
    # ReduceL1 and ReduceSumSquare have no gradient in onnxruntime-training:
    # Abs, Mul and ReduceSum do.
    terms = []
    for name, coefs in coefficients.items():
        if coefs["l1"]:
            l1 = app.reduce("ReduceSum", app.node("Abs", [name]))
            terms.append(app.node("Mul", [l1, app.const(coefs["l1"])]))
        if coefs["l2"]:
            l2 = app.reduce("ReduceSum", app.node("Mul", [name, name]))
            terms.append(app.node("Mul", [l2, app.const(coefs["l2"])]))
    total = terms[0] if terms else None
    for term in terms[1:]:
        total = app.node("Add", [total, term])
    return total


def add_loss_output(
    onx,
    score_name="squared_error",
    loss_name="loss",
    label_name="label",
    weight_name=None,
    penalty=None,
    output_index=None,
    **kwargs,
):
    """Append a label input and a scalar loss output to a model.

    The returned model computes ``loss`` from the model's prediction, a new
    input ``label_name`` and, when ``weight_name`` is given, a new input of
    per-sample weights. Its only output is the loss: this is the graph the
    whole-training API (:class:`helpers.OrtGradientOptimizer`) trains.
    The module docstring gives the formulas.

    Parameters
    ----------
    onx : onnx.ModelProto
        The model whose output is the prediction; left unchanged.
    score_name : {'squared_error', 'absolute_error', 'elastic', 'log', 'cross_entropy'}
        The loss (:data:`helpers.core.graphs.loss_graphs.LOSSES`; the aliases
        ``'square_error'``, ``'neglog'``, ``'log_loss'`` are accepted). ``log`` is the binary log
        loss: the output holds the probability of the positive class, of shape ``(N,)`` or ``(N,
        1)`` (pick a column first if the model returns both classes), and labels are 0 or 1.
        ``cross_entropy`` is the softmax cross-entropy of a classifier's raw scores, of shape ``(N,
        n_classes)``: the label input takes one-hot rows, and :class:`helpers.OrtGradientOptimizer`
        also takes one class index per sample in ``fit`` and encodes it.
    loss_name : str
        Name of the loss output.
    label_name : str
        Name of the new label input. It has the shape of the chosen output.
    weight_name : str or None
        Name of a new input of per-sample weights, shape ``(N,)``.
    penalty : dict, ElasticLearningPenalty or None
        Initializer name to ``{'l1': a, 'l2': b}`` or to ``b`` (L2 only),
        or a penalty object (:mod:`helpers.core.updates.penalties`): adds
        ``a * sum|W| + b * sum W**2`` to the loss.
    output_index : int or None
        Which model output the loss applies to; None when there is only one.
    **kwargs
        ``l1_weight`` and ``l2_weight`` for ``elastic`` (0.5 each by
        default), ``eps`` for ``log`` (probabilities are clipped to
        ``[eps, 1 - eps]``).

    Returns
    -------
    onnx.ModelProto
        The model with the loss, which passes ``onnx.checker``.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> onx_loss = add_loss_output(model, weight_name="weight", penalty={"coefficient1": 0.01})
    >>> [i.name for i in onx_loss.graph.input], [o.name for o in onx_loss.graph.output]
    (['X', 'label', 'weight'], ['loss'])
    """
    score_name = canonical_loss_name(score_name)
    params = loss_kwargs(score_name, kwargs)
    output_index, out = _output_info(onx, output_index)
    penalty = make_learning_penalty(penalty).coefficients(list(get_train_initializer(onx)))
    taken = {i.name for i in onx.graph.input} | {i.name for i in onx.graph.initializer}
    for new_name in filter(None, [label_name, weight_name, loss_name]):
        if new_name in taken:
            raise ValueError(f"Name {new_name!r} is already used in the model: choose another.")

    model = onnx.ModelProto()
    model.CopyFrom(onx)
    app = GraphAppender(model, prefix=f"{loss_name}_")
    dims = out.type.tensor_type.shape.dim
    rank = len(dims)
    if rank == 0:
        raise ValueError(f"Output {out.name!r} has no known rank: the loss needs one.")
    label_shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims]
    model.graph.input.append(
        helper.make_tensor_value_info(label_name, TensorProto.FLOAT, label_shape)
    )
    per_sample = per_sample_loss(app, score_name, out.name, label_name, rank, params)
    if weight_name:
        model.graph.input.append(
            helper.make_tensor_value_info(weight_name, TensorProto.FLOAT, [label_shape[0]])
        )
        per_sample = app.node("Mul", [per_sample, weight_name])
    data_loss = app.reduce("ReduceMean", per_sample)
    penalty_loss = _penalty_term(app, penalty)
    if penalty_loss is None:
        app.node("Identity", [data_loss], output=loss_name)
    else:
        app.node("Add", [data_loss, penalty_loss], output=loss_name)

    original_outputs = [o.name for o in model.graph.output]
    # The original outputs stay described in value_info so that
    # remove_loss_output can restore them with their types.
    known = {v.name for v in model.graph.value_info}
    model.graph.value_info.extend(o for o in model.graph.output if o.name not in known)
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(loss_name, TensorProto.FLOAT, []))
    record = {
        "score_name": score_name,
        "score_kwargs": params,
        "loss_name": loss_name,
        "label_name": label_name,
        "weight_name": weight_name,
        "penalty": penalty,
        "output_name": out.name,
        "output_index": output_index,
        "model_outputs": original_outputs,
        "model_inputs": [i.name for i in onx.graph.input],
    }
    meta = [p for p in model.metadata_props if p.key != LOSS_METADATA_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(meta)
    model.metadata_props.add(key=LOSS_METADATA_KEY, value=json.dumps(record))
    onnx.checker.check_model(model)
    return model


def loss_metadata(onx_loss):
    """Return what :func:`add_loss_output` recorded in ``onx_loss``, or None.

    Parameters
    ----------
    onx_loss : onnx.ModelProto

    Returns
    -------
    dict or None
        The loss, its parameters and the names of the inputs and outputs
        involved; None for a model :func:`add_loss_output` did not make.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> record = loss_metadata(add_loss_output(model, "elastic", l1_weight=0.2))
    >>> record["score_name"], record["score_kwargs"], record["output_name"]
    ('elastic', {'l1_weight': 0.2, 'l2_weight': 0.5}, 'variable')
    >>> print(loss_metadata(model))
    None
    """
    for prop in onx_loss.metadata_props:
        if prop.key == LOSS_METADATA_KEY:
            return json.loads(prop.value)
    return None


def remove_loss_output(onx_loss):
    """Return the prediction model that :func:`add_loss_output` started from.

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model returned by :func:`add_loss_output` (possibly with other
        initializer values).

    Returns
    -------
    onnx.ModelProto
        The same graph without the label, weight and loss, with the original
        outputs and the current initializer values.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> restored = remove_loss_output(add_loss_output(model, weight_name="weight"))
    >>> [i.name for i in restored.graph.input], [o.name for o in restored.graph.output]
    (['X'], ['variable'])
    >>> restored.graph.node == model.graph.node
    True
    """
    record = loss_metadata(onx_loss)
    if record is None:
        raise ValueError(
            "This model was not made by add_loss_output: the prediction graph "
            "cannot be told apart from the loss. Build it with add_loss_output."
        )
    loss_inputs = {record["label_name"], record["weight_name"]}
    kept_nodes = nodes_reaching(onx_loss.graph, set(record["model_outputs"]))
    model = onnx.ModelProto()
    model.CopyFrom(onx_loss)
    graph = model.graph
    outputs = set(record["model_outputs"])
    value_info = {v.name: v for v in onx_loss.graph.value_info}
    del graph.value_info[:]
    graph.value_info.extend(v for n, v in value_info.items() if n not in outputs)
    del graph.node[:]
    graph.node.extend(kept_nodes)
    used = {name for node in kept_nodes for name in node.input}
    kept_inits = [i for i in onx_loss.graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    kept_inputs = [i for i in onx_loss.graph.input if i.name not in loss_inputs]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    del graph.output[:]
    graph.output.extend(value_info[name] for name in record["model_outputs"])
    meta = [p for p in model.metadata_props if p.key != LOSS_METADATA_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(meta)
    return model
