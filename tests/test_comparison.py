"""helpers.teaching.comparison: one run per seed and library, on the right scales."""

from functools import partial

import numpy as np
import pytest
from skl2onnx import to_onnx
from sklearn.metrics import accuracy_score, r2_score
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.utils import Bunch

from helpers import (
    NegLogLearningLoss,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
)
from helpers.core.model_graphs.onnx_graph import select_outputs
from helpers.teaching.comparison import summarize_runs, train_side_by_side
from helpers.teaching.datasets import one_hot
from helpers.teaching.sklearn_bridge import mlp_weight_names
from helpers.teaching.sklearn_training import (
    continue_mlp_training,
    fit_first_epoch,
    mlp_update_parameters,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3)).astype(np.float32)
    y = (X[:, 0] ** 2 + X[:, 1]).astype(np.float32)
    return Bunch(X_train=X[:60], y_train=y[:60], X_test=X[60:], y_test=y[60:])


def test_regression_runs_scores_and_curves(data):
    lr, batch = 0.05, 60
    start = fit_first_epoch(
        MLPRegressor(
            hidden_layer_sizes=(4,),
            solver="sgd",
            momentum=0.5,
            nesterovs_momentum=False,
            learning_rate_init=lr,
            batch_size=batch,
            alpha=0.0,
            random_state=0,
        ),
        data.X_train,
        data.y_train,
    )
    onx = add_loss_output(to_onnx(start, data.X_train[:1]))

    params = mlp_update_parameters(start)
    assert (params["solver"], params["momentum"], params["learning_rate"]) == (
        "momentum",
        0.5,
        lr / 2,
    )
    make = partial(OrtGradientOptimizer, onx, mlp_weight_names(start), max_iter=5, **params)
    result = train_side_by_side(start, make, data, 5, [3, 4], {"R²": r2_score}, batch_size=batch)
    assert list(result.scores["library"]) == ["scikit-learn", "onnxruntime"] * 2
    assert list(result.scores["seed"]) == [3, 3, 4, 4]
    assert list(result.scores.columns) == [
        "library",
        "seed",
        "R² (train)",
        "R² (test)",
        "fit time (s)",
    ]
    # full batch: both libraries follow the same path, scikit-learn's curve doubled
    for skl_curve, ort_curve in zip(result.curves["scikit-learn"], result.curves["onnxruntime"]):
        np.testing.assert_allclose(ort_curve, skl_curve, rtol=1e-4)
    expected = continue_mlp_training(start, data.X_train, data.y_train, 5, random_state=3)
    np.testing.assert_allclose(result.curves["scikit-learn"][0], 2 * np.array(expected.loss_curve_))
    assert result.scores.loc[0, "R² (test)"] == pytest.approx(
        r2_score(data.y_test, expected.predict(data.X_test))
    )
    # validation losses were recorded on the test part
    assert len(result.optimizers[0].validation_losses_) > 0

    summary = summarize_runs(result.scores)
    assert list(summary.index) == ["scikit-learn", "onnxruntime"]
    assert summary.loc["scikit-learn", ("R² (test)", "mean")] == pytest.approx(
        result.scores.query("library == 'scikit-learn'")["R² (test)"].mean()
    )
    assert ("fit time (s)", "std") in summary.columns


def test_classification_with_its_own_targets_and_predictions(data):
    y = np.digitize(data.y_train, [0.3, 1.5]).astype(np.int64)
    y_test = np.digitize(data.y_test, [0.3, 1.5]).astype(np.int64)
    cls = Bunch(X_train=data.X_train, y_train=y, X_test=data.X_test, y_test=y_test)
    start = fit_first_epoch(
        MLPClassifier(
            hidden_layer_sizes=(4,),
            solver="sgd",
            momentum=0.5,
            learning_rate_init=0.1,
            batch_size=60,
            alpha=0.0,
            random_state=0,
        ),
        cls.X_train,
        cls.y_train,
    )
    raw = select_outputs(
        to_onnx(start, cls.X_train[:1], options={"zipmap": False}), ["add_result1"]
    )

    params = mlp_update_parameters(start, momentum=0.0)
    assert (params["solver"], params["learning_rate"]) == (
        "sgd",
        0.1,
    )  # the log loss has no factor 1/2
    make = partial(
        OrtGradientForwardBackwardOptimizer,
        raw,
        max_iter=3,
        learning_loss=NegLogLearningLoss(probability_function="softmax"),
        **params,
    )

    result = train_side_by_side(
        start,
        make,
        cls,
        3,
        [0],
        {"accuracy": accuracy_score},
        y_train_ort=one_hot(y, 3),
        y_test_ort=one_hot(y_test, 3),
        ort_predict=lambda opt, X: opt.predict(X).argmax(axis=1),
        loss_scale=1.0,
        momentum=0.0,
    )
    row = result.scores.set_index("library").loc["onnxruntime"]
    pred = result.optimizers[0].predict(cls.X_test).argmax(axis=1)
    assert row["accuracy (test)"] == pytest.approx(accuracy_score(y_test, pred))
    # plain SGD on both sides, full batch, same learning rate: same log loss
    np.testing.assert_allclose(
        result.curves["onnxruntime"][0], result.curves["scikit-learn"][0], rtol=1e-3
    )


