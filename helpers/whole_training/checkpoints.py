"""The training state a checkpoint carries beside onnxruntime's own.

onnxruntime's checkpoint holds the weights and its optimizer's state (AdamW's
moments). The rest of a training (epochs and updates done, losses, the
buffers of an update rule run as a graph, the shuffling generator) goes into
one of its string properties as JSON: loading a checkpoint unpickles
nothing, so it cannot run code.
"""
import base64
import io
import json

import numpy as np
from onnxruntime.training.api import CheckpointState

#: The checkpoint property holding the training state.
CHECKPOINT_KEY = "helpers.training_state"

#: The training attributes a checkpoint keeps, as they are.
_COUNTERS = ("n_iter_", "t_", "train_losses_", "validation_losses_", "validation_epochs_")


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
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4).fit(X, y)
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
        update_state=[encode_array(v) for v in (updater.get_state() if updater else [])],
    )
    return json.dumps(state)


def read_training_state(path):
    """The training state saved in checkpoint ``path``, as a dict.

    Raises
    ------
    ValueError
        When the checkpoint was not written by
        :meth:`helpers.OrtGradientOptimizer.save_checkpoint`.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     opt.save_checkpoint(os.path.join(folder, "ckpt"))
    ...     read_training_state(os.path.join(folder, "ckpt"))["weights_to_train_"]
    ['coefficient0', 'intercept0', 'coefficient1', 'intercept1']
    """
    probe = CheckpointState.load_checkpoint(path)
    if CHECKPOINT_KEY not in probe.properties:
        raise ValueError(f"{path} was not written by OrtGradientOptimizer.save_checkpoint.")
    return json.loads(probe.properties[CHECKPOINT_KEY])


def check_training_state(optimizer, state):
    """Raise a clear error when ``state`` was saved by a training with other weights or another rule.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4).fit(X, y)
    >>> state = json.loads(training_state(opt))
    >>> check_training_state(opt.set_params(solver="adamw")._prepare() or opt, state)
    Traceback (most recent call last):
    ...
    ValueError: The checkpoint trained ['coefficient0', 'intercept0', 'coefficient1', 'intercept1'] with SGDRule(); this optimizer trains ['coefficient0', 'intercept0', 'coefficient1', 'intercept1'] with AdamWRule(betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0): build it with the parameters of the saved training.
    """
    if state["weights_to_train_"] != optimizer.weights_to_train_ or state["update_rule"] != repr(optimizer.update_rule_):
        raise ValueError(
            f"The checkpoint trained {state['weights_to_train_']} with {state['update_rule']}; this "
            f"optimizer trains {optimizer.weights_to_train_} with {optimizer.update_rule_!r}: build it "
            "with the parameters of the saved training."
        )


def restore_training_state(optimizer, state):
    """Put ``state`` (from :func:`read_training_state`) back into an optimizer rebuilt from the checkpoint.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X, y = np.ones((8, 2), dtype=np.float32), np.zeros(8, dtype=np.float32)
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(2, hidden=(3,))), max_iter=2, batch_size=4).fit(X, y)
    >>> state = json.loads(training_state(opt))
    >>> opt.n_iter_ = 0
    >>> restore_training_state(opt, state)
    >>> opt.n_iter_
    2
    """
    if optimizer._runtime.updater is not None:
        optimizer._runtime.updater.set_state([decode_array(v) for v in state["update_state"]])
    name, keys, pos, has_gauss, cached = state["rng"]
    optimizer._rng = np.random.RandomState()
    optimizer._rng.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    for key in _COUNTERS:
        setattr(optimizer, key, state[key])
    optimizer._y_ndim = state["y_ndim"]
