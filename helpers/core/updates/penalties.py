"""Penalties on the weights, for both APIs.

A penalty adds ``sum_W l1_W * sum|W| + l2_W * sum W**2`` to the mean loss of
each batch. Both APIs take it in either form: a dict (onnxcustom's
``add_loss_output(penalty={'coef': {'l2': 0.01}})``) or an object
(:class:`ElasticLearningPenalty`, :class:`NoLearningPenalty`);
:func:`make_learning_penalty` checks both and gives an object whose
:meth:`~BaseLearningPenalty.coefficients` say what each weight gets. The
whole-training API writes these terms into the loss graph
(:func:`helpers.add_loss_output`); the forward/backward API adds their
gradient ``l1 * sign(W) + 2 * l2 * W`` to the data gradient, with one ONNX
graph on the training device.

How it scales: the data-loss gradient is a mean over the batch, the penalty
gradient is not divided by anything. Each update therefore shrinks the
weights by ``eta * (l1 * sign(W) + 2 * l2 * W)`` whatever the batch size,
and an epoch applies it ``n_samples / batch_size`` times: halving the batch
size doubles the shrinkage per epoch, as it doubles the number of data
updates. scikit-learn's ``MLPRegressor(alpha=a)`` divides its penalty by the
batch size instead: with its loss halved (``0.5 * mean squared error``),
``l2 = a / batch_size`` and half its learning rate give the same updates.
"""

import numbers

import numpy as np
from onnx import helper

from ..graphs.onnx_function import OnnxFunction, make_model
from ..inputs.validation import check_finite_number
from .configurable import Configurable


class BaseLearningPenalty(Configurable):
    """A penalty: which weights it applies to, with which coefficients.

    Subclasses write :meth:`coefficients`; this class builds and runs the
    graph of the forward/backward API.

    Examples
    --------
    >>> class OnlyL2(BaseLearningPenalty):
    ...     def coefficients(self, names):
    ...         return {name: {"l1": 0.0, "l2": 0.1} for name in names}
    >>> OnlyL2().coefficients(["coef"])
    {'coef': {'l1': 0.0, 'l2': 0.1}}
    """

    def __init__(self):
        self._functions = {}

    def __getstate__(self):
        return {**self.__dict__, "_functions": {}}

    def coefficients(self, names):
        """``{weight: {'l1': a, 'l2': b}}`` for the penalized weights among ``names``."""
        raise NotImplementedError

    def _function(self, device, names):
        key = (device, tuple(names))
        if key in self._functions:
            return self._functions[key]
        coefs = self.coefficients(names)
        nodes, inputs, outputs, terms = [], [], [("penalty", [])], []

        def const(name, value):
            nodes.append(
                helper.make_node(
                    "Constant", [], [name], value=helper.make_tensor(name, 1, [], [value])
                )
            )
            return name

        for i, name in enumerate(names):
            w, g = f"W{i}", f"G{i}"
            inputs += [(w, None), (g, None)]
            outputs.append((f"{g}_new", None))
            if name not in coefs:
                nodes.append(helper.make_node("Identity", [g], [f"{g}_new"]))
                continue
            l1, l2 = coefs[name]["l1"], coefs[name]["l2"]
            nodes += [
                helper.make_node("Abs", [w], [f"abs{i}"]),
                helper.make_node("ReduceSum", [f"abs{i}"], [f"sum_abs{i}"], keepdims=0),
                helper.make_node("Mul", [w, w], [f"sq{i}"]),
                helper.make_node("ReduceSum", [f"sq{i}"], [f"sum_sq{i}"], keepdims=0),
                helper.make_node("Mul", [f"sum_abs{i}", const(f"l1_{i}", l1)], [f"pl1_{i}"]),
                helper.make_node("Mul", [f"sum_sq{i}", const(f"l2_{i}", l2)], [f"pl2_{i}"]),
                helper.make_node("Add", [f"pl1_{i}", f"pl2_{i}"], [f"p{i}"]),
                helper.make_node("Sign", [w], [f"sign{i}"]),
                helper.make_node("Mul", [f"sign{i}", f"l1_{i}"], [f"gl1_{i}"]),
                helper.make_node("Mul", [w, const(f"l2x2_{i}", 2 * l2)], [f"gl2_{i}"]),
                helper.make_node("Add", [g, f"gl1_{i}"], [f"g1_{i}"]),
                helper.make_node("Add", [f"g1_{i}", f"gl2_{i}"], [f"{g}_new"]),
            ]
            terms.append(f"p{i}")
        if terms:
            nodes.append(helper.make_node("Sum", terms, ["penalty"]))
        else:
            nodes.append(helper.make_node("Identity", [const("zero", 0.0)], ["penalty"]))
        self._functions[key] = OnnxFunction(make_model(nodes, inputs, outputs, "penalty"), device)
        return self._functions[key]

    def penalty_loss(self, device, weights, names):
        """Return the penalty of ``weights`` (OrtValues named ``names``), a float."""
        if not self.coefficients(names):
            return 0.0
        zeros = [np.zeros(w.shape(), dtype=np.float32) for w in weights]
        args = [v for pair in zip(weights, zeros) for v in pair]
        return float(self._function(device, names)(*args)[0].numpy())

    def update_gradients(self, device, weights, gradients, names):
        """Return the gradients with the penalty's gradient added, and the penalty.

        Returns
        -------
        tuple
            (list of OrtValue gradients, OrtValue holding the penalty); the
            gradients unchanged and 0.0 when no weight is penalized.
        """
        if not self.coefficients(names):
            return gradients, 0.0
        args = [v for pair in zip(weights, gradients) for v in pair]
        outputs = self._function(device, names)(*args)
        return outputs[1:], outputs[0]


