"""Learning rates: scikit-learn's schedules, and the learning-rate objects of the forward/backward
API.

A schedule gives the learning rate of update ``t`` (from 1), with the names
and formulas of scikit-learn's ``SGDRegressor``:

* ``'constant'``: ``eta = eta0``
* ``'invscaling'``: ``eta = eta0 / t ** power_t``
* ``'optimal'``: ``eta = 1 / (alpha * (t0 + t - 1))`` where
  ``t0 = 1 / (alpha * sqrt(1 / sqrt(alpha)))``, scikit-learn's choice for
  the squared loss, so that the first rate is ``sqrt(1 / sqrt(alpha))``.

Both optimizers take ``learning_rate`` as a float (``eta0``, with
``learning_rate_schedule``, ``power_t``, ``alpha`` and the update rule of
``solver``) or as one of the learning-rate objects, :class:`LearningRateSGD` and
:class:`LearningRateSGDNesterov`, which carry a schedule and an update rule
together. :func:`resolve_learning_rate` turns either form into a schedule
and an update rule (:mod:`helpers.core.updates.update_rules`), the one place where
they are checked.
"""

import math
import numbers

from ..inputs.validation import check_finite_number
from .configurable import Configurable
from .update_rules import MomentumRule, NesterovRule, SGDRule, make_update_rule
from .weight_updater import WeightUpdater

#: The schedule names, scikit-learn's.
SCHEDULES = ("constant", "invscaling", "optimal")


def check_schedule(schedule, eta0, power_t, alpha=None):
    """Raise a clear error on a bad schedule, learning rate, exponent or alpha.

    Examples
    --------
    >>> check_schedule("invscaling", 0.01, 0.25)
    >>> check_schedule("adaptive", 0.01, 0.25)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: Unknown learning-rate schedule 'adaptive', expected one of ('constant',
    'invscaling', 'optimal').
    """
    if schedule not in SCHEDULES:
        raise ValueError(
            f"Unknown learning-rate schedule {schedule!r}, expected one of {SCHEDULES}."
        )
    for name, value in (("eta0", eta0), ("power_t", power_t), ("alpha", alpha)):
        if isinstance(value, numbers.Real):  # other types are refused below
            check_finite_number(name, value)
    if not isinstance(eta0, numbers.Real) or isinstance(eta0, bool) or not eta0 > 0:
        raise ValueError(f"The learning rate must be a float > 0, got {eta0!r}.")
    if schedule == "invscaling" and not power_t >= 0:
        raise ValueError(f"power_t must be >= 0, got {power_t!r}.")
    if schedule == "optimal" and not (alpha is not None and alpha > 0):
        raise ValueError(f"The 'optimal' schedule needs alpha > 0, got {alpha!r}.")


def learning_rate_at(schedule, eta0, t, power_t=0.25, alpha=None):
    """Return the learning rate of update number ``t`` (starting at 1).

    Parameters
    ----------
    schedule : {'constant', 'invscaling', 'optimal'}
    eta0 : float
        Initial learning rate (unused by ``'optimal'``).
    t : int
        Update count, 1 for the first update.
    power_t : float
        Exponent of ``'invscaling'``.
    alpha : float
        Regularization strength that ``'optimal'`` derives its rate from.

    Returns
    -------
    float

    Examples
    --------
    >>> learning_rate_at("invscaling", 0.1, t=16, power_t=0.5)
    0.025
    """
    if schedule == "constant":
        return eta0
    if schedule == "invscaling":
        return eta0 / t**power_t
    t0 = 1.0 / (alpha * math.sqrt(1.0 / math.sqrt(alpha)))
    return 1.0 / (alpha * (t0 + t - 1))


class LearningRateSchedule(Configurable):
    """The learning rate of each update: one of :data:`SCHEDULES`.

    Parameters
    ----------
    eta0 : float
        Initial learning rate.
    alpha : float
        Only used by ``'optimal'``.
    power_t : float
        Exponent of ``'invscaling'``.
    learning_rate : {'constant', 'invscaling', 'optimal'}
        The schedule (this parameter's name in onnxcustom's objects).

    Examples
    --------
    >>> LearningRateSchedule(0.1, learning_rate="invscaling", power_t=0.5).value(4)
    0.05
    """

    def __init__(self, eta0=0.01, alpha=0.0001, power_t=0.25, learning_rate="constant"):
        check_schedule(learning_rate, eta0, power_t, alpha)
        self.eta0, self.alpha, self.power_t = eta0, alpha, power_t
        self.learning_rate = learning_rate

    def get_params(self, deep=True):
        """Constructor parameters, as scikit-learn's ``get_params``."""
        return {
            "eta0": self.eta0,
            "alpha": self.alpha,
            "power_t": self.power_t,
            "learning_rate": self.learning_rate,
        }

    def value(self, t):
        """Learning rate of update ``t`` (from 1)."""
        return learning_rate_at(self.learning_rate, self.eta0, t, self.power_t, self.alpha)


