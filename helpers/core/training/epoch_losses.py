"""The losses of an epoch, read from the device a few dozen steps at a time.

Reading a loss waits for its step to finish; reading them together lets the
device run ahead. A NaN or infinite loss still stops training within
:data:`LOSSES_READ_TOGETHER` steps, and the error says where it happened.
"""

import math

from ...portable.divergence import TrainingDivergedError

#: Steps whose losses stay on the device before they are read together.
LOSSES_READ_TOGETHER = 64


class EpochLosses:
    """Collect the losses of an epoch's steps; read them in groups.

    Parameters
    ----------
    read : callable
        ``read(handle)`` turns what a training step returned (an OrtValue
        left on the device...) into a float.
    epoch : int
        The epoch's number, from 1, for the error message.

    Examples
    --------
    >>> losses = EpochLosses(float, epoch=1)
    >>> losses.add(2.0, 0, 10)   # a mean loss over rows 0:10
    >>> losses.add(1.0, 10, 15)
    >>> losses.total()           # 2 * 10 + 1 * 5
    25.0
    >>> losses = EpochLosses(float, epoch=3)
    >>> losses.add(float("nan"), 20, 30)
    >>> losses.total()  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    helpers.portable.divergence.TrainingDivergedError: The loss is nan at epoch 3, rows
    20:30 of the shuffled data: training diverged. Try a smaller learning rate, or scale the
    features (sklearn.preprocessing.StandardScaler).
    """

    def __init__(self, read, epoch):
        self.read, self.epoch = read, epoch
        self._pending, self._total = [], 0.0

    def add(self, handle, start, end):
        """Record the mean loss of rows ``start:end``; raise if a read loss is not finite."""
        self._pending.append((handle, start, end))
        if len(self._pending) == LOSSES_READ_TOGETHER:
            self._read()

    def _read(self):
        pending, self._pending = self._pending, []
        for handle, start, end in pending:
            loss = self.read(handle)
            if not math.isfinite(loss):
                raise TrainingDivergedError(
                    f"The loss is {loss} at epoch {self.epoch}, rows {start}:{end} of the shuffled "
                    "data: training diverged. Try a smaller learning rate, or scale the features "
                    "(sklearn.preprocessing.StandardScaler)."
                )
            self._total += loss * (end - start)

    def total(self):
        """The sum over the epoch of each step's mean loss times its rows."""
        self._read()
        return self._total
