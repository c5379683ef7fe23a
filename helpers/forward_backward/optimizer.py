"""Train an ONNX layer with the forward/backward API.

:class:`OrtGradientForwardBackwardOptimizer` runs the forward and backward
passes with :class:`helpers.OrtGradientForwardBackward`; the loss gradient
(:mod:`helpers.forward_backward.losses`), the penalty
(:mod:`helpers.core.updates.penalties`) and the update
(:mod:`helpers.core.updates.update_rules`) run as ONNX graphs on the training device
(:class:`~helpers.forward_backward.session.ForwardBackwardSession`).
"""

import numpy as np

from ..core.export.optimizer_step import export_optimizer_step
from ..core.machine.devices import Device
from ..core.model_graphs.onnx_graph import check_weights_to_train, static_dims
from ..core.training.estimator import BaseOrtOptimizer
from ..core.training.parameters import document_parameters
from ..core.updates.penalties import make_learning_penalty
from .losses import make_learning_loss
from .session import ForwardBackwardSession
from .step_loss import forward_backward_step_loss


@document_parameters
class OrtGradientForwardBackwardOptimizer(BaseOrtOptimizer):
    """Train an ONNX model (no loss inside) with explicit loss, penalty and update.

    Parameters
    ----------
    model_onnx : onnx.ModelProto
        The model to train, with one input (the features) and one output.
    {shared_parameters}
    learning_loss : str or BaseLearningLoss
        ``'squared_error'``, ``'absolute_error'``, ``'elastic'``, ``'log'``
        (:data:`helpers.core.graphs.loss_graphs.LOSSES`, with their aliases such
        as ``'square_error'``) or an object (:class:`helpers.SquareLearningLoss`...).
        ``'log'`` takes raw scores (logits): its probability function is
        part of the loss.
    learning_penalty : None, str, dict or BaseLearningPenalty
        None, ``'elastic'``, a dict ``{weight: {'l1': a, 'l2': b}}`` as
        :func:`helpers.add_loss_output` takes, or an object
        (:class:`helpers.ElasticLearningPenalty`).

    Attributes
    ----------
    {shared_attributes}
    learning_loss_, learning_penalty_ : objects
        The loss and penalty of the last ``fit`` (copies of those given).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    >>> y = X.sum(axis=1, keepdims=True)
    >>> opt = OrtGradientForwardBackwardOptimizer(
    ...     mlp_onnx(3, hidden=(8,)),
    ...     max_iter=20,
    ...     learning_rate=0.05,
    ...     solver="adamw",
    ...     batch_size=16,
    ...     random_state=0,
    ... ).fit(X, y)
    >>> bool(opt.train_losses_[-1] < opt.train_losses_[0])
    True
    """

    def __init__(
        self,
        model_onnx,
        weights_to_train=None,
        max_iter=100,
        batch_size=10,
        learning_rate="SGD",
        learning_rate_schedule="constant",
        power_t=0.25,
        alpha=0.0001,
        solver="sgd",
        momentum=0.9,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        device="cpu",
        warm_start=False,
        verbose=0,
        validation_every=0.1,
        random_state=None,
        n_threads=None,
        fast_gradients=True,
        on_divergence="raise",
        backend="auto",
        learning_loss="squared_error",
        learning_penalty=None,
    ):
        super().__init__(
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
        )
        self.learning_loss = learning_loss
        self.learning_penalty = learning_penalty

    def _check_model(self):
        outputs = [o.name for o in self.model_onnx.graph.output]
        if len(outputs) != 1:
            raise ValueError(
                f"The model has outputs {outputs}: this optimizer trains a model with "
                "one output. Convert a classifier to return its raw scores only."
            )
        if static_dims(self.model_onnx.graph.output[0]) == []:
            raise ValueError(
                f"The model's output {outputs[0]!r} is a scalar, a loss: this optimizer trains the "
                "model without its loss and computes the loss itself (learning_loss). Give it the "
                "model from before add_loss_output, or train this one with OrtGradientOptimizer."
            )
        self.weights_to_train_ = check_weights_to_train(self.model_onnx, self.weights_to_train)
        # fresh copies: the objects cache compiled graphs for one fit
        self.learning_loss_ = make_learning_loss(self.learning_loss).fresh_copy()
        self.learning_penalty_ = make_learning_penalty(self.learning_penalty).fresh_copy()
        self.learning_penalty_.coefficients(self.weights_to_train_)  # unknown weights fail now

    def _inference_model(self):
        return self.model_onnx

    def _label_shape(self):
        return static_dims(self.model_onnx.graph.output[0])

    def _takes_class_labels(self):
        return self.learning_loss_.takes_class_labels

    def _start_training(self, weights):
        self._runtime = ForwardBackwardSession(
            self.model_onnx,
            weights,
            self.update_rule_,
            self.device_,
            self.n_threads,
            self.fast_gradients,
            random_draws=self.random_state is not None,
            backend=self.backend_,
        )

    def _train_step(self, batch, t):
        X, y, *weighted = batch.ortvalues()
        return self._runtime.train_step(
            X,
            y,
            weighted[0] if weighted else None,
            self.learning_loss_,
            self.learning_penalty_,
            self.learning_rate_.value(t),
            t,
            self._draws,
        )

    def export_training_step(self, path=None, gradient_builder=None):
        """Write one training step of this optimizer as a standard ONNX model.

        The step model (:mod:`helpers.portable.step_format`) computes the loss of a batch and
        its penalty, the gradients (the loss class's own gradient with respect to the
        prediction, the penalty's added), the update of the weights and of the update rule's
        buffers (its learning rate computed from its ``step`` input and the schedule), and the
        running statistics of batch normalization, with standard operators only
        (:mod:`helpers.portable.lowering`): onnxruntime 1.19.2 to 1.31.1 run it with a plain
        ``InferenceSession``, and :class:`helpers.portable.trainer.PortableTrainer` trains with
        it. Its batch is the features, ``label`` and ``sample_weight`` (ones for an unweighted
        fit): :mod:`helpers.forward_backward.step_loss`.

        Parameters
        ----------
        path : str, optional
            The file, written atomically; without it the model is returned instead of its
            record (the model carries the record: :func:`helpers.portable.step_format.read_record`).
        gradient_builder : {"onnxruntime-training", "onnx"}, optional
            Who writes the gradients: onnxruntime-training 1.19.2's gradient builder, or this
            project's, in standard ONNX (:mod:`helpers.portable.gradients`), which needs no
            training package. By default, the optimizer's backend (``backend_``): the gradients
            ``fit`` runs.

        Returns
        -------
        helpers.portable.step_format.StepRecord or onnx.ModelProto
            The record the model carries. A new optimizer's step starts from the model's
            initial weights; a fitted one's from its trained weights, buffers, running
            statistics and update count (``steps_done``, ``epochs_done``): training the step
            continues as ``fit`` with ``warm_start=True`` would.

        Raises
        ------
        helpers.portable.lowering.UnsupportedOperatorError
            When the gradient graph holds an operator without a standard formulation.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> import onnx, onnxruntime
        >>> from helpers.portable.step_format import initial_state
        >>> from helpers import OrtGradientForwardBackwardOptimizer
        >>> from helpers.teaching.model_factories import mlp_onnx
        >>> X = np.ones((8, 3), np.float32)
        >>> opt = OrtGradientForwardBackwardOptimizer(
        ...     mlp_onnx(3, hidden=(4,)), max_iter=2, batch_size=4, learning_rate=0.1,
        ...     solver="momentum",
        ...     random_state=0).fit(X, X[:, :1])
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     record = opt.export_training_step(os.path.join(folder, "step.onnx"))
        ...     model = onnx.load(os.path.join(folder, "step.onnx"))
        >>> step = onnxruntime.InferenceSession(model.SerializeToString())
        >>> record.batch_inputs, record.state[-1], record.parameters["steps_done"]
        (['X', 'label', 'sample_weight'], 'intercept1.momentum_buffer', 4)
        >>> feeds = {"X": X, "label": X[:, :1], "sample_weight": np.ones(8, np.float32)}
        >>> state = initial_state(model)  # the fitted weights and momentum buffers
        >>> loss, *after = step.run(None, {**feeds, "step": np.array(5), **state})
        >>> bool(np.isfinite(loss))
        True
        """
        return export_optimizer_step(
            self,
            path,
            "forward_backward",
            lambda: forward_backward_step_loss(
                self.model_onnx, self.learning_loss_, self.learning_penalty_, self.weights_to_train_
            ),
            gradient_builder=gradient_builder,
        )

    def _loss_value(self, handle):
        loss, penalty = handle
        penalty = penalty if isinstance(penalty, float) else float(penalty.numpy())
        return float(loss.numpy()) + penalty

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
        return self._scores_and_outputs(X, y, w)[0]

    def _scores_and_outputs(self, X, y, w):
        if getattr(self, "_runtime", None) is None:  # unpickled: the exported model predicts
            pred, device = self.predict(X).reshape(y.shape).astype(np.float32), Device("cpu")
        else:
            pred, device = self._runtime.predict(X), self._runtime.device
        scores = self.learning_loss_.loss_scores(device, y, pred, w).numpy()
        return scores, pred if isinstance(pred, np.ndarray) else pred.numpy()

    def _loss_and_outputs(self, X, y, w):
        scores, outputs = self._scores_and_outputs(X, y, w)
        return float(scores.mean()), outputs
