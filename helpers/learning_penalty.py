"""Penalties on the weights for the forward/backward API, as ONNX graphs.

A penalty adds ``l1 * sum|W| + l2 * sum W**2`` to the mean loss of each
batch, the same objective as :func:`helpers.add_loss_output`'s ``penalty``.
Its gradient ``l1 * sign(W) + 2 * l2 * W`` is added to the gradient of the
data loss before the update.

How it scales: the data-loss gradient is a mean over the batch, the penalty
gradient is not divided by anything. Each update therefore shrinks the
weights by ``eta * (l1 * sign(W) + 2 * l2 * W)`` whatever the batch size,
and an epoch applies it ``n_samples / batch_size`` times: halving the batch
size doubles the shrinkage per epoch, as it doubles the number of data
updates. The learning rate multiplies both terms alike. scikit-learn's
``MLPRegressor(alpha=a)`` divides its penalty by the batch size instead:
with its loss halved (``0.5 * mean squared error``), ``l2 = a / batch_size``
and half its learning rate give the same updates.
"""
import numpy as np
from onnx import helper

from .onnx_function import OnnxFunction, make_model


class NoLearningPenalty:
    """No penalty: gradients pass through unchanged."""

    def get_params(self, deep=True):
        """Constructor parameters, as scikit-learn's ``get_params``."""
        return {}

    def __repr__(self):
        return "NoLearningPenalty()"

    def penalty_loss(self, device, weights, names):
        """Return the penalty of ``weights`` (0 here)."""
        return 0.0

    def update_gradients(self, device, weights, gradients, names):
        """Return the gradients with the penalty's gradient added, and the penalty.

        Returns
        -------
        tuple
            (list of OrtValue gradients, penalty value): here the gradients
            unchanged and 0.
        """
        return gradients, 0.0


class ElasticLearningPenalty(NoLearningPenalty):
    """L1 and L2 penalty ``l1 * sum|W| + l2 * sum W**2``.

    Parameters
    ----------
    l1, l2 : float
        Coefficients, >= 0.
    weights : list of str, optional
        The weights penalized; None means every trained weight. scikit-learn
        penalizes the coefficients of its models, not their intercepts.
    """

    def __init__(self, l1=0.5, l2=0.5, weights=None):
        if l1 < 0 or l2 < 0:
            raise ValueError(f"l1 and l2 must be >= 0, got {l1}, {l2}.")
        self.l1, self.l2, self.weights = float(l1), float(l2), weights
        self._functions = {}

    def __getstate__(self):
        return {**self.__dict__, "_functions": {}}

    def get_params(self, deep=True):
        return {"l1": self.l1, "l2": self.l2, "weights": self.weights}

    def __repr__(self):
        return f"ElasticLearningPenalty(l1={self.l1!r}, l2={self.l2!r}, weights={self.weights!r})"

    def _mask(self, names):
        if self.weights is None:
            return [True] * len(names)
        unknown = set(self.weights) - set(names)
        if unknown:
            raise ValueError(f"Penalty on unknown weights {sorted(unknown)}; trained ones are {names}.")
        return [name in self.weights for name in names]

    def _function(self, device, names):
        key = (device, tuple(names))
        if key in self._functions:
            return self._functions[key]
        nodes, inputs, outputs, terms = [], [], [("penalty", [])], []

        def const(name, value):
            nodes.append(
                helper.make_node(
                    "Constant", [], [name], value=helper.make_tensor(name, 1, [], [value])
                )
            )
            return name

        l1, l2, l2x2 = const("l1", self.l1), const("l2", self.l2), const("l2x2", 2 * self.l2)
        for i, penalized in enumerate(self._mask(names)):
            w, g = f"W{i}", f"G{i}"
            inputs += [(w, None), (g, None)]
            outputs.append((f"{g}_new", None))
            if not penalized:
                nodes.append(helper.make_node("Identity", [g], [f"{g}_new"]))
                continue
            nodes += [
                helper.make_node("Abs", [w], [f"abs{i}"]),
                helper.make_node("ReduceSum", [f"abs{i}"], [f"sum_abs{i}"], keepdims=0),
                helper.make_node("Mul", [w, w], [f"sq{i}"]),
                helper.make_node("ReduceSum", [f"sq{i}"], [f"sum_sq{i}"], keepdims=0),
                helper.make_node("Mul", [f"sum_abs{i}", l1], [f"pl1_{i}"]),
                helper.make_node("Mul", [f"sum_sq{i}", l2], [f"pl2_{i}"]),
                helper.make_node("Add", [f"pl1_{i}", f"pl2_{i}"], [f"p{i}"]),
                helper.make_node("Sign", [w], [f"sign{i}"]),
                helper.make_node("Mul", [f"sign{i}", l1], [f"gl1_{i}"]),
                helper.make_node("Mul", [w, l2x2], [f"gl2_{i}"]),
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

    def _run(self, device, weights, gradients, names):
        args = [v for pair in zip(weights, gradients) for v in pair]
        return self._function(device, names)(*args)

    def penalty_loss(self, device, weights, names):
        """Return ``l1 * sum|W| + l2 * sum W**2`` over the penalized weights."""
        zeros = [np.zeros(w.shape(), dtype=np.float32) for w in weights]
        return float(self._run(device, weights, zeros, names)[0].numpy())

    def update_gradients(self, device, weights, gradients, names):
        """Return ``gradients`` plus ``l1 * sign(W) + 2 * l2 * W``, and the penalty.

        Returns
        -------
        tuple
            (list of OrtValue gradients, OrtValue holding the penalty).
        """
        outputs = self._run(device, weights, gradients, names)
        return outputs[1:], outputs[0]


#: Names accepted for ``learning_penalty``.
PENALTY_ALIASES = {
    None: NoLearningPenalty,
    "none": NoLearningPenalty,
    "NoLearningPenalty": NoLearningPenalty,
    "elastic": ElasticLearningPenalty,
    "ElasticLearningPenalty": ElasticLearningPenalty,
}


def make_learning_penalty(learning_penalty):
    """Return a penalty object from an instance, a name or None."""
    if isinstance(learning_penalty, NoLearningPenalty):
        return learning_penalty
    if (learning_penalty is None or isinstance(learning_penalty, str)) and (
        learning_penalty in PENALTY_ALIASES
    ):
        return PENALTY_ALIASES[learning_penalty]()
    raise ValueError(
        f"Unknown learning_penalty {learning_penalty!r}: use an ElasticLearningPenalty, "
        f"a NoLearningPenalty or one of {[k for k in PENALTY_ALIASES if k]}."
    )
