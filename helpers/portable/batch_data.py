"""The arrays a step model is trained on, checked against its batch inputs.

Features, labels and sample weights are cast to the element type the step model declares when
the kind agrees (float64 to float32, int32 to int64), a 1-D label becomes the column a
``(N, 1)`` input expects, and anything else the runtime would refuse or train on silently
wrong (a float where ids are expected, a wrong number of columns, NaN or infinity, rows that
differ in number) raises ``ValueError`` naming the array and the fix.
"""

import numpy as np

from .class_labels import class_labels_as_one_hot

#: What the user calls each batch input, by position: features, label, sample weights.
USER_NAMES = ("X", "y", "sample_weight")


def check_array(spec, value, what):
    """``value`` as the contiguous array the input ``spec`` takes.

    Parameters
    ----------
    spec : helpers.portable.step_model.TensorSpec
    value : array-like
    what : str
        The array's name in the messages (``"X"``).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> from helpers.portable.step_model import TensorSpec
    >>> spec = TensorSpec("label", np.dtype(np.float32), (None, 1))
    >>> check_array(spec, np.array([1.0, 2.0]), "y").shape
    (2, 1)
    >>> check_array(spec, np.array([1.0, np.nan]), "y")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: y holds 1 NaN or infinite value (the first in row 1): ...
    """
    array = np.asarray(value)
    wanted = spec.dtype
    accepted = "biuf" if wanted.kind == "f" else "biu"
    if array.dtype.kind not in accepted:
        raise ValueError(
            f"{what} has dtype {array.dtype}, but the step model's input {spec.name!r} takes "
            f"{wanted}: give {what} as a numpy array of {wanted}."
        )
    if array.ndim == spec.rank - 1 and spec.shape[-1] == 1:
        array = array.reshape(*array.shape, 1)
    if array.ndim != spec.rank:
        raise ValueError(
            f"{what} has {array.ndim} dimensions (shape {array.shape}), but the step model's input "
            f"{spec.name!r} takes {spec.rank} (shape {_shape_text(spec.shape)})."
        )
    wrong = [
        i for i, size in enumerate(spec.shape[1:], 1) if size is not None and array.shape[i] != size
    ]
    if wrong:
        raise ValueError(
            f"{what} has shape {array.shape}, but the step model's input {spec.name!r} takes "
            f"{_shape_text(spec.shape)}: dimension {wrong[0]} differs."
        )
    array = np.ascontiguousarray(array, dtype=wanted)
    if wanted.kind == "f":
        bad = ~np.isfinite(array)
        if bad.any():
            count, row = int(bad.sum()), int(np.argwhere(bad)[0][0])
            raise ValueError(
                f"{what} holds {count} NaN or infinite value{'s' if count > 1 else ''} (the first "
                f"in row {row}): remove or impute those rows before training."
            )
    return array


def _shape_text(shape):
    return "(" + ", ".join("N" if d is None else str(d) for d in shape) + ")"


def check_batch_arrays(specs, X, y, sample_weight=None, class_labels=False):
    """The arrays of a fit, one per batch input of the step model, all with the same rows.

    Parameters
    ----------
    specs : list of TensorSpec
        The step model's batch inputs (features, label, sample weights when it takes them).
    X, y : array-like
    sample_weight : array-like or None
        Ones when the step takes weights and none are given.
    class_labels : bool
        The step's loss is a softmax cross-entropy on one-hot rows: ``y`` may hold one class
        index per sample, as ``fit`` of the exporting optimizer takes it
        (:func:`~helpers.portable.class_labels.class_labels_as_one_hot`).

    Returns
    -------
    list of numpy.ndarray

    Examples
    --------
    >>> from helpers.portable.step_model import TensorSpec
    >>> specs = [TensorSpec("X", np.dtype(np.float32), (None, 2)),
    ...          TensorSpec("label", np.dtype(np.float32), (None, 1))]
    >>> [a.shape for a in check_batch_arrays(specs, np.zeros((4, 2)), np.zeros(4))]
    [(4, 2), (4, 1)]
    >>> check_batch_arrays(specs, np.zeros((4, 2)), np.zeros(3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: X has 4 rows but y has 3: ...

    A classifier's step takes one-hot rows; its users give class indices:

    >>> specs[1] = TensorSpec("label", np.dtype(np.float32), (None, 3))
    >>> check_batch_arrays(specs, np.zeros((2, 2)), [2, 0], class_labels=True)[1].tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if sample_weight is not None and len(specs) < 3:
        raise ValueError(
            "This step model was exported without sample weights: train it without "
            "sample_weight, or export the step from an optimizer fitted with sample weights."
        )
    if class_labels and len(specs[1].shape) == 2 and specs[1].shape[1]:
        one_hot = class_labels_as_one_hot(y, specs[1].shape[1])
        y = y if one_hot is None else one_hot
    values = [X, y]
    if len(specs) >= 3:
        rows = len(np.asarray(X))
        values.append(np.ones(rows, np.float32) if sample_weight is None else sample_weight)
    arrays = [check_array(spec, v, what) for spec, v, what in zip(specs, values, USER_NAMES)]
    for array, what in zip(arrays[1:], USER_NAMES[1:]):
        if len(array) != len(arrays[0]):
            raise ValueError(
                f"X has {len(arrays[0])} rows but {what} has {len(array)}: give one per sample."
            )
    if len(arrays[0]) == 0:
        raise ValueError("X has no rows: give at least one sample.")
    return arrays
