"""Small regression and classification data sets for the notebooks, in float32.

ONNX graphs converted from scikit-learn run in float32, so the features and
the regression targets are returned in that type, ready to feed the runtime;
class labels are int64 indices (:func:`one_hot` encodes them).
"""

import numpy as np
from sklearn.datasets import load_diabetes, make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from ..portable.class_labels import one_hot  # noqa: F401  (re-exported: the notebooks' import)


def split_standardized(X, y, test_size=0.25, random_state=0, stratify=None, y_dtype=np.float32):
    """Split rows into a training and a test part, standardize the features.

    The scaler is fitted on the training part only, so no statistic of the
    test rows leaks into training.

    Parameters
    ----------
    X, y : array-like
    test_size : float or int
        Fraction (or number) of rows kept for the test part.
    random_state : int, RandomState or None
        Seed of the split.
    stratify : array-like, optional
        Class labels whose shares both parts keep.
    y_dtype : numpy dtype
        Type of the returned targets.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_train``, ``X_test`` (float32), ``y_train``, ``y_test`` and
        ``scaler``, the fitted StandardScaler.

    Examples
    --------
    >>> import numpy as np
    >>> data = split_standardized(np.arange(20.0).reshape(10, 2), np.arange(10), test_size=0.2)
    >>> data.X_train.shape, data.X_test.shape, data.X_train.dtype
    ((8, 2), (2, 2), dtype('float32'))
    >>> data.X_train.std(axis=0)
    array([1., 1.], dtype=float32)
    """
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=random_state, stratify=stratify
    )
    scaler = StandardScaler().fit(X_train)
    return Bunch(
        X_train=scaler.transform(X_train).astype(np.float32),
        X_test=scaler.transform(X_test).astype(np.float32),
        y_train=np.asarray(y_train).astype(y_dtype),
        y_test=np.asarray(y_test).astype(y_dtype),
        scaler=scaler,
    )


def make_synthetic_regression(
    n_samples=1000, n_features=10, n_informative=None, noise=0.0, bias=0.0, random_state=None
):
    """A linear regression problem whose true coefficients are known.

    Wraps :func:`sklearn.datasets.make_regression`: the features are standard
    normal, ``y = X @ coef + bias + noise`` with Gaussian noise of standard
    deviation ``noise``.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_features : int
        Number of columns.
    n_informative : int or None
        Number of non-zero true coefficients; None means all of them.
    noise : float
        Standard deviation of the noise added to the targets.
    bias : float
        The true intercept.
    random_state : int, RandomState or None
        Seed of the features, coefficients and noise.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, n_features), float32
    y : numpy.ndarray of shape (n_samples,), float32
    coef : numpy.ndarray of shape (n_features,), float32
        The true coefficients: without noise, ``X @ coef + bias`` equals
        ``y`` up to float32 rounding.

    Examples
    --------
    >>> import numpy as np
    >>> X, y, coef = make_synthetic_regression(n_samples=50, n_features=3, bias=1.0, random_state=0)
    >>> X.shape, y.shape, coef.shape
    ((50, 3), (50,), (3,))
    >>> bool(np.allclose(X @ coef + 1.0, y, atol=1e-3))
    True
    """
    if n_informative is None:
        n_informative = n_features
    X, y, coef = make_regression(
        n_samples=n_samples,
        n_features=n_features,
        n_informative=n_informative,
        noise=noise,
        bias=bias,
        coef=True,
        random_state=random_state,
    )
    return X.astype(np.float32), y.astype(np.float32), coef.astype(np.float32)


def load_diabetes_standardized(test_size=0.25, random_state=0):
    """The diabetes data set of scikit-learn, split and standardized.

    The ten features are loaded unscaled, split into a training and a test
    part, then standardized with a :class:`~sklearn.preprocessing.StandardScaler`
    fitted on the training part only, so that nothing about the test part
    leaks into training. The target (a disease progression score, about 25
    to 350) is left as it is.

    Parameters
    ----------
    test_size : float
        Fraction of the rows kept for the test part.
    random_state : int, RandomState or None
        Seed of the split.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_train``, ``X_test`` (float32, 10 columns), ``y_train``, ``y_test``
        (float32, one dimension), ``feature_names`` (list of str) and
        ``scaler`` (the fitted StandardScaler).

    Examples
    --------
    >>> data = load_diabetes_standardized()
    >>> data.X_train.shape, data.X_test.shape
    ((331, 10), (111, 10))
    >>> data.feature_names[:4], data.y_train[:3]
    (['age', 'sex', 'bmi', 'bp'], array([ 68., 109.,  94.], dtype=float32))
    """
    data = load_diabetes(scaled=False)
    split = split_standardized(data.data, data.target, test_size, random_state)
    split.feature_names = list(data.feature_names)
    return split


def make_friedman1_standardized(n_samples=1000, noise=1.0, test_size=0.25, random_state=0):
    """A nonlinear regression problem (Friedman #1), split and standardized.

    :func:`sklearn.datasets.make_friedman1` draws ten uniform features on
    ``[0, 1]`` and builds
    ``y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)**2 + 10 x3 + 5 x4 + noise``: the last
    five features are unused. A linear model cannot fit the sine and the
    square, a small neural network can. The features are standardized with
    the mean and standard deviation of the training part; the target is left
    as it is (about 5 to 25).

    Parameters
    ----------
    n_samples : int
        Rows before the split.
    noise : float
        Standard deviation of the Gaussian noise added to ``y``.
    test_size : float or int
        Fraction (or number) of rows kept for the test part.
    random_state : int
        Seed of the data and of the split.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_train``, ``X_test`` (float32, 10 columns), ``y_train``, ``y_test``
        (float32, one dimension), ``feature_names`` and ``scaler``.

    Examples
    --------
    >>> data = make_friedman1_standardized(n_samples=100)
    >>> data.X_train.shape, data.X_test.shape
    ((75, 10), (25, 10))
    >>> data.feature_names[:3]
    ['x0', 'x1', 'x2']
    """
    from sklearn.datasets import make_friedman1  # noqa: PLC0415

    X, y = make_friedman1(n_samples=n_samples, noise=noise, random_state=random_state)
    split = split_standardized(X, y, test_size, random_state)
    split.feature_names = [f"x{i}" for i in range(X.shape[1])]
    return split