def test_targets_come_in_pairs(data):
    with pytest.raises(ValueError, match="both"):
        train_side_by_side(None, None, data, 1, [0], {}, y_train_ort=data.y_train)


def _summary(means, stds):
    import pandas as pd  # noqa: PLC0415

    columns = pd.MultiIndex.from_tuples([("score", "mean"), ("score", "std")])
    return pd.DataFrame(
        [[means[0], stds[0]], [means[1], stds[1]]],
        index=["scikit-learn", "onnxruntime"],
        columns=columns,
    )


def test_check_same_level_accepts_a_gap_within_the_spread():
    from helpers.teaching.comparison import check_same_level  # noqa: PLC0415

    gap, allowed = check_same_level(_summary([1.46, 1.25], [0.18, 0.06]), "score")
    assert gap == pytest.approx(0.21) and allowed == pytest.approx(2 * 0.24)
    # the tolerances can be larger than the spread
    assert check_same_level(_summary([1.0, 1.05], [0.0, 0.0]), "score", rtol=0.1)[
        1
    ] == pytest.approx(0.1)
    assert check_same_level(_summary([1.0, 1.05], [np.nan, np.nan]), "score", atol=0.06)[1] == 0.06


def test_check_same_level_refuses_a_larger_gap():
    from helpers.teaching.comparison import check_same_level  # noqa: PLC0415

    with pytest.raises(AssertionError, match="differ by 0.3"):
        check_same_level(_summary([1.0, 1.3], [0.01, 0.02]), "score", rtol=0.1)


def test_mlp_update_parameters_refuses_what_has_no_equivalent():
    with pytest.raises(ValueError, match="only 'constant'"):
        mlp_update_parameters(MLPRegressor(solver="sgd", learning_rate="invscaling"))
    with pytest.raises(ValueError, match="solver='lbfgs'"):
        mlp_update_parameters(MLPRegressor(solver="lbfgs"))
    adam = mlp_update_parameters(
        MLPRegressor(solver="adam", beta_1=0.8, epsilon=1e-7, learning_rate_init=0.01),
        batch_size=16,
    )
    assert (adam["solver"], adam["betas"], adam["batch_size"]) == ("adamw", (0.8, 0.999), 16)
    # Adam's steps do not change with doubled gradients: same rate, doubled epsilon
    assert adam["learning_rate"] == 0.01 and adam["eps"] == pytest.approx(2e-7)


def test_mlp_update_parameters_reproduce_adam(data):
    """Full batch: scikit-learn's adam and our adamw with the helper's parameters follow the same
    losses."""
    start = fit_first_epoch(
        MLPRegressor(
            hidden_layer_sizes=(4,),
            solver="adam",
            learning_rate_init=0.01,
            batch_size=60,
            alpha=0.0,
            random_state=0,
        ),
        data.X_train,
        data.y_train,
    )
    network = continue_mlp_training(start, data.X_train, data.y_train, 10, random_state=0)
    opt = OrtGradientOptimizer(
        add_loss_output(to_onnx(start, data.X_train[:1])),
        mlp_weight_names(start),
        max_iter=10,
        random_state=0,
        **mlp_update_parameters(start),
    ).fit(data.X_train, data.y_train)
    np.testing.assert_allclose(opt.train_losses_, 2 * np.array(network.loss_curve_), rtol=1e-4)


def test_first_epoch_of_minibatches_is_scikit_learns(data):
    # Both shuffle arange(n) with numpy's RandomState(seed) before the first epoch:
    # with the same seed, the first epochs coincide; later ones part ways (scikit-learn
    # shuffles its shuffled order again, the optimizer draws a fresh permutation).
    start = fit_first_epoch(
        MLPRegressor(
            hidden_layer_sizes=(4,),
            solver="sgd",
            learning_rate_init=0.01,
            batch_size=15,
            alpha=0.0,
            random_state=0,
        ),
        data.X_train,
        data.y_train,
    )
    onx = add_loss_output(to_onnx(start, data.X_train[:1]))
    make = partial(
        OrtGradientOptimizer,
        onx,
        mlp_weight_names(start),
        max_iter=3,
        **mlp_update_parameters(start),
    )
    result = train_side_by_side(start, make, data, 3, seeds=[4], metrics={"R²": r2_score})
    sklearn_curve, ort_curve = (runs[0] for runs in result.curves.values())
    np.testing.assert_allclose(ort_curve[0], sklearn_curve[0], rtol=1e-5)
    assert abs(ort_curve[2] / sklearn_curve[2] - 1) > 1e-5
