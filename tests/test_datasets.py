"""helpers.teaching.datasets: shapes, types and the known truth of the data sets."""

import numpy as np
import pytest

from helpers.teaching.datasets import load_diabetes_standardized, make_synthetic_regression


def test_synthetic_shapes_and_dtypes():
    X, y, coef = make_synthetic_regression(n_samples=50, n_features=4, random_state=0)
    assert X.shape == (50, 4)
    assert y.shape == (50,)
    assert coef.shape == (4,)
    assert X.dtype == y.dtype == coef.dtype == np.float32


def test_synthetic_true_coefficients_reproduce_y_without_noise():
    X, y, coef = make_synthetic_regression(
        n_samples=200, n_features=6, noise=0.0, bias=3.5, random_state=1
    )
    expected = X.astype(np.float64) @ coef.astype(np.float64) + 3.5
    # float32 rounding of X, coef and y only
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-3)


def test_synthetic_noise_has_the_requested_scale():
    X, y, coef = make_synthetic_regression(
        n_samples=5000, n_features=3, noise=2.0, bias=-1.0, random_state=2
    )
    residuals = y - (X @ coef - 1.0)
    assert abs(residuals.mean()) < 0.1
    assert residuals.std() == pytest.approx(2.0, rel=0.05)


def test_synthetic_n_informative_zeroes_coefficients():
    _, _, coef = make_synthetic_regression(
        n_samples=20, n_features=8, n_informative=3, random_state=0
    )
    assert np.count_nonzero(coef) == 3


def test_synthetic_is_reproducible():
    a = make_synthetic_regression(n_samples=30, n_features=2, noise=1.0, random_state=5)
    b = make_synthetic_regression(n_samples=30, n_features=2, noise=1.0, random_state=5)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_diabetes_split_shapes_dtypes_and_names():
    data = load_diabetes_standardized(test_size=0.25, random_state=0)
    n_train, n_test = data.X_train.shape[0], data.X_test.shape[0]
    assert n_train + n_test == 442
    assert n_test == 111
    assert data.X_train.shape[1] == data.X_test.shape[1] == 10
    assert data.y_train.shape == (n_train,)
    assert data.y_test.shape == (n_test,)
    for array in (data.X_train, data.X_test, data.y_train, data.y_test):
        assert array.dtype == np.float32
    assert data.feature_names[:3] == ["age", "sex", "bmi"]


def test_diabetes_standardized_on_the_training_part_only():
    data = load_diabetes_standardized(random_state=0)
    np.testing.assert_allclose(data.X_train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(data.X_train.std(axis=0), 1, rtol=1e-4)
    # the test part is transformed with the training statistics, so it is
    # close to, but not exactly, centred
    assert np.abs(data.X_test.mean(axis=0)).max() > 1e-3
    # the target is left in its original units
    assert 20 < data.y_train.min() and data.y_train.max() < 400


def test_diabetes_scaler_inverts_to_raw_features():
    from sklearn.datasets import load_diabetes

    data = load_diabetes_standardized(random_state=0)
    raw = data.scaler.inverse_transform(data.X_train.astype(np.float64))
    all_rows = load_diabetes(scaled=False).data
    # every reconstructed training row is a row of the raw data set
    distances = np.abs(raw[:, None, :] - all_rows[None, :, :]).max(axis=2).min(axis=1)
    assert distances.max() < 1e-3
