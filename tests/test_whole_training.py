"""OrtGradientOptimizer: convergence, update rules, sample weights, the training loop, prediction
and export, the estimator contract. What it refuses is in ``test_whole_training_bad_input.py``."""

import pickle

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV

from helpers import OrtGradientOptimizer, TrainingDivergedError, add_loss_output
from helpers.core.model_graphs.onnx_graph import get_train_initializer


@pytest.fixture(scope="module")
def onx_loss_weighted(linear_onnx):
    return add_loss_output(linear_onnx, weight_name="weight")


def _fit(model, X, y, **kwargs):
    params = dict(max_iter=30, batch_size=10, learning_rate=0.05, random_state=0)
    params.update(kwargs)
    return OrtGradientOptimizer(model, **params).fit(X, y)


# -- convergence --------------------------------------------------------------------
@pytest.mark.parametrize(
    "solver, learning_rate",
    [("sgd", 0.05), ("momentum", 0.01), ("nesterov", 0.01), ("adamw", 0.01)],
)
def test_converges_to_linear_regression(onx_loss, linear_data, solver, learning_rate):
    """Within 0.02 of the least-squares coefficients (noise std 0.1, 300 rows)."""
    X, y = linear_data
    opt = _fit(onx_loss, X, y, solver=solver, learning_rate=learning_rate, max_iter=60)
    ref = LinearRegression().fit(X, y)
    state = opt.get_state()
    np.testing.assert_allclose(state["coef"].ravel(), ref.coef_, atol=0.02)
    np.testing.assert_allclose(state["intercept"], [ref.intercept_], atol=0.02)
    assert opt.train_losses_[-1] < opt.train_losses_[0] / 10
    assert opt.n_iter_ == 60 and opt.t_ == 60 * 30


def test_invscaling_slows_down(onx_loss, linear_data):
    X, y = linear_data
    const = _fit(onx_loss, X, y, max_iter=3, learning_rate=0.01)
    inv = _fit(
        onx_loss,
        X,
        y,
        max_iter=3,
        learning_rate=0.01,
        learning_rate_schedule="invscaling",
        power_t=0.5,
    )
    assert inv.train_losses_[-1] > const.train_losses_[-1]


def test_sample_weight_converges_to_weighted_least_squares(onx_loss_weighted, linear_data):
    X, y = linear_data
    y = y.copy()
    y[:100] += 3.0  # a shifted group, which the weights make dominant
    w = np.ones(len(y), dtype=np.float32)
    w[:100] = 10.0
    opt = OrtGradientOptimizer(
        onx_loss_weighted, max_iter=80, learning_rate=0.005, random_state=0
    ).fit(X, y, w)
    ref = LinearRegression().fit(X, y, sample_weight=w)
    unweighted = LinearRegression().fit(X, y)
    np.testing.assert_allclose(opt.get_state()["intercept"], [ref.intercept_], atol=0.05)
    assert abs(ref.intercept_ - unweighted.intercept_) > 1.0  # the weights matter


def test_sample_weight_needs_weight_input(onx_loss, linear_data):
    X, y = linear_data
    with pytest.raises(ValueError, match="no weight input.*weight_name"):
        OrtGradientOptimizer(onx_loss, max_iter=1).fit(X, y, np.ones(len(y)))


def test_bad_sample_weight(onx_loss_weighted, linear_data):
    X, y = linear_data
    w = np.ones(len(y))
    for bad, match in [
        (w[:-1], "one weight per sample"),
        (np.where(y > 3, np.nan, w), "sample_weight contains NaN"),
        (-w, "negative"),
    ]:
        with pytest.raises(ValueError, match=match):
            OrtGradientOptimizer(onx_loss_weighted, max_iter=1).fit(X, y, bad)


# -- update rules against numpy references ------------------------------------------------
def _full_batch_gradient(X, y, coef, intercept):
    d = X @ coef + intercept - y
    return 2 * X.T @ d / len(y), 2 * d.mean(keepdims=True)


@pytest.mark.parametrize("solver", ["sgd", "momentum", "nesterov"])
def test_first_steps_match_numpy_reference(onx_loss, linear_data, solver):
    """Full batches, so that shuffling does not matter; scikit-learn's MLP update rules."""
    X, y = linear_data
    X64, y64 = X.astype(np.float64), y.astype(np.float64)
    init = get_train_initializer(onx_loss)
    coef, intercept = init["coef"].ravel().astype(np.float64), init["intercept"].astype(np.float64)
    vel = [np.zeros_like(coef), np.zeros_like(intercept)]
    lr, mu = 0.05, 0.9
    for _ in range(4):
        grads = _full_batch_gradient(X64, y64, coef, intercept)
        params = [coef, intercept]
        for k in range(2):
            if solver == "sgd":
                params[k] = params[k] - lr * grads[k]
                continue
            vel[k] = mu * vel[k] - lr * grads[k]
            step = mu * vel[k] - lr * grads[k] if solver == "nesterov" else vel[k]
            params[k] = params[k] + step
        coef, intercept = params
    opt = _fit(
        onx_loss, X, y, solver=solver, learning_rate=lr, momentum=mu, batch_size=len(y), max_iter=4
    )
    state = opt.get_state()
    np.testing.assert_allclose(state["coef"].ravel(), coef, rtol=1e-4)
    np.testing.assert_allclose(state["intercept"], intercept, rtol=1e-4)


