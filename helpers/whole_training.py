"""The whole-training API: the loss is in the graph, the runtime trains it.

:class:`OrtGradientOptimizer` keeps the interface of the seeds' optimizer,
built on ``TrainingSession``, which onnxruntime removed. It is built on the
on-device training API instead: ``generate_artifacts`` writes a training
model, an eval model, an optimizer model and a checkpoint, and
``Module``/``Optimizer``/``CheckpointState`` run them.
"""
import base64
import functools
import io
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnxruntime.capi import _pybind_state as C
from onnxruntime.training import artifacts, onnxblock
from onnxruntime.training.api import CheckpointState, Module

from .base_optimizer import BaseOrtOptimizer
from .gradient_rewrites import count_rewrites, restore_rewrites, rewrite_for_training
from .learning_rates import check_schedule, learning_rate_at
from .onnx_graph import check_weights_to_train, initializers_to_inputs
from .onnx_loss import add_loss_output, loss_metadata, remove_loss_output
from .runtime import explain_untrainable, native_stderr_captured, quiet_runtime_logs, session_options
from .sgd_update import SGDUpdate
from .training_cache import cached_artifact_folder, content_key

#: The update rules of :class:`OrtGradientOptimizer`.
SOLVERS = ("sgd", "momentum", "nesterov", "adamw")


def generate_training_artifacts(onx_loss, weights_to_train, directory, solver="sgd", **adamw):
    """Write the training artifacts of a model whose only output is its loss.

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model from :func:`helpers.add_loss_output` (or any model whose
        single output is a scalar loss).
    weights_to_train : list of str
        Float initializers to train; the other initializers are frozen.
    directory : str
        Existing folder that receives ``training_model.onnx``,
        ``eval_model.onnx``, ``optimizer_model.onnx`` and ``checkpoint``.
    solver : str
        ``'adamw'`` writes an AdamW optimizer model, the others an SGD one.
    **adamw
        ``betas``, ``eps``, ``weight_decay`` of the AdamW optimizer model.
    """
    frozen = [i.name for i in onx_loss.graph.initializer if i.name not in weights_to_train]
    optimizer = (
        onnxblock.optim.AdamW(**adamw) if solver == "adamw" else artifacts.OptimType.SGD
    )
    quiet_runtime_logs()
    with native_stderr_captured():
        artifacts.generate_artifacts(
            onx_loss,
            requires_grad=list(weights_to_train),
            frozen_params=frozen,
            loss=None,
            optimizer=optimizer,
            artifact_directory=directory,
        )


