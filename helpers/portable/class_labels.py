"""Class labels for a classifier's softmax loss: indices in, one-hot rows out.

A classifier exported to ONNX returns one raw score per class, and its
softmax cross-entropy compares those scores with one-hot rows. Users hold
class indices (``0 .. n_classes - 1``, what ``load_digits().target`` or
``sklearn.preprocessing.LabelEncoder`` give); :func:`one_hot` turns them into
those rows, and the optimizers call :func:`class_labels_as_one_hot` when their
loss is a softmax cross-entropy, so that ``fit(X, labels)`` works as it does
in scikit-learn.
"""

import numpy as np


def one_hot(y, n_classes=None):
    """Encode class indices as rows of zeros with a one: the softmax losses' labels.

    Parameters
    ----------
    y : array-like of int, shape (n_samples,)
        Class indices, from 0 to ``n_classes - 1``.
    n_classes : int or None
        Number of classes; ``max(y) + 1`` when None.

    Returns
    -------
    numpy.ndarray of shape (n_samples, n_classes), float32

    Examples
    --------
    >>> one_hot([0, 2, 1])
    array([[1., 0., 0.],
           [0., 0., 1.],
           [0., 1., 0.]], dtype=float32)
    """
    y = np.asarray(y)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"y must be a 1-D array of class indices, got dtype {y.dtype} and shape {y.shape}."
        )
    if n_classes is None:
        n_classes = int(y.max()) + 1
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"Class indices must be in [0, {n_classes - 1}], got {y.min()} to {y.max()}."
        )
    encoded = np.zeros((y.size, n_classes), dtype=np.float32)
    encoded[np.arange(y.size), y] = 1.0
    return encoded


def class_labels_as_one_hot(y, n_classes):
    """One-hot rows when ``y`` holds one class index per sample, else None.

    ``y`` holds class indices when it is one column (shape ``(n,)`` or
    ``(n, 1)``) of integers, or of floats with integer values. Indices
    outside ``0 .. n_classes - 1`` raise: they cannot be a class of a model
    with ``n_classes`` scores.

    Parameters
    ----------
    y : array-like
        The targets given to ``fit`` or ``score``.
    n_classes : int
        Scores per sample of the model.

    Returns
    -------
    numpy.ndarray of shape (n_samples, n_classes), float32, or None

    Examples
    --------
    >>> class_labels_as_one_hot([2, 0], n_classes=3)
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    >>> print(class_labels_as_one_hot([[0.2, 0.8]], n_classes=2))  # already one row per sample
    None
    >>> class_labels_as_one_hot([0, 3], n_classes=3)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: y holds class labels from 0 to 3, but the model has 3 scores per sample: labels must
    be class indices from 0 to 2 (sklearn.preprocessing.LabelEncoder makes them from any labels).
    """
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1 and n_classes > 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.dtype.kind not in "iuf" or labels.size == 0:
        return None
    if labels.dtype.kind == "f":
        if not (np.all(np.isfinite(labels)) and np.all(labels == np.round(labels))):
            return None
        labels = labels.astype(np.int64)
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= n_classes:
        raise ValueError(
            f"y holds class labels from {low} to {high}, but the model has {n_classes} scores per "
            f"sample: labels must be class indices from 0 to {n_classes - 1} "
            "(sklearn.preprocessing.LabelEncoder makes them from any labels)."
        )
    return one_hot(labels, n_classes)
