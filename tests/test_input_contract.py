"""scikit-learn's input contract in both optimizers (issue 29, items 2 and 4).

Feature names are checked as scikit-learn's estimators check them, non-finite
parameters are refused before training, missing values of nullable pandas
columns are called missing values, and the validation set is named.
"""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import APIS, make_optimizer
from sklearn.model_selection import GridSearchCV
from torch import nn

from helpers import (
    ElasticLearningPenalty,
    LearningRateSGD,
    export_for_training,
)
from helpers.forward_backward.losses import ElasticLearningLoss
from helpers.teaching.model_factories import mlp_onnx

NAMES = ["a", "b", "c"]
MISMATCH = "The feature names should match those that were passed during fit"


def make(api, onx=None, **params):
    onx = mlp_onnx(3, hidden=(4,)) if onx is None else onx
    params = {
        "max_iter": 2,
        "batch_size": 16,
        "random_state": 0,
        "validation_every": 0,
        "learning_rate": 0.01,
        **params,
    }
    return make_optimizer(api, onx, **params)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3)).astype(np.float32)
    y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)
    return pd.DataFrame(X, columns=NAMES), y


@pytest.fixture(scope="module", params=APIS)
def on_frame(request, data):
    frame, y = data
    return make(request.param).fit(frame, y)


def _no_warning(call, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call(*args)


# -- feature names ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "columns, detail",
    [
        (["c", "a", "b"], "Feature names must be in the same order as they were in fit"),
        (
            ["a", "b", "d"],
            "Feature names unseen at fit time:\n- d\n"
            "Feature names seen at fit time, yet now missing:\n- c",
        ),
        (["a", "b"], "Feature names seen at fit time, yet now missing:\n- c"),
    ],
    ids=["reordered", "renamed", "missing"],
)
def test_other_columns_are_refused_at_predict_score_and_warm_fit(on_frame, data, columns, detail):
    frame, y = data
    other = frame.rename(columns=dict(zip(NAMES, ["a", "b", "d"]))) if "d" in columns else frame
    other = other[columns]
    for call in (on_frame.predict, lambda X: on_frame.score(X, y)):
        with pytest.raises(ValueError, match=MISMATCH) as error:
            call(other)
        assert detail in str(error.value)
    warm = pickle.loads(pickle.dumps(on_frame)).set_params(warm_start=True)
    before = warm.get_state()
    with pytest.raises(ValueError, match=MISMATCH):
        warm.fit(other, y)
    after = warm.get_state()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # refused before training


def test_reordered_columns_would_predict_other_values(on_frame, data):
    frame, _ = data
    reordered = frame[["c", "a", "b"]].to_numpy()  # what a model ignoring the names reads
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        assert not np.allclose(on_frame.predict(frame), on_frame.predict(reordered))


def test_the_same_columns_predict_without_a_warning(on_frame, data):
    frame, y = data
    expected = _no_warning(on_frame.predict, frame)
    assert np.isfinite(_no_warning(on_frame.score, frame, y))
    warm = pickle.loads(pickle.dumps(on_frame)).set_params(warm_start=True)
    _no_warning(warm.fit, frame, y)
    fitted_with = r"X does not have valid feature names, but OrtGradient\w* was fitted with"
    with pytest.warns(UserWarning, match=fitted_with):
        plain = on_frame.predict(frame.to_numpy())
    np.testing.assert_array_equal(plain, expected)


@pytest.mark.parametrize("api", APIS)
def test_a_frame_given_to_a_model_fitted_on_an_array_warns(api, data):
    frame, y = data
    opt = make(api).fit(frame.to_numpy(), y)
    without = r"X has feature names, but OrtGradient\w* was fitted without feature names"
    with pytest.warns(UserWarning, match=without):
        opt.predict(frame)
    opt.set_params(warm_start=True)
    with pytest.warns(UserWarning, match="X has feature names"):
        opt.fit(frame, y)
    assert not hasattr(opt, "feature_names_in_")
    opt.set_params(warm_start=False).fit(frame, y)  # a new fit takes the names
    assert list(opt.feature_names_in_) == NAMES


@pytest.mark.parametrize("api", APIS)
def test_images_have_no_feature_names(api):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 6 * 6, 1))
    X = np.random.default_rng(0).standard_normal((20, 1, 8, 8)).astype(np.float32)
    opt = make(api, export_for_training(module, torch.from_numpy(X[:2])), batch_size=8)
    _no_warning(opt.fit, X, X[:, 0, 0, :1].copy())
    assert not hasattr(opt, "feature_names_in_")
    assert _no_warning(opt.predict, X[:3]).shape == (3, 1)


