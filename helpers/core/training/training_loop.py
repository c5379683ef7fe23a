"""What keeps a training consistent when it stops early: interrupts, divergence, the end of an
epoch.

* :class:`deferred_interrupt`: Ctrl-C (or a Jupyter kernel interrupt) during
  a fit takes effect between two training steps, never inside one, so that
  the estimator knows exactly which steps were done.
* :class:`TrainingState`: the one snapshot of a training session (weights,
  running statistics, the update rule's buffers) and its restore, which an
  epoch's start, a pickle and AdamW's restart after a divergence share.
* :class:`EpochStart`: what an epoch starts from (a :class:`TrainingState`,
  the update counter, the shuffling and draws generators), put back when it diverges.
* :func:`check_finite_state`: the weights after the last update of an
  epoch, which no loss has seen yet, are checked too.
* :func:`check_finite_outputs`: the outputs of the model a fit ends with, on
  the last batch it trained on (finite weights can still overflow them).
"""

import signal
import threading
from typing import NamedTuple

import numpy as np

from ...portable.divergence import TrainingDivergedError


class deferred_interrupt:  # noqa: N801 - used as a context manager, named like one
    """Defer SIGINT to the next :meth:`check` while the block runs (main thread only).

    Outside the main thread, or when another handler than Python's default
    one is installed, nothing changes: signals only reach the main thread,
    and someone else's handler is left alone.

    Examples
    --------
    >>> import os, signal
    >>> with deferred_interrupt() as interrupt:
    ...     os.kill(os.getpid(), signal.SIGINT)   # arrives in the middle of a step
    ...     pending = interrupt.requested          # the step goes on
    ...     try:
    ...         interrupt.check()                  # and stops here, between two steps
    ...     except KeyboardInterrupt:
    ...         stopped = True
    >>> pending, stopped
    (True, True)
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def _record(self, signum, frame):
        self.requested = True

    def __enter__(self):
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._record)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self.requested and exc[0] is None:
            raise KeyboardInterrupt
        return False

    def check(self):
        """Raise ``KeyboardInterrupt`` if one arrived since the block began."""
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt


class TrainingState(NamedTuple):
    """What a training session holds that an estimator puts back: a snapshot and its restore.

    One snapshot for the three times a training state is put back: the start
    of an epoch that diverged (:class:`EpochStart`), an unpickled estimator
    (its pickle keeps one, ``_saved_state``), and the whole-training AdamW's
    restart after a divergence. The last restores it into a new session:
    onnxruntime's AdamW moments are no part of it (they cannot be set but by
    a checkpoint), so they restart from zero.

    Parameters
    ----------
    weights : dict
        Weight name to array.
    statistics : dict
        :meth:`helpers.core.layers.running_statistics.RunningStatistics.get`.
    update_state : list or None
        The update rule's buffers (forward/backward API), None without one.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.ones((8, 3), dtype=np.float32)
    >>> opt = OrtGradientForwardBackwardOptimizer(mlp_onnx(3, hidden=(4,)), max_iter=1)
    >>> state = TrainingState.of(opt.fit(X, X[:, 0])._runtime)
    >>> opt._runtime.set_weights({name: w + 1 for name, w in state.weights.items()})
    >>> state.restore(opt._runtime)
    >>> all((opt.get_state()[name] == w).all() for name, w in state.weights.items())
    True
    """

    weights: dict
    statistics: dict
    update_state: list = None

    @classmethod
    def of(cls, runtime):
        """A copy of the state of the training session ``runtime``."""
        updater = runtime.updater
        return cls(
            runtime.get_weights(),
            runtime.statistics.get(),
            None if updater is None else updater.get_state(),
        )

    def restore(self, runtime):
        """Put the weights, running statistics and update buffers back into ``runtime``."""
        runtime.set_weights(self.weights)
        runtime.statistics.set(self.statistics)
        if self.update_state is not None and runtime.updater is not None:
            runtime.updater.set_state(self.update_state)


class EpochStart:
    """The state an epoch starts from, to put back if it diverges.

    Parameters
    ----------
    optimizer : helpers.core.training.estimator.BaseOrtOptimizer
        During ``fit``: its training session (``_runtime``), ``t_``,
        ``_rng`` and ``_draws`` (None without random draws).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.ones((8, 3), dtype=np.float32)
    >>> opt = OrtGradientForwardBackwardOptimizer(
    ...     mlp_onnx(3, hidden=(4,)), max_iter=1, batch_size=4
    ... ).fit(X, X[:, 0])
    >>> start = EpochStart(opt)
    >>> opt.t_ = 99
    >>> start.restore(opt)
    >>> opt.t_
    2
    """

    def __init__(self, optimizer):
        self.training = TrainingState.of(optimizer._runtime)
        self.t = optimizer.t_
        self.rng = optimizer._rng.get_state()
        draws = getattr(optimizer, "_draws", None)
        self.draws = None if draws is None else draws.bit_generator.state
        self.partial_epoch = getattr(optimizer, "_partial_epoch", None)

    def restore(self, optimizer):
        """Put the weights, statistics, update buffers, counter, generator and interrupted epoch
        back."""
        self.training.restore(optimizer._runtime)
        optimizer.t_ = self.t
        optimizer._rng.set_state(self.rng)
        if self.draws is not None:
            optimizer._draws.bit_generator.state = self.draws
        optimizer._partial_epoch = self.partial_epoch


def check_finite_state(weights, statistics, epoch):
    """Raise :class:`TrainingDivergedError` when a weight or a running statistic is not finite.

    The loss of a step is computed before its update: the update of the
    last step of an epoch (of a fit with one step, say) is seen by no loss.

    Examples
    --------
    >>> import numpy as np
    >>> state = {"w": np.array([1.0, np.inf])}
    >>> check_finite_state(state, {}, epoch=1)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    helpers.portable.divergence.TrainingDivergedError: The updates of epoch 1 left
    non-finite values in 'w': training diverged. Try a smaller learning rate, or scale the features
    (sklearn.preprocessing.StandardScaler).
    """
    for name, value in {**weights, **statistics}.items():
        if not np.isfinite(value).all():
            raise TrainingDivergedError(
                f"The updates of epoch {epoch} left non-finite values in {name!r}: training "
                "diverged. Try a smaller learning rate, or scale the features "
                "(sklearn.preprocessing.StandardScaler)."
            )


def check_finite_outputs(loss, outputs, rows, epoch):
    """Raise :class:`TrainingDivergedError` when a trained model's outputs or loss are not finite.

    Finite weights can still give infinite outputs (weights of 1e17 times
    features of 1e9 overflow float32): the model a fit ends with is run once
    on the last batch it trained on.

    Parameters
    ----------
    loss : float
        The model's loss on that batch.
    outputs : numpy.ndarray
        Its predictions for that batch.
    rows : tuple of int
        The batch: rows ``start:end`` of the shuffled data.
    epoch : int
        The epoch that trained it (from 1).

    Examples
    --------
    >>> import numpy as np
    >>> try:
    ...     check_finite_outputs(3.0, np.array([1.0, -np.inf]), (8, 16), epoch=1)
    ... except TrainingDivergedError as error:
    ...     print(str(error).split(",")[0])
    The model trained by epoch 1 gives non-finite outputs on rows 8:16 of the shuffled data
    """
    if not np.isfinite(outputs).all():
        what = "outputs", "its outputs overflow"
    elif not np.isfinite(loss):
        what = "loss", "its loss overflows"
    else:
        return
    raise TrainingDivergedError(
        f"The model trained by epoch {epoch} gives non-finite {what[0]} on rows "
        f"{rows[0]}:{rows[1]} of the shuffled data, the last batch it trained on (its weights are "
        f"finite, {what[1]} float32): training diverged. Try a smaller learning rate, or scale the "
        "features (sklearn.preprocessing.StandardScaler)."
    )