def _encode_array(array):
    """An array as text: numpy's format, no pickle, in base64."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _decode_array(text):
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def _write_artifacts(onx_loss, names, folder, solver, adamw, fast_gradients):
    """Write the artifacts, the training graph rewritten for fast gradients."""
    initializers = {i.name for i in onx_loss.graph.initializer}
    per_row = [i.name for i in onx_loss.graph.input if i.name not in initializers]
    training_model = rewrite_for_training(onx_loss, per_row) if fast_gradients else onx_loss
    generate_training_artifacts(training_model, names, folder, solver, **adamw)


def _restore_eval_model(folder):
    """Put the plain ``Relu`` nodes back into the evaluation model of ``folder``."""
    path = os.path.join(folder, "eval_model.onnx")
    eval_model = onnx.load(path)
    if count_rewrites(eval_model):
        onnx.save(restore_rewrites(eval_model), path)


class WholeTrainingSession:
    """The on-device training objects of one fit: a step is :meth:`train_step`.

    :class:`OrtGradientOptimizer` builds one per fit; a training loop of
    one's own (or a benchmark timing single steps) can use it directly. The
    artifacts come from the process's cache (:mod:`helpers.training_cache`)
    unless ``artifact_dir`` asks for them in a folder of the user's. The
    module has no evaluation session: losses on held-out data run in the
    optimizer's own scoring session.

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model whose single output is its loss (:func:`helpers.add_loss_output`).
    weights : dict
        Name to initial value of each weight to train.
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The update rule (see :class:`OrtGradientOptimizer`).
    adamw : dict
        ``betas``, ``eps``, ``weight_decay`` of AdamW.
    device : helpers.devices.Device
    momentum : float
        Momentum of ``'momentum'`` and ``'nesterov'``.
    n_threads : int, optional
        Threads of the training session.
    fast_gradients : bool
        Train the graph rewritten by :func:`helpers.gradient_rewrites.rewrite_for_training`.
    artifact_dir : str, optional
        Write the training artifacts in this folder and keep them.
    checkpoint : str, optional
        Start from this checkpoint (weights and optimizer state) instead of
        ``weights``.

    Examples
    --------
    >>> import numpy as np
    >>> from onnxruntime import OrtValue
    >>> from helpers import add_loss_output, get_train_initializer
    >>> from helpers.devices import Device
    >>> from helpers.model_factories import mlp_onnx
    >>> onx = mlp_onnx(3, hidden=(4,))
    >>> session = WholeTrainingSession(add_loss_output(onx), get_train_initializer(onx), "sgd", {},
    ...                                Device("cpu"), momentum=0.0)
    >>> X, y = np.ones((8, 3), dtype=np.float32), np.zeros((8, 1), dtype=np.float32)
    >>> loss = session.train_step([OrtValue.ortvalue_from_numpy(X), OrtValue.ortvalue_from_numpy(y)], 0.01)
    >>> float(loss.numpy()) >= 0
    True
    """

    def __init__(
        self,
        onx_loss,
        weights,
        solver,
        adamw,
        device,
        momentum,
        n_threads=None,
        fast_gradients=True,
        artifact_dir=None,
        checkpoint=None,
    ):
        names = list(weights)
        write = functools.partial(
            _write_artifacts, onx_loss, names, solver=solver, adamw=adamw, fast_gradients=fast_gradients
        )
        if artifact_dir is None:
            key = content_key(
                onx_loss, names, solver, sorted(adamw.items()), fast_gradients,
                onnx.__version__, onnxruntime.__version__,
            )
            folder = cached_artifact_folder(key, write)
        else:
            folder = artifact_dir
            os.makedirs(folder, exist_ok=True)
            write(folder)
            _restore_eval_model(folder)
        self.state = CheckpointState.load_checkpoint(checkpoint or os.path.join(folder, "checkpoint"))
        try:
            self.module = Module(
                os.path.join(folder, "training_model.onnx"),
                self.state,
                None,
                device=str(device),
                session_options=session_options(n_threads, "model"),
            )
        except Exception as exc:  # the runtime raises its own types
            clear = explain_untrainable(onx_loss, exc)
            if clear is None:
                raise
            raise clear from None
        # The optimizer's session gets its own options: one thread, as every
        # elementwise graph of the project (see helpers.sgd_update.SGDUpdate).
        self.optimizer = C.Optimizer(
            os.path.join(folder, "optimizer_model.onnx"),
            self.state._state,
            self.module._device,
            session_options(1, "update"),
        )
        self.names = names
        if checkpoint is None:
            self.set_weights(weights)
        self.parameters = [self.state.parameters[name]._parameter for name in self.names]
        self._ort_device = device.ort_device()
        self._learning_rate = None
        self.updater = self._buffers = None
        if solver in ("momentum", "nesterov"):
            self.updater = SGDUpdate(
                [w.shape for w in weights.values()],
                momentum,
                solver == "nesterov",
                device.type,
                device.index,
            )
        self.module.train()

    def save(self, path, properties):
        """Save weights, optimizer state and ``properties`` (str values), atomically."""
        for key, value in properties.items():
            self.state.properties[key] = value
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_ckpt_")
        os.close(fd)
        try:
            CheckpointState.save_checkpoint(self.state, tmp, include_optimizer_state=True)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def set_weights(self, weights):
        for name, value in weights.items():
            self.state.parameters[name] = np.ascontiguousarray(value, dtype=np.float32)

    def get_weights(self):
        return {name: self.state.parameters[name].data.copy() for name in self.names}

    def train_step(self, inputs, learning_rate):
        """Run one training step on ``inputs`` (OrtValues); return the loss.

        The loss stays an ``OrtValue`` (the base loop reads the losses of many
        steps at once), and the C objects are called directly: the Python
        wrappers of ``Module`` and ``Optimizer`` cost as much as the kernels
        of a small network.
        """
        feeds = C.OrtValueVector()
        feeds.reserve(len(inputs))
        for value in inputs:
            feeds.push_back(value._ortvalue)
        fetches = C.OrtValueVector()
        self.module._model.train_step_with_ort_values(feeds, fetches)
        if self.updater is None:
            if learning_rate != self._learning_rate:
                self.optimizer.set_learning_rate(learning_rate)
                self._learning_rate = learning_rate
            self.optimizer.optimizer_step()
        else:
            if self._buffers is None:
                # the runtime keeps weights and gradients in fixed buffers
                # (lazy_reset_grad clears them, it does not reallocate):
                # the update graph writes the new weights into them
                self._buffers = (
                    [onnxruntime.OrtValue(p.data) for p in self.parameters],
                    [onnxruntime.OrtValue(p.grad) for p in self.parameters],
                )
            self.updater.update(*self._buffers, learning_rate)
        self.module._model.lazy_reset_grad()
        return onnxruntime.OrtValue(fetches[0])


class OrtGradientOptimizer(BaseOrtOptimizer):
    """Train an ONNX model whose graph computes its own loss.

    The model is usually the output of :func:`helpers.add_loss_output`. Each
    step runs the training model (forward and backward) in onnxruntime, then
    updates the weights on the same device.

    Parameters
    ----------
    model_onnx : onnx.ModelProto
        A model whose single output is a scalar loss, with inputs features,
        label and optionally per-sample weights, in that order.
    weights_to_train : list of str, optional
        Float initializers to train; None means all of them.
    max_iter : int
        Number of epochs.
    batch_size : int
        Rows per minibatch; the last batch of an epoch may be smaller.
    learning_rate : float
        Initial learning rate ``eta0``.
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The update rule. ``'sgd'`` and ``'adamw'`` use the optimizer model
        of onnxruntime; ``'momentum'`` and ``'nesterov'`` follow
        scikit-learn's ``MLPRegressor(solver='sgd')`` and run as an ONNX
        graph on the training device (:mod:`helpers.sgd_update`).
    learning_rate_schedule : {'constant', 'invscaling'}
        ``eta = eta0`` or ``eta = eta0 / t ** power_t`` at update ``t``.
    power_t : float
        Exponent of ``'invscaling'``.
    momentum : float
        Momentum of ``'momentum'`` and ``'nesterov'``.
    betas : tuple of float
        AdamW's moment decay rates.
    eps : float
        AdamW's denominator term.
    weight_decay : float
        AdamW's decoupled weight decay.
    device : str
        ``'cpu'``, ``'cuda'``, ``'cuda:N'`` or ``'auto'`` (a GPU when one
        really works, else the CPU). On a GPU the data is copied there once
        per ``fit`` and the batches are gathered there.
    warm_start : bool
        When True, ``fit`` continues from the current weights, optimizer
        state and shuffling instead of starting again.
    verbose : int
        Shows a progress bar with the epoch and the loss when > 0.
    validation_every : float or int
        Epochs between two validation losses: a value below 1 is a fraction
        of ``max_iter`` (0.1: every tenth of the training), a value from 1 on
        a number of epochs (1: every epoch); 0 never computes them.
    random_state : int, RandomState or None
        Seeds the shuffling of the minibatches.
    n_threads : int, optional
        Threads of onnxruntime's sessions (intra-op); None lets onnxruntime
        choose (one per core), or takes :func:`helpers.runtime.set_num_threads`.
    fast_gradients : bool
        Rewrite each ``Relu`` of the training graph as an exact equivalent
        whose gradient runs faster, and name the batch dimension of the
        per-row inputs (:mod:`helpers.gradient_rewrites`); the trained
        weights are the same up to float32 rounding (the smaller graph
        fuses some nodes), and the exported model keeps its ``Relu``.
        False trains the graph as given.
    artifact_dir : str, optional
        Folder where ``fit`` writes the training artifacts (training, eval
        and optimizer models, initial checkpoint) and leaves them for
        inspection; by default they go to a temporary folder.
    checkpoint_path : str, optional
        File where ``fit`` saves a checkpoint every ``checkpoint_every``
        epochs (see :meth:`save_checkpoint`): an interrupted training can
        resume from it with :meth:`load_checkpoint`.
    checkpoint_every : int
        Epochs between two checkpoints.

    Notes
    -----
    A pickled optimizer keeps its weights, its momentum velocities and its
    shuffling state, so ``warm_start`` continues after unpickling; AdamW's
    moment estimates are not kept and restart from zero.

    Attributes
    ----------
    train_losses_ : list of float
        Mean loss of each epoch (penalty included), computed while the
        weights change.
    validation_losses_ : list of float
        Loss on the validation set without the penalty, at epochs
        ``validation_epochs_``.
    validation_epochs_ : list of int
        Epochs (counted from 1) of the validation losses.
    n_iter_ : int
        Number of epochs run.
    t_ : int
        Number of weight updates (minibatches) run.
    weights_to_train_ : list of str
        The trained weights.
    """

    def __init__(
        self,
        model_onnx,
        weights_to_train=None,
        max_iter=100,
        batch_size=10,
        learning_rate=1e-3,
        solver="sgd",
        learning_rate_schedule="constant",
        power_t=0.25,
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
        artifact_dir=None,
        checkpoint_path=None,
        checkpoint_every=1,
    ):
        self.model_onnx = model_onnx
        self.weights_to_train = weights_to_train
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.solver = solver
        self.learning_rate_schedule = learning_rate_schedule
        self.power_t = power_t
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
        self.artifact_dir = artifact_dir
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every

    # -- checks -------------------------------------------------------------------
    def _check_params(self):
        super()._check_params()
        if not isinstance(self.model_onnx, onnx.ModelProto):
            raise TypeError(
                f"model_onnx must be an onnx.ModelProto, got {type(self.model_onnx).__name__}; "
                "load a file with onnx.load(path)."
            )
        outputs = [o.name for o in self.model_onnx.graph.output]
        if len(outputs) != 1:
            raise ValueError(
                f"The model has outputs {outputs}: the whole-training API needs a "
                "single output, the loss. Add it with helpers.add_loss_output."
            )
        if self.solver not in SOLVERS:
            raise ValueError(f"Unknown solver {self.solver!r}, expected one of {SOLVERS}.")
        check_schedule(self.learning_rate_schedule, self.learning_rate, self.power_t)
        if self.solver in ("momentum", "nesterov") and not 0 < self.momentum < 1:
            raise ValueError(f"momentum must be in (0, 1), got {self.momentum!r}.")
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

    def _check_data(self, X, y, sample_weight=None):
        if sample_weight is not None and self._record()["weight_name"] is None:
            raise ValueError(
                "sample_weight was given but the loss has no weight input: build it "
                "with add_loss_output(..., weight_name='weight')."
            )
        return super()._check_data(X, y, sample_weight)

    def _batch_arrays(self, X, y, w, weighted):
        # the loss model takes weights (ones when none were given) or nothing
        return [X, y] if self._record()["weight_name"] is None else [X, y, w]

    # -- training -----------------------------------------------------------------
    def _start_training(self, weights, checkpoint=None):
        adamw = {"betas": tuple(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}
        self._runtime = WholeTrainingSession(
            self.model_onnx,
            weights,
            self.solver,
            adamw,
            self.device_,
            self.momentum,
            n_threads=self.n_threads,
            fast_gradients=self.fast_gradients,
            artifact_dir=self.artifact_dir,
            checkpoint=checkpoint,
        )

    _CHECKPOINT_KEY = "helpers.training_state"

    def _end_epoch(self):
        if self.checkpoint_path and self.n_iter_ % self.checkpoint_every == 0:
            self.save_checkpoint(self.checkpoint_path)

    def save_checkpoint(self, path):
        """Save everything needed to continue training exactly, atomically.

        The checkpoint of onnxruntime (weights, optimizer state such as
        AdamW's moments) carries, as a property, the rest of the training
        state: epochs and updates done, losses, momentum velocities and the
        state of the shuffling generator, as JSON (nothing is unpickled
        when loading, so a checkpoint cannot run code). The file is written beside
        ``path`` then renamed: an interruption leaves the previous
        checkpoint intact.

        Parameters
        ----------
        path : str
            The checkpoint file.
        """
        self._check_is_fitted()
        updater = self._runtime.updater
        name, keys, pos, has_gauss, cached = self._rng.get_state()
        rng_state = [name, keys.tolist(), pos, has_gauss, cached]
        velocities = updater.get_velocities() if updater else []
        state = {
            "n_iter_": self.n_iter_,
            "t_": self.t_,
            "train_losses_": self.train_losses_,
            "validation_losses_": self.validation_losses_,
            "validation_epochs_": self.validation_epochs_,
            "y_ndim": self._y_ndim,
            "weights_to_train_": self.weights_to_train_,
            "solver": self.solver,
            "rng": rng_state,
            "velocities": [_encode_array(v) for v in velocities],
        }
        self._runtime.save(path, {self._CHECKPOINT_KEY: json.dumps(state)})

    def load_checkpoint(self, path):
        """Restore a training saved by :meth:`save_checkpoint`.

        Build the optimizer with the parameters of the saved training and
        ``warm_start=True``, load, then ``fit`` runs ``max_iter`` more epochs
        exactly as the uninterrupted training would have.

        Parameters
        ----------
        path : str
            A checkpoint file written by :meth:`save_checkpoint`.

        Returns
        -------
        self
        """
        self._prepare()
        probe = CheckpointState.load_checkpoint(path)
        if self._CHECKPOINT_KEY not in probe.properties:
            raise ValueError(f"{path} was not written by OrtGradientOptimizer.save_checkpoint.")
        state = json.loads(probe.properties[self._CHECKPOINT_KEY])
        if state["weights_to_train_"] != self.weights_to_train_ or state["solver"] != self.solver:
            raise ValueError(
                f"The checkpoint trained {state['weights_to_train_']} with solver "
                f"{state['solver']!r}; this optimizer trains {self.weights_to_train_} with "
                f"{self.solver!r}: build it with the parameters of the saved training."
            )
        self._start_training(self._initial_weights(), checkpoint=path)
        if self._runtime.updater is not None:
            self._runtime.updater.set_velocities([_decode_array(v) for v in state["velocities"]])
        name, keys, pos, has_gauss, cached = state["rng"]
        self._rng = np.random.RandomState()
        self._rng.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        for name in ("n_iter_", "t_", "train_losses_", "validation_losses_", "validation_epochs_"):
            setattr(self, name, state[name])
        self._y_ndim = state["y_ndim"]
        self._predict_session = self._scorer = None
        return self

    def _runtime_extra_state(self):
        updater = self._runtime.updater
        return {"_saved_velocities": updater.get_velocities() if updater else []}

    def _restore_extra_state(self):
        if self._runtime.updater is not None:
            self._runtime.updater.set_velocities(self._saved_velocities)

    def _train_step(self, batch, t):
        eta = learning_rate_at(self.learning_rate_schedule, self.learning_rate, t, self.power_t)
        return self._runtime.train_step(batch.ortvalues(), eta)

    def _loss(self, X, y, w):
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
            model = initializers_to_inputs(scoring, self.weights_to_train_)
            self._scorer = onnxruntime.InferenceSession(
                model.SerializeToString(),
                session_options(self.n_threads, "score"),
                providers=["CPUExecutionProvider"],
            )
        names = [i.name for i in self._scorer.get_inputs()]
        feeds = dict(zip(names, (X, y, w)))
        feeds.update(self.get_state())
        return float(self._scorer.run(None, feeds)[0])
    def _loss_value(self, handle):
        return float(handle.numpy())

    def _get_weights(self):
        return self._runtime.get_weights()

    def _set_weights(self, weights):
        self._runtime.set_weights(weights)
