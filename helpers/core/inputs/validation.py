"""Checks on the data given to ``fit``, ``predict`` and ``score``.

The runtime itself reports a wrong dtype or shape with a C++ message, and
silently trains on NaN. These checks name the problem and the fix instead.
"""

import math
import numbers

import numpy as np
from onnx import TensorProto

from ...portable.class_labels import class_labels_as_one_hot
from ..graphs.graph_shapes import tensor_dims


def _as_float32(name, values):
    """Return ``values`` as a C-contiguous float32 array.

    Floating point, integer and boolean arrays are converted: the models run
    in float32, like the ONNX graphs scikit-learn models convert to. The
    missing values of pandas' nullable columns (``pd.NA``) become NaN.
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
        try:  # numbers held as Python objects (a pandas column of mixed types, a nullable one...)
            if hasattr(values, "to_numpy"):  # pandas
                array = values.to_numpy(np.float64, na_value=np.nan)
            else:
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
        bad = tuple(int(i) for i in np.argwhere(~finite)[0])
        if np.isnan(array[bad]):
            what = "a missing value, NaN or pd.NA"
            fix = "impute the missing values (sklearn.impute.SimpleImputer)"
        else:
            what, fix = str(array[bad]), "clip the values (numpy.clip)"
        raise ValueError(
            f"{name} contains NaN or infinite values (first at index {bad}: {what}). Remove the "
            f"rows or {fix} before training."
        )


def check_finite_number(name, value):
    """Raise a clear error unless ``value`` is a finite real number, for the parameter ``name``.

    Examples
    --------
    >>> check_finite_number("momentum", 0.9)
    0.9
    >>> check_finite_number("learning_rate", float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: learning_rate must be a finite number, got inf.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return value


#: numpy types of the model inputs the optimizers feed: float32 features, integer ids.
INPUT_DTYPES = {
    TensorProto.FLOAT: np.float32,
    TensorProto.INT64: np.int64,
    TensorProto.INT32: np.int32,
}


class InputSpec:
    """What the model's data input takes: the shape of one sample, a type, the range of ids.

    Parameters
    ----------
    name : str
        The input's name.
    sample_shape : list or None
        The dimensions after the batch dimension (None where free), or None
        when the rank is unknown.
    dtype : numpy.dtype
        float32, or int64 / int32 for indices (token ids).
    id_ranges : dict
        For an integer input that indexes a table (``Gather`` on an
        initializer, the export of ``torch.nn.Embedding``): the table's
        name to its number of rows.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> spec = InputSpec.of(mlp_onnx(3, hidden=(4,)))
    >>> spec.name, spec.sample_shape, spec.dtype, spec.is_tabular
    ('X', [3], <class 'numpy.float32'>, True)
    """

    def __init__(self, name, sample_shape, dtype, id_ranges=None):
        self.name, self.sample_shape, self.dtype = name, sample_shape, dtype
        self.id_ranges = dict(id_ranges or {})

    @classmethod
    def of(cls, model):
        """The spec of the first input of ``model`` that is not an initializer."""
        initializers = {i.name: i for i in model.graph.initializer}
        info = next(i for i in model.graph.input if i.name not in initializers)
        dims = tensor_dims(info)
        dims = None if dims is None else dims[1:]
        ranges = {
            node.input[0]: int(initializers[node.input[0]].dims[0])
            for node in model.graph.node
            if node.op_type == "Gather"
            and len(node.input) > 1
            and node.input[1] == info.name
            and node.input[0] in initializers
            and not any(a.name == "axis" and a.i for a in node.attribute)
        }
        return cls(
            info.name, dims, INPUT_DTYPES.get(info.type.tensor_type.elem_type, np.float32), ranges
        )

    @property
    def is_tabular(self):
        """True for rows of float features, the input scikit-learn's conventions describe."""
        return (
            self.dtype == np.float32
            and self.sample_shape is not None
            and len(self.sample_shape) == 1
        )

    def describe(self):
        """The input as ``name[N, 1, 28, 28] (float32)``."""
        dims = (
            "?"
            if self.sample_shape is None
            else ", ".join("N" if d is None else str(d) for d in [None, *self.sample_shape])
        )
        return f"{self.name}[{dims}] ({np.dtype(self.dtype).name})"


def _as_ids(name, values, dtype):
    """Return ``values`` as integers of ``dtype``: integer arrays, or floats that are whole
    numbers."""
    array = np.asarray(values) if not hasattr(values, "nnz") else None
    if array is not None and array.dtype.kind in "iu":
        return np.ascontiguousarray(array, dtype=dtype)
    array = _as_float32(name, values)
    _check_finite(name, array)
    if not np.all(array == np.round(array)):
        raise ValueError(
            f"{name} holds values that are not whole numbers, but the model takes integer ids "
            f"({np.dtype(dtype).name}): give it the ids themselves (an integer array)."
        )
    return np.ascontiguousarray(array, dtype=dtype)


def _check_shape(X, spec, name):
    if spec.is_tabular:
        if X.ndim != 2:
            raise ValueError(
                f"Reshape your data: {name} must be a 2D array of shape (n_samples, n_features), "
                f"got shape {X.shape}. Use {name}.reshape(-1, 1) for a single feature or "
                f"{name}.reshape(1, -1) for a single sample."
            )
        if spec.sample_shape[0] is not None and X.shape[1] != spec.sample_shape[0]:
            raise ValueError(
                f"{name} has {X.shape[1]} features, but the model expects {spec.sample_shape[0]}."
            )
        return
    if spec.sample_shape is None:
        if X.ndim < 1:
            raise ValueError(f"{name} must be an array with one sample per row, got a scalar.")
        return
    expected = tuple("any" if d is None else d for d in spec.sample_shape)
    if X.ndim != len(expected) + 1 or any(
        d is not None and d != got for d, got in zip(spec.sample_shape, X.shape[1:])
    ):
        hint = ""
        if (
            None not in spec.sample_shape
            and X.ndim >= 1
            and X.size == X.shape[0] * int(np.prod(spec.sample_shape))
        ):
            dims = ", ".join(str(d) for d in spec.sample_shape)
            hint = f" Reshape it: {name}.reshape(-1, {dims})."
        raise ValueError(
            f"{name} has samples of shape {tuple(X.shape[1:])} ({name}: {X.shape}), but the "
            f"model's input {spec.describe()} takes samples of shape {expected}.{hint}"
        )


def _check_ids(X, spec, name):
    for table, rows in spec.id_ranges.items():
        low, high = int(X.min()), int(X.max())
        if low < 0 or high >= rows:
            raise ValueError(
                f"{name} holds ids from {low} to {high}, but the model's input {spec.name!r} "
                f"indexes {table!r}, which has {rows} rows: ids must be in 0..{rows - 1}."
            )


def check_features(X, spec=None, name="X"):
    """Validate the features (any rank) and convert them to the type of the model's input.

    Parameters
    ----------
    X : array-like of shape (n_samples,) + sample_shape
        Rows of features (float32), images, sequences, or integer ids.
    spec : InputSpec, optional
        What the model takes (:meth:`InputSpec.of`); None checks a 2-D
        float32 array of any width.
    name : str
        What the messages call ``X`` (``'X_val'`` for a validation set).

    Returns
    -------
    numpy.ndarray
        C-contiguous, of the type the model's input takes.

    Examples
    --------
    >>> check_features([[1, 2]]).dtype
    dtype('float32')
    >>> check_features([[1, 2]], InputSpec("X", [3], np.float32))
    Traceback (most recent call last):
    ...
    ValueError: X has 2 features, but the model expects 3.
    >>> images = InputSpec("x", [1, 8, 8], np.float32)
    >>> check_features(np.zeros((5, 64)), images)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: X has samples of shape (64,) (X: (5, 64)), but the model's input x[N, 1, 8, 8]
    (float32) takes samples of shape (1, 8, 8). Reshape it: X.reshape(-1, 1, 8, 8).
    >>> check_features([[3, 1], [0, 2]], InputSpec("ids", [2], np.int64, {"embedding": 4})).dtype
    dtype('int64')
    """
    spec = spec if spec is not None else InputSpec("X", [None], np.float32)
    X = _as_float32(name, X) if spec.dtype == np.float32 else _as_ids(name, X, spec.dtype)
    _check_shape(X, spec, name)
    if X.shape[0] == 0:
        raise ValueError(f"{name} has no rows.")
    if spec.dtype == np.float32:
        _check_finite(name, X)
    else:
        _check_ids(X, spec, name)
    return X


def check_targets(y, n_samples, label_shape, class_labels=False, names=("X", "y")):
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
    names : tuple of str
        What the messages call the features and the targets (``('X_val', 'y_val')``
        for a validation set).

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
    X_name, y_name = names
    y = _as_float32(y_name, y)
    if y.ndim == 0 or y.shape[0] != n_samples:
        got = "a scalar" if y.ndim == 0 else f"{y.shape[0]} rows"
        raise ValueError(
            f"{X_name} has {n_samples} rows but {y_name} has {got}: they must have "
            "one row per sample."
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
        if (
            isinstance(width, int)
            and width > 1
            and y.shape[1:] == (1,)
            and np.all(y == np.round(y))
        ):
            hint = (
                f" {y_name} looks like class labels: a model with {width} scores per sample trains "
                f"on one-hot targets, helpers.teaching.datasets.one_hot(y, {width}), or on class "
                "labels with the softmax cross-entropy (add_loss_output(..., "
                "score_name='cross_entropy') or learning_loss='cross_entropy'), which encodes them "
                "itself."
            )
        raise ValueError(
            f"{y_name} has shape {y.shape}, but the model predicts shape {expected}: one target "
            f"column per model output.{hint}"
        )
    _check_finite(y_name, y)
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
            "sample_weight is 0 for every sample: nothing would be learned and every loss would "
            "be 0. Give some samples a positive weight."
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
