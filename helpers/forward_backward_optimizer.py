"""Train an ONNX layer with the forward/backward API.

:class:`OrtGradientForwardBackwardOptimizer` runs the forward and backward
passes with :class:`helpers.OrtGradientForwardBackward`; the loss gradient,
the penalty and the update come from :mod:`helpers.learning_loss`,
:mod:`helpers.learning_penalty` and :mod:`helpers.learning_rate`, all run as
ONNX graphs on the training device.
"""
import numpy as np
import onnx
from sklearn.base import clone

from .base_optimizer import BaseOrtOptimizer, _static_dims
from .forward_backward import OrtGradientForwardBackward
from .learning_loss import BaseLearningLoss, make_learning_loss
from .learning_penalty import NoLearningPenalty, make_learning_penalty
from .learning_rate import BaseLearningRate, make_learning_rate
from .onnx_function import to_ortvalue
from .onnx_graph import check_weights_to_train


def _fresh(obj, factory, base):
    """A new instance: the objects hold per-training state (velocities...)."""
    return clone(obj) if isinstance(obj, base) else factory(obj)


class _Runtime:
    """Forward/backward function and the trained weights, on the device."""

    def __init__(self, model, names, weights, device, n_threads, fast_gradients):
        self.fb = OrtGradientForwardBackward(
            model, names, device=device, n_threads=n_threads, fast_gradients=fast_gradients
        )
        self.function = self.fb.new_instance()
        self.device = self.fb.device
        self.names = names
        self.weights = [to_ortvalue(weights[n].copy(), self.device) for n in names]


