"""The on-device training objects of one fit of the whole-training API."""

import functools
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnxruntime.capi import _pybind_state as C
from onnxruntime.training.api import CheckpointState, Module

from ..core.graphs.onnx_function import ortvalue_of
from ..core.machine.disk_space import TEMPORARY_FOLDER, artifact_bytes, full_disk_explained
from ..core.machine.runtime import explain_untrainable
from ..core.machine.sessions import session_options
from ..core.machine.training_cache import cached_artifact_folder, content_key
from ..core.updates.weight_updater import WeightUpdater
from .checkpoints import BATCH_COUNT_PROPERTY, append_checksum
from .fit_artifacts import loss_training_graph, write_eval_model, write_training_artifacts

#: The update rules run by onnxruntime's optimizer model; the others run as
#: a :class:`~helpers.core.updates.weight_updater.WeightUpdater` graph.
RUNTIME_RULES = ("sgd", "adamw")


class WholeTrainingSession:
    """The on-device training objects of one fit: a step is :meth:`train_step`.

    :class:`helpers.OrtGradientOptimizer` builds one per fit; a training loop
    of one's own (or a benchmark timing single steps) can use it directly.
    The artifacts come from the process's cache
    (:mod:`helpers.core.machine.training_cache`) unless ``artifact_dir`` asks for
    them in a folder of the user's. ``'sgd'`` and ``'adamw'`` update the
    weights with onnxruntime's optimizer model; ``'momentum'`` and
    ``'nesterov'`` with a :class:`~helpers.core.updates.weight_updater.WeightUpdater`
    working on the runtime's own weight and gradient buffers. The running
    statistics of batch normalization layers are updated after each step
    (:attr:`statistics`, :mod:`helpers.core.layers.batch_norm`).

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model whose single output is its loss (:func:`helpers.add_loss_output`).
    weights : dict
        Name to initial value of each weight to train.
    rule : helpers.core.updates.update_rules.BaseUpdateRule
        The update rule.
    device : helpers.core.machine.devices.Device
    n_threads : int, optional
        Threads of the training session.
    fast_gradients : bool
        Train the graph rewritten by
        :func:`helpers.core.rewrites.gradient_rewrites.rewrite_for_training` (the rewrites
        of :func:`helpers.core.model_graphs.training_graph.training_graph` without which
        some layers cannot train are always applied).
    artifact_dir : str, optional
        Write the training artifacts in this folder and keep them.
    checkpoint : str, optional
        Start from this checkpoint (weights and optimizer state) instead of
        ``weights``.
    random_draws : bool
        The random operators (``Dropout``...) take their values as inputs that
        :meth:`train_step` draws from its ``generator``
        (:mod:`helpers.core.model_graphs.random_draws`); False leaves them to onnxruntime's own
        generator, which nothing seeds.

    Examples
    --------
    >>> import numpy as np
    >>> from onnxruntime import OrtValue
    >>> from helpers import add_loss_output, get_train_initializer
    >>> from helpers.core.machine.devices import Device
    >>> from helpers.core.updates.update_rules import SGDRule
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx = mlp_onnx(3, hidden=(4,))
    >>> session = WholeTrainingSession(
    ...     add_loss_output(onx), get_train_initializer(onx), SGDRule(), Device("cpu")
    ... )
    >>> X, y = np.ones((8, 3), dtype=np.float32), np.zeros((8, 1), dtype=np.float32)
    >>> loss = session.train_step(
    ...     [OrtValue.ortvalue_from_numpy(X), OrtValue.ortvalue_from_numpy(y)], 0.01, t=1
    ... )
    >>> float(loss.numpy()) >= 0
    True
    """

    def __init__(
        self,
        onx_loss,
        weights,
        rule,
        device,
        n_threads=None,
        fast_gradients=True,
        artifact_dir=None,
        checkpoint=None,
        random_draws=False,
    ):
        names = list(weights)
        solver = rule.name if rule.name in RUNTIME_RULES else "sgd"
        adamw = rule.get_params() if solver == "adamw" else {}
        # a full disk: the cache removes a folder written half-way, never keeps it
        disk = full_disk_explained(
            artifact_dir or tempfile.gettempdir(),
            "the training artifacts",
            artifact_bytes(onx_loss),
            f"{TEMPORARY_FOLDER}, or give artifact_dir= a folder with room"
            if artifact_dir is None
            else "give artifact_dir= another folder",
        )
        try:
            graph = loss_training_graph(onx_loss, fast_gradients, random_draws)
            write = functools.partial(
                write_training_artifacts, graph, names, solver=solver, adamw=adamw
            )
            if artifact_dir is None:
                key = content_key(
                    onx_loss,
                    names,
                    solver,
                    sorted(adamw.items()),
                    fast_gradients,
                    random_draws,
                    onnx.__version__,
                    onnxruntime.__version__,
                )
                with disk, cached_artifact_folder(key, write) as folder:
                    self._load(folder, checkpoint, rule, device, n_threads)
            else:
                with disk:
                    os.makedirs(artifact_dir, exist_ok=True)
                    write(artifact_dir)
                    write_eval_model(artifact_dir, onx_loss, graph.draws.names)
                self._load(artifact_dir, checkpoint, rule, device, n_threads)
        except Exception as exc:  # the runtime raises its own types
            clear = explain_untrainable(onx_loss, exc)
            if clear is None:
                raise
            raise clear from None
        self.names = names
        self.adamw = solver == "adamw"
        self.statistics = graph.statistics
        self.draws = graph.draws
        self.device = device
        initializers = {i.name for i in onx_loss.graph.initializer}
        self.batch_names = [i.name for i in onx_loss.graph.input if i.name not in initializers]
        if checkpoint is None:
            self.set_weights(weights)
        else:
            saved = {name: self.state.parameters[name].data for name in self.statistics.names}
            properties = self.state.properties
            saved.update(
                {name: properties[BATCH_COUNT_PROPERTY + name] for name in self.statistics.counts}
            )
            self.statistics.set(saved)
        self.parameters = [self.state.parameters[name]._parameter for name in self.names]
        self._buffers = self._learning_rate = None
        if self.optimizer is None:
            self.updater = WeightUpdater(rule, [w.shape for w in weights.values()], device)
        self.module.train()

    def _load(self, folder, checkpoint, rule, device, n_threads):
        """Load the state, the training model and the optimizer model of ``folder`` (read at once,
        not later)."""
        self.state = CheckpointState.load_checkpoint(
            checkpoint or os.path.join(folder, "checkpoint")
        )
        self.module = Module(
            os.path.join(folder, "training_model.onnx"),
            self.state,
            None,
            device=str(device),
            session_options=session_options(n_threads, "model"),
        )
        self.optimizer = self.updater = None
        if rule.name in RUNTIME_RULES:
            # one thread, as every elementwise graph of the project
            self.optimizer = C.Optimizer(
                os.path.join(folder, "optimizer_model.onnx"),
                self.state._state,
                self.module._device,
                session_options(1, "update"),
            )

    def save(self, path, properties):
        """Save weights, running statistics, optimizer state and ``properties`` (str values),
        atomically.

        The file ends with its checksum
        (:func:`helpers.whole_training.checkpoints.append_checksum`). It is
        written beside ``path``, flushed to disk, then renamed: a failed
        write (a full disk) leaves the previous checkpoint as it was.
        """
        for key, value in properties.items():
            self.state.properties[key] = value
        for name, value in self.statistics.values.items():  # frozen parameters of the checkpoint
            self.state.parameters[name] = value
        for name, count in self.statistics.counts.items():
            self.state.properties[BATCH_COUNT_PROPERTY + name] = count
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = None
        try:
            size = self.checkpoint_bytes()
            with full_disk_explained(folder, "the checkpoint", size, "save it in another folder"):
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_ckpt_")
                os.close(fd)
                CheckpointState.save_checkpoint(self.state, tmp, include_optimizer_state=True)
                append_checksum(tmp)
            os.replace(tmp, path)
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.remove(tmp)

    def checkpoint_bytes(self):
        """About the size of a checkpoint: trained weights (thrice with AdamW's moments),
        statistics."""
        trained = sum(self.state.parameters[name].data.nbytes for name in self.names)
        statistics = sum(np.asarray(value).nbytes for value in self.statistics.values.values())
        return trained * (3 if self.adamw else 1) + statistics

    def set_weights(self, weights):
        """Write ``weights`` (name to array) into the checkpoint state."""
        for name, value in weights.items():
            self.state.parameters[name] = np.ascontiguousarray(value, dtype=np.float32)

    def get_weights(self):
        """The trained weights, name to a float32 array (a copy)."""
        return {name: self.state.parameters[name].data.copy() for name in self.names}

    def train_step(self, inputs, learning_rate, t, generator=None):
        """Run training step ``t`` (from 1) on ``inputs`` (OrtValues); return the loss.

        A graph with random inputs (``random_draws``) takes them from ``generator`` (a
        :class:`numpy.random.Generator`), drawn for this batch.

        The loss stays an ``OrtValue`` (the training loop reads the losses of
        many steps at once), and the C objects are called directly: the
        Python wrappers of ``Module`` and ``Optimizer`` cost as much as the
        kernels of a small network.
        """
        if self.draws:
            drawn = self.draws.values(generator, dict(zip(self.batch_names, inputs)), self.device)
            inputs = [*inputs, *(ortvalue_of(value, self.device) for value in drawn)]
        feeds = C.OrtValueVector()
        feeds.reserve(len(inputs))
        for value in inputs:
            feeds.push_back(value._ortvalue)
        fetches = C.OrtValueVector()
        self.module._model.train_step_with_ort_values(feeds, fetches)
        if self.statistics:
            self.statistics.update(
                [fetches[i].numpy() for i in range(1, 1 + len(self.statistics.output_names))]
            )
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
            self.updater.update(*self._buffers, learning_rate, t)
        self.module._model.lazy_reset_grad()
        return onnxruntime.OrtValue(fetches[0])
