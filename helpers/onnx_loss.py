"""Append a loss to an ONNX graph: the model the whole-training API trains.

All losses are means over the batch of a per-sample loss, optionally weighted
per sample, plus a penalty on the weights. With ``d = prediction - label``,
summed over the outputs of one sample:

* ``squared_error``: ``sum d**2``
* ``absolute_error``: ``sum abs(d)``
* ``elastic``: ``sum l1_weight * abs(d) + l2_weight * d**2``
* ``log``: ``-sum y log(p) + (1 - y) log(1 - p)``

so ``loss = mean_i(w_i * loss_i) + sum_W (l1 * sum|W| + l2 * sum W**2)``.
The squared error is the mean squared error of torch's ``MSELoss``; it is
twice scikit-learn's ``squared_error`` of ``SGDRegressor`` and
``MLPRegressor``, which carry a factor 1/2.
"""
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .onnx_graph import get_train_initializer, nodes_reaching
from .runtime import main_opset

#: Key of the model metadata where :func:`add_loss_output` records what it did.
LOSS_METADATA_KEY = "helpers.loss"

#: Score names and the keyword arguments each one takes, with defaults.
SCORES = {
    "squared_error": {},
    "absolute_error": {},
    "elastic": {"l1_weight": 0.5, "l2_weight": 0.5},
    "log": {"eps": 1e-5},
}


class _Appender:
    """Adds uniquely named nodes and constants to a graph."""

    def __init__(self, model, prefix):
        self.graph = model.graph
        self.opset = main_opset(model)
        self.prefix = prefix
        self._count = 0
        self.used = {n for node in self.graph.node for n in (*node.input, *node.output)}
        self.used |= {v.name for v in (*self.graph.input, *self.graph.output)}
        self.used |= {i.name for i in self.graph.initializer}

    def name(self, hint):
        while True:
            self._count += 1
            candidate = f"{self.prefix}{hint}_{self._count}"
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate

    def node(self, op_type, inputs, output=None, **attrs):
        output = output or self.name(op_type.lower())
        self.graph.node.append(
            helper.make_node(op_type, inputs, [output], name=self.name(op_type), **attrs)
        )
        return output

    def const(self, value, dtype=np.float32, hint="cst"):
        """A Constant node: unlike an initializer, never mistaken for a weight."""
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), self.name(hint))
        return self.node("Constant", [], value=tensor)

    def reduce(self, op_type, x, axes=None, keepdims=0):
        """A reduction over ``axes`` (all when None) with the opset's syntax."""
        if axes is None:
            return self.node(op_type, [x], keepdims=keepdims)
        axes_as_input = self.opset >= (13 if op_type == "ReduceSum" else 18)
        if axes_as_input:
            return self.node(op_type, [x, self.const(axes, np.int64, "axes")], keepdims=keepdims)
        return self.node(op_type, [x], axes=list(axes), keepdims=keepdims)


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


def _normalize_penalty(onx, penalty):
    if not penalty:
        return {}
    trainable = get_train_initializer(onx)
    normalized = {}
    for name, value in penalty.items():
        if name not in trainable:
            raise ValueError(
                f"Penalty on {name!r}, which is not a float initializer of the model. "
                f"Float initializers are {list(trainable)}."
            )
        if isinstance(value, dict):
            unknown = set(value) - {"l1", "l2"}
            if unknown:
                raise ValueError(f"Penalty keys must be 'l1' or 'l2', got {sorted(unknown)}.")
            coefs = {"l1": float(value.get("l1", 0)), "l2": float(value.get("l2", 0))}
        else:
            coefs = {"l1": 0.0, "l2": float(value)}
        if min(coefs.values()) < 0:
            raise ValueError(f"Penalty coefficients must be non-negative, got {coefs} for {name!r}.")
        normalized[name] = coefs
    return normalized


