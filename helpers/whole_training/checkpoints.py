"""The training state a checkpoint carries beside onnxruntime's own, and the checks before loading
one.

onnxruntime's checkpoint holds the weights, the running statistics of batch
normalization and its optimizer's state (AdamW's moments). The rest of a
training (epochs and updates done, losses, the buffers of an update rule
run as a graph, the shuffling generator) goes into one of its string
properties as JSON: loading a checkpoint unpickles nothing, so it cannot
run code.

A SHA-256 checksum of the whole checkpoint (parameters, optimizer state,
properties) follows it at the end of the file (:func:`append_checksum`);
onnxruntime reads the checkpoint and ignores it. Before anything is loaded
into an estimator, :func:`read_checkpoint`
checks the file (it exists, onnxruntime can read it, it was written by
:meth:`helpers.OrtGradientOptimizer.save_checkpoint`, its content matches
its checksum) and :func:`check_training_state` checks that it belongs to the
estimator's model (the same weights with the same shapes, the same update
rule): a damaged, foreign or missing checkpoint gives a
:class:`CheckpointError` naming the file and the problem.
"""

import base64
import hashlib
import io
import json
import os

import numpy as np

#: The checkpoint property holding the training state.
CHECKPOINT_KEY = "helpers.training_state"

#: Prefix of the checkpoint properties holding the batch counters of cumulative averages (both
#: backends write them).
BATCH_COUNT_PROPERTY = "helpers.batch_count."

#: What precedes the checksum at the end of a checkpoint file (64 hexadecimal digits follow).
CHECKSUM_MARK = b"\nhelpers-sha256:"

#: The training attributes a checkpoint keeps, as they are.
_COUNTERS = ("n_iter_", "t_", "train_losses_", "validation_losses_", "validation_epochs_")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded into this estimator: missing, damaged or foreign.

    Examples
    --------
    >>> read_checkpoint("no/such/file.ckpt")
    Traceback (most recent call last):
    ...
    helpers.whole_training.checkpoints.CheckpointError: no/such/file.ckpt: no such checkpoint file.
    """


def append_checksum(path):
    """Append the SHA-256 of the file ``path`` to its end (:data:`CHECKSUM_MARK` and 64 hex digits).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     _ = f.write(b"checkpoint")
    >>> append_checksum(f.name)
    >>> checksum_problem(f.name) is None, len(open(f.name, "rb").read())
    (True, 90)
    """
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(path, "ab") as f:
        f.write(CHECKSUM_MARK + digest.encode("ascii"))
        f.flush()
        os.fsync(f.fileno())


def checksum_problem(path):
    """What is wrong with the checksum at the end of ``path``, or None when the content matches it.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     _ = f.write(b"checkpoint")
    >>> checksum_problem(f.name)  # doctest: +NORMALIZE_WHITESPACE
    'it has no checksum: it was not written by OrtGradientOptimizer.save_checkpoint, or it was cut
    short'
    """
    with open(path, "rb") as f:
        content = f.read()
    size = len(CHECKSUM_MARK) + 64
    if len(content) < size or content[-size:-64] != CHECKSUM_MARK:
        return (
            "it has no checksum: it was not written by OrtGradientOptimizer.save_checkpoint, or "
            "it was cut short"
        )
    if hashlib.sha256(content[:-size]).hexdigest().encode("ascii") != content[-64:]:
        return "its content does not match its checksum"
    return None


def encode_array(array):
    """An array as text: numpy's format, no pickle, in base64.

    Examples
    --------
    >>> decode_array(encode_array(np.arange(3))).tolist()
    [0, 1, 2]
    """
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_array(text):
    """The array :func:`encode_array` wrote.

    Examples
    --------
    >>> decode_array(encode_array(np.eye(2, dtype=np.float32))).dtype
    dtype('float32')
    """
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def training_state(optimizer):
    """The JSON text of what a fitted optimizer needs to continue, besides its weights.

    Parameters
    ----------
    optimizer : helpers.OrtGradientOptimizer
        A fitted optimizer.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(
    ...     add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4
    ... ).fit(X, y)
    >>> state = json.loads(training_state(opt))
    >>> state["n_iter_"], state["t_"], state["update_rule"]
    (2, 4, 'SGDRule()')
    """
    name, keys, pos, has_gauss, cached = optimizer._rng.get_state()
    updater = optimizer._runtime.updater
    state = {key: getattr(optimizer, key) for key in _COUNTERS}
    state.update(
        y_ndim=optimizer._y_ndim,
        weights_to_train_=optimizer.weights_to_train_,
        update_rule=repr(optimizer.update_rule_),
        rng=[name, keys.tolist(), pos, has_gauss, cached],
        draws=None if optimizer._draws is None else optimizer._draws.bit_generator.state,
        update_state=[encode_array(v) for v in (updater.get_state() if updater else [])],
    )
    partial = getattr(
        optimizer, "_partial_epoch", None
    )  # an interrupted epoch: its rows, how far it went
    state["partial_epoch"] = (
        None if partial is None else [encode_array(partial[0]), int(partial[1]), float(partial[2])]
    )
    return json.dumps(state)


def read_checkpoint(path):
    """The training state and the parameter shapes of checkpoint ``path``, once the file is checked.

    Returns
    -------
    state : dict
        What :func:`training_state` saved.
    shapes : dict
        Parameter name to its shape, as saved.

    Raises
    ------
    CheckpointError
        When the file does not exist, its content does not match its
        checksum (or it has none), onnxruntime cannot read it, or it was not
        written by :meth:`helpers.OrtGradientOptimizer.save_checkpoint`.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(
    ...     add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4
    ... ).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     opt.save_checkpoint(os.path.join(folder, "ckpt"))
    ...     state, shapes = read_checkpoint(os.path.join(folder, "ckpt"))
    >>> state["weights_to_train_"], shapes["coefficient0"]
    (['coefficient0', 'intercept0', 'coefficient1', 'intercept1'], (2, 3))
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file.")
    problem = checksum_problem(path)
    if problem is not None:
        raise CheckpointError(f"{path} is damaged or foreign: {problem}.")
    # onnxruntime's flatbuffers, without the training package: 2 s to import onnxruntime
    from .checkpoint_file import read_checkpoint_file  # noqa: PLC0415

    try:
        content = read_checkpoint_file(path)
    except (OSError, ValueError) as exc:  # a damaged file, or one that is no checkpoint
        raise CheckpointError(
            f"{path} is damaged or not a checkpoint: onnxruntime cannot read it "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})."
        ) from None
    properties = content.properties
    shapes = {
        name: tuple(value.shape) for name, value in {**content.trained, **content.frozen}.items()
    }
    if not isinstance(properties.get(CHECKPOINT_KEY), str):
        raise CheckpointError(f"{path} was not written by OrtGradientOptimizer.save_checkpoint.")
    try:
        return json.loads(properties[CHECKPOINT_KEY]), shapes
    except ValueError:
        raise CheckpointError(f"{path} is damaged: its training state is not readable.") from None


