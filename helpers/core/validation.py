"""Checks on the data given to ``fit``, ``predict`` and ``score``.

The runtime itself reports a wrong dtype or shape with a C++ message, and
silently trains on NaN. These checks name the problem and the fix instead.
"""
import numpy as np

from .class_labels import class_labels_as_one_hot


def _as_float32(name, values):
    """Return ``values`` as a C-contiguous float32 array.

    Floating point, integer and boolean arrays are converted: the models run
    in float32, like the ONNX graphs scikit-learn models convert to.
    """
    if hasattr(values, "toarray") and hasattr(values, "nnz"):
        raise TypeError(
            f"{name} is a sparse matrix: the ONNX models take dense arrays. Convert it with "
            f"{name}.toarray() (or train on a dense subset of the columns)."
        )
    array = np.asarray(values)
    if array.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} must hold real numbers.")
    if array.dtype.kind == "O":
        try:  # numbers held as Python objects (a pandas column of mixed types...)
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if array.dtype.kind not in "fiub":
        raise TypeError(
            f"{name} has dtype {array.dtype}: it must hold numbers. Encode "
            "categories and convert it to numeric values (float32) first."
        )
    return np.ascontiguousarray(array, dtype=np.float32)


def _check_finite(name, array):
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        raise ValueError(
            f"{name} contains NaN or infinite values (first at index "
            f"{tuple(int(i) for i in bad)}). Remove or impute them before "
            "training, for example with sklearn.impute.SimpleImputer."
        )


def check_features(X, n_features=None):
    """Validate and convert the features.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Converted to float32.
    n_features : int or None
        The number of columns the model expects, when known.

    Returns
    -------
    numpy.ndarray
        Float32, C-contiguous.

    Examples
    --------
    >>> check_features([[1, 2]], n_features=2).dtype
    dtype('float32')
    >>> check_features([[1, 2]], n_features=3)
    Traceback (most recent call last):
    ...
    ValueError: X has 2 features, but the model expects 3.
    """
    X = _as_float32("X", X)
    if X.ndim != 2:
        raise ValueError(
            f"Reshape your data: X must be a 2D array of shape (n_samples, n_features), got shape "
            f"{X.shape}. Use X.reshape(-1, 1) for a single feature or "
            "X.reshape(1, -1) for a single sample."
        )
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model expects {n_features}.")
    if X.shape[0] == 0:
        raise ValueError("X has no rows.")
    _check_finite("X", X)
    return X


def check_targets(y, n_samples, label_shape, class_labels=False):
    """Validate the targets and reshape them to the label input of the model.

    Parameters
    ----------
    y : array-like
        One target (row) per sample.
    n_samples : int
        Number of rows of X.
    label_shape : list
        Shape of the label input; static dimensions are ints, others None.
    class_labels : bool
        True when the loss is a softmax cross-entropy over the model's scores:
        one class index per sample is then encoded as a one-hot row.

    Returns
    -------
    numpy.ndarray
        Float32 targets with the rank of the label.

    Examples
    --------
    >>> check_targets([1, 2, 3], 3, [None, 1]).shape  # a label of shape (N, 1)
    (3, 1)
    >>> check_targets([2, 0], 2, [None, 3], class_labels=True)  # class indices, 3 scores
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    """
    width = label_shape[-1] if len(label_shape) == 2 else None
    if class_labels and isinstance(width, int) and width > 1:
        encoded = class_labels_as_one_hot(y, width)
        if encoded is not None:
            y = encoded
    y = _as_float32("y", y)
    if y.ndim == 0 or y.shape[0] != n_samples:
        got = "a scalar" if y.ndim == 0 else f"{y.shape[0]} rows"
        raise ValueError(
            f"X has {n_samples} rows but y has {got}: they must have one row per sample."
        )
    rank = len(label_shape)
    if y.ndim < rank:
        y = y.reshape(y.shape + (1,) * (rank - y.ndim))
    elif y.ndim > rank and all(d == 1 for d in y.shape[rank:]):
        y = y.reshape(y.shape[:rank])
    mismatch = any(
        isinstance(expected, int) and expected > 0 and got != expected
        for got, expected in zip(y.shape[1:], label_shape[1:])
    )
    if y.ndim != rank or mismatch:
        expected = ["N" if d is None else d for d in label_shape]
        hint = ""
        if isinstance(width, int) and width > 1 and y.shape[1:] == (1,) and np.all(y == np.round(y)):
            hint = (
                f" y looks like class labels: a model with {width} scores per sample trains on "
                f"one-hot targets, helpers.teaching.datasets.one_hot(y, {width}), or on class labels "
                "with the softmax cross-entropy (add_loss_output(..., score_name='cross_entropy') or "
                "learning_loss='cross_entropy'), which encodes them itself."
            )
        raise ValueError(
            f"y has shape {y.shape}, but the model predicts shape {expected}: one target "
            f"column per model output.{hint}"
        )
    _check_finite("y", y)
    return y


def check_sample_weight(sample_weight, n_samples):
    """Validate per-sample weights, returning ones when None.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,) or None
    n_samples : int

    Returns
    -------
    numpy.ndarray
        Float32 weights of shape (n_samples,).

    Examples
    --------
    >>> check_sample_weight(None, 3)
    array([1., 1., 1.], dtype=float32)
    """
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float32)
    w = _as_float32("sample_weight", sample_weight).ravel()
    if w.shape[0] != n_samples:
        raise ValueError(
            f"X has {n_samples} rows but sample_weight has {w.shape[0]} values: "
            "one weight per sample."
        )
    _check_finite("sample_weight", w)
    if (w < 0).any():
        raise ValueError("sample_weight has negative values: weights must be >= 0.")
    if not w.any():
        raise ValueError(
            "sample_weight is 0 for every sample: nothing would be learned and every loss would be 0. "
            "Give some samples a positive weight."
        )
    return w


def check_positive_int(name, value):
    """Raise a clear error unless ``value`` is an integer >= 1.

    Examples
    --------
    >>> check_positive_int("max_iter", 10)
    10
    >>> check_positive_int("max_iter", 2.5)
    Traceback (most recent call last):
    ...
    ValueError: max_iter must be an integer >= 1, got 2.5.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)
