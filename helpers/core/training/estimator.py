"""The training loop shared by both optimizers.

:class:`BaseOrtOptimizer` owns what does not depend on the training API:
input checks, shuffled minibatches (one permutation per epoch), the
progress bar, the divergence check, validation losses, warm starts and
pickling. Subclasses build the runtime objects and run one training step.
"""

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from tqdm.auto import tqdm

from ...portable.batch_order import draws_generator, epoch_order, random_state
from ...portable.divergence import TrainingDivergedError
from ..inputs.feature_names import check_feature_names, check_validation_names, feature_names
from ..inputs.validation import InputSpec, check_features, check_sample_weight, check_targets
from ..machine.backends import resolve_backend
from ..machine.devices import resolve_device
from ..machine.runtime import (
    check_model_inputs,
    check_model_ir_version,
    check_model_opset,
    check_onnx_compatible,
)
from ..model_graphs.inference_mode import inference_graph
from ..model_graphs.onnx_graph import get_train_initializer
from ..updates.learning_rates import resolve_learning_rate
from .batches import Batches
from .display import ModelSummaryRepr
from .epoch_losses import EpochLosses
from .parameters import (
    check_shared_parameters,
    check_warm_start,
    training_settings,
    validation_period,
)
from .trained_model import PREDICTION_SESSIONS, TrainedModelMixin
from .training_loop import EpochStart, check_finite_outputs, check_finite_state, deferred_interrupt