def load_diabetes_scaled(test_size=0.25, random_state=0):
    """The diabetes data set with standardized features *and* target.

    As :func:`load_diabetes_standardized`, and the target is standardized
    too, with the mean and standard deviation of the training part. A neural
    network starts from small random weights, so its first predictions are
    near 0; on the raw target (about 25 to 350) the first squared errors, and
    gradients, would be huge. R² is the same on either scale; to get a mean
    squared error in the original units, multiply it by ``target_scale**2``.

    Parameters
    ----------
    test_size : float or int
        Fraction (or number) of rows kept for the test part.
    random_state : int, RandomState or None
        Seed of the split.

    Returns
    -------
    sklearn.utils.Bunch
        The fields of :func:`load_diabetes_standardized`, the targets
        standardized, plus ``target_mean`` and ``target_scale`` (floats):
        ``y_original = y * target_scale + target_mean``.

    Examples
    --------
    >>> data = load_diabetes_scaled()
    >>> round(float(data.y_train.mean()), 4), round(float(data.y_train.std()), 4)
    (0.0, 1.0)
    >>> round(data.target_mean, 2), round(data.target_scale, 2)
    (151.92, 79.08)
    >>> data.y_train[:3] * data.target_scale + data.target_mean  # the original targets
    array([ 68., 109.,  94.], dtype=float32)
    """
    data = load_diabetes_standardized(test_size=test_size, random_state=random_state)
    mean, scale = float(data.y_train.mean()), float(data.y_train.std())
    data.y_train = ((data.y_train - mean) / scale).astype(np.float32)
    data.y_test = ((data.y_test - mean) / scale).astype(np.float32)
    data.target_mean, data.target_scale = mean, scale
    return data


#: Classification data sets shipped with scikit-learn (no download).
CLASSIFICATION_DATASETS = ("digits", "breast_cancer", "iris", "wine")


def load_classification_standardized(name="digits", test_size=0.25, random_state=0):
    """A classification data set of scikit-learn, split and standardized.

    The split is stratified (each class keeps its share in both parts) and
    the features are standardized with the statistics of the training part.
    Constant columns (the border pixels of ``digits``) stay constant: the
    scaler leaves a zero variance column at zero instead of dividing by 0.

    Parameters
    ----------
    name : {'digits', 'breast_cancer', 'iris', 'wine'}
        ``digits``: 8x8 images of handwritten digits, 64 features, 10 classes;
        ``breast_cancer``: 30 measurements of a tumour, 2 classes
        (0 malignant, 1 benign); ``iris`` and ``wine``: 3 classes.
    test_size : float or int
        Fraction (or number) of rows kept for the test part.
    random_state : int, RandomState or None
        Seed of the split.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_train``, ``X_test`` (float32), ``y_train``, ``y_test`` (int64
        class indices 0 to ``n_classes - 1``), ``n_classes``,
        ``feature_names``, ``target_names`` and ``scaler``.

    Examples
    --------
    >>> import numpy as np
    >>> data = load_classification_standardized("iris")
    >>> data.n_classes, data.target_names
    (3, ['setosa', 'versicolor', 'virginica'])
    >>> data.X_train.shape, np.bincount(data.y_train)
    ((112, 4), array([37, 37, 38]))
    """
    from sklearn import datasets  # noqa: PLC0415

    if name not in CLASSIFICATION_DATASETS:
        raise ValueError(f"Unknown data set {name!r}, expected one of {CLASSIFICATION_DATASETS}.")
    data = getattr(datasets, f"load_{name}")()
    split = split_standardized(
        data.data, data.target, test_size, random_state, stratify=data.target, y_dtype=np.int64
    )
    split.n_classes = len(data.target_names)
    split.feature_names = [str(f) for f in data.feature_names]
    split.target_names = [str(t) for t in data.target_names]
    return split


def random_regression(n_samples, n_features, noise=0.3, random_state=0):
    """A cheap float32 regression problem for the benchmarks that time steps.

    ``X`` is standard normal, ``y = X @ w + noise * e`` with ``w`` a random
    unit vector and ``e`` standard normal: features and target are already
    standardized (the target's variance is ``1 + noise ** 2``), without the
    float64 copies of ``make_regression`` (which matter for millions of
    values).

    Parameters
    ----------
    n_samples, n_features : int
        Shape of ``X``.
    noise : float
        Standard deviation of the noise added to the target.
    random_state : int or None
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, n_features), float32
    y : numpy.ndarray of shape (n_samples,), float32

    Examples
    --------
    >>> X, y = random_regression(1000, 3, noise=0.3)
    >>> X.shape, X.dtype, y.shape, y.dtype
    ((1000, 3), dtype('float32'), (1000,), dtype('float32'))
    >>> round(float(y.var()), 1)  # about 1 + 0.3 ** 2
    1.1
    """
    rng = np.random.default_rng(random_state)
    X = rng.standard_normal((n_samples, n_features), dtype=np.float32)
    w = rng.standard_normal(n_features, dtype=np.float32)
    w /= np.linalg.norm(w)
    y = X @ w + np.float32(noise) * rng.standard_normal(n_samples, dtype=np.float32)
    return X, y.astype(np.float32)
