"""Weight updates with torch's formulas, run as one ONNX graph on the device.

One registry, :data:`UPDATE_RULES`, names the update rules both optimizers
offer (their ``solver`` parameter). With ``g`` the gradient, ``lr`` the
learning rate of the step and ``t`` the update count (from 1):

* ``'sgd'``: ``w -= lr * g`` (``torch.optim.SGD``)
* ``'momentum'``: ``b = mu * b + g``, ``w -= lr * b``
  (``torch.optim.SGD(momentum=mu)``)
* ``'nesterov'``: ``b = mu * b + g``, ``w -= lr * (g + mu * b)``
  (``torch.optim.SGD(momentum=mu, nesterov=True)``)
* ``'adamw'``: ``w *= 1 - lr * wd``, ``m += (1 - b1) * (g - m)``,
  ``v = b2 * v + (1 - b2) * g**2``,
  ``w -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``
  (``torch.optim.AdamW``)

With a constant learning rate, ``'momentum'`` and ``'nesterov'`` are also
the updates of scikit-learn's ``MLPRegressor(solver='sgd')`` (its velocity
is ``-lr * b``); with a changing one, scikit-learn keeps each past step's
rate in its velocity and torch applies the current rate to the buffer.

Each rule is a short subclass of :class:`BaseUpdateRule` that writes its
nodes for one weight; :class:`~helpers.core.updates.weight_updater.WeightUpdater`
compiles them for a list of weights and updates them in place.
"""

import math

from onnx import helper

from ..inputs.validation import check_finite_number
from .configurable import Configurable


class BaseUpdateRule(Configurable):
    """An update rule: its per-weight state and the ONNX nodes of one step.

    Subclasses set :attr:`name` and :attr:`state_names` and write
    :meth:`nodes` (and :meth:`step_scalars` when a step needs more than
    the learning rate).

    Examples
    --------
    >>> sorted(UPDATE_RULES)
    ['adamw', 'momentum', 'nesterov', 'sgd']
    >>> [(name, rule.state_names) for name, rule in UPDATE_RULES.items()][1]
    ('momentum', ('momentum_buffer',))
    """

    #: The name in :data:`UPDATE_RULES` and the optimizers' ``solver``.
    name = None
    #: Buffers kept per weight, zeros at the start (torch's state names).
    state_names = ()

    def step_scalars(self, learning_rate, t):
        """The scalar inputs of step ``t`` (from 1), by name."""
        return {"lr": learning_rate}

    def nodes(self, w, g, states, outputs):
        """The nodes updating weight ``w`` with gradient ``g``.

        Parameters
        ----------
        w, g : str
            Names of the weight and its gradient.
        states : list of str
            Names of the weight's buffers (:attr:`state_names` order).
        outputs : list of str
            Names to write: the new weight, then each new buffer.
        """
        raise NotImplementedError


class SGDRule(BaseUpdateRule):
    """``w -= lr * g``.

    Examples
    --------
    >>> SGDRule().state_names
    ()
    """

    name = "sgd"

    def nodes(self, w, g, states, outputs):
        return [
            helper.make_node("Mul", ["lr", g], [f"lr_{g}"]),
            helper.make_node("Sub", [w, f"lr_{g}"], [outputs[0]]),
        ]


class MomentumRule(BaseUpdateRule):
    """``b = mu * b + g``, then ``w -= lr * b`` (or ``lr * (g + mu * b)``, Nesterov).

    Parameters
    ----------
    momentum : float
        ``mu``, in (0, 1).
    nesterov : bool

    Examples
    --------
    >>> MomentumRule(0.9).state_names
    ('momentum_buffer',)
    """

    name = "momentum"
    state_names = ("momentum_buffer",)

    def __init__(self, momentum=0.9, nesterov=False):
        if not 0 < momentum < 1:
            raise ValueError(f"momentum must be in (0, 1), got {momentum!r}.")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def get_params(self, deep=True):
        return {"momentum": self.momentum}

    def step_scalars(self, learning_rate, t):
        return {"lr": learning_rate, "mu": self.momentum}

    def nodes(self, w, g, states, outputs):
        (b,), (w_new, b_new) = states, outputs
        nodes = [
            helper.make_node("Mul", ["mu", b], [f"mu_{b}"]),
            helper.make_node("Add", [f"mu_{b}", g], [b_new]),
        ]
        direction = b_new
        if self.nesterov:
            nodes += [
                helper.make_node("Mul", ["mu", b_new], [f"mu_{b_new}"]),
                helper.make_node("Add", [g, f"mu_{b_new}"], [f"dir_{w}"]),
            ]
            direction = f"dir_{w}"
        return nodes + [
            helper.make_node("Mul", ["lr", direction], [f"step_{w}"]),
            helper.make_node("Sub", [w, f"step_{w}"], [w_new]),
        ]


