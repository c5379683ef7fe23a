"""What a user gets wrong with the estimators, and what they should see (issue: a new user's
mistakes)."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from conftest import APIS, make_optimizer
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from helpers import (
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    TrainingDivergedError,
    add_loss_output,
)
from helpers.teaching.model_factories import mlp_onnx


def make(api, onx, **params):
    params = {"max_iter": 2, "batch_size": 16, "random_state": 0, "validation_every": 0, **params}
    return make_optimizer(api, onx, **params)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3)).astype(np.float32)
    return X, (X @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)


@pytest.mark.parametrize("api", APIS)
def test_warm_start_refuses_a_changed_update_rule(api, data):
    X, y = data
    opt = make(api, mlp_onnx(3, hidden=(4,)), warm_start=True, learning_rate=0.01).fit(X, y)
    opt.set_params(solver="adamw")
    with pytest.raises(ValueError, match=r"update rule changed from SGDRule\(\) to AdamWRule"):
        opt.fit(X, y)
    opt.set_params(solver="sgd", n_threads=1)
    with pytest.raises(ValueError, match="n_threads changed from None to 1.*warm_start=False"):
        opt.fit(X, y)


@pytest.mark.parametrize("api", APIS)
def test_warm_start_applies_a_new_learning_rate(api, data):
    X, y = data
    opt = make(
        api, mlp_onnx(3, hidden=(4,)), warm_start=True, learning_rate=0.05, batch_size=64
    ).fit(X, y)
    before = opt.get_state()
    opt.set_params(learning_rate=1e-12).fit(X, y)  # the new rate: the weights barely move
    after = opt.get_state()
    assert max(np.abs(before[k] - after[k]).max() for k in before) < 1e-8
    assert opt.learning_rate_.eta0 == 1e-12


@pytest.mark.parametrize("api", APIS)
def test_a_failed_first_fit_leaves_the_estimator_unfitted(api, data):
    X, y = data
    opt = make(api, mlp_onnx(3, hidden=(4,)), learning_rate=1e3)
    with pytest.raises(TrainingDivergedError):
        opt.fit(X * 1e3, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(opt)
    with pytest.raises(NotFittedError):
        opt.predict(X)


@pytest.mark.parametrize("api", APIS)
def test_divergence_never_leaves_nan_weights(api, data):
    X, y = data
    opt = make(api, mlp_onnx(3, hidden=(4,)), learning_rate=0.01, warm_start=True).fit(X, y)
    good = opt.get_state()
    opt.set_params(learning_rate=1e3)
    with pytest.raises(TrainingDivergedError):
        opt.fit(X * 1e3, y)
    state = opt.get_state()
    assert all(np.isfinite(v).all() for v in state.values())
    assert all(np.array_equal(good[k], state[k]) for k in good)  # the weights of the epoch's start
    check_is_fitted(opt)  # still the fitted estimator it was


@pytest.mark.parametrize("api", APIS)
def test_feature_counts_and_names(api, data):
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    opt = make(api, mlp_onnx(3, hidden=(4,))).fit(frame, y)
    assert opt.n_features_in_ == 3 and list(opt.feature_names_in_) == ["a", "b", "c"]
    opt.fit(X, y)
    assert opt.n_features_in_ == 3 and not hasattr(opt, "feature_names_in_")


@pytest.mark.parametrize("api", APIS)
def test_bad_data_is_named(api, data):
    X, y = data
    opt = make(api, mlp_onnx(3, hidden=(4,)))
    with pytest.raises(TypeError, match=r"sparse matrix.*toarray\(\)"):
        opt.fit(scipy.sparse.csr_matrix(X), y)
    if api == "whole":
        opt = OrtGradientOptimizer(
            add_loss_output(mlp_onnx(3, hidden=(4,)), weight_name="weight"), max_iter=1
        )
    with pytest.raises(ValueError, match="sample_weight is 0 for every sample"):
        opt.fit(X, y, sample_weight=np.zeros(len(X)))


def test_class_labels_for_a_multiclass_model_point_to_one_hot(data):
    X, _ = data
    labels = np.arange(len(X)) % 4
    opt = OrtGradientForwardBackwardOptimizer(mlp_onnx(3, hidden=(4,), n_outputs=4), max_iter=1)
    with pytest.raises(ValueError, match=r"one_hot\(y, 4\)"):
        opt.fit(X, labels)


@pytest.mark.parametrize("api", APIS)
def test_repr_shows_the_model_in_one_line(api):
    opt = make(api, mlp_onnx(784, hidden=(500,), n_outputs=10))
    text = repr(opt)
    assert len(text) < 300 and "397510 values" in text and "initializer" not in text
    assert opt._repr_mimebundle_() == {"text/plain": text}
    assert not hasattr(opt, "_repr_html_")  # Jupyter shows the text, not a 30 KB diagram


def _int_input_model():
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["X"], ["Xf"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["Xf", "coef"], ["y"]),
        ],
        "int_input",
        [helper.make_tensor_value_info("X", TensorProto.INT64, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])],
        [numpy_helper.from_array(np.ones((3, 1), dtype=np.float32), "coef")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


@pytest.mark.parametrize("api", APIS)
def test_models_the_runtime_cannot_train_are_named(api, data):
    X, y = data
    # an integer input takes integers (ids), not measurements
    with pytest.raises(ValueError, match="not whole numbers, but the model takes integer ids"):
        make(api, _int_input_model()).fit(X, y)
    opt = make(api, _int_input_model()).fit(np.round(X * 3).astype(np.int64), y)
    assert opt.predict(np.ones((2, 3), dtype=np.int64)).shape == (2,)
    from helpers import RuntimeCompatibilityError

    with pytest.raises(RuntimeCompatibilityError, match=r"opset 99 .* runs opset \d+ at most"):
        make(api, mlp_onnx(3, opset=99)).fit(X, y)


def test_a_float64_model_and_a_loss_model_given_to_forward_backward(data):
    from onnx import TensorProto

    X, y = data
    double = mlp_onnx(3, hidden=(4,))
    double.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(TypeError, match=r"input 'X' is double.*astype\(numpy.float32\)"):
        OrtGradientForwardBackwardOptimizer(double, max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match="is a scalar, a loss.*before add_loss_output"):
        OrtGradientForwardBackwardOptimizer(
            add_loss_output(mlp_onnx(3, hidden=(4,))), max_iter=1
        ).fit(X, y)


def test_cross_entropy_on_logits_in_both_apis():
    """add_loss_output(..., 'cross_entropy') trains a classifier's raw scores as the
    forward/backward API does."""
    from helpers.teaching.datasets import one_hot

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4)).astype(np.float32)
    labels = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5).astype(np.int64)
    Y = one_hot(labels, 3)
    onx = mlp_onnx(4, hidden=(6,), n_outputs=3, activation="tanh")
    params = dict(learning_rate=0.1, batch_size=60, max_iter=10, random_state=0, validation_every=0)
    whole = OrtGradientOptimizer(add_loss_output(onx, score_name="cross_entropy"), **params).fit(
        X, Y
    )
    fb = OrtGradientForwardBackwardOptimizer(onx, learning_loss="cross_entropy", **params).fit(X, Y)
    # the same loss and gradient: the same trajectory (the forward/backward loss value clips at eps)
    np.testing.assert_allclose(whole.train_losses_, fb.train_losses_, rtol=1e-4)
    assert whole.train_losses_[-1] < whole.train_losses_[0] * 0.9
    for name, value in whole.get_state().items():
        np.testing.assert_allclose(value, fb.get_state()[name], rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="cross_entropy needs scores of shape"):
        add_loss_output(_rank1_model(), score_name="cross_entropy")


@pytest.mark.parametrize("api", APIS)
def test_cross_entropy_takes_class_indices(api):
    """Class indices train and score exactly as their one-hot rows do, in both APIs."""
    from helpers.teaching.datasets import one_hot

    rng = np.random.default_rng(1)
    X = rng.standard_normal((48, 4)).astype(np.float32)
    labels = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5).astype(np.int64)
    onx = mlp_onnx(4, hidden=(6,), n_outputs=3)

    def build():
        return make(api, onx, loss="cross_entropy", learning_rate=0.1, max_iter=3)

    by_index = build().fit(X, labels)
    by_row = build().fit(X, one_hot(labels, 3))
    np.testing.assert_array_equal(by_index.train_losses_, by_row.train_losses_)
    # the same labels as floats, or as a column, are class indices too
    assert by_index.score(X, labels.astype(np.float64)) == by_index.score(X, one_hot(labels, 3))
    assert by_index.score(X, labels.reshape(-1, 1)) == by_index.score(X, one_hot(labels, 3))
    with pytest.raises(ValueError, match="class labels from 0 to 3, but the model has 3 scores"):
        build().fit(X, np.where(labels == 2, 3, labels))
    with pytest.raises(ValueError, match="class labels from -1 to"):
        build().fit(X, labels - 1)


@pytest.mark.parametrize("api", APIS)
def test_class_indices_with_a_regression_loss_are_refused(api):
    """Only a softmax cross-entropy encodes class indices: squared error on 3 outputs refuses
    them."""
    X = np.random.default_rng(2).standard_normal((30, 4)).astype(np.float32)
    onx = mlp_onnx(4, hidden=(6,), n_outputs=3)
    opt = make(api, onx)
    with pytest.raises(
        ValueError, match=r"y looks like class labels.*one_hot\(y, 3\).*cross_entropy"
    ):
        opt.fit(X, np.arange(30) % 3)


def _rank1_model():
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["X"], ["y"], axes=[1], keepdims=0),
            helper.make_node("Mul", ["y", "w"], ["z"]),
        ],
        "rank1",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [None])],
        [numpy_helper.from_array(np.ones(1, dtype=np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