class BaseLearningRate(LearningRateSchedule):
    """A schedule and an update rule in one object (onnxcustom's form of a learning rate).

    Subclasses say which update rule they run (:meth:`update_rule`). The
    object can also update weights itself, for a training loop written by
    hand: :meth:`init_learning_rate`, then :meth:`update_weights` per step.

    Examples
    --------
    >>> [issubclass(cls, BaseLearningRate) for cls in (LearningRateSGD, LearningRateSGDNesterov)]
    [True, True]
    >>> LearningRateSGDNesterov(eta0=0.1, momentum=0.5).update_rule()
    NesterovRule(momentum=0.5)
    """

    def __init__(self, eta0, alpha, power_t, learning_rate):
        super().__init__(eta0, alpha, power_t, learning_rate)
        self._updater = None

    def __getstate__(self):
        state = dict(self.__dict__)
        if self._updater is not None:
            state["_saved_state"] = self._updater.get_state()
        state["_updater"] = None
        return state

    def update_rule(self):
        """The :class:`~helpers.core.updates.update_rules.BaseUpdateRule` of this object."""
        raise NotImplementedError

    def init_learning_rate(self, device, weights):
        """Start a hand-written training: zero buffers for ``weights`` (OrtValues) on ``device``."""
        self._updater = WeightUpdater(self.update_rule(), [w.shape() for w in weights], device)
        saved = self.__dict__.pop("_saved_state", None)
        if saved is not None and len(saved) == len(self._updater.states):
            self._updater.set_state(saved)

    def update_weights(self, weights, gradients, t):
        """Apply update ``t`` (from 1) to ``weights`` (OrtValues), in place.

        Parameters
        ----------
        weights : list of OrtValue
            Overwritten with the updated weights.
        gradients : list of OrtValue
            Gradients of the loss, same order and shapes.
        t : int
            Update count, from 1.
        """
        if self._updater is None:
            raise RuntimeError("Call init_learning_rate(device, weights) first.")
        self._updater.update(weights, gradients, self.value(t), t)


class LearningRateSGD(BaseLearningRate):
    """Plain stochastic gradient descent with scikit-learn's ``SGDRegressor`` schedules.

    ``weight -= eta * gradient``, with ``eta`` from ``learning_rate``.

    Parameters
    ----------
    eta0 : float
    alpha : float
        Only used by ``'optimal'``.
    power_t : float
    learning_rate : {'invscaling', 'constant', 'optimal'}

    Examples
    --------
    >>> rate = LearningRateSGD(eta0=0.1, learning_rate="invscaling", power_t=0.5)
    >>> rate.value(4), rate.update_rule()
    (0.05, SGDRule())
    """

    def __init__(self, eta0=0.01, alpha=0.0001, power_t=0.25, learning_rate="invscaling"):
        super().__init__(eta0, alpha, power_t, learning_rate)

    def update_rule(self):
        return SGDRule()


class LearningRateSGDNesterov(BaseLearningRate):
    """SGD with momentum, Nesterov's by default, torch's formulas.

    ``b = momentum * b + gradient``, then ``weight -= eta * b``, or with
    Nesterov's momentum ``weight -= eta * (gradient + momentum * b)``; with
    a constant rate these are the updates of scikit-learn's
    ``MLPRegressor(solver='sgd')``.

    Parameters
    ----------
    eta0 : float
    alpha : float
        Only used by ``'optimal'``.
    power_t : float
    learning_rate : {'constant', 'invscaling', 'optimal'}
    momentum : float
        In (0, 1).
    nesterov : bool

    Examples
    --------
    >>> LearningRateSGDNesterov(eta0=0.01, momentum=0.5).update_rule()
    NesterovRule(momentum=0.5)
    """

    def __init__(
        self,
        eta0=0.001,
        alpha=0.0001,
        power_t=0.25,
        learning_rate="constant",
        momentum=0.9,
        nesterov=True,
    ):
        super().__init__(eta0, alpha, power_t, learning_rate)
        self.momentum, self.nesterov = momentum, nesterov
        self.update_rule()  # checks momentum

    def get_params(self, deep=True):
        return {**super().get_params(), "momentum": self.momentum, "nesterov": self.nesterov}

    def update_rule(self):
        return NesterovRule(self.momentum) if self.nesterov else MomentumRule(self.momentum)


