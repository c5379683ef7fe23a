"""The arrays a step model is trained on, checked against its batch inputs.

Features, labels and sample weights are cast to the element type the step model declares when
the kind agrees (float64 to float32, int32 to int64), a 1-D label becomes the column a
``(N, 1)`` input expects, and anything else the runtime would refuse or train on silently
wrong (a float where ids are expected, ids the input's integer type cannot hold, a wrong number
of columns, NaN or infinity, rows that differ in number) raises ``ValueError`` naming the array
and the fix. A step without features (a model whose prediction takes no input) is trained with
``X=None`` (:func:`batch_roles`).
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

    Integers are cast only where the input's type holds them:

    >>> ids = TensorSpec("ids", np.dtype(np.int32), (None,))
    >>> check_array(ids, np.array([3, 2**31]), "X")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: X holds 1 value outside int32's range [-2147483648, 2147483647] (the first, ...
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
    if wanted.kind in "iu" and array.dtype.kind in "iu":
        _check_integer_range(spec, array, what)
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


def _check_integer_range(spec, array, what):
    """Raise ``ValueError`` when ``array`` holds integers the input's type cannot: a cast would
    wrap them around, silently."""
    wanted = spec.dtype
    if array.size == 0 or np.can_cast(array.dtype, wanted):
        return
    info = np.iinfo(wanted)
    low, high = int(array.min()), int(array.max())
    if info.min <= low and high <= info.max:
        return
    bad = np.zeros(array.shape, dtype=bool)
    if low < info.min:  # then info.min fits array's type, and so below for info.max
        bad |= array < info.min
    if high > info.max:
        bad |= array > info.max
    count, first = int(bad.sum()), np.argwhere(bad)[0]
    raise ValueError(
        f"{what} holds {count} value{'s' if count > 1 else ''} outside {wanted}'s range "
        f"[{info.min}, {info.max}] (the first, {array[tuple(first)]}, in row {first[0]}), which "
        f"the step model's input {spec.name!r} takes: cast, they would wrap around. Number the "
        f"values within that range, or export the step with an input of type {array.dtype}."
    )


def _shape_text(shape):
    return "(" + ", ".join("N" if d is None else str(d) for d in shape) + ")"


def batch_roles(batch_inputs, parameters):
    """What the user calls each batch input of a step: ``"X"``, ``"y"``, ``"sample_weight"``.

    Features, label, then sample weights when the step takes them (three inputs). A step
    without features has the label alone, or the label and the weights its record's
    ``sample_weight`` parameter names (as the optimizers' export writes it).

    Parameters
    ----------
    batch_inputs : list of str
        The record's batch inputs.
    parameters : dict
        The record's parameters.

    Returns
    -------
    list of str

    Examples
    --------
    >>> batch_roles(["X", "label"], {}), batch_roles(["label"], {})
    (['X', 'y'], ['y'])
    >>> batch_roles(["label", "weight"], {"sample_weight": "weight"})
    ['y', 'sample_weight']
    """
    count = len(batch_inputs)
    if count >= 3:
        return list(USER_NAMES)
    if count == 2:
        weighted = parameters.get("sample_weight") == batch_inputs[1]
        return ["y", "sample_weight"] if weighted else ["X", "y"]
    return ["y"][:count]


def check_batch_arrays(specs, X, y, sample_weight=None, class_labels=False, roles=None):
    """The arrays of a fit, one per batch input of the step model, all with the same rows.

    Parameters
    ----------
    specs : list of TensorSpec
        The step model's batch inputs (features, label, sample weights when it takes them).
    X : array-like or None
        The features; None for a step without any (``roles`` without ``"X"``).
    y : array-like
    sample_weight : array-like or None
        Ones when the step takes weights and none are given.
    class_labels : bool
        The step's loss is a softmax cross-entropy on one-hot rows: ``y`` may hold one class
        index per sample, as ``fit`` of the exporting optimizer takes it
        (:func:`~helpers.portable.class_labels.class_labels_as_one_hot`).
    roles : list of str or None
        What each of ``specs`` is (:func:`batch_roles`); None: features, label, weights, in
        that order.

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

    A step without features takes ``X=None``:

    >>> check_batch_arrays(specs[1:], None, [2, 0], class_labels=True, roles=["y"])[0].shape
    (2, 3)
    """
    roles = list(USER_NAMES[: len(specs)]) if roles is None else list(roles)
    if "y" not in roles:
        raise ValueError(
            f"This step model's batch inputs {[s.name for s in specs]} have no label: it is not "
            "a training step of this project. Export the step again."
        )
    if sample_weight is not None and "sample_weight" not in roles:
        raise ValueError(
            "This step model was exported without sample weights: train it without "
            "sample_weight, or export the step from an optimizer fitted with sample weights."
        )
    if "X" in roles and X is None:
        raise ValueError(
            f"X is None, but the step model takes features (its input {specs[0].name!r}): give "
            "X, one row per sample."
        )
    if "X" not in roles and X is not None:
        raise ValueError(
            f"This step model takes no features (its batch inputs are {[s.name for s in specs]}, "
            "a label and sample weights): pass X=None."
        )
    if y is None:
        raise ValueError("y is None: give the labels, one per sample.")
    label = specs[roles.index("y")]
    if class_labels and len(label.shape) == 2 and label.shape[1]:
        one_hot = class_labels_as_one_hot(y, label.shape[1])
        y = y if one_hot is None else one_hot
    given = {"X": X, "y": y, "sample_weight": sample_weight}
    arrays = {
        role: check_array(spec, given[role], role)
        for spec, role in zip(specs, roles)
        if given[role] is not None
    }
    first = roles[0]
    if "sample_weight" in roles and sample_weight is None:
        arrays["sample_weight"] = np.ones(len(arrays[first]), np.float32)
    for what in roles[1:]:
        if len(arrays[what]) != len(arrays[first]):
            raise ValueError(
                f"{first} has {len(arrays[first])} rows but {what} has {len(arrays[what])}: give "
                "one per sample."
            )
    if len(arrays[first]) == 0:
        raise ValueError(f"{first} has no rows: give at least one sample.")
    return [arrays[role] for role in roles]
