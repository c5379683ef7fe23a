"""What a fitted optimizer offers: its weights, running statistics, predictions and pickles.

:class:`TrainedModelMixin` is the half of
:class:`~helpers.core.training.estimator.BaseOrtOptimizer` that reads the training
session a fit left (``_runtime``) or, once unpickled, the arrays a pickle
kept instead.
"""

import os
import threading
import weakref

import numpy as np

from ..inputs.feature_names import check_feature_names
from ..inputs.validation import check_features
from ..layers.running_statistics import statistic_initializers
from ..machine.sessions import make_session
from ..model_graphs.onnx_graph import replace_initializers
from .training_loop import TrainingState


class PredictionSessions:
    """The prediction session of each fitted optimizer, made by the first ``predict`` after the
    weights changed.

    The sessions live beside the estimators, not in their ``__dict__``
    (``predict`` changes nothing in the estimator), in a weak dictionary
    guarded by a lock: estimators fitted and used in several threads at
    once each get their own. A forked child starts without its parent's.

    Examples
    --------
    >>> class Estimator:
    ...     pass
    >>> sessions, estimator = PredictionSessions(), Estimator()
    >>> sessions.get(estimator, lambda: "session"), sessions.get(estimator, lambda: "another")
    ('session', 'session')
    >>> sessions.drop(estimator)
    >>> sessions.get(estimator, lambda: "another")
    'another'
    """

    def __init__(self):
        self._reset()

    def _reset(self):
        self._sessions = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, estimator, make):
        """The session of ``estimator``, made by ``make()`` when it has none."""
        with self._lock:
            session = self._sessions.get(estimator)
        if session is None:
            session = make()
            with self._lock:
                self._sessions[estimator] = session
        return session

    def drop(self, estimator):
        """Forget the session of ``estimator`` (its weights changed)."""
        with self._lock:
            self._sessions.pop(estimator, None)


#: The prediction sessions of every fitted optimizer of the process.
PREDICTION_SESSIONS = PredictionSessions()
os.register_at_fork(after_in_child=PREDICTION_SESSIONS._reset)


class TrainedModelMixin:
    """Weights, running statistics, predictions and pickling of a fitted optimizer.

    It relies on what :class:`~helpers.core.training.estimator.BaseOrtOptimizer`
    sets: ``_runtime`` (the training session: ``get_weights``,
    ``set_weights``, ``statistics``, ``updater``), ``_prediction_model``,
    ``_input_spec``, and the hooks ``_check_is_fitted``, ``_check_data``,
    ``_loss`` and ``_prediction_name``.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> issubclass(OrtGradientForwardBackwardOptimizer, TrainedModelMixin)
    True
    """

    #: Attributes holding onnxruntime objects, which a pickle drops (rebuilt when needed).
    _session_attributes = ("_runtime",)

    # -- weights -----------------------------------------------------------------
    def get_state(self):
        """Return the trained weights.

        Returns
        -------
        dict
            Weight name to a float32 :class:`numpy.ndarray` (a copy).
        """
        self._check_is_fitted()
        return self._current_weights()

    def _current_weights(self):
        """The weights now, during a fit too (a copy)."""
        if getattr(self, "_runtime", None) is None:
            return {k: v.copy() for k, v in self._saved_state.weights.items()}
        return self._runtime.get_weights()

    def _current_statistics(self):
        """The running statistics now, during a fit too (a copy)."""
        if getattr(self, "_runtime", None) is None:
            return {k: v.copy() for k, v in self._saved_state.statistics.items()}
        return self._runtime.statistics.get()

    def get_running_statistics(self):
        """Return the running statistics of the model's batch normalization layers.

        They are not trained but updated after every step with torch's
        formula (:mod:`helpers.core.layers.batch_norm`); predictions and
        :meth:`get_trained_onnx` normalize with them, as torch's eval mode
        does.

        Returns
        -------
        dict
            Initializer name (``'1.running_mean'``...) to a float32 array
            (a copy); empty for a model without batch normalization. A
            layer with torch's ``momentum=None`` (a cumulative average)
            adds its batch counter (``'1.num_batches_tracked'``, an int64
            array), as torch's buffers do.
        """
        self._check_is_fitted()
        return self._current_statistics()

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
            raise ValueError(
                f"set_state expects the weights {sorted(current)}, got {sorted(state)}."
            )
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
            self._saved_state = self._saved_state._replace(weights=new)
        else:
            self._runtime.set_weights(new)
        PREDICTION_SESSIONS.drop(self)

    def get_trained_onnx(self):
        """Return the prediction model with the trained weights.

        Returns
        -------
        onnx.ModelProto
            No loss and no label: the model given to the optimizer, before
            the loss was added, carrying the trained weights and running
            statistics, in inference mode (``Dropout`` drops nothing, batch
            normalization uses the running statistics).
        """
        # the batch counters of cumulative averages are not initializers
        statistics = statistic_initializers(self._current_statistics())
        return replace_initializers(self._prediction_model, {**self.get_state(), **statistics})

    # -- prediction ----------------------------------------------------------------
    def predict(self, X):
        """Predict with the trained weights.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples,) + sample_shape

        Returns
        -------
        numpy.ndarray
            The model output; shape (n_samples,) when the targets given to
            ``fit`` were one-dimensional.
        """
        self._check_is_fitted()
        check_feature_names(self, X)
        X = check_features(X, self._input_spec)
        sess = PREDICTION_SESSIONS.get(
            self,
            lambda: make_session(
                self.get_trained_onnx(), n_threads=self.n_threads, label="predict"
            ),
        )
        pred = sess.run([self._prediction_name()], {sess.get_inputs()[0].name: X})[0]
        if self._y_ndim == 1 and pred.ndim == 2 and pred.shape[1] == 1:
            pred = pred.ravel()
        return pred

    def score(self, X, y, sample_weight=None):
        """Return minus the mean loss on ``(X, y)``: higher is better.

        The loss is the one the model is trained on, without the penalty on
        the weights: ``GridSearchCV`` then compares penalties by the error
        they lead to on held-out data, not by their own size.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples,) + sample_shape
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        self._check_is_fitted()
        check_feature_names(self, X)
        return -self._loss(*self._check_data(X, y, sample_weight))

    # -- pickling --------------------------------------------------------------------
    def __getstate__(self):
        state = dict(self.__dict__)
        runtime = state.get("_runtime")
        if runtime is not None:
            state["_saved_state"] = TrainingState.of(runtime)
        for name in self._session_attributes:
            state[name] = None
        return state
