"""Learning-rate schedules shared by the optimizers.

They follow scikit-learn's ``SGDRegressor`` (``t`` counts updates, from 1):

* ``'constant'``: ``eta = eta0``
* ``'invscaling'``: ``eta = eta0 / t ** power_t``
"""

SCHEDULES = ("constant", "invscaling")


def check_schedule(schedule, eta0, power_t):
    """Raise a clear error on a bad schedule, learning rate or exponent."""
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown learning-rate schedule {schedule!r}, expected one of {SCHEDULES}.")
    if not isinstance(eta0, (int, float)) or isinstance(eta0, bool) or not eta0 > 0:
        raise ValueError(f"The learning rate must be a float > 0, got {eta0!r}.")
    if schedule == "invscaling" and not power_t >= 0:
        raise ValueError(f"power_t must be >= 0, got {power_t!r}.")


def learning_rate_at(schedule, eta0, t, power_t=0.25):
    """Return the learning rate of update number ``t`` (starting at 1).

    Parameters
    ----------
    schedule : {'constant', 'invscaling'}
    eta0 : float
        Initial learning rate.
    t : int
        Update count, 1 for the first update.
    power_t : float
        Exponent of ``'invscaling'``.

    Returns
    -------
    float
    """
    if schedule == "constant":
        return eta0
    return eta0 / t**power_t
