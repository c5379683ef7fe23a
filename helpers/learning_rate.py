"""Learning rates of the forward/backward API: schedule plus update rule.

Each object gives the learning rate of update ``t`` (scikit-learn's
formulas, :mod:`helpers.learning_rates`) and applies the update to weights
held as :class:`onnxruntime.OrtValue` on the training device, with one ONNX
graph (:class:`helpers.sgd_update.SGDUpdate`).
"""
from .learning_rates import check_schedule, learning_rate_at
from .sgd_update import SGDUpdate


class BaseLearningRate:
    """Schedule and update rule; subclasses set ``momentum`` and ``nesterov``."""

    momentum = 0.0
    nesterov = False

    def __init__(self, eta0, alpha, power_t, learning_rate):
        check_schedule(learning_rate, eta0, power_t, alpha)
        self.eta0, self.alpha, self.power_t = eta0, alpha, power_t
        self.learning_rate = learning_rate
        self._updater = None

    def __getstate__(self):
        state = dict(self.__dict__)
        if self._updater is not None:
            state["_velocities"] = self._updater.get_velocities()
        state["_updater"] = None
        return state

    def get_params(self, deep=True):
        """Constructor parameters, as scikit-learn's ``get_params``."""
        return {
            "eta0": self.eta0,
            "alpha": self.alpha,
            "power_t": self.power_t,
            "learning_rate": self.learning_rate,
        }

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def value(self, t):
        """Learning rate of update ``t`` (from 1)."""
        return learning_rate_at(self.learning_rate, self.eta0, t, self.power_t, self.alpha)

    def init_learning_rate(self, device, weights):
        """Start a new training: zero velocities for ``weights`` on ``device``."""
        self._updater = SGDUpdate(
            [w.shape() for w in weights], self.momentum, self.nesterov, device.type, device.index
        )
        saved = self.__dict__.pop("_velocities", None)
        if saved is not None and len(saved) == len(self._updater.velocities):
            self._updater.set_velocities(saved)

    def update_weights(self, weights, gradients, t):
        """Apply update ``t`` to ``weights`` (list of OrtValue), in place.

        Parameters
        ----------
        weights : list of OrtValue
            Overwritten with the updated weights: each OrtValue keeps its
            buffer (and an OrtValue made from a numpy array without a copy
            writes into that array).
        gradients : list of OrtValue
            Gradients of the loss, same order and shapes.
        t : int
            Update count, from 1.
        """
        if self._updater is None:
            raise RuntimeError("Call init_learning_rate(device, weights) first.")
        self._updater.update(weights, gradients, self.value(t))


class LearningRateSGD(BaseLearningRate):
    """Plain stochastic gradient descent, scikit-learn's ``SGDRegressor`` schedules.

    ``weight -= eta * gradient``, with ``eta`` from ``learning_rate``:
    ``'constant'`` (``eta0``), ``'invscaling'`` (``eta0 / t ** power_t``) or
    ``'optimal'`` (``1 / (alpha * (t0 + t - 1))``, ``t0`` chosen as
    scikit-learn does for the squared loss).

    Parameters
    ----------
    eta0 : float
    alpha : float
        Only used by ``'optimal'``.
    power_t : float
    learning_rate : {'invscaling', 'constant', 'optimal'}
    """

    def __init__(self, eta0=0.01, alpha=0.0001, power_t=0.25, learning_rate="invscaling"):
        super().__init__(eta0, alpha, power_t, learning_rate)


class LearningRateSGDNesterov(BaseLearningRate):
    """SGD with momentum, the update of scikit-learn's ``MLPRegressor(solver='sgd')``.

    ``v = momentum * v - eta * gradient``, then ``weight += v``, or with
    Nesterov's momentum ``weight += momentum * v - eta * gradient``.

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
        if not 0 < momentum < 1:
            raise ValueError(f"momentum must be in (0, 1), got {momentum!r}.")
        super().__init__(eta0, alpha, power_t, learning_rate)
        self.momentum, self.nesterov = momentum, nesterov

    def get_params(self, deep=True):
        return {**super().get_params(), "momentum": self.momentum, "nesterov": self.nesterov}


#: Names accepted for ``learning_rate``, with the class each one builds.
LEARNING_RATE_ALIASES = {
    "SGD": LearningRateSGD,
    "sgd": LearningRateSGD,
    "Nesterov": LearningRateSGDNesterov,
    "nesterov": LearningRateSGDNesterov,
    "SGDNesterov": LearningRateSGDNesterov,
    "LearningRateSGD": LearningRateSGD,
    "LearningRateSGDNesterov": LearningRateSGDNesterov,
}


def make_learning_rate(learning_rate):
    """Return a learning-rate object from an instance or a name."""
    if isinstance(learning_rate, BaseLearningRate):
        return learning_rate
    if isinstance(learning_rate, str) and learning_rate in LEARNING_RATE_ALIASES:
        return LEARNING_RATE_ALIASES[learning_rate]()
    raise ValueError(
        f"Unknown learning_rate {learning_rate!r}: use a LearningRateSGD, a "
        f"LearningRateSGDNesterov or one of {sorted(LEARNING_RATE_ALIASES)}."
    )