def _score_kwargs(score_name, kwargs):
    if score_name not in SCORES:
        raise ValueError(f"Unknown score_name {score_name!r}, expected one of {list(SCORES)}.")
    unknown = set(kwargs) - set(SCORES[score_name])
    if unknown:
        raise TypeError(
            f"score_name={score_name!r} takes {list(SCORES[score_name]) or 'no'} "
            f"extra arguments, got {sorted(unknown)}."
        )
    return {**SCORES[score_name], **{k: float(v) for k, v in kwargs.items()}}


def _per_sample_loss(app, score_name, pred, label, rank, params):
    """Per-sample loss, a vector of one value per row."""
    if score_name == "log":
        eps = params["eps"]
        if app.opset >= 11:
            p = app.node("Clip", [pred, app.const(eps), app.const(1 - eps)])
        else:
            p = app.node("Clip", [pred], min=eps, max=1 - eps)
        one = app.const(1.0)
        pos = app.node("Mul", [label, app.node("Log", [p])])
        neg = app.node(
            "Mul", [app.node("Sub", [one, label]), app.node("Log", [app.node("Sub", [one, p])])]
        )
        elementwise = app.node("Neg", [app.node("Add", [pos, neg])])
    else:
        diff = app.node("Sub", [pred, label])
        l1, l2 = {
            "squared_error": (0.0, 1.0),
            "absolute_error": (1.0, 0.0),
            "elastic": (params.get("l1_weight"), params.get("l2_weight")),
        }[score_name]
        terms = []
        if l2:
            sq = app.node("Mul", [diff, diff])
            terms.append(sq if l2 == 1 else app.node("Mul", [sq, app.const(l2)]))
        if l1:
            ab = app.node("Abs", [diff])
            terms.append(ab if l1 == 1 else app.node("Mul", [ab, app.const(l1)]))
        if not terms:
            raise ValueError("The elastic loss needs l1_weight or l2_weight above 0.")
        elementwise = terms[0] if len(terms) == 1 else app.node("Add", terms)
    if rank == 1:
        return elementwise
    return app.reduce("ReduceSum", elementwise, axes=list(range(1, rank)))


def _penalty_term(app, penalty):
    # ReduceL1 and ReduceSumSquare have no gradient in onnxruntime-training:
    # Abs, Mul and ReduceSum do.
    terms = []
    for name, coefs in penalty.items():
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
    score_name : {'squared_error', 'absolute_error', 'elastic', 'log'}
        The loss. ``log`` is the binary log loss: the output holds the
        probability of the positive class, of shape ``(N,)`` or ``(N, 1)``
        (pick a column first if the model returns both classes), and labels
        are 0 or 1.
    loss_name : str
        Name of the loss output.
    label_name : str
        Name of the new label input. It has the shape of the chosen output.
    weight_name : str or None
        Name of a new input of per-sample weights, shape ``(N,)``.
    penalty : dict or None
        Initializer name to ``{'l1': a, 'l2': b}`` or to ``b`` (L2 only):
        adds ``a * sum|W| + b * sum W**2`` to the loss.
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
    """
    params = _score_kwargs(score_name, kwargs)
    output_index, out = _output_info(onx, output_index)
    penalty = _normalize_penalty(onx, penalty)
    taken = {i.name for i in onx.graph.input} | {i.name for i in onx.graph.initializer}
    for new_name in filter(None, [label_name, weight_name, loss_name]):
        if new_name in taken:
            raise ValueError(f"Name {new_name!r} is already used in the model: choose another.")

    model = onnx.ModelProto()
    model.CopyFrom(onx)
    app = _Appender(model, prefix=f"{loss_name}_")
    dims = out.type.tensor_type.shape.dim
    rank = len(dims)
    if rank == 0:
        raise ValueError(f"Output {out.name!r} has no known rank: the loss needs one.")
    label_shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims]
    model.graph.input.append(
        helper.make_tensor_value_info(label_name, TensorProto.FLOAT, label_shape)
    )
    per_sample = _per_sample_loss(app, score_name, out.name, label_name, rank, params)
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
    """Return what :func:`add_loss_output` recorded in ``onx_loss``, or None."""
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
