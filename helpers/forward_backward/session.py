"""The objects of one fit of the forward/backward API."""

import numpy as np

from ..core.graphs.onnx_function import to_ortvalue
from ..core.updates.weight_updater import WeightUpdater
from .function import OrtGradientForwardBackward


class ForwardBackwardSession:
    """The forward/backward function, the weights on the device, and their update.

    The running statistics of batch normalization layers, in
    :attr:`statistics`, are updated after each step
    (:mod:`helpers.core.layers.batch_norm`).

    :class:`helpers.OrtGradientForwardBackwardOptimizer` builds one per fit;
    :meth:`train_step` is one step: forward, loss gradient, backward,
    penalty, update, every tensor staying on the training device.

    Parameters
    ----------
    model : onnx.ModelProto
        The model to train (no loss inside).
    weights : dict
        Name to initial value of each weight to train.
    rule : helpers.core.updates.update_rules.BaseUpdateRule
    device : helpers.core.machine.devices.Device
    n_threads : int, optional
        Threads of the model's sessions.
    fast_gradients : bool
        See :class:`helpers.OrtGradientForwardBackward`.
    random_draws : bool
        See :class:`helpers.OrtGradientForwardBackward`.
    backend : {"auto", "onnxruntime-training", "onnx"}
        See :class:`helpers.OrtGradientForwardBackward`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import SquareLearningLoss, NoLearningPenalty, get_train_initializer
    >>> from helpers.core.machine.devices import Device
    >>> from helpers.core.updates.update_rules import SGDRule
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx = mlp_onnx(3, hidden=(4,))
    >>> session = ForwardBackwardSession(onx, get_train_initializer(onx), SGDRule(), Device("cpu"))
    >>> X, y = np.ones((8, 3), dtype=np.float32), np.zeros((8, 1), dtype=np.float32)
    >>> loss, penalty = session.train_step(
    ...     X, y, None, SquareLearningLoss(), NoLearningPenalty(), 0.01, t=1
    ... )
    >>> float(loss.numpy()) >= 0, penalty
    (True, 0.0)
    """

    def __init__(
        self,
        model,
        weights,
        rule,
        device,
        n_threads=None,
        fast_gradients=True,
        random_draws=False,
        backend="auto",
    ):
        self.names = list(weights)
        self.fb = OrtGradientForwardBackward(
            model,
            self.names,
            device=device,
            n_threads=n_threads,
            fast_gradients=fast_gradients,
            random_draws=random_draws,
            backend=backend,
        )
        self.function = self.fb.new_instance()
        self.device = self.fb.device
        self.weights = [
            to_ortvalue(np.array(weights[n], dtype=np.float32), self.device) for n in self.names
        ]
        self.updater = WeightUpdater(rule, [w.shape() for w in self.weights], self.device)
        self.statistics = self.fb.statistics.copy()  # the function may be shared by other fits

    def get_weights(self):
        """The trained weights, name to a float32 array (a copy)."""
        return {name: value.numpy().copy() for name, value in zip(self.names, self.weights)}

    def set_weights(self, weights):
        """Overwrite the weights, in their buffers, from ``weights`` (name to array)."""
        for value, name in zip(self.weights, self.names):
            value.update_inplace(np.ascontiguousarray(weights[name], dtype=np.float32))

    def predict(self, X):
        """The model's output for ``X`` with the current weights and running statistics (an
        OrtValue)."""
        statistics = [self.statistics.values[name] for name in self.statistics.names]
        return self.function.forward([X, *self.weights, *statistics])[0]

    def train_step(self, X, y, w, loss, penalty, learning_rate, t, generator=None):
        """Run training step ``t`` (from 1) on a batch.

        Parameters
        ----------
        X, y : OrtValue or numpy.ndarray
            Features and labels of the batch.
        w : OrtValue, numpy.ndarray or None
            Per-sample weights.
        loss : helpers.forward_backward.base_loss.BaseLearningLoss
        penalty : helpers.core.updates.penalties.BaseLearningPenalty
        learning_rate : float
        t : int
        generator : numpy.random.Generator, optional
            Draws the random inputs of a function built with ``random_draws``.

        Returns
        -------
        tuple
            The batch's mean loss (an OrtValue left on the device) and its
            penalty (an OrtValue, or 0.0 without one).
        """
        output, *batch_statistics = self.function.forward(
            [X, *self.weights], training=True, generator=generator
        )
        if batch_statistics:
            self.statistics.update([value.numpy() for value in batch_statistics])
        value, gradient = loss.loss_gradient(self.device, y, output, w)
        gradients = self.function.backward([gradient])
        gradients, penalty_value = penalty.update_gradients(
            self.device, self.weights, gradients, self.names
        )
        self.updater.update(self.weights, gradients, learning_rate, t)
        return value, penalty_value
