"""One fit of the whole-training API on any onnxruntime: gradients in standard ONNX.

:class:`StandardTrainingSession` is what :class:`helpers.OrtGradientOptimizer` builds with
``backend="onnx"``: the same training graph as the training package's
(:func:`helpers.core.model_graphs.training_graph.training_graph`), its gradients written by
:func:`helpers.portable.gradients.build_gradients`, run by an ``InferenceSession`` that returns
the loss, the batch statistics and the gradients; every update rule is a
:class:`~helpers.core.updates.weight_updater.WeightUpdater` graph that writes the new weights into
their buffers. Its checkpoints have onnxruntime-training's file format
(:mod:`helpers.whole_training.checkpoint_file`): the training package's backend loads them, and
it loads theirs.
"""

import hashlib
import os

import numpy as np
import onnxruntime
from onnx import helper

from ..core.export.gradient_model import gradient_model
from ..core.graphs.onnx_function import ortvalue_of, to_ortvalue
from ..core.machine.disk_space import full_disk_explained
from ..core.machine.runtime import explain_no_gradient
from ..core.machine.sessions import is_profiling, make_session
from ..core.machine.threads import resolved_threads
from ..core.machine.training_cache import GRADIENT_GRAPHS, content_key
from ..core.model_graphs.inference_mode import inference_graph
from ..core.model_graphs.onnx_graph import initializers_to_inputs
from ..core.updates.weight_updater import WeightUpdater, build_update_graph
from ..portable.atomic_files import write_atomic
from ..portable.gradients import NoGradientError
from ..portable.lowering import lower_model
from .adamw_state import MOMENT_NAMES, moments_by_weight
from .checkpoint_file import checkpoint_bytes, read_checkpoint_file
from .checkpoints import BATCH_COUNT_PROPERTY, CHECKSUM_MARK


def _training_model(onx_loss, names, fast_gradients, random_draws):
    """The graph computing the loss, the batch statistics and the gradients, weights as inputs."""
    try:
        built = gradient_model(onx_loss, names, fast_gradients, random_draws, builder="onnx")
    except NoGradientError as error:
        raise explain_no_gradient(error) from None
    model = built.model
    outputs = [o.name for o in model.graph.output]
    model.graph.output.extend(
        helper.make_empty_tensor_value_info(built.gradients[name])
        for name in names
        if built.gradients[name] not in outputs
    )
    model = initializers_to_inputs(lower_model(model), names)
    return model, built