def test_adamw_first_steps_match_torch(onx_loss, linear_data):
    X, y = linear_data
    init = get_train_initializer(onx_loss)
    coef = torch.tensor(init["coef"].ravel(), dtype=torch.float64, requires_grad=True)
    intercept = torch.tensor(init["intercept"], dtype=torch.float64, requires_grad=True)
    optim = torch.optim.AdamW(
        [coef, intercept], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0
    )
    Xt, yt = torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    for _ in range(5):
        optim.zero_grad()
        ((Xt @ coef + intercept - yt) ** 2).mean().backward()
        optim.step()
    opt = _fit(onx_loss, X, y, solver="adamw", learning_rate=0.1, batch_size=len(y), max_iter=5)
    np.testing.assert_allclose(opt.get_state()["coef"].ravel(), coef.detach().numpy(), rtol=1e-4)
    np.testing.assert_allclose(opt.get_state()["intercept"], intercept.detach().numpy(), rtol=1e-4)


# -- minibatches, warm start, validation ---------------------------------------------------
def test_random_state_reproducible_and_seed_matters(onx_loss, linear_data):
    X, y = linear_data
    a = _fit(onx_loss, X, y, max_iter=3, random_state=1)
    b = _fit(onx_loss, X, y, max_iter=3, random_state=1)
    c = _fit(onx_loss, X, y, max_iter=3, random_state=2)
    assert a.train_losses_ == b.train_losses_
    assert a.train_losses_ != c.train_losses_


def test_warm_start_continues_like_one_run(onx_loss, linear_data):
    X, y = linear_data
    one = _fit(onx_loss, X, y, max_iter=4, solver="momentum", learning_rate=0.01)
    two = _fit(onx_loss, X, y, max_iter=2, solver="momentum", learning_rate=0.01, warm_start=True)
    two.fit(X, y)
    assert two.n_iter_ == 4
    np.testing.assert_allclose(two.train_losses_, one.train_losses_, rtol=1e-5)
    cold = _fit(onx_loss, X, y, max_iter=2, solver="momentum", learning_rate=0.01)
    cold.fit(X, y)
    assert cold.n_iter_ == 2


def test_validation_losses(onx_loss, linear_data):
    X, y = linear_data
    opt = OrtGradientOptimizer(
        onx_loss, max_iter=10, learning_rate=0.002, validation_every=0.2, random_state=0
    )
    opt.fit(X[:200], y[:200], X_val=X[200:], y_val=y[200:])
    assert opt.validation_epochs_ == [2, 4, 6, 8, 10]
    assert len(opt.validation_losses_) == 5
    assert opt.validation_losses_[-1] < opt.validation_losses_[0]
    np.testing.assert_allclose(opt.validation_losses_[-1], -opt.score(X[200:], y[200:]), rtol=1e-5)
    opt.set_params(validation_every=3).fit(X[:200], y[:200], X_val=X[200:], y_val=y[200:])
    assert opt.validation_epochs_ == [3, 6, 9]
    with pytest.raises(ValueError, match="both X_val and y_val"):
        opt.fit(X, y, X_val=X)


def test_progress_bar_shows_epoch_and_loss(onx_loss, linear_data, capsys):
    X, y = linear_data
    _fit(onx_loss, X, y, max_iter=2, verbose=1)
    err = capsys.readouterr().err
    assert "2/2" in err and "loss=" in err
    _fit(onx_loss, X, y, max_iter=2, verbose=0)
    assert "loss=" not in capsys.readouterr().err


def test_divergence_raises_clear_error(onx_loss, linear_data):
    X, y = linear_data
    with pytest.raises(TrainingDivergedError, match="smaller learning rate"):
        _fit(onx_loss, X * 100, y, learning_rate=10.0, max_iter=20)


# -- prediction and export -----------------------------------------------------------
def test_predict_and_trained_onnx_agree(onx_loss, linear_data):
    X, y = linear_data
    opt = _fit(onx_loss, X, y, max_iter=5)
    state = opt.get_state()
    pred = opt.predict(X[:7])
    assert pred.shape == (7,)
    np.testing.assert_allclose(pred, X[:7] @ state["coef"].ravel() + state["intercept"], rtol=1e-5)
    model = opt.get_trained_onnx()
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["X"]
    assert [o.name for o in model.graph.output] == ["variable"]
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(sess.run(None, {"X": X[:7]})[0].ravel(), pred, rtol=1e-6)


