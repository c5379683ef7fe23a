"""The whole-training API: the loss is in the graph, the runtime trains it.

:class:`OrtGradientOptimizer` keeps the interface of onnxcustom's optimizer,
built on ``TrainingSession``, which onnxruntime removed. It is built on the
on-device training API instead (:class:`~helpers.whole_training.session.WholeTrainingSession`):
``generate_artifacts`` writes a training model, an eval model, an optimizer
model and a checkpoint, and ``Module``/``Optimizer``/``CheckpointState``
run them.
"""

import warnings

import numpy as np

from ..core.export.optimizer_step import StepLoss, export_optimizer_step
from ..core.layers.running_statistics import statistic_initializers
from ..core.machine.disk_space import temporary_file
from ..core.machine.runtime import has_training_package
from ..core.machine.runtime_output import quiet_runtime_logs
from ..core.machine.sessions import make_session
from ..core.model_graphs.onnx_graph import check_weights_to_train, initializers_to_inputs
from ..core.training.estimator import BaseOrtOptimizer
from ..core.training.parameters import document_parameters, training_settings
from ..core.training.training_loop import TrainingState
from .adamw_state import adamw_moments, moments_by_weight
from .checkpoint_file import checkpoint_bytes
from .checkpoints import (
    CHECKPOINT_KEY,
    check_training_state,
    read_checkpoint,
    restore_training_state,
    training_state,
)
from .loss_output import add_loss_output, loss_metadata, remove_loss_output
from .standard_session import StandardTrainingSession

if has_training_package():  # generate_artifacts' info lines kept out of the notebooks' output
    quiet_runtime_logs()


