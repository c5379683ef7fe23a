"""The error of a training that diverged, raised by every trainer of the project.

:class:`TrainingDivergedError` is what the optimizers' ``fit`` (a NaN or infinite loss, weight
or prediction) and :class:`~helpers.portable.trainer.PortableTrainer` (a NaN or infinite loss
of a step) raise; ``python -m helpers.portable fit`` exits with code 4 on it. Its message says
where the training diverged and what to change (a smaller learning rate, scaled features).
"""


class TrainingDivergedError(FloatingPointError):
    """The training diverged: a loss, a weight or a prediction became NaN or infinite.

    Examples
    --------
    >>> import math
    >>> loss = float("inf")
    >>> try:
    ...     if not math.isfinite(loss):
    ...         raise TrainingDivergedError(f"The loss is {loss}: try a smaller learning rate.")
    ... except FloatingPointError as error:  # a TrainingDivergedError is a FloatingPointError
    ...     print(type(error).__name__, error)
    TrainingDivergedError The loss is inf: try a smaller learning rate.
    """
