"""Learning-rate schedules shared by the optimizers.

They follow scikit-learn's ``SGDRegressor`` (``t`` counts updates, from 1):

* ``'constant'``: ``eta = eta0``
* ``'invscaling'``: ``eta = eta0 / t ** power_t``
* ``'optimal'``: ``eta = 1 / (alpha * (t0 + t - 1))`` where
  ``t0 = 1 / (alpha * sqrt(1 / sqrt(alpha)))``, scikit-learn's choice for the
  squared loss, so that the first rate is ``sqrt(1 / sqrt(alpha))``.
"""
import math
import numbers

SCHEDULES = ("constant", "invscaling", "optimal")


def check_schedule(schedule, eta0, power_t, alpha=None):
    """Raise a clear error on a bad schedule, learning rate, exponent or alpha."""
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown learning-rate schedule {schedule!r}, expected one of {SCHEDULES}.")
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
    """
    if schedule == "constant":
        return eta0
    if schedule == "invscaling":
        return eta0 / t**power_t
    t0 = 1.0 / (alpha * math.sqrt(1.0 / math.sqrt(alpha)))
    return 1.0 / (alpha * (t0 + t - 1))
