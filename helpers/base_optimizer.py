"""The training loop shared by both optimizers.

:class:`BaseOrtOptimizer` owns what does not depend on the training API:
input checks, shuffled minibatches (one permutation per epoch), the
progress bar, the divergence check, validation losses, warm starts and
pickling. Subclasses build the runtime objects and run one training step.
"""
import math
import numbers
import warnings

import numpy as np
import onnxruntime
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from tqdm.auto import tqdm

from .device_data import Batches
from .devices import resolve_device
from .runtime import check_model_ir_version, check_n_threads, check_onnx_compatible, session_options
from .validation import check_features, check_positive_int, check_sample_weight, check_targets


#: Steps whose losses stay on the device before they are read together: a
#: divergence is caught within that many steps.
_LOSSES_READ_TOGETHER = 64


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite during training."""


def _static_dims(value_info):
    return [
        d.dim_value if d.HasField("dim_value") else None
        for d in value_info.type.tensor_type.shape.dim
    ]


class BaseOrtOptimizer(BaseEstimator):
    """Training loop shared by the optimizers of this package.

    Subclasses set the constructor parameters ``model_onnx``,
    ``weights_to_train``, ``max_iter``, ``batch_size``, ``device``,
    ``warm_start``, ``verbose``, ``validation_every``, ``random_state`` and
    implement the ``_start_training``, ``_train_step``, ``_loss`` methods and
    the weight accessors ``_get_weights``, ``_set_weights``.
    """

    # -- hooks for subclasses -------------------------------------------------
    def _start_training(self, weights):
        """Build the runtime objects from the initial ``weights`` (a dict)."""
        raise NotImplementedError

    def _batch_arrays(self, X, y, w, weighted):
        """The arrays cut into minibatches: features, labels, and the weights if ``weighted``."""
        return [X, y, w] if weighted else [X, y]

    def _train_step(self, batch, t):
        """Run forward, backward and update number ``t`` on a :class:`~helpers.device_data.Batch`.

        Return the loss in any form :meth:`_loss_value` reads (an
        ``OrtValue`` left on the device, so that it is read with others).
        """
        raise NotImplementedError

    def _loss(self, X, y, w):
        """Return the mean loss on ``X``, penalty excluded, without updating."""
        raise NotImplementedError

    def _get_weights(self):
        """Return the trained weights of the runtime objects."""
        raise NotImplementedError

    def _set_weights(self, weights):
        """Write ``weights`` into the runtime objects."""
        raise NotImplementedError

    def _label_shape(self):
        """Shape of the label the loss compares predictions with."""
        raise NotImplementedError

    def _inference_model(self):
        """The prediction model (no loss), with the initial weights."""
        raise NotImplementedError

    # -- checks ----------------------------------------------------------------
    def _check_params(self):
        check_n_threads(self.n_threads)
        if not isinstance(self.fast_gradients, bool):
            raise TypeError(f"fast_gradients must be True or False, got {self.fast_gradients!r}.")
        check_positive_int("max_iter", self.max_iter)
        check_positive_int("batch_size", self.batch_size)
        every = self.validation_every
        if every is not None and not (
            isinstance(every, numbers.Real) and not isinstance(every, bool) and every >= 0
        ):
            raise ValueError(
                "validation_every must be a fraction of max_iter below 1, a number "
                f"of epochs >= 1, or 0 for never; got {every!r}."
            )

    def _n_features(self):
        dims = _static_dims(self._prediction_model.graph.input[0])
        return dims[1] if len(dims) == 2 else None

    def _validation_period(self):
        """Epochs between validation losses: 0 never, below 1 a fraction of max_iter."""
        every = self.validation_every or 0
        if every <= 0:
            return 0
        if every < 1:
            return max(1, int(round(every * self.max_iter)))
        return int(round(every))

    def _check_data(self, X, y, sample_weight=None):
        X = check_features(X, self._n_features())
        y = check_targets(y, X.shape[0], self._label_shape())
        return X, y, check_sample_weight(sample_weight, X.shape[0])

    def _is_fitted(self):
        return hasattr(self, "train_losses_")

    def _check_is_fitted(self):
        if not self._is_fitted():
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet: call fit(X, y) first."
            )

    # -- training --------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, X_val=None, y_val=None):
        """Train the model on minibatches.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features; converted to float32, the type of the ONNX graph.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets, converted to float32.
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights; the loss model must have a weight input.
        X_val, y_val : array-like, optional
            A validation set whose loss is recorded in ``validation_losses_``
            every ``validation_every`` epochs.

        Returns
        -------
        self
        """
        self._prepare()
        y_ndim = np.ndim(y)
        X, y, w = self._check_data(X, y, sample_weight)
        validation = None
        if (X_val is None) != (y_val is None):
            raise ValueError("Give both X_val and y_val, or neither.")
        if X_val is not None:
            validation = self._check_data(X_val, y_val)
        self._y_ndim = y_ndim

        if not (self.warm_start and self._is_fitted()):
            self._start_training(self._initial_weights())
            self._rng = check_random_state(self.random_state)
            self.train_losses_, self.validation_losses_, self.validation_epochs_ = [], [], []
            self.n_iter_ = self.t_ = 0
        elif getattr(self, "_runtime", None) is None:
            # unpickled: rebuild the runtime from the saved weights
            self._start_training(self._saved_weights)
            self._restore_extra_state()
        self._predict_session = None

        period = self._validation_period()
        n = X.shape[0]
        batches = Batches(self._batch_arrays(X, y, w, sample_weight is not None), self.device_)
        bar = tqdm(
            range(self.max_iter), disable=not self.verbose, desc=type(self).__name__, unit="epoch"
        )
        for _ in bar:
            if not getattr(self, "exc", True):
                last_good = self._get_weights()
            total, pending, diverged = 0.0, [], None
            for batch in batches.epoch(self._rng.permutation(n), self.batch_size):
                self.t_ += 1
                pending.append((self._train_step(batch, self.t_), batch.start, batch.end))
                if len(pending) == _LOSSES_READ_TOGETHER:
                    added, diverged = self._read_losses(pending)
                    total, pending = total + added, []
                    if diverged:
                        break
            if pending and not diverged:
                added, diverged = self._read_losses(pending)
                total += added
            if diverged:
                loss, start, end = diverged
                message = (
                    f"The loss is {loss} at epoch {self.n_iter_ + 1}, rows "
                    f"{start}:{end} of the shuffled data: training diverged. "
                    "Try a smaller learning rate, or scale the features "
                    "(sklearn.preprocessing.StandardScaler)."
                )
                if getattr(self, "exc", True):
                    raise TrainingDivergedError(message)
                warnings.warn(
                    message + " Training stopped; the weights are those of the "
                    "start of the epoch.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._set_weights(last_good)
                break
            self.n_iter_ += 1
            self.train_losses_.append(total / n)
            postfix = {"loss": f"{self.train_losses_[-1]:.4g}"}
            if validation is not None and period and self.n_iter_ % period == 0:
                self.validation_losses_.append(self._loss(*validation))
                self.validation_epochs_.append(self.n_iter_)
                postfix["val"] = f"{self.validation_losses_[-1]:.4g}"
            if self.verbose:
                bar.set_postfix(postfix)
            self._end_epoch()
        return self

    def _read_losses(self, pending):
        """Read the losses of several steps at once.

        Parameters
        ----------
        pending : list of tuple
            ``(loss, start, end)`` per step, ``loss`` as ``_train_step``
            returned it (kept on the device until now).

        Returns
        -------
        tuple
            The sum of ``loss * (end - start)`` over the steps, and
            ``(loss, start, end)`` of the first step whose loss is not finite
            (None when all are).
        """
        total = 0.0
        for handle, start, end in pending:
            loss = self._loss_value(handle)
            if not math.isfinite(loss):
                return total, (loss, start, end)
            total += loss * (end - start)
        return total, None

    def _loss_value(self, handle):
        """The float behind what ``_train_step`` returned."""
        return float(handle)

    def _prepare(self):
        """Check the parameters and the model, choose the device."""
        check_onnx_compatible()
        self._check_params()
        check_model_ir_version(self.model_onnx)
        self._prediction_model = self._inference_model()
        self.device_ = resolve_device(self.device)

    def _end_epoch(self):
        """Called after each complete epoch (checkpoints, for instance)."""

    def _initial_weights(self):
        from .onnx_graph import get_train_initializer  # noqa: PLC0415

        init = get_train_initializer(self.model_onnx)
        return {name: init[name] for name in self.weights_to_train_}

    # -- weights -----------------------------------------------------------------
    def get_state(self):
        """Return the trained weights.

        Returns
        -------
        dict
            Weight name to a float32 :class:`numpy.ndarray` (a copy).
        """
        self._check_is_fitted()
        if getattr(self, "_runtime", None) is None:
            return {k: v.copy() for k, v in self._saved_weights.items()}
        return self._get_weights()

    def set_state(self, state):
        """Replace the trained weights, for example to continue training.

        Parameters
        ----------
        state : dict
            Weight name to array, for every trained weight, with their shapes.
        """
        self._check_is_fitted()
        current = self.get_state()
        if set(state) != set(current):
            raise ValueError(f"set_state expects the weights {sorted(current)}, got {sorted(state)}.")
        new = {}
        for name, value in state.items():
            value = np.asarray(value, dtype=np.float32)
            if value.shape != current[name].shape:
                raise ValueError(
                    f"Weight {name!r} has shape {current[name].shape}, got {value.shape}."
                )
            if not np.isfinite(value).all():
                raise ValueError(f"Weight {name!r} contains NaN or infinite values.")
            new[name] = np.ascontiguousarray(value)
        if getattr(self, "_runtime", None) is None:
            self._saved_weights = new
        else:
            self._set_weights(new)
        self._predict_session = None

    def get_trained_onnx(self):
        """Return the prediction model with the trained weights.

        Returns
        -------
        onnx.ModelProto
            No loss and no label: the model given to the optimizer, before
            the loss was added, carrying the trained weights.
        """
        from .onnx_graph import replace_initializers  # noqa: PLC0415

        return replace_initializers(self._prediction_model, self.get_state())

    # -- prediction ----------------------------------------------------------------
    def predict(self, X):
        """Predict with the trained weights.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray
            The model output; shape (n_samples,) when the targets given to
            ``fit`` were one-dimensional.
        """
        self._check_is_fitted()
        X = check_features(X, self._n_features())
        if getattr(self, "_predict_session", None) is None:
            model = self.get_trained_onnx()
            self._predict_session = onnxruntime.InferenceSession(
                model.SerializeToString(),
                session_options(self.n_threads, "predict"),
                providers=["CPUExecutionProvider"],
            )
        sess = self._predict_session
        pred = sess.run([self._prediction_name()], {sess.get_inputs()[0].name: X})[0]
        if self._y_ndim == 1 and pred.ndim == 2 and pred.shape[1] == 1:
            pred = pred.ravel()
        return pred

    def _prediction_name(self):
        return self._prediction_model.graph.output[0].name

    def score(self, X, y, sample_weight=None):
        """Return minus the mean loss on ``(X, y)``: higher is better.

        The loss is the one the model is trained on, without the penalty on
        the weights: ``GridSearchCV`` then compares penalties by the error
        they lead to on held-out data, not by their own size.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        self._check_is_fitted()
        return -self._loss(*self._check_data(X, y, sample_weight))

    # -- pickling --------------------------------------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        if state.get("_runtime") is not None:
            state["_saved_weights"] = self._get_weights()
            state.update(self._runtime_extra_state())
        state["_runtime"] = state["_predict_session"] = state["_scorer"] = None
        return state

    def _runtime_extra_state(self):
        """What else a pickle keeps to resume training (velocities...)."""
        return {}

    def _restore_extra_state(self):
        """Put back into a rebuilt runtime what ``_runtime_extra_state`` kept."""