class NoLearningPenalty(BaseLearningPenalty):
    """No penalty: gradients pass through unchanged.

    Examples
    --------
    >>> NoLearningPenalty().coefficients(["coef", "intercept"])
    {}
    """

    def coefficients(self, names):
        return {}


class ElasticLearningPenalty(BaseLearningPenalty):
    """The same L1 and L2 coefficients on every penalized weight.

    Parameters
    ----------
    l1, l2 : float
        Coefficients, >= 0.
    weights : list of str, optional
        The weights penalized; None means every trained weight. scikit-learn
        penalizes the coefficients of its models, not their intercepts.

    Examples
    --------
    >>> ElasticLearningPenalty(l1=0.0, l2=0.01, weights=["coef"]).coefficients(
    ...     ["coef", "intercept"]
    ... )
    {'coef': {'l1': 0.0, 'l2': 0.01}}
    """

    def __init__(self, l1=0.5, l2=0.5, weights=None):
        super().__init__()
        _check_coefficients({"l1": l1, "l2": l2}, "ElasticLearningPenalty")
        self.l1, self.l2, self.weights = float(l1), float(l2), weights

    def get_params(self, deep=True):
        return {"l1": self.l1, "l2": self.l2, "weights": self.weights}

    def coefficients(self, names):
        chosen = list(names) if self.weights is None else list(self.weights)
        _check_names(chosen, names)
        return {name: {"l1": self.l1, "l2": self.l2} for name in chosen}


class WeightPenalty(BaseLearningPenalty):
    """Coefficients given weight by weight: the dict form of a penalty.

    Parameters
    ----------
    penalty : dict
        Weight name to ``{'l1': a, 'l2': b}`` (either may be left out) or to
        a number ``b`` (L2 only).

    Examples
    --------
    >>> WeightPenalty({"coef": {"l1": 0.1}, "intercept": 0.5}).coefficients(["coef", "intercept"])
    {'coef': {'l1': 0.1, 'l2': 0.0}, 'intercept': {'l1': 0.0, 'l2': 0.5}}
    """

    def __init__(self, penalty):
        super().__init__()
        self.penalty = {}
        for name, value in penalty.items():
            if isinstance(value, dict):
                unknown = set(value) - {"l1", "l2"}
                if unknown:
                    raise ValueError(f"Penalty keys must be 'l1' or 'l2', got {sorted(unknown)}.")
                coefs = {"l1": value.get("l1", 0), "l2": value.get("l2", 0)}
            else:
                coefs = {"l1": 0, "l2": value}
            _check_coefficients(coefs, f"The penalty on {name!r}")
            self.penalty[name] = {k: float(v) for k, v in coefs.items()}

    def get_params(self, deep=True):
        return {"penalty": self.penalty}

    def coefficients(self, names):
        _check_names(list(self.penalty), names)
        return {name: dict(coefs) for name, coefs in self.penalty.items() if any(coefs.values())}


def _check_coefficients(coefs, owner):
    for key, value in coefs.items():
        check_finite_number(f"{owner}: {key}", value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
            raise ValueError(f"{owner}: {key} must be a number >= 0, got {value!r}.")


def _check_names(chosen, names):
    for name in chosen:
        if name not in names:
            raise ValueError(
                f"Penalty on {name!r}, which is not a float initializer of the model "
                f"being trained. Float initializers are {list(names)}."
            )


#: Names accepted for a penalty: ``None``, ``'none'`` and ``'NoLearningPenalty'`` build a
#: :class:`NoLearningPenalty`; ``'elastic'`` and ``'ElasticLearningPenalty'`` an
#: :class:`ElasticLearningPenalty` (a dict builds a :class:`WeightPenalty`).
PENALTY_ALIASES = {
    None: NoLearningPenalty,
    "none": NoLearningPenalty,
    "NoLearningPenalty": NoLearningPenalty,
    "elastic": ElasticLearningPenalty,
    "ElasticLearningPenalty": ElasticLearningPenalty,
}


def make_learning_penalty(penalty):
    """Return a penalty object from an object, a dict, a name or None.

    Parameters
    ----------
    penalty : BaseLearningPenalty, dict, str or None
        See the module docstring; a dict becomes a :class:`WeightPenalty`.

    Examples
    --------
    >>> make_learning_penalty({"coef": 0.01})
    WeightPenalty(penalty={'coef': {'l1': 0.0, 'l2': 0.01}})
    >>> make_learning_penalty(None)
    NoLearningPenalty()
    """
    if isinstance(penalty, BaseLearningPenalty):
        return penalty
    if isinstance(penalty, dict):
        return WeightPenalty(penalty) if penalty else NoLearningPenalty()
    if (penalty is None or isinstance(penalty, str)) and penalty in PENALTY_ALIASES:
        return PENALTY_ALIASES[penalty]()
    raise ValueError(
        f"Unknown penalty {penalty!r}: use an ElasticLearningPenalty, a dict "
        "{weight: {'l1': a, 'l2': b}}, None or one of "
        f"{[k for k in PENALTY_ALIASES if k]}."
    )
