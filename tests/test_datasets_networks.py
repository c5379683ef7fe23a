"""helpers.teaching.datasets, the data sets of the neural network notebooks (05 to 07)."""

import numpy as np
import pytest

from helpers.teaching.datasets import (
    CLASSIFICATION_DATASETS,
    load_classification_standardized,
    load_diabetes_scaled,
    load_diabetes_standardized,
    make_friedman1_standardized,
    one_hot,
)


def test_friedman1_follows_its_formula_and_is_standardized():
    data = make_friedman1_standardized(n_samples=400, noise=0.0, test_size=0.25, random_state=3)
    assert data.X_train.shape == (300, 10) and data.X_test.shape == (100, 10)
    assert data.X_train.dtype == data.y_train.dtype == np.float32
    np.testing.assert_allclose(data.X_train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(data.X_train.std(axis=0), 1, rtol=1e-4)
    X = data.scaler.inverse_transform(data.X_test.astype(np.float64))
    assert X.min() > -1e-5 and X.max() < 1 + 1e-5  # uniform on [0, 1]
    expected = (
        10 * np.sin(np.pi * X[:, 0] * X[:, 1])
        + 20 * (X[:, 2] - 0.5) ** 2
        + 10 * X[:, 3]
        + 5 * X[:, 4]
    )
    np.testing.assert_allclose(data.y_test, expected, rtol=1e-4, atol=1e-4)


def test_friedman1_noise_has_the_requested_scale():
    clean = make_friedman1_standardized(n_samples=4000, noise=0.0, random_state=0)
    noisy = make_friedman1_standardized(n_samples=4000, noise=2.0, random_state=0)
    # same seed, same features: the difference of the targets is the noise
    np.testing.assert_allclose(clean.X_train, noisy.X_train)
    assert np.std(noisy.y_train - clean.y_train) == pytest.approx(2.0, rel=0.05)


def test_diabetes_scaled_is_the_standardized_target():
    plain = load_diabetes_standardized(test_size=0.25, random_state=1)
    scaled = load_diabetes_scaled(test_size=0.25, random_state=1)
    np.testing.assert_array_equal(scaled.X_train, plain.X_train)
    assert scaled.y_train.dtype == np.float32
    assert abs(scaled.y_train.mean()) < 1e-5 and scaled.y_train.std() == pytest.approx(1, rel=1e-5)
    for part in ("y_train", "y_test"):
        back = scaled[part] * scaled.target_scale + scaled.target_mean
        np.testing.assert_allclose(back, plain[part], rtol=1e-5, atol=1e-3)
    # the test part is scaled with the training statistics, not its own
    assert abs(scaled.y_test.mean()) > 1e-3


def test_diabetes_scaled_accepts_a_number_of_test_rows():
    data = load_diabetes_scaled(test_size=102, random_state=0)
    assert data.X_train.shape[0] == 340 and data.X_test.shape[0] == 102


@pytest.mark.parametrize(
    "name, n_features, n_classes",
    [("digits", 64, 10), ("breast_cancer", 30, 2), ("iris", 4, 3), ("wine", 13, 3)],
)
def test_classification_shapes_types_and_stratification(name, n_features, n_classes):
    data = load_classification_standardized(name, test_size=0.25, random_state=0)
    assert name in CLASSIFICATION_DATASETS
    assert data.n_classes == n_classes == len(data.target_names)
    assert data.X_train.shape[1] == data.X_test.shape[1] == n_features == len(data.feature_names)
    assert data.X_train.dtype == np.float32 and data.y_train.dtype == np.int64
    assert set(np.unique(data.y_train)) == set(range(n_classes))
    train_share = np.bincount(data.y_train) / data.y_train.size
    test_share = np.bincount(data.y_test, minlength=n_classes) / data.y_test.size
    np.testing.assert_allclose(test_share, train_share, atol=0.03)
    # standardized with the training part; constant columns stay at 0
    std = data.X_train.std(axis=0)
    assert np.all((np.abs(std - 1) < 1e-3) | (std == 0))
    assert np.all(data.X_train[:, std == 0] == 0)


def test_classification_unknown_name():
    with pytest.raises(ValueError, match="Unknown data set"):
        load_classification_standardized("mnist")


def test_one_hot_rows():
    y = np.array([2, 0, 1, 2])
    encoded = one_hot(y)
    assert encoded.shape == (4, 3) and encoded.dtype == np.float32
    np.testing.assert_array_equal(encoded.sum(axis=1), 1)
    np.testing.assert_array_equal(encoded.argmax(axis=1), y)
    assert one_hot(np.array([0, 1]), n_classes=5).shape == (2, 5)


@pytest.mark.parametrize("bad", [np.array([0.0, 1.0]), np.array([[0, 1]]), np.array([0, 3])])
def test_one_hot_refuses_bad_labels(bad):
    with pytest.raises(ValueError):
        one_hot(bad, n_classes=3)