class StandardTrainingSession:
    """The session of one fit of the whole-training API with ``backend="onnx"``.

    It offers what :class:`~helpers.whole_training.session.WholeTrainingSession` offers the
    optimizer (``train_step``, ``get_weights``, ``set_weights``, ``statistics``, ``updater``,
    ``save``, ``checkpoint_bytes``), without the training package: onnxruntime 1.31.1 on Python
    3.13 runs it, and so does 1.19.2's inference session.

    Parameters
    ----------
    onx_loss : onnx.ModelProto
        A model whose single output is its loss (:func:`helpers.add_loss_output`).
    weights : dict
        Name to initial value of each weight to train.
    rule : helpers.core.updates.update_rules.BaseUpdateRule
    device : helpers.core.machine.devices.Device
    n_threads : int, optional
        Threads of the training session.
    fast_gradients : bool
        As :class:`~helpers.whole_training.session.WholeTrainingSession`'s.
    artifact_dir : str, optional
        Write the training artifacts in this folder, with the names the training package gives
        its own: ``training_model.onnx`` (loss, batch statistics and gradients, the weights as
        inputs), ``optimizer_model.onnx`` (the update graph), ``eval_model.onnx`` (the loss model
        in inference mode) and ``checkpoint`` (the initial weights), all standard ONNX but the
        checkpoint.
    checkpoint : str, optional
        Start from this checkpoint (weights, running statistics, AdamW's moments), written by
        either backend, instead of ``weights``.
    random_draws : bool
        The random operators take their values as inputs :meth:`train_step` draws.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import add_loss_output, get_train_initializer
    >>> from helpers.core.graphs.onnx_function import to_ortvalue
    >>> from helpers.core.machine.devices import Device
    >>> from helpers.core.updates.update_rules import MomentumRule
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> cpu, linear = Device("cpu"), mlp_onnx(2, hidden=())
    >>> weights = get_train_initializer(linear)
    >>> session = StandardTrainingSession(add_loss_output(linear), weights, MomentumRule(), cpu)
    >>> batch = [to_ortvalue(np.eye(2, dtype=np.float32), cpu),
    ...          to_ortvalue(np.ones((2, 1), dtype=np.float32), cpu)]
    >>> # a linear regression trained with momentum, two steps on one batch
    >>> first, second = (float(session.train_step(batch, 0.1, t).numpy()) for t in (1, 2))
    >>> second < first
    True
    """

    #: The training package's optimizer object: none here, every rule is an update graph.
    optimizer = None

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
        self.names = list(weights)
        self.rule = rule
        self.adamw = rule.name == "adamw"
        key = content_key(
            "standard whole-training",
            onx_loss,
            self.names,
            fast_gradients,
            random_draws,
            str(device),
            resolved_threads(n_threads),
            onnxruntime.__version__,
        )

        def build():
            model, built = _training_model(onx_loss, self.names, fast_gradients, random_draws)
            return model, built, make_session(model, device, n_threads, "model")

        # a refit (a grid search) reuses the graph and its session: the weights are inputs
        build_now = is_profiling() or artifact_dir is not None
        model, built, self._session = (
            build() if build_now else GRADIENT_GRAPHS.get_or_build(key, build)
        )
        self.statistics = built.statistics.copy()  # the graph's may be shared by other fits
        self.draws = built.draws
        self.device = device
        initializers = {i.name for i in onx_loss.graph.initializer}
        self.batch_names = [i.name for i in onx_loss.graph.input if i.name not in initializers]
        self._feed_names = self.batch_names + list(self.draws.names) + self.names
        self._output_names = [
            model.graph.output[0].name,
            *self.statistics.output_names,
            *(built.gradients[name] for name in self.names),
        ]
        self.weights = [
            to_ortvalue(np.array(weights[name], dtype=np.float32), device) for name in self.names
        ]
        self.updater = WeightUpdater(rule, [w.shape() for w in self.weights], device)
        # the weights and the gradients stay bound to their buffers: a step binds its batch only
        self.gradients = [
            to_ortvalue(np.zeros(w.shape(), np.float32), device) for w in self.weights
        ]
        self._binding = self._session.io_binding()._iobinding
        for name, value in zip(self.names, self.weights):
            self._binding.bind_ortvalue_input(name, value._ortvalue)
        # the loss first (each step binds a buffer of its own: get_outputs keeps this order),
        # then the batch statistics, read as soon as a step ends, in buffers onnxruntime keeps
        n_fresh = 1 + len(self.statistics.output_names)
        for name in self._output_names[:n_fresh]:
            self._binding.bind_output(name, device.ort_device())
        for name, value in zip(self._output_names[n_fresh:], self.gradients):
            self._binding.bind_ortvalue_output(name, value._ortvalue)
        self._t = 0  # updates done: AdamW's step count in a checkpoint
        if artifact_dir is not None:
            self._write_artifacts(artifact_dir, model, onx_loss)
        if checkpoint is not None:
            self._load(checkpoint)

    def _write_artifacts(self, folder, model, onx_loss):
        """The training, update and evaluation models and the initial checkpoint, in ``folder``."""
        files = {
            "training_model.onnx": model,
            "optimizer_model.onnx": build_update_graph(self.rule, len(self.names)),
            "eval_model.onnx": initializers_to_inputs(inference_graph(onx_loss), self.names),
        }
        size = sum(m.ByteSize() for m in files.values()) + self.checkpoint_bytes()
        elsewhere = "give artifact_dir= another folder"
        with full_disk_explained(folder, "the training artifacts", size, elsewhere):
            os.makedirs(folder, exist_ok=True)
            for name, content in files.items():
                write_atomic(os.path.join(folder, name), content.SerializeToString())
            self.save(os.path.join(folder, "checkpoint"), {})

    def _load(self, path):
        """Weights, running statistics and AdamW's moments from a checkpoint of either backend."""
        content = read_checkpoint_file(path)
        parameters = {**content.frozen, **content.trained}
        self.set_weights(parameters)
        self._t = content.step
        saved = {name: parameters[name] for name in self.statistics.names}
        saved.update(
            {
                name: content.properties[BATCH_COUNT_PROPERTY + name]
                for name in self.statistics.counts
            }
        )
        self.statistics.set(saved)
        if self.adamw and content.moments:
            self.updater.set_state(
                [content.moments[name][moment] for name in self.names for moment in MOMENT_NAMES]
            )

    def train_step(self, inputs, learning_rate, t, generator=None):
        """Run training step ``t`` (from 1) on ``inputs`` (OrtValues); return the loss (an
        OrtValue).

        A graph with random inputs takes them from ``generator``, drawn for this batch.
        """
        if self.draws:
            drawn = self.draws.values(generator, dict(zip(self.batch_names, inputs)), self.device)
            inputs = [*inputs, *(ortvalue_of(value, self.device) for value in drawn)]
        binding = self._binding
        for name, value in zip(self._feed_names, inputs):
            binding.bind_ortvalue_input(name, value._ortvalue)
        # each step's loss in a buffer of its own: the training loop reads the losses later
        loss = onnxruntime.OrtValue.ortvalue_from_shape_and_type(
            [], np.float32, self.device.type, self.device.index
        )
        binding.bind_ortvalue_output(self._output_names[0], loss._ortvalue)
        self._session._sess.run_with_iobinding(binding, None)
        fetched = binding.get_outputs()
        n_statistics = len(self.statistics.output_names)
        if n_statistics:
            self.statistics.update([fetched[i].numpy() for i in range(1, 1 + n_statistics)])
        self.updater.update(self.weights, self.gradients, learning_rate, t)
        self._t = t
        return loss

    def get_weights(self):
        """The trained weights, name to a float32 array (a copy)."""
        return {name: value.numpy().copy() for name, value in zip(self.names, self.weights)}

    def set_weights(self, weights):
        """Overwrite the weights, in their buffers, from ``weights`` (name to array)."""
        for value, name in zip(self.weights, self.names):
            value.update_inplace(np.ascontiguousarray(weights[name], dtype=np.float32))

    def checkpoint_bytes(self):
        """About the size of a checkpoint: trained weights (thrice with AdamW's moments),
        statistics."""
        trained = sum(w.numpy().nbytes for w in self.weights)
        statistics = sum(np.asarray(value).nbytes for value in self.statistics.values.values())
        return trained * (3 if self.adamw else 1) + statistics

    def save(self, path, properties):
        """Save weights, running statistics, AdamW's moments and ``properties`` (str values)
        atomically, in onnxruntime-training's format followed by its checksum
        (:func:`helpers.whole_training.checkpoints.append_checksum`'s)."""
        properties = dict(properties)
        properties.update(
            {BATCH_COUNT_PROPERTY + name: int(n) for name, n in self.statistics.counts.items()}
        )
        moments = moments_by_weight(self.names, self.updater.get_state()) if self.adamw else {}
        content = checkpoint_bytes(
            self.get_weights(),
            {name: np.asarray(v) for name, v in self.statistics.values.items()},
            properties,
            moments,
            step=self._t,
        )
        digest = hashlib.sha256(content).hexdigest().encode("ascii")
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with full_disk_explained(
            folder, "the checkpoint", len(content), "save it in another folder"
        ):
            write_atomic(path, content + CHECKSUM_MARK + digest)