@pytest.mark.parametrize("api", APIS)
def test_the_validation_set_has_the_columns_of_X(api, data):
    frame, y = data
    opt = make(api, validation_every=1)
    with pytest.raises(ValueError, match=f"X_val: {MISMATCH}.*\n.*same order"):
        opt.fit(frame, y, X_val=frame[["b", "a", "c"]], y_val=y)
    with pytest.warns(UserWarning, match=r"X_val does not have valid feature names, but X has"):
        opt.fit(frame, y, X_val=frame.to_numpy(), y_val=y)
    with pytest.warns(UserWarning, match=r"X_val has feature names, but X has none"):
        opt.fit(frame.to_numpy(), y, X_val=frame, y_val=y)
    _no_warning(lambda: opt.fit(frame, y, X_val=frame, y_val=y))
    assert len(opt.validation_losses_) == 2


# -- parameters ------------------------------------------------------------------------
INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "params, name",
    [
        ({"learning_rate": INF}, "learning_rate"),
        ({"learning_rate": -INF}, "learning_rate"),
        ({"learning_rate": NAN}, "learning_rate"),
        ({"learning_rate_schedule": "invscaling", "power_t": INF}, "power_t"),
        ({"learning_rate_schedule": "optimal", "alpha": INF}, "alpha"),
        ({"alpha": NAN}, "alpha"),
        ({"solver": "momentum", "momentum": NAN}, "momentum"),
        ({"solver": "adamw", "betas": (0.9, INF)}, r"betas\[1\]"),
        ({"solver": "adamw", "eps": INF}, "eps"),
        ({"solver": "adamw", "weight_decay": INF}, "weight_decay"),
        ({"solver": "adamw", "weight_decay": NAN}, "weight_decay"),
        ({"validation_every": INF}, "validation_every"),
    ],
)
def test_non_finite_parameters_are_refused_before_training(api, data, params, name):
    frame, y = data
    opt = make(api, **params)
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number, got .*(inf|nan)"):
        opt.fit(frame, y)
    assert not hasattr(opt, "train_losses_")


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda: LearningRateSGD(eta0=INF), "eta0"),
        (lambda: LearningRateSGD(power_t=INF), "power_t"),
        (lambda: ElasticLearningPenalty(l1=0.0, l2=INF), "ElasticLearningPenalty: l2"),
        (lambda: ElasticLearningLoss(l1_weight=NAN), "l1_weight"),
        (lambda: ElasticLearningLoss(l2_weight=INF), "l2_weight"),
        (
            lambda: make("forward_backward", learning_penalty={"coefficient0": INF}).fit(
                np.zeros((4, 3)), np.zeros(4)
            ),
            "l2",
        ),
    ],
)
def test_non_finite_parameters_of_the_objects_are_refused(build, name):
    with pytest.raises(ValueError, match=rf"{name} must be a finite number, got .*(inf|nan)"):
        build()


# -- data ------------------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_missing_values_of_nullable_columns_are_called_missing(api, data):
    frame, y = data
    nullable = frame.astype("Float64")
    nullable.iloc[3, 1] = pd.NA
    opt = make(api)
    missing = r"X contains NaN or infinite values \(first at index \(3, 1\): a missing value, NaN"
    with pytest.raises(ValueError, match=missing + " or pd.NA.*impute the missing values"):
        opt.fit(nullable, y)
    targets = pd.Series(y, dtype="Float64")
    targets.iloc[5] = pd.NA
    y_missing = r"y contains NaN or infinite values \(first at index \(5, 0\): a missing value"
    with pytest.raises(ValueError, match=y_missing):
        opt.fit(frame, targets)
    opt.fit(frame.astype("Float64"), pd.Series(y, dtype="Float64"))  # nullable, without NA: trains
    with pytest.raises(ValueError, match=r"\(first at index \(0, 0\): -?inf\).*clip the values"):
        opt.predict(frame * np.inf)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "validation, match",
    [
        (lambda X, y: (X[:, :2], y), r"X_val has 2 features, but the model expects 3"),
        (lambda X, y: (X, y[:10]), r"X_val has 64 rows but y_val has 10 rows"),
        (lambda X, y: (np.where(X > 1, np.nan, X), y), r"X_val contains NaN"),
        (lambda X, y: (X, np.full_like(y, np.inf)), r"y_val contains NaN or infinite"),
        (lambda X, y: (X.astype(str), y), r"X_val has dtype <U\d+: it must hold numbers"),
    ],
)
def test_errors_about_the_validation_set_name_it(api, data, validation, match):
    frame, y = data
    X_val, y_val = validation(frame.to_numpy(), y)
    with pytest.raises((ValueError, TypeError), match=match):
        make(api, validation_every=1).fit(frame.to_numpy(), y, X_val=X_val, y_val=y_val)


# -- scikit-learn's tools with a DataFrame ---------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_grid_search_and_pickles_take_a_frame(api, data):
    frame, y = data
    search = GridSearchCV(make(api), {"learning_rate": [0.01, 0.05]}, cv=2)
    _no_warning(search.fit, frame, y)
    best = search.best_estimator_
    assert list(best.feature_names_in_) == NAMES
    copy = pickle.loads(pickle.dumps(best))
    np.testing.assert_array_equal(_no_warning(copy.predict, frame), best.predict(frame))
    with pytest.raises(ValueError, match=MISMATCH):
        copy.predict(frame[["b", "c", "a"]])
