"""scikit-learn's feature-name contract: a model fitted on a DataFrame checks the columns it gets.

scikit-learn's estimators keep the column names of the DataFrame given to
``fit`` in ``feature_names_in_`` and check the data of ``predict``,
``score`` and warm-started fits against them: columns in another order,
renamed or missing raise a ``ValueError`` (the model would otherwise read
each column as another feature, silently); an array without names given to
a model fitted with them, or the reverse, warns. The checks and their
messages are scikit-learn's own (:func:`sklearn.utils.validation.validate_data`).
Inputs without column names (arrays of any rank: images, sequences) are not
concerned.
"""

import warnings

from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data


class _Columns(BaseEstimator):
    """A bare estimator, that ``validate_data`` gives the names of a DataFrame to, or checks."""


def _fitted_on(names):
    columns = _Columns()
    columns.feature_names_in_ = names
    return columns


def _validate_names(estimator, X, reset):
    # the names only: the optimizers check the values and the shape themselves, for any rank
    validate_data(estimator, X, reset=reset, skip_check_array=True, ensure_2d=False)


def feature_names(X):
    """The feature names scikit-learn reads from ``X``: a DataFrame's str column names, else None.

    Column names mixing str and other types raise scikit-learn's ``TypeError``.

    Examples
    --------
    >>> import pandas as pd
    >>> feature_names(pd.DataFrame([[1.0, 2.0]], columns=["a", "b"]))
    array(['a', 'b'], dtype=object)
    >>> feature_names([[1.0, 2.0]]) is None, feature_names(pd.DataFrame([[1.0, 2.0]])) is None
    (True, True)
    """
    columns = _Columns()
    _validate_names(columns, X, reset=True)
    return getattr(columns, "feature_names_in_", None)


def check_feature_names(estimator, X):
    """Check the names of ``X`` against ``estimator.feature_names_in_``, as scikit-learn does.

    Examples
    --------
    >>> import pandas as pd
    >>> fitted = _fitted_on(feature_names(pd.DataFrame([[1.0, 2.0]], columns=["a", "b"])))
    >>> check_feature_names(fitted, pd.DataFrame([[1.0, 2.0]], columns=["b", "a"]))
    Traceback (most recent call last):
    ...
    ValueError: The feature names should match those that were passed during fit.
    Feature names must be in the same order as they were in fit.
    <BLANKLINE>
    """
    _validate_names(estimator, X, reset=False)


def check_validation_names(names, X_val):
    """Check the names of the validation set ``X_val`` against ``names``, those of ``X``.

    Examples
    --------
    >>> import pandas as pd
    >>> X_val = pd.DataFrame([[1.0, 2.0]], columns=["a", "c"])
    >>> check_validation_names(feature_names(X_val), X_val)
    >>> check_validation_names(feature_names(X_val[["c", "a"]]), X_val)
    Traceback (most recent call last):
    ...
    ValueError: X_val: The feature names should match those that were passed during fit.
    Feature names must be in the same order as they were in fit.
    <BLANKLINE>
    """
    val_names = feature_names(X_val)
    if names is not None and val_names is None:
        warnings.warn(
            "X_val does not have valid feature names, but X has: its columns are taken to be "
            "those of X, in their order.",
            UserWarning,
            stacklevel=3,
        )
    elif names is None and val_names is not None:
        message = "X_val has feature names, but X has none: they are not checked."
        warnings.warn(message, UserWarning, stacklevel=3)
    elif names is not None:
        try:
            check_feature_names(_fitted_on(names), X_val)
        except ValueError as error:
            raise ValueError(f"X_val: {error}") from None
