"""The learning rate and the update rule's scalars of a step, computed in its graph.

A fit computes them in Python for update ``t`` (from 1):
:meth:`~helpers.core.updates.learning_rates.LearningRateSchedule.value` gives the learning rate,
:meth:`~helpers.core.updates.update_rules.BaseUpdateRule.step_scalars` the scalars of the rule
(AdamW's step size and bias correction), in double precision, and the update graph receives them
as float32. The step model computes the same formulas from its ``step`` input, in double
precision too, then casts them: the same float32 values, and a step model whose learning rate is
no input. Scalars that depend on neither the rate nor ``t`` (a momentum, AdamW's betas) are
constants; ``tests/test_portable_export_scalars.py`` checks both against the Python formulas.
"""

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

#: Prefix of the names this module writes.
SCALAR_PREFIX = "step_scalar__"


class _Scalars:
    """Nodes of double-precision scalar arithmetic."""

    def __init__(self):
        self.nodes = []

    def const(self, value, tag):
        name = f"{SCALAR_PREFIX}{tag}"
        tensor = numpy_helper.from_array(np.array(value, dtype=np.float64), name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=name, value=tensor))
        return name

    def op(self, op_type, inputs, tag, **attributes):
        name = f"{SCALAR_PREFIX}{tag}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        return name


def _learning_rate(s, schedule, t):
    """The schedule's rate of update ``t`` (a double), in the order of ``learning_rate_at``."""
    if schedule.learning_rate == "constant":
        return s.const(schedule.eta0, "lr")
    if schedule.learning_rate == "invscaling":
        power = s.op("Pow", [t, s.const(schedule.power_t, "power_t")], "t_power")
        return s.op("Div", [s.const(schedule.eta0, "eta0"), power], "lr")
    alpha = schedule.alpha
    t0 = 1.0 / (alpha * math.sqrt(1.0 / math.sqrt(alpha)))
    shifted = s.op("Sub", [s.op("Add", [s.const(t0, "t0"), t], "t0_t"), s.const(1.0, "one")], "n")
    scaled = s.op("Mul", [s.const(alpha, "alpha"), shifted], "alpha_n")
    return s.op("Div", [s.const(1.0, "numerator"), scaled], "lr")


def _one_minus(s, value, tag):
    return s.op("Sub", [s.const(1.0, f"{tag}_one"), value], tag)


def _power_of_t(s, base, t, tag):
    return s.op("Pow", [s.const(base, f"{tag}_base"), t], tag)


#: The scalars of the update rules that change with the rate or ``t``: name to a function
#: ``(nodes, rule, lr, t)`` of double-precision values, written as the rule's ``step_scalars``.
DYNAMIC_SCALARS = {
    "lr": lambda s, rule, lr, t: lr,
    "decay": lambda s, rule, lr, t: _one_minus(
        s, s.op("Mul", [lr, s.const(rule.weight_decay, "weight_decay")], "lr_wd"), "decay"
    ),
    "step_size": lambda s, rule, lr, t: s.op(
        "Div", [lr, _one_minus(s, _power_of_t(s, rule.betas[0], t, "beta1_t"), "bc1")], "step_size"
    ),
    "bias_correction2_sqrt": lambda s, rule, lr, t: s.op(
        "Sqrt", [_one_minus(s, _power_of_t(s, rule.betas[1], t, "beta2_t"), "bc2")], "bc2_sqrt"
    ),
}


def step_scalar_nodes(step, schedule, rule):
    """The nodes computing the scalars of ``rule`` for the update numbered by ``step``.

    Parameters
    ----------
    step : str
        An int64 scalar of the graph: the update count ``t``, from 1.
    schedule : helpers.core.updates.learning_rates.LearningRateSchedule
    rule : helpers.core.updates.update_rules.BaseUpdateRule

    Returns
    -------
    tuple
        ``(nodes, names)``: the nodes, and each scalar of ``rule.step_scalars`` to the float32
        value holding it.

    Raises
    ------
    NotImplementedError
        For a scalar that changes with the rate or ``t`` and has no formula here.

    Examples
    --------
    >>> from helpers.core.updates.learning_rates import LearningRateSchedule
    >>> from helpers.core.updates.update_rules import MomentumRule
    >>> schedule = LearningRateSchedule(0.1, learning_rate="invscaling", power_t=0.5)
    >>> nodes, names = step_scalar_nodes("step", schedule, MomentumRule(0.9))
    >>> sorted(names)
    ['lr', 'mu']
    """
    s = _Scalars()
    t = s.op("Cast", [step], "t", to=TensorProto.DOUBLE)
    lr = _learning_rate(s, schedule, t)
    first, other = rule.step_scalars(0.1, 1), rule.step_scalars(0.2, 7)
    names = {}
    for name, value in first.items():
        if name in DYNAMIC_SCALARS:
            double = DYNAMIC_SCALARS[name](s, rule, lr, t)
        elif value == other[name]:
            double = s.const(value, name)
        else:
            raise NotImplementedError(
                f"The update rule {rule.name!r} has a scalar {name!r} that changes from step to "
                "step and has no formula in helpers.core.export.step_scalars: add one."
            )
        names[name] = s.op("Cast", [double], f"{name}_float", to=TensorProto.FLOAT)
    return s.nodes, names