class NesterovRule(MomentumRule):
    """Nesterov's momentum: ``b = mu * b + g``, ``w -= lr * (g + mu * b)``.

    Examples
    --------
    >>> NesterovRule(0.5).nesterov
    True
    """

    name = "nesterov"

    def __init__(self, momentum=0.9):
        super().__init__(momentum, nesterov=True)


class AdamWRule(BaseUpdateRule):
    """torch's AdamW: decoupled weight decay, bias-corrected moments.

    Parameters
    ----------
    betas : tuple of float
        Decay rates of the first and second moments.
    eps : float
        Added to the bias-corrected root of the second moment.
    weight_decay : float
        Decoupled weight decay: ``w *= 1 - lr * weight_decay`` first.

    Examples
    --------
    >>> AdamWRule().step_scalars(0.1, 1)["step_size"]  # lr / (1 - 0.9)
    1.0000000000000002
    """

    name = "adamw"
    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        beta1, beta2 = betas
        check_finite_number("eps", eps)
        check_finite_number("weight_decay", weight_decay)
        if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}.")
        if not eps > 0 or not weight_decay >= 0:
            raise ValueError(
                f"eps must be > 0 and weight_decay >= 0, got {eps!r}, {weight_decay!r}."
            )
        self.betas, self.eps, self.weight_decay = (
            (float(beta1), float(beta2)),
            float(eps),
            float(weight_decay),
        )

    def get_params(self, deep=True):
        return {"betas": self.betas, "eps": self.eps, "weight_decay": self.weight_decay}

    def step_scalars(self, learning_rate, t):
        beta1, beta2 = self.betas
        decay = {"decay": 1.0 - learning_rate * self.weight_decay} if self.weight_decay else {}
        return {
            **decay,
            "one_minus_beta1": 1.0 - beta1,
            "beta2": beta2,
            "one_minus_beta2": 1.0 - beta2,
            "step_size": learning_rate / (1.0 - beta1**t),
            "bias_correction2_sqrt": math.sqrt(1.0 - beta2**t),
            "eps": self.eps,
        }

    def nodes(self, w, g, states, outputs):
        (m, v), (w_new, m_new, v_new) = states, outputs
        decayed = w
        nodes = []
        if self.weight_decay:
            decayed = f"decayed_{w}"
            nodes.append(helper.make_node("Mul", [w, "decay"], [decayed]))
        return nodes + [
            # m.lerp_(g, 1 - beta1), as torch writes it
            helper.make_node("Sub", [g, m], [f"gm_{w}"]),
            helper.make_node("Mul", [f"gm_{w}", "one_minus_beta1"], [f"lerp_{w}"]),
            helper.make_node("Add", [m, f"lerp_{w}"], [m_new]),
            helper.make_node("Mul", [v, "beta2"], [f"b2v_{w}"]),
            helper.make_node("Mul", [g, g], [f"g2_{w}"]),
            helper.make_node("Mul", [f"g2_{w}", "one_minus_beta2"], [f"b2g2_{w}"]),
            helper.make_node("Add", [f"b2v_{w}", f"b2g2_{w}"], [v_new]),
            helper.make_node("Sqrt", [v_new], [f"sqrt_{w}"]),
            helper.make_node("Div", [f"sqrt_{w}", "bias_correction2_sqrt"], [f"corr_{w}"]),
            helper.make_node("Add", [f"corr_{w}", "eps"], [f"denom_{w}"]),
            helper.make_node("Div", [m_new, f"denom_{w}"], [f"ratio_{w}"]),
            helper.make_node("Mul", [f"ratio_{w}", "step_size"], [f"step_{w}"]),
            helper.make_node("Sub", [decayed, f"step_{w}"], [w_new]),
        ]


#: The update rules, by the name the optimizers' ``solver`` takes: ``'sgd'`` :class:`SGDRule`,
#: ``'momentum'`` :class:`MomentumRule`, ``'nesterov'`` :class:`NesterovRule`, ``'adamw'``
#: :class:`AdamWRule`.
UPDATE_RULES = {rule.name: rule for rule in (SGDRule, MomentumRule, NesterovRule, AdamWRule)}


def make_update_rule(solver, momentum=0.9, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Return the rule named ``solver`` with its hyper-parameters.

    Parameters
    ----------
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
    momentum : float
        Used by ``'momentum'`` and ``'nesterov'``.
    betas, eps, weight_decay
        Used by ``'adamw'``.

    Examples
    --------
    >>> make_update_rule("nesterov", momentum=0.5)
    NesterovRule(momentum=0.5)
    """
    if solver not in UPDATE_RULES:
        raise ValueError(f"Unknown solver {solver!r}, expected one of {list(UPDATE_RULES)}.")
    if solver in ("momentum", "nesterov"):
        return UPDATE_RULES[solver](momentum)
    if solver == "adamw":
        return AdamWRule(betas, eps, weight_decay)
    return SGDRule()
