"""A working linear warm-up and decay for onnxruntime-training 1.19.2.

``onnxruntime.training.api.LinearLRScheduler(optimizer, warmup_step_count,
total_step_count, initial_lr)`` reads its two counts the other way round in
1.19.2: asked for 2 warm-up steps out of 10, it warms up for 10 steps and
never decays. :func:`linear_lr_scheduler` passes them in the order the
runtime really reads, and :func:`linear_learning_rate` gives the intended
schedule to check it against.
"""

from onnxruntime.training.api import LinearLRScheduler


def linear_learning_rate(step, warmup_step_count, total_step_count, initial_lr):
    """The learning rate a linear warm-up then linear decay gives at ``step``.

    It grows from 0 to ``initial_lr`` during the first ``warmup_step_count``
    optimizer steps, then decreases linearly to 0 at ``total_step_count``.

    Parameters
    ----------
    step : int
        Optimizer steps done so far.
    warmup_step_count, total_step_count : int
    initial_lr : float

    Returns
    -------
    float

    Examples
    --------
    >>> [round(linear_learning_rate(step, 2, 6, 0.1), 4) for step in range(7)]
    [0.0, 0.05, 0.1, 0.075, 0.05, 0.025, 0.0]
    """
    if step < warmup_step_count:
        return initial_lr * step / warmup_step_count
    remaining = max(0, total_step_count - step)
    return initial_lr * remaining / max(1, total_step_count - warmup_step_count)


def linear_lr_scheduler(optimizer, warmup_step_count, total_step_count, initial_lr):
    """Return a ``LinearLRScheduler`` that does what its arguments say.

    Parameters
    ----------
    optimizer : onnxruntime.training.api.Optimizer
    warmup_step_count : int
        Steps of the warm-up, from 0 to ``initial_lr``.
    total_step_count : int
        Step at which the learning rate reaches 0.
    initial_lr : float

    Returns
    -------
    onnxruntime.training.api.LinearLRScheduler
        Call its ``step()`` after each ``optimizer.step()``.

    Examples
    --------
    >>> import tempfile
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> from helpers.whole_training.artifacts import (
    ...     generate_training_artifacts,
    ...     load_training_artifacts,
    ... )
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     generate_training_artifacts(
    ...         add_loss_output(mlp_onnx(3, hidden=(4,))), ["intercept1"], folder
    ...     )
    ...     state, module, optimizer = load_training_artifacts(folder)

    The learning rate after each step follows :func:`linear_learning_rate`:

    >>> scheduler = linear_lr_scheduler(optimizer, 2, 6, 0.1)
    >>> rates = []
    >>> for _ in range(6):
    ...     optimizer.step()
    ...     scheduler.step()
    ...     rates.append(round(optimizer.get_learning_rate(), 4))
    >>> rates
    [0.05, 0.1, 0.075, 0.05, 0.025, 0.0]
    """
    if not 0 <= warmup_step_count <= total_step_count:
        raise ValueError(
            f"Expected 0 <= warmup_step_count <= total_step_count, got "
            f"{warmup_step_count} and {total_step_count}."
        )
    # 1.19.2 swaps the two counts: give them swapped so that they come out right.
    return LinearLRScheduler(optimizer, total_step_count, warmup_step_count, initial_lr)
