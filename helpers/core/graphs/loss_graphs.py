"""The per-sample losses both APIs share, written as ONNX nodes.

One registry, :data:`LOSSES`, names the losses and their keyword arguments;
:func:`canonical_loss_name` accepts the other spellings onnxcustom and
scikit-learn use (:data:`LOSS_ALIASES`) and gives the one name. With
``d = prediction - label``, the loss of one sample is the mean over its
``k`` outputs (all the values of a row), so that the mean over a batch is
the mean over every element, as torch's losses reduce by default:

* ``squared_error``: ``mean_j d**2``, torch's ``MSELoss``; twice
  scikit-learn's ``squared_error``, which carries a factor 1/2
* ``absolute_error``: ``mean_j abs(d)``, torch's ``L1Loss``
* ``elastic``: ``mean_j l1_weight * abs(d) + l2_weight * d**2``
* ``log``: ``-mean_j y log(p) + (1 - y) log(1 - p)``, ``p`` clipped to
  ``[eps, 1 - eps]``: the output must be a probability (after a sigmoid);
  torch's ``BCELoss``
* ``cross_entropy``: ``-sum_j y log(softmax(s))`` on raw scores ``s`` (logits)
  of shape ``(N, n_classes)``, with one-hot labels ``y``: a classifier's
  loss, summed over the classes (one loss per sample), torch's
  ``CrossEntropyLoss``

:func:`helpers.add_loss_output` appends these nodes to a model (the
whole-training API); :mod:`helpers.forward_backward.losses` builds a loss
and its gradient from them (the forward/backward API).
"""

import numpy as np
from onnx import helper, numpy_helper

from ..machine.runtime import main_opset

#: Score names and the keyword arguments each one takes, with defaults.
LOSSES = {
    "squared_error": {},
    "absolute_error": {},
    "elastic": {"l1_weight": 0.5, "l2_weight": 0.5},
    "log": {"eps": 1e-5},
    "cross_entropy": {},
}


class GraphAppender:
    """Adds uniquely named nodes and constants to a model's graph, in place.

    Parameters
    ----------
    model : onnx.ModelProto
        The model whose graph grows.
    prefix : str
        Start of every new name.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], []
    ... )
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    >>> app = GraphAppender(model, prefix="loss_")
    >>> app.node("Abs", ["x"])
    'loss_abs_1'
    """

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


#: Other spellings of the loss names (onnxcustom's, scikit-learn's), to the one name:
#: ``square_error`` -> ``squared_error``, ``neglog`` and ``log_loss`` -> ``log``.
LOSS_ALIASES = {
    "square_error": "squared_error",
    "neglog": "log",
    "log_loss": "log",
}


def canonical_loss_name(name):
    """The name in :data:`LOSSES` for ``name`` or one of its aliases.

    Examples
    --------
    >>> canonical_loss_name("square_error")
    'squared_error'
    """
    if isinstance(name, str):
        name = LOSS_ALIASES.get(name, name)
        if name in LOSSES:
            return name
    raise ValueError(
        f"Unknown loss {name!r}, expected one of {list(LOSSES)} "
        f"(or the aliases {sorted(LOSS_ALIASES)})."
    )


def loss_kwargs(score_name, kwargs):
    """Check the keyword arguments of a loss; return them with the defaults filled in.

    Examples
    --------
    >>> loss_kwargs("elastic", {"l1_weight": 0.2})
    {'l1_weight': 0.2, 'l2_weight': 0.5}
    """
    score_name = canonical_loss_name(score_name)
    unknown = set(kwargs) - set(LOSSES[score_name])
    if unknown:
        raise TypeError(
            f"score_name={score_name!r} takes {list(LOSSES[score_name]) or 'no'} "
            f"extra arguments, got {sorted(unknown)}."
        )
    return {**LOSSES[score_name], **{k: float(v) for k, v in kwargs.items()}}


def per_sample_loss(app, score_name, pred, label, rank, params):
    """Append the per-sample loss; return the name of its vector (one value per row).

    The mean of the elementwise loss over the values of a row, its sum over
    the classes for ``cross_entropy`` (see the module's documentation).

    Parameters
    ----------
    app : GraphAppender
    score_name : str
        A name of :data:`LOSSES`.
    pred, label : str
        Names of the prediction and the label, of rank ``rank``.
    rank : int
    params : dict
        The loss's keyword arguments (:func:`loss_kwargs`).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> from helpers.core.machine.sessions import make_session
    >>> graph = helper.make_graph(
    ...     [],
    ...     "loss",
    ...     [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 2]) for n in ("p", "y")],
    ...     [],
    ... )
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    >>> out = per_sample_loss(GraphAppender(model, "t_"), "squared_error", "p", "y", 2, {})
    >>> model.graph.output.extend([helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N"])])
    >>> p, y = np.array([[1, 2], [0, 0]], dtype=np.float32), np.zeros((2, 2), dtype=np.float32)
    >>> make_session(model).run(None, {"p": p, "y": y})[0]  # mean of the squares of each row
    array([2.5, 0. ], dtype=float32)
    """
    if score_name == "cross_entropy":
        if rank != 2:
            raise ValueError(
                "cross_entropy needs scores of shape (N, n_classes) and one-hot labels of the same "
                "shape (helpers.teaching.datasets.one_hot)."
            )
        log_proba = app.node("LogSoftmax", [pred], axis=1)
        elementwise = app.node("Neg", [app.node("Mul", [label, log_proba])])
    elif score_name == "log":
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
    reduction = "ReduceSum" if score_name == "cross_entropy" else "ReduceMean"
    return app.reduce(reduction, elementwise, axes=list(range(1, rank)))