class OrtGradientForwardBackwardOptimizer(BaseOrtOptimizer):
    """Train an ONNX model (no loss inside) with explicit loss, penalty and update.

    Parameters
    ----------
    model_onnx : onnx.ModelProto
        The model to train, with one input (the features) and one output.
    weights_to_train : list of str, optional
        Float initializers to train; None means all of them.
    max_iter : int
        Number of epochs.
    batch_size : int
        Rows per minibatch; the last batch of an epoch may be smaller.
    learning_rate : str or BaseLearningRate
        ``'SGD'`` (:class:`LearningRateSGD`), ``'Nesterov'``
        (:class:`LearningRateSGDNesterov`) or an instance.
    device : str
        ``'cpu'``, ``'cuda'``, ``'cuda:N'`` or ``'auto'`` (a GPU when one
        really works, else the CPU). On a GPU the data is copied there once
        per ``fit``, the batches are gathered there and the weights stay there.
    warm_start : bool
        When True, ``fit`` continues from the current weights, velocities
        and shuffling.
    verbose : int
        Shows a progress bar with the epoch and the loss when > 0.
    validation_every : float or int
        Epochs between two validation losses: a value below 1 is a fraction
        of ``max_iter`` (0.1: every tenth of the training), a value from 1 on
        a number of epochs (1: every epoch); 0 never computes them.
    learning_loss : str or BaseLearningLoss
        ``'square_error'``, ``'absolute_error'``, ``'elastic'``, ``'log'`` or
        an instance (:class:`SquareLearningLoss`...).
    learning_penalty : None, str or NoLearningPenalty
        None, ``'elastic'`` or an :class:`ElasticLearningPenalty`.
    random_state : int, RandomState or None
        Seeds the shuffling of the minibatches.
    exc : bool
        When the loss becomes NaN or infinite: True raises
        :class:`helpers.TrainingDivergedError`; False warns, puts back the
        weights of the start of the epoch and stops.
    n_threads : int, optional
        Threads of onnxruntime's sessions (intra-op) for the model; None lets
        onnxruntime choose (one per core), or takes
        :func:`helpers.runtime.set_num_threads`. The loss, penalty and update
        graphs run on the calling thread: they are elementwise, and a second
        thread pool spinning beside the model's would slow it down.
    fast_gradients : bool
        Build the gradient graph with each ``Relu`` rewritten into an exact
        equivalent whose gradient runs faster, and the batch dimension named
        (:mod:`helpers.gradient_rewrites`): the gradient graph has fewer
        nodes and fuses ``MatMul`` with ``Add``, so the trained weights equal
        those without it up to float32 rounding (about 1e-7 relative); the
        exported model keeps its ``Relu``. False builds it from the graph as
        given.

    Attributes
    ----------
    train_losses_ : list of float
        Mean loss of each epoch, penalty included.
    validation_losses_ : list of float
        Loss on the validation set, without penalty, at ``validation_epochs_``.
    validation_epochs_ : list of int
    n_iter_ : int
        Number of epochs run.
    t_ : int
        Number of weight updates run.
    learning_rate_, learning_loss_, learning_penalty_ : objects
        The objects used by the last ``fit``.
    weights_to_train_ : list of str
    """

    def __init__(
        self,
        model_onnx,
        weights_to_train=None,
        max_iter=100,
        batch_size=10,
        learning_rate="SGD",
        device="cpu",
        warm_start=False,
        verbose=0,
        validation_every=0.1,
        learning_loss="square_error",
        learning_penalty=None,
        random_state=None,
        exc=True,
        n_threads=None,
        fast_gradients=True,
    ):
        self.model_onnx = model_onnx
        self.weights_to_train = weights_to_train
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.device = device
        self.warm_start = warm_start
        self.verbose = verbose
        self.validation_every = validation_every
        self.learning_loss = learning_loss
        self.learning_penalty = learning_penalty
        self.random_state = random_state
        self.exc = exc
        self.n_threads = n_threads
        self.fast_gradients = fast_gradients

    def _check_params(self):
        super()._check_params()
        if not isinstance(self.model_onnx, onnx.ModelProto):
            raise TypeError(
                f"model_onnx must be an onnx.ModelProto, got {type(self.model_onnx).__name__}."
            )
        outputs = [o.name for o in self.model_onnx.graph.output]
        if len(outputs) != 1:
            raise ValueError(
                f"The model has outputs {outputs}: this optimizer trains a model with "
                "one output. Convert a classifier to return its raw scores only."
            )
        self.weights_to_train_ = check_weights_to_train(self.model_onnx, self.weights_to_train)
        if not (self.warm_start and self._is_fitted()):
            self.learning_rate_ = _fresh(self.learning_rate, make_learning_rate, BaseLearningRate)
            self.learning_loss_ = _fresh(self.learning_loss, make_learning_loss, BaseLearningLoss)
            self.learning_penalty_ = _fresh(
                self.learning_penalty, make_learning_penalty, NoLearningPenalty
            )

    def _inference_model(self):
        return self.model_onnx

    def _label_shape(self):
        return _static_dims(self.model_onnx.graph.output[0])

    def _start_training(self, weights):
        self._runtime = _Runtime(
            self.model_onnx,
            self.weights_to_train_,
            weights,
            self.device_,
            self.n_threads,
            self.fast_gradients,
        )
        self.learning_rate_.init_learning_rate(self._runtime.device, self._runtime.weights)

    def _restore_extra_state(self):
        pass  # the learning rate object pickled its velocities itself

    def _train_step(self, batch, t):
        rt = self._runtime
        device = rt.device
        X, y, *weighted = batch.ortvalues()
        w = weighted[0] if weighted else None
        output = rt.function.forward([X, *rt.weights], training=True)[0]
        loss, grad = self.learning_loss_.loss_gradient(device, y, output, w)
        grads = rt.function.backward([grad])
        grads, penalty = self.learning_penalty_.update_gradients(device, rt.weights, grads, rt.names)
        self.learning_rate_.update_weights(rt.weights, grads, t)
        return loss, penalty

    def _loss_value(self, handle):
        loss, penalty = handle
        penalty = penalty if isinstance(penalty, float) else float(penalty.numpy())
        return float(loss.numpy()) + penalty

    def _predict_raw(self, X):
        rt = getattr(self, "_runtime", None)
        if rt is None:
            return None
        return rt.function.forward([X, *rt.weights])[0]

    def losses(self, X, y, sample_weight=None):
        """Return the loss of each sample (times its weight), without penalty.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        self._check_is_fitted()
        X, y, w = self._check_data(X, y, sample_weight)
        return self._scores(X, y, w)

    def _scores(self, X, y, w):
        pred = self._predict_raw(X)
        if pred is None:  # unpickled: predictions from the exported model
            pred = self.predict(X).reshape(y.shape).astype(np.float32)
            device = None
        else:
            device = self._runtime.device
        if device is None:
            from .devices import Device  # noqa: PLC0415

            device = Device("cpu")
        return self.learning_loss_.loss_scores(device, y, pred, w).numpy()

    def _loss(self, X, y, w):
        return float(self._scores(X, y, w).mean())

    def _get_weights(self):
        rt = self._runtime
        return {name: value.numpy().copy() for name, value in zip(rt.names, rt.weights)}

    def _set_weights(self, weights):
        rt = self._runtime
        for value, name in zip(rt.weights, rt.names):
            value.update_inplace(np.ascontiguousarray(weights[name], dtype=np.float32))