#: Names accepted for ``learning_rate``: ``'SGD'``/``'sgd'``/``'LearningRateSGD'`` build a
#: :class:`LearningRateSGD`;
#: ``'Nesterov'``/``'nesterov'``/``'SGDNesterov'``/``'LearningRateSGDNesterov'`` a
#: :class:`LearningRateSGDNesterov`.
LEARNING_RATE_ALIASES = {
    "SGD": LearningRateSGD,
    "sgd": LearningRateSGD,
    "Nesterov": LearningRateSGDNesterov,
    "nesterov": LearningRateSGDNesterov,
    "SGDNesterov": LearningRateSGDNesterov,
    "LearningRateSGD": LearningRateSGD,
    "LearningRateSGDNesterov": LearningRateSGDNesterov,
}


def resolve_learning_rate(
    learning_rate,
    learning_rate_schedule="constant",
    power_t=0.25,
    alpha=0.0001,
    solver="sgd",
    momentum=0.9,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.0,
):
    """Check the learning-rate parameters of an optimizer; return its schedule and update rule.

    Parameters
    ----------
    learning_rate : float, str or BaseLearningRate
        A float is ``eta0`` of ``learning_rate_schedule``, updated by
        ``solver``. An object (or a name of :data:`LEARNING_RATE_ALIASES`)
        brings its own schedule and rule; the other parameters must then be
        left at their defaults or agree with it (none is ignored silently).
    learning_rate_schedule, power_t, alpha
        The schedule of a float ``learning_rate`` (:data:`SCHEDULES`).
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The update rule of a float ``learning_rate``.
    momentum, betas, eps, weight_decay
        The rule's hyper-parameters.

    Returns
    -------
    tuple
        ``(schedule, rule)``: a :class:`LearningRateSchedule` (a fresh copy
        of the object given, if one was; its :meth:`~LearningRateSchedule.value`
        gives each step's rate) and a
        :class:`~helpers.core.updates.update_rules.BaseUpdateRule`.

    Examples
    --------
    >>> schedule, rule = resolve_learning_rate(0.01, solver="momentum", momentum=0.5)
    >>> schedule.value(10), rule
    (0.01, MomentumRule(momentum=0.5))
    >>> resolve_learning_rate("Nesterov")[1]
    NesterovRule(momentum=0.9)
    """
    rule = make_update_rule(solver, momentum, betas, eps, weight_decay)
    if isinstance(learning_rate, str):
        if learning_rate not in LEARNING_RATE_ALIASES:
            raise ValueError(
                f"Unknown learning_rate {learning_rate!r}: use a float, a LearningRateSGD, "
                f"a LearningRateSGDNesterov or one of {sorted(LEARNING_RATE_ALIASES)}."
            )
        learning_rate = LEARNING_RATE_ALIASES[learning_rate]()
    if isinstance(learning_rate, BaseLearningRate):
        own = learning_rate.update_rule()
        # each parameter left at its default, or saying what the object says: nothing is ignored
        # silently
        given = {
            "solver": (solver, "sgd", own.name),
            "learning_rate_schedule": (
                learning_rate_schedule,
                "constant",
                learning_rate.learning_rate,
            ),
            "power_t": (power_t, 0.25, learning_rate.power_t),
            "alpha": (alpha, 0.0001, learning_rate.alpha),
            "momentum": (momentum, 0.9, own.get_params().get("momentum")),
            "betas": (tuple(betas), (0.9, 0.999), None),
            "eps": (eps, 1e-8, None),
            "weight_decay": (weight_decay, 0.0, None),
        }
        contradicting = [
            f"{k}={v!r}" for k, (v, default, theirs) in given.items() if v not in (default, theirs)
        ]
        if contradicting:
            raise ValueError(
                f"learning_rate={learning_rate!r} brings its own schedule and update rule "
                f"({learning_rate.learning_rate!r}, {own!r}); {', '.join(contradicting)} "
                "contradict it. Give a float learning_rate with these parameters, or the object "
                "alone."
            )
        return learning_rate.fresh_copy(), own
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real):
        raise TypeError(
            "learning_rate must be a float or a learning-rate object (LearningRateSGD...), got "
            f"{learning_rate!r}."
        )
    return LearningRateSchedule(learning_rate, alpha, power_t, learning_rate_schedule), rule
