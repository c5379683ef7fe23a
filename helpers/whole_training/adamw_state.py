"""The AdamW moments onnxruntime's optimizer keeps, read from a checkpoint.

onnxruntime-training 1.19.2 offers no way to read an ``Optimizer``'s state in Python; its
checkpoint holds it (``include_optimizer_state=True``): one optimizer group whose state gives,
for each trained weight, ``momentum0`` (torch's ``exp_avg``) and ``momentum1``
(``exp_avg_sq``). :func:`adamw_moments` reads them with
:func:`helpers.whole_training.checkpoint_file.read_checkpoint_file` (the flatbuffers schema
onnxruntime ships), so that a fitted :class:`helpers.OrtGradientOptimizer` exports its step with
its moments.
"""

from .checkpoint_file import read_checkpoint_file

#: onnxruntime's names of AdamW's moments, in the order of torch's (``exp_avg``, ``exp_avg_sq``).
MOMENT_NAMES = ("momentum0", "momentum1")


def moments_by_weight(names, buffers):
    """The AdamW buffers of an update graph (``exp_avg`` then ``exp_avg_sq`` of each weight of
    ``names``, :meth:`~helpers.core.updates.weight_updater.WeightUpdater.get_state`'s order) as
    a checkpoint holds them: weight name to moment name to array.

    Examples
    --------
    >>> import numpy as np
    >>> moments = moments_by_weight(["w"], [np.zeros(2), np.ones(2)])
    >>> sorted(moments["w"]), moments["w"]["momentum1"].tolist()
    (['momentum0', 'momentum1'], [1.0, 1.0])
    """
    return {
        name: dict(zip(MOMENT_NAMES, buffers[2 * i : 2 * i + 2])) for i, name in enumerate(names)
    }


def adamw_moments(checkpoint, names):
    """The AdamW moments of the weights ``names`` in the checkpoint ``checkpoint`` (bytes).

    Parameters
    ----------
    checkpoint : bytes
        A checkpoint of onnxruntime-training saved with its optimizer state (trailing bytes,
        such as the checksum :mod:`helpers.whole_training.checkpoints` appends, are ignored).
    names : list of str

    Returns
    -------
    list of numpy.ndarray
        ``exp_avg`` then ``exp_avg_sq`` of each weight, in the order of ``names``.

    Raises
    ------
    ValueError
        When the checkpoint holds no AdamW state for one of ``names``, or is no checkpoint.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.whole_training.checkpoint_file import checkpoint_bytes
    >>> two = np.ones(2, np.float32)
    >>> saved = checkpoint_bytes(
    ...     {"w": 0 * two}, moments={"w": {"momentum0": two, "momentum1": 4 * two}}, step=3
    ... )
    >>> moments = adamw_moments(saved, ["w"])
    >>> [m.tolist() for m in moments]
    [[1.0, 1.0], [4.0, 4.0]]
    """
    states = read_checkpoint_file(checkpoint).moments
    moments = []
    for name in names:
        found = states.get(name, {})
        if not set(MOMENT_NAMES) <= set(found):
            raise ValueError(f"The checkpoint holds no AdamW moments for {name!r}.")
        moments += [found[moment] for moment in MOMENT_NAMES]
    return moments