class BaseOrtOptimizer(TrainedModelMixin, ModelSummaryRepr, BaseEstimator):
    """Training loop shared by the optimizers of this package.

    It defines the parameters both APIs share (the docstrings of
    :class:`helpers.OrtGradientOptimizer` and
    :class:`helpers.OrtGradientForwardBackwardOptimizer` describe them) and
    uses nothing else. A subclass lists them in its own ``__init__`` (as
    scikit-learn requires) and passes them here, then writes the hooks
    below: it builds a training session for each fit
    (:meth:`_start_training`), and that session keeps the weights
    (``get_weights``, ``set_weights``) and, for rules with buffers, a
    :class:`~helpers.core.updates.weight_updater.WeightUpdater` as ``updater``.

    Both optimizers take the parameters defined here, and only a few of their own.

    Examples
    --------
    >>> import inspect
    >>> from helpers import OrtGradientForwardBackwardOptimizer, OrtGradientOptimizer
    >>> shared = set(inspect.signature(BaseOrtOptimizer).parameters)
    >>> sorted(set(inspect.signature(OrtGradientOptimizer).parameters) - shared)
    ['artifact_dir', 'checkpoint_every', 'checkpoint_path']
    >>> sorted(set(inspect.signature(OrtGradientForwardBackwardOptimizer).parameters) - shared)
    ['learning_loss', 'learning_penalty']
    """

    def __init__(
        self,
        model_onnx,
        weights_to_train,
        max_iter,
        batch_size,
        learning_rate,
        learning_rate_schedule,
        power_t,
        alpha,
        solver,
        momentum,
        betas,
        eps,
        weight_decay,
        device,
        warm_start,
        verbose,
        validation_every,
        random_state,
        n_threads,
        fast_gradients,
        on_divergence,
        backend,
    ):
        self.model_onnx = model_onnx
        self.weights_to_train = weights_to_train
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.learning_rate_schedule = learning_rate_schedule
        self.power_t = power_t
        self.alpha = alpha
        self.solver = solver
        self.momentum = momentum
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.device = device
        self.warm_start = warm_start
        self.verbose = verbose
        self.validation_every = validation_every
        self.random_state = random_state
        self.n_threads = n_threads
        self.fast_gradients = fast_gradients
        self.on_divergence = on_divergence
        self.backend = backend

    # -- hooks for subclasses -------------------------------------------------
    def _check_model(self):
        """Check ``model_onnx`` for this API; set ``weights_to_train_``."""
        raise NotImplementedError

    def _start_training(self, weights):
        """Set ``self._runtime``, the training session, from the initial ``weights`` (a dict)."""
        raise NotImplementedError

    def _batch_arrays(self, X, y, w, weighted):
        """The arrays cut into minibatches: features, labels, and the weights if ``weighted``."""
        return [X, y, w] if weighted else [X, y]

    def _train_step(self, batch, t):
        """Run forward, backward and update number ``t`` on a ``batches.Batch``.

        Return the loss in any form :meth:`_loss_value` reads (an
        ``OrtValue`` left on the device, so that it is read with others).
        """
        raise NotImplementedError

    def _loss_value(self, handle):
        """The float behind what :meth:`_train_step` returned."""
        raise NotImplementedError

    def _loss(self, X, y, w):
        """Return the mean loss on ``X``, penalty excluded, without updating."""
        return self._loss_and_outputs(X, y, w)[0]

    def _loss_and_outputs(self, X, y, w):
        """Return the mean loss on ``X`` (as :meth:`_loss`) and the predictions; in a fit too."""
        raise NotImplementedError

    def _label_shape(self):
        """Shape of the label the loss compares predictions with."""
        raise NotImplementedError

    def _takes_class_labels(self):
        """Whether the loss is a softmax cross-entropy, whose targets may be class indices."""
        return False

    def _inference_model(self):
        """The prediction model (no loss), with the initial weights."""
        raise NotImplementedError

    def _prediction_name(self):
        """The output of the prediction model that ``predict`` returns."""
        return self._prediction_model.graph.output[0].name

    def _end_epoch(self):
        """Called after each complete epoch (checkpoints, for instance)."""

    # -- checks ----------------------------------------------------------------
    def _check_params(self):
        check_shared_parameters(self)
        self.learning_rate_, self.update_rule_ = resolve_learning_rate(
            self.learning_rate,
            self.learning_rate_schedule,
            self.power_t,
            self.alpha,
            self.solver,
            self.momentum,
            tuple(self.betas),
            self.eps,
            self.weight_decay,
        )
        self._check_model()

    def _check_data(self, X, y, sample_weight=None, names=("X", "y")):
        """The arrays ``fit`` and ``score`` take; ``names``: what the messages call ``X``, ``y``."""
        X = check_features(X, self._input_spec, names[0])
        y = check_targets(y, X.shape[0], self._label_shape(), self._takes_class_labels(), names)
        return X, y, check_sample_weight(sample_weight, X.shape[0])

    def _is_fitted(self):
        # a fit that failed before its end leaves its attributes but not the flag
        return getattr(self, "_fitted", hasattr(self, "train_losses_"))

    def __sklearn_is_fitted__(self):
        return self._is_fitted()

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
        X : array-like of shape (n_samples, n_features) or (n_samples,) + sample_shape
            Features; converted to float32, the type of the ONNX graph. A
            model whose input has another rank takes samples of that shape
            (images ``(n, C, H, W)``, sequences ``(n, C, L)``); a model
            whose input is integer takes integer ids (token ids for an
            embedding, checked against its number of rows).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets, converted to float32.
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights; the loss model must have a weight input.
        X_val, y_val : array-like, optional
            A validation set whose loss is recorded in ``validation_losses_``
            every ``validation_every`` epochs; a DataFrame has the columns of ``X``.

        Returns
        -------
        self
        """
        self._prepare()
        y_ndim = np.asarray(y).ndim
        names = feature_names(X)
        warm = self.warm_start and self._is_fitted()
        if warm:  # the training continues on the columns it started with
            check_feature_names(self, X)
        X, y, w = self._check_data(X, y, sample_weight)
        validation = None
        if (X_val is None) != (y_val is None):
            raise ValueError("Give both X_val and y_val, or neither.")
        if X_val is not None:
            check_validation_names(names, X_val)
            validation = self._check_data(X_val, y_val, names=("X_val", "y_val"))
        self._y_ndim = y_ndim
        settings = training_settings(self)
        if not warm:
            self._fitted = False
            self._start_training(self._initial_weights())
            self._rng = random_state(self.random_state)
            self._draws = draws_generator(self.random_state)
            self.train_losses_, self.validation_losses_, self.validation_epochs_ = [], [], []
            self.n_iter_ = self.t_ = 0
            self._partial_epoch = None
            self._settings = settings
        else:
            check_warm_start(self._settings, settings)
            if (
                getattr(self, "_runtime", None) is None
            ):  # unpickled: rebuild the runtime from what the pickle kept
                self._rebuild_runtime()
        PREDICTION_SESSIONS.drop(self)
        self._set_input_attributes(X, getattr(self, "feature_names_in_", None) if warm else names)

        period = validation_period(self.validation_every, self.max_iter)
        batches = Batches(self._batch_arrays(X, y, w, sample_weight is not None), self.device_)
        bar = tqdm(
            range(self.max_iter), disable=not self.verbose, desc=type(self).__name__, unit="epoch"
        )
        with deferred_interrupt() as interrupt:
            for epoch in bar:
                # the model the fit ends with is run on the last batch it trained on
                last = (X, y, w) if epoch == self.max_iter - 1 else None
                total = self._run_epoch(batches, interrupt, last)
                if total is None:  # diverged, on_divergence='stop'
                    break
                self.n_iter_ += 1
                self.train_losses_.append(total / X.shape[0])
                postfix = {"loss": f"{self.train_losses_[-1]:.4g}"}
                if validation is not None and period and self.n_iter_ % period == 0:
                    self.validation_losses_.append(self._loss(*validation))
                    self.validation_epochs_.append(self.n_iter_)
                    postfix["val"] = f"{self.validation_losses_[-1]:.4g}"
                if self.verbose:
                    bar.set_postfix(postfix)
                self._end_epoch()
        self._fitted = True
        return self

    @property
    def partial_epoch_rows_(self):
        """Rows of an interrupted epoch already trained, 0 when the last epoch ran to its end.

        Read from the record of that epoch that a warm-started ``fit`` resumes,
        so the two never disagree.
        """
        return 0 if self._partial_epoch is None else self._partial_epoch[1]

    def _epoch_order(self, n):
        """The rows of the next epoch, the rows already trained and their loss (an interrupted epoch
        resumes)."""
        partial, self._partial_epoch = getattr(self, "_partial_epoch", None), None
        if partial is not None and len(partial[0]) == n:
            return partial
        if partial is not None:
            warnings.warn(
                f"The interrupted epoch ({partial[1]} of {len(partial[0])} rows) cannot resume on "
                f"{n} rows: a new epoch starts.",
                RuntimeWarning,
                stacklevel=3,
            )
        return epoch_order(self._rng, n), 0, 0.0

    def _run_epoch(self, batches, interrupt, data=None):
        """Train one epoch; return the sum of the batch losses times their rows, None if it diverged
        and stopped.

        An interrupt takes effect between two steps: the estimator then keeps
        the weights of the steps done and records how far the epoch went
        (``partial_epoch_rows_``); a warm-started ``fit`` finishes it. With
        ``data`` (the features, labels and sample weights of the last epoch
        of a fit), the trained model is run on the epoch's last batch: its
        outputs may overflow though its weights are finite.
        """
        start = EpochStart(self)
        order, trained, done = self._epoch_order(batches.n_rows)
        losses = EpochLosses(self._loss_value, self.n_iter_ + 1)
        try:
            try:
                for batch in batches.epoch(order, self.batch_size, trained):
                    losses.add(self._train_step(batch, self.t_ + 1), batch.start, batch.end)
                    self.t_ += 1
                    trained = batch.end
                    interrupt.check()
            except TrainingDivergedError:
                raise
            except (
                BaseException
            ):  # interrupted: record exactly how far the epoch went, to finish it later
                self._partial_epoch = (order, trained, done + losses.total())
                raise
            total = done + losses.total()
            check_finite_state(
                self._runtime.get_weights(), self._runtime.statistics.get(), self.n_iter_ + 1
            )
            if data is not None:
                rows = order[batch.start : batch.end]
                loss, outputs = self._loss_and_outputs(*(array[rows] for array in data))
                check_finite_outputs(loss, outputs, (batch.start, batch.end), self.n_iter_ + 1)
        except TrainingDivergedError as error:
            start.restore(self)  # never NaN weights in the estimator, counters that agree with them
            self._after_divergence()
            if self.on_divergence == "raise":
                raise
            message = f"{error} Training stopped; the weights are those of the start of the epoch."
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            return None
        return total

    def _after_divergence(self):
        """Called once the epoch start is restored: a subclass resets what it cannot restore."""

    def _rebuild_runtime(self):
        """The training session of an unpickled estimator, from the state its pickle kept."""
        self._start_training(self._saved_state.weights)
        self._saved_state.restore(self._runtime)

    def _set_input_attributes(self, X, names):
        """``sample_shape_in_``; ``n_features_in_`` for rows of features; ``feature_names_in_``."""
        self.sample_shape_in_ = tuple(X.shape[1:])
        n_features = X.shape[1] if X.ndim == 2 else None
        for attribute, value in (("n_features_in_", n_features), ("feature_names_in_", names)):
            if value is not None:
                setattr(self, attribute, value)
            elif hasattr(self, attribute):
                delattr(self, attribute)

    def _prepare(self):
        """Check the parameters and the model, choose the device and the backend."""
        self.backend_ = resolve_backend(self.backend)
        check_onnx_compatible()
        self._check_params()
        check_model_ir_version(self.model_onnx)
        check_model_opset(self.model_onnx)
        check_model_inputs(self.model_onnx)
        self._prediction_model = inference_graph(self._inference_model())
        self._input_spec = InputSpec.of(self._prediction_model)
        self.device_ = resolve_device(self.device)

    def _initial_weights(self):
        init = get_train_initializer(self.model_onnx)
        return {name: init[name] for name in self.weights_to_train_}