def check_training_state(optimizer, state, shapes, path):
    """Raise a :class:`CheckpointError` when checkpoint ``path`` was saved by a training of another
    model or rule.

    Parameters
    ----------
    optimizer : helpers.OrtGradientOptimizer
        Prepared (its ``weights_to_train_`` and ``update_rule_`` known).
    state, shapes : dict
        What :func:`read_checkpoint` returned.
    path : str
        Named in the message.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(
    ...     add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4
    ... ).fit(X, y)
    >>> state = json.loads(training_state(opt))
    >>> shapes = {name: value.shape for name, value in opt.get_state().items()}
    >>> other = {**shapes, "coefficient0": (2, 6)}
    >>> check_training_state(opt, state, other, "train.ckpt")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    helpers.whole_training.checkpoints.CheckpointError: train.ckpt was saved from another model: it
    has weight 'coefficient0' of shape (2, 6), this model's is (2, 3). Load it into an optimizer
    built on the model it was saved from.
    """
    if state["weights_to_train_"] != optimizer.weights_to_train_ or state["update_rule"] != repr(
        optimizer.update_rule_
    ):
        raise CheckpointError(
            f"{path} trained {state['weights_to_train_']} with {state['update_rule']}; this "
            f"optimizer trains {optimizer.weights_to_train_} with {optimizer.update_rule_!r}: "
            "build it with the parameters of the saved training."
        )
    expected = {name: value.shape for name, value in optimizer._initial_weights().items()}
    for name, shape in expected.items():
        if name not in shapes or tuple(shapes[name]) != tuple(shape):
            saved = (
                f"has no weight {name!r}"
                if name not in shapes
                else f"has weight {name!r} of shape {tuple(shapes[name])}"
            )
            raise CheckpointError(
                f"{path} was saved from another model: it {saved}, this model's is {tuple(shape)}. "
                "Load it into an optimizer built on the model it was saved from."
            )


def restore_training_state(optimizer, state):
    """Put ``state`` (from :func:`read_checkpoint`) back into an optimizer rebuilt from the
    checkpoint.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(
    ...     add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4
    ... ).fit(X, y)
    >>> state = json.loads(training_state(opt))
    >>> opt.n_iter_ = 0
    >>> restore_training_state(opt, state)
    >>> opt.n_iter_
    2
    """
    # AdamW's moments saved by the training package's optimizer are in the checkpoint's optimizer
    # state, not here: the session loaded them with the weights
    if optimizer._runtime.updater is not None and state["update_state"]:
        optimizer._runtime.updater.set_state([decode_array(v) for v in state["update_state"]])
    name, keys, pos, has_gauss, cached = state["rng"]
    optimizer._rng = np.random.RandomState()
    optimizer._rng.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    optimizer._draws = None
    if state.get("draws") is not None:  # the dropout masks continue where the saved fit stopped
        optimizer._draws = np.random.Generator(np.random.PCG64())
        optimizer._draws.bit_generator.state = state["draws"]
    for key in _COUNTERS:
        setattr(optimizer, key, state[key])
    optimizer._y_ndim = state["y_ndim"]
    partial = state.get("partial_epoch")
    optimizer._partial_epoch = (
        None if partial is None else (decode_array(partial[0]), partial[1], partial[2])
    )
