"""Small regression data sets for the notebooks, in float32.

ONNX graphs converted from scikit-learn run in float32, so the features and
targets are returned in that type, ready to feed the runtime.
"""
import numpy as np
from sklearn.datasets import load_diabetes, make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch


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
    """
    data = load_diabetes(scaled=False)
    X_train, X_test, y_train, y_test = train_test_split(
        data.data, data.target, test_size=test_size, random_state=random_state
    )
    scaler = StandardScaler().fit(X_train)
    return Bunch(
        X_train=scaler.transform(X_train).astype(np.float32),
        X_test=scaler.transform(X_test).astype(np.float32),
        y_train=y_train.astype(np.float32),
        y_test=y_test.astype(np.float32),
        feature_names=list(data.feature_names),
        scaler=scaler,
    )