def test_set_state(onx_loss, linear_data):
    X, y = linear_data
    opt = _fit(onx_loss, X, y, max_iter=1)
    opt.set_state({"coef": np.ones((4, 1)), "intercept": np.zeros(1)})
    np.testing.assert_allclose(opt.predict(X[:3]), X[:3].sum(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match="expects the weights"):
        opt.set_state({"coef": np.ones((4, 1))})
    with pytest.raises(ValueError, match="shape"):
        opt.set_state({"coef": np.ones(3), "intercept": np.zeros(1)})


# -- scikit-learn estimator contract -------------------------------------------------------
def test_clone_and_params(onx_loss):
    opt = OrtGradientOptimizer(onx_loss, ["coef"], learning_rate=0.1, solver="adamw")
    params = opt.get_params()
    assert params["weights_to_train"] == ["coef"] and params["solver"] == "adamw"
    copy = clone(opt)
    assert copy.get_params()["learning_rate"] == 0.1
    assert copy.set_params(max_iter=7).max_iter == 7


def test_pickle_after_fit_then_warm_start(onx_loss, linear_data):
    X, y = linear_data
    opt = _fit(onx_loss, X, y, max_iter=2, solver="momentum", learning_rate=0.01, warm_start=True)
    restored = pickle.loads(pickle.dumps(opt))
    np.testing.assert_allclose(restored.predict(X[:5]), opt.predict(X[:5]))
    assert restored.score(X, y) == pytest.approx(opt.score(X, y), rel=1e-6)
    # both continue identically: weights, velocities and shuffling were kept
    opt.fit(X, y)
    restored.fit(X, y)
    np.testing.assert_allclose(restored.train_losses_, opt.train_losses_, rtol=1e-5)


def test_grid_search(onx_loss, linear_data):
    X, y = linear_data
    search = GridSearchCV(
        OrtGradientOptimizer(onx_loss, max_iter=5, random_state=0),
        {"learning_rate": [1e-4, 0.05]},
        cv=2,
    ).fit(X, y)
    assert search.best_params_ == {"learning_rate": 0.05}


def test_trains_only_the_weights_asked(onx_loss, linear_data):
    X, y = linear_data
    opt = _fit(onx_loss, X, y, max_iter=2, weights_to_train=["intercept"])
    assert list(opt.get_state()) == ["intercept"]
    assert opt.weights_to_train_ == ["intercept"]
    coef = opt.get_trained_onnx().graph.initializer[0]
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(coef), get_train_initializer(onx_loss)["coef"]
    )


# -- input conversion, penalties, the seed's calls --------------------------------------
def test_float64_and_integer_features_are_converted(onx_loss, linear_data):
    X, y = linear_data
    ref = _fit(onx_loss, X, y, max_iter=2)
    as64 = _fit(onx_loss, X.astype(np.float64), y.astype(np.float64), max_iter=2)
    assert as64.train_losses_ == ref.train_losses_
    ints = _fit(onx_loss, np.round(X).astype(np.int64), y, max_iter=1)
    assert np.isfinite(ints.train_losses_).all()


def test_score_excludes_the_penalty(linear_onnx, linear_data):
    """train_losses_ hold the objective; score and validation the data loss only."""
    X, y = linear_data
    onx_loss = add_loss_output(linear_onnx, penalty={"coef": 10.0})
    opt = _fit(onx_loss, X, y, max_iter=2, learning_rate=0.01)
    state = opt.get_state()
    mse = np.mean((X @ state["coef"].ravel() + state["intercept"] - y) ** 2)
    assert opt.score(X, y) == pytest.approx(-mse, rel=1e-5)
    penalty = 10.0 * (state["coef"] ** 2).sum()
    assert opt.train_losses_[-1] > mse + penalty / 2


def test_validation_every_one_means_every_epoch_and_numpy_numbers(onx_loss, linear_data):
    X, y = linear_data
    for every in (1, 1.0, np.int64(1)):
        opt = OrtGradientOptimizer(
            onx_loss, max_iter=3, validation_every=every, learning_rate=np.float32(0.01)
        ).fit(X, y, X_val=X, y_val=y)
        assert opt.validation_epochs_ == [1, 2, 3]
    opt.set_params(validation_every=0).fit(X, y, X_val=X, y_val=y)
    assert opt.validation_epochs_ == []


def test_seed_calls_as_written(linear_onnx, linear_data):
    """The calls of the seed documents, unchanged."""
    X_train, y_train = linear_data
    w_train = np.random.default_rng(0).uniform(0.5, 1.5, len(y_train)).astype(np.float32)
    onx = linear_onnx
    onx_loss = add_loss_output(
        onx,
        weight_name="weight",
        score_name="elastic",
        l1_weight=0.1,
        l2_weight=0.9,
        penalty={"coef": {"l2": 0.01}},
    )
    train_session = OrtGradientOptimizer(onx_loss, ["intercept", "coef"], learning_rate=1e-3)
    train_session.fit(X_train, y_train, w_train)
    state_tensors = train_session.get_state()
    losses = train_session.train_losses_
    assert set(state_tensors) == {"intercept", "coef"}
    assert len(losses) == 100 and losses[-1] < losses[0]