@document_parameters
class OrtGradientOptimizer(BaseOrtOptimizer):
    """Train an ONNX model whose graph computes its own loss.

    The model is usually the output of :func:`helpers.add_loss_output`. Each
    step runs the training model (forward and backward) in onnxruntime, then
    updates the weights on the same device: ``'sgd'`` and ``'adamw'`` with
    onnxruntime's optimizer model, ``'momentum'`` and ``'nesterov'`` with an
    ONNX graph of this package (:mod:`helpers.core.updates.update_rules`).

    Parameters
    ----------
    model_onnx : onnx.ModelProto
        A model whose single output is a scalar loss, with inputs features,
        label and optionally per-sample weights, in that order.
    {shared_parameters}
    artifact_dir : str, optional
        Folder where ``fit`` writes the training artifacts (training, eval
        and optimizer models, initial checkpoint) and leaves them for
        inspection; by default they come from a cache of the process.
    checkpoint_path : str, optional
        File where ``fit`` saves a checkpoint every ``checkpoint_every``
        epochs (see :meth:`save_checkpoint`): an interrupted training can
        resume from it with :meth:`load_checkpoint`.
    checkpoint_every : int
        Epochs between two checkpoints.

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    A pickled optimizer keeps its weights, its running statistics, its
    update rule's state (momentum buffers; AdamW's moment estimates, which
    live in onnxruntime's optimizer, travel as a checkpoint inside the
    pickle) and its shuffling state, so ``warm_start`` continues after
    unpickling exactly as the uninterrupted training. A checkpoint that
    cannot be written during ``fit`` (a full disk) warns and keeps the
    previous one; training goes on. A diverged epoch with
    ``on_divergence='stop'`` puts back the weights of its start; AdamW's
    moments, which onnxruntime cannot put back, restart from zero.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    >>> y = X.sum(axis=1, keepdims=True)
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(3, hidden=(8,))), max_iter=20,
    ...                            learning_rate=0.05, batch_size=16, random_state=0).fit(X, y)
    >>> bool(opt.train_losses_[-1] < opt.train_losses_[0])
    True
    """

    _session_attributes = BaseOrtOptimizer._session_attributes + ("_scorer",)

    def __init__(
        self,
        model_onnx,
        weights_to_train=None,
        max_iter=100,
        batch_size=10,
        learning_rate=1e-3,
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
        artifact_dir=None,
        checkpoint_path=None,
        checkpoint_every=1,
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
        self.artifact_dir = artifact_dir
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every

    # -- checks -------------------------------------------------------------------
    def _check_model(self):
        outputs = [o.name for o in self.model_onnx.graph.output]
        if len(outputs) != 1:
            raise ValueError(
                f"The model has outputs {outputs}: the whole-training API needs a "
                "single output, the loss. Add it with helpers.add_loss_output."
            )
        self.weights_to_train_ = check_weights_to_train(self.model_onnx, self.weights_to_train)
        self._loss_record = self._scorer = None
        self._loss_record = self._record()

    def _label_shape(self):
        record = self._record()
        label = next(i for i in self.model_onnx.graph.input if i.name == record["label_name"])
        return [
            d.dim_value if d.HasField("dim_value") else None
            for d in label.type.tensor_type.shape.dim
        ]

    def _takes_class_labels(self):
        return self._record()["score_name"] == "cross_entropy"

    def _record(self):
        """What add_loss_output recorded, read once per fit."""
        if getattr(self, "_loss_record", None) is not None:
            return self._loss_record
        record = loss_metadata(self.model_onnx)
        if record is None:
            raise ValueError(
                "The model was not made by helpers.add_loss_output, so its label and "
                "prediction cannot be found. Add the loss with add_loss_output."
            )
        return record

    def _inference_model(self):
        self._record()
        return remove_loss_output(self.model_onnx)

    def _prediction_name(self):
        return self._record()["output_name"]

    def _check_data(self, X, y, sample_weight=None, names=("X", "y")):
        if sample_weight is not None and self._record()["weight_name"] is None:
            raise ValueError(
                "sample_weight was given but the loss has no weight input: build it "
                "with add_loss_output(..., weight_name='weight')."
            )
        return super()._check_data(X, y, sample_weight, names)

    def _batch_arrays(self, X, y, w, weighted):
        # the loss model takes weights (ones when none were given) or nothing
        return [X, y] if self._record()["weight_name"] is None else [X, y, w]

    # -- training -----------------------------------------------------------------
    def _start_training(self, weights, checkpoint=None):
        settings = dict(
            n_threads=self.n_threads,
            fast_gradients=self.fast_gradients,
            checkpoint=checkpoint,
            random_draws=self.random_state is not None,
        )
        if self.backend_ == "onnx":
            session = StandardTrainingSession
        else:
            from .session import WholeTrainingSession as session  # noqa: PLC0415 - the package
        self._runtime = session(
            self.model_onnx,
            weights,
            self.update_rule_,
            self.device_,
            artifact_dir=self.artifact_dir,
            **settings,
        )

    def _end_epoch(self):
        if self.checkpoint_path and self.n_iter_ % self.checkpoint_every == 0:
            try:
                self.save_checkpoint(self.checkpoint_path)
            except OSError as error:  # a full disk, a folder gone: the training itself is fine
                warnings.warn(
                    f"Could not write the checkpoint {self.checkpoint_path} after epoch "
                    f"{self.n_iter_} ({error}). The previous checkpoint is kept and training goes "
                    "on; the trained weights stay in this estimator: save_checkpoint to another "
                    "file, or pickle it.",
                    RuntimeWarning,
                    stacklevel=5,
                )

    def _after_divergence(self):
        if self._runtime.optimizer is not None and self.update_rule_.name == "adamw":
            # onnxruntime's AdamW moments are no part of a TrainingState: they restart from zero
            state = TrainingState.of(self._runtime)
            self._start_training(state.weights)
            state.restore(self._runtime)

    def _rebuild_runtime(self):
        checkpoint = getattr(self, "_saved_checkpoint", None)
        moments = self._saved_state.update_state
        if checkpoint is None and self.update_rule_.name == "adamw" and moments:
            if self.backend_ == "onnxruntime-training":  # AdamW's moments of the backend "onnx"
                statistics = {k: np.asarray(v) for k, v in self._saved_state.statistics.items()}
                checkpoint = checkpoint_bytes(
                    self._saved_state.weights,
                    # the training package loads every parameter its model has; the restore below
                    # sets them (and the batch counters) again
                    {k: v for k, v in statistics.items() if v.dtype.kind == "f"},
                    moments=moments_by_weight(self.weights_to_train_, moments),
                    step=self.t_,
                )
        if checkpoint is None:
            super()._rebuild_runtime()
            return
        # AdamW's moments, kept by the pickle
        with temporary_file("the AdamW state of this estimator", len(checkpoint)) as path:
            with open(path, "wb") as f:
                f.write(checkpoint)
            self._start_training(self._saved_state.weights, checkpoint=path)
        self._saved_state.restore(self._runtime)

    def __getstate__(self):
        state = super().__getstate__()
        runtime = self.__dict__.get("_runtime")
        if (
            runtime is not None
            and runtime.optimizer is not None
            and self.update_rule_.name == "adamw"
        ):
            size = runtime.checkpoint_bytes()
            with temporary_file("the AdamW state a pickle carries", size) as path:
                runtime.save(
                    path, {}
                )  # the moments; the rest of the training state is in the pickle itself
                with open(path, "rb") as f:
                    state["_saved_checkpoint"] = f.read()
        return state

    def save_checkpoint(self, path):
        """Save everything needed to continue training exactly, atomically.

        The checkpoint of onnxruntime (weights, optimizer state such as
        AdamW's moments) carries, as a property, the rest of the training
        state (:mod:`helpers.whole_training.checkpoints`). The file is
        written beside ``path`` then renamed: an interruption leaves the
        previous checkpoint intact.

        Parameters
        ----------
        path : str
            The checkpoint file.
        """
        if getattr(self, "_runtime", None) is None or not hasattr(self, "train_losses_"):
            # fit calls it between epochs, before the estimator counts as fitted
            self._check_is_fitted()
        self._runtime.save(path, {CHECKPOINT_KEY: training_state(self)})

    def load_checkpoint(self, path):
        """Restore a training saved by :meth:`save_checkpoint`.

        Build the optimizer with the parameters of the saved training and
        ``warm_start=True``, load, then ``fit`` runs ``max_iter`` more epochs
        exactly as the uninterrupted training would have.

        The file is checked before anything is loaded (it exists, it is not
        damaged: :mod:`helpers.whole_training.checkpoints`), and so is its
        fit with this optimizer's model (the same weights, with the same
        shapes, and update rule). A checkpoint that fails a check raises
        :class:`~helpers.whole_training.checkpoints.CheckpointError`, which
        names the file and the problem, and leaves the estimator as it was.

        Parameters
        ----------
        path : str
            A checkpoint file written by :meth:`save_checkpoint`.

        Returns
        -------
        self
        """
        before = dict(self.__dict__)
        try:
            self._prepare()
            state, shapes = read_checkpoint(path)
            check_training_state(self, state, shapes, path)
            self._start_training(self._initial_weights(), checkpoint=path)
            restore_training_state(self, state)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise
        self._scorer = None
        self._settings, self._fitted = training_settings(self), True
        return self

    def _train_step(self, batch, t):
        return self._runtime.train_step(
            batch.ortvalues(), self.learning_rate_.value(t), t, self._draws
        )

    def export_training_step(self, path=None, gradient_builder=None):
        """Write one training step of this optimizer as a standard ONNX model.

        The step model (:mod:`helpers.portable.step_format`) computes the loss of a batch, the
        gradients, the update of the weights and of the update rule's buffers with torch's
        formulas (its learning rate computed from its ``step`` input and the schedule), and the
        running statistics of batch normalization, with standard operators only
        (:mod:`helpers.portable.lowering`): onnxruntime 1.19.2 to 1.31.1 run it with a plain
        ``InferenceSession``, and :class:`helpers.portable.trainer.PortableTrainer` trains with
        it. Its graph is the gradient graph ``fit`` runs for ``model_onnx``, with every rewrite
        ``fit`` applies: the training model of ``generate_artifacts`` with the backend
        ``"onnxruntime-training"``, this project's gradients with ``"onnx"``.

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
            The record the model carries: its inputs and state, the inference model, the
            training parameters. A new optimizer's step starts from the model's initial weights;
            a fitted one's from its trained weights, buffers, running statistics and update
            count (``steps_done``, ``epochs_done``): training the step continues as ``fit``
            with ``warm_start=True`` would.

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
        >>> from helpers import OrtGradientOptimizer, add_loss_output
        >>> from helpers.teaching.model_factories import mlp_onnx
        >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(3, hidden=(4,))),
        ...                            learning_rate=0.1, batch_size=8, random_state=0)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     record = opt.export_training_step(os.path.join(folder, "step.onnx"))
        ...     model = onnx.load(os.path.join(folder, "step.onnx"))
        >>> step = onnxruntime.InferenceSession(model.SerializeToString())
        >>> record.batch_inputs, record.state[:2]
        (['X', 'label'], ['coefficient0', 'intercept0'])
        >>> X, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)
        >>> state = initial_state(model)  # the weights fit would start from
        >>> loss, *after = step.run(None, {"X": X, "label": y, "step": np.array(1), **state})
        >>> [o.name for o in step.get_outputs()][:2], bool(loss > 0)
        (['loss', 'coefficient0.next'], True)
        """
        return export_optimizer_step(
            self,
            path,
            "whole_training",
            lambda: StepLoss(self.model_onnx),
            self._adamw_moments,
            gradient_builder,
        )

    def _adamw_moments(self):
        """The AdamW moments of onnxruntime's optimizer (a fitted or an unpickled estimator)."""
        checkpoint = getattr(self, "_saved_checkpoint", None)
        if getattr(self, "_runtime", None) is not None:
            size = self._runtime.checkpoint_bytes()
            with temporary_file("the AdamW state of the exported step", size) as path:
                from onnxruntime.training.api import CheckpointState  # noqa: PLC0415

                CheckpointState.save_checkpoint(self._runtime.state, path, True)
                with open(path, "rb") as f:
                    checkpoint = f.read()
        return adamw_moments(checkpoint, self.weights_to_train_)

    def _loss_and_outputs(self, X, y, w):
        if getattr(self, "_scorer", None) is None:
            record = self._record()
            scoring = add_loss_output(
                self._prediction_model,
                score_name=record["score_name"],
                label_name=record["label_name"],
                weight_name=record["weight_name"] or "sample_weight",
                output_index=record["output_index"],
                **record["score_kwargs"],
            )
            # the predictions too: the last batch of a fit checks them
            scoring.graph.output.extend(
                v for v in scoring.graph.value_info if v.name == record["output_name"]
            )
            statistics = list(statistic_initializers(self._current_statistics()))
            model = initializers_to_inputs(scoring, self.weights_to_train_ + statistics)
            self._scorer = make_session(model, n_threads=self.n_threads, label="score")
        names = [i.name for i in self._scorer.get_inputs()]
        feeds = dict(zip(names, (X, y, w)))
        feeds.update(self._current_weights())
        feeds.update(statistic_initializers(self._current_statistics()))
        loss, outputs = self._scorer.run(None, feeds)
        return float(loss), outputs

    def _loss_value(self, handle):
        return float(handle.numpy())
