"""What the lessons of the notebooks show, checked on the helpers they use.

The notebooks print these facts as sentences; the assertions that guard them
live here: the parts of a training graph, the updates that equal
scikit-learn's, the penalty's shrinkage, the loop that ``fit`` runs, frozen
weights and checkpoints that resume exactly.
"""

import numpy as np
import onnx
import pytest
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression, SGDRegressor

from helpers import (
    ElasticLearningPenalty,
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
    get_train_initializer,
)
from helpers.core.model_graphs.onnx_graph import replace_initializers
from helpers.teaching.datasets import make_synthetic_regression
from helpers.teaching.graph_parts import operators_by_part, summarize_parts


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_synthetic_regression(
        n_samples=120, n_features=4, noise=1.0, bias=2.0, random_state=0
    )
    return X, y


@pytest.fixture(scope="module")
def onx_zero(data):
    X, y = data
    onx = to_onnx(LinearRegression().fit(X, y), X[:1], black_op={"LinearRegressor"})
    zeros = {k: np.zeros_like(v) for k, v in get_train_initializer(onx).items()}
    return replace_initializers(onx, zeros)


def _artifacts_api():
    """onnxruntime-training's artifacts API, and this package's wrappers of it (notebooks 3 and 4
    teach them): ``(artifacts, CheckpointState, load_training_artifacts, train_step)``."""
    from onnxruntime.training import artifacts  # noqa: PLC0415 - the training package
    from onnxruntime.training.api import CheckpointState  # noqa: PLC0415

    from helpers.whole_training.artifacts import load_training_artifacts, train_step  # noqa: PLC0415

    return artifacts, CheckpointState, load_training_artifacts, train_step


def _generate(onx_loss, folder, requires_grad, frozen):
    artifacts = _artifacts_api()[0]
    artifacts.generate_artifacts(
        onx_loss,
        requires_grad=requires_grad,
        frozen_params=frozen,
        loss=None,
        optimizer=artifacts.OptimType.SGD,
        artifact_directory=str(folder),
    )
    return str(folder)


def _sgd_regressor_on_permutations(X, y, epochs, random_state=0, **params):
    """SGDRegressor fed, one epoch per partial_fit, the permutations the optimizers draw."""
    sgd = SGDRegressor(shuffle=False, tol=None, **params)
    orders = np.random.RandomState(random_state)
    for _ in range(epochs):
        order = orders.permutation(len(X))
        sgd.partial_fit(X[order], y[order])
    return sgd


@pytest.mark.training_package
def test_training_model_parts(onx_zero, tmp_path):
    onx_loss = add_loss_output(onx_zero)
    folder = _generate(onx_loss, tmp_path, ["coef", "intercept"], ["shape_tensor"])
    training = onnx.load(f"{folder}/training_model.onnx")
    optimizer = onnx.load(f"{folder}/optimizer_model.onnx")
    table = operators_by_part(training, onx_zero, loss_model=onx_loss, optimizer_model=optimizer)
    parts = table.groupby("part")["op_type"].apply(list).to_dict()
    assert sorted(parts["forward"]) == sorted(n.op_type for n in onx_zero.graph.node)
    appended = [n.op_type for n in onx_loss.graph.node[len(onx_zero.graph.node) :]]
    assert sorted(parts["loss"]) == sorted(appended)
    assert parts["accumulation"] == ["InPlaceAccumulatorV2"] * 2  # one per trained weight
    assert parts["optimizer"] == ["SGDOptimizerV2"]
    assert "Gemm" in parts["gradient"]  # the MatMul's gradient for coef
    summary = summarize_parts(table)
    assert list(summary.index) == ["forward", "loss", "gradient", "accumulation", "optimizer"]
    assert summary["nodes"].sum() == len(training.graph.node) + len(optimizer.graph.node)


@pytest.mark.training_package
def test_gradient_graph_parts(onx_zero):
    fb = OrtGradientForwardBackward(onx_zero, ["coef", "intercept"])
    table = operators_by_part(fb.gradient_model_, onx_zero)
    yields = table[table["part"] == "YieldOp"]
    assert len(yields) == 1
    assert yields.iloc[0]["inputs"] == "variable"
    assert yields.iloc[0]["outputs"] == "variable_grad"
    assert set(table["part"]) == {"forward", "YieldOp", "backward"}
    assert fb.feed_names_ == ["X", "coef", "intercept"]
    assert fb.grad_names_ == ["coef_grad", "intercept_grad"]


@pytest.mark.training_package
def test_hand_loop_reproduces_fit(onx_zero, data, tmp_path):
    """fit's shuffling is numpy's RandomState: the same loop by hand gives the same losses."""
    X, y = data
    _, _, load_training_artifacts, train_step = _artifacts_api()
    onx_loss = add_loss_output(onx_zero)
    state, module, optimizer = load_training_artifacts(
        _generate(onx_loss, tmp_path, ["coef", "intercept"], ["shape_tensor"])
    )
    optimizer.set_learning_rate(0.01)
    rng, epoch_losses = np.random.RandomState(0), []
    for _ in range(3):
        order = rng.permutation(len(X))
        losses = [
            train_step(module, optimizer, X[rows], y[rows].reshape(-1, 1)) * len(rows)
            for rows in np.array_split(order, range(16, len(X), 16))
        ]
        epoch_losses.append(sum(losses) / len(X))
    model = OrtGradientOptimizer(
        onx_loss,
        ["intercept", "coef"],
        max_iter=3,
        batch_size=16,
        learning_rate=0.01,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_allclose(model.train_losses_, epoch_losses, rtol=1e-6)
    np.testing.assert_allclose(model.get_state()["coef"], state.parameters["coef"].data)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({"learning_rate": 0.005}, {"learning_rate": "constant", "eta0": 0.01, "penalty": None}),
        (
            {
                "learning_rate": 0.005,
                "learning_rate_schedule": "invscaling",
                "power_t": 0.25,
                "learning_penalty": ElasticLearningPenalty(l1=0, l2=1e-3, weights=["coef"]),
            },
            {"alpha": 1e-3},  # SGDRegressor's defaults: invscaling, eta0=0.01, power_t=0.25
        ),
    ],
    ids=["constant", "invscaling-l2"],
)
def test_batch_one_equals_sgdregressor(onx_zero, data, ours, theirs):
    X, y = data
    model = OrtGradientForwardBackwardOptimizer(
        onx_zero, ["coef", "intercept"], max_iter=3, batch_size=1, random_state=0, **ours
    ).fit(X, y)
    sgd = _sgd_regressor_on_permutations(X, y, 3, **theirs)
    assert model.t_ == sgd.t_ - 1  # scikit-learn counts from 1
    scale = np.abs(sgd.coef_).max()
    np.testing.assert_allclose(model.get_state()["coef"].ravel(), sgd.coef_, atol=1e-4 * scale)
    np.testing.assert_allclose(model.get_state()["intercept"], sgd.intercept_, rtol=1e-4)


def test_absolute_error_equals_epsilon_insensitive(onx_zero, data):
    X, y = data
    model = OrtGradientForwardBackwardOptimizer(
        onx_zero,
        ["coef", "intercept"],
        max_iter=2,
        batch_size=1,
        learning_rate=0.1,
        learning_loss="absolute_error",
        random_state=0,
    ).fit(X, y)
    sgd = _sgd_regressor_on_permutations(
        X,
        y,
        2,
        loss="epsilon_insensitive",
        epsilon=0,
        learning_rate="constant",
        eta0=0.1,
        penalty=None,
    )
    np.testing.assert_allclose(model.get_state()["coef"].ravel(), sgd.coef_, atol=1e-4)


@pytest.mark.parametrize("batch_size", [1, 7])
def test_penalty_alone_shrinks_once_per_update(onx_zero, data, batch_size):
    """With zero features only the penalty moves coef: one shrinkage per update."""
    X, y = data
    start = np.array([3.0, -2.0, 0.5, 1.0])
    onx = replace_initializers(onx_zero, {"coef": start.astype(np.float32).reshape(-1, 1)})
    l1, l2, lr = 0.5, 0.05, 0.005
    model = OrtGradientForwardBackwardOptimizer(
        onx,
        ["coef", "intercept"],
        max_iter=1,
        batch_size=batch_size,
        learning_rate=lr,
        learning_penalty=ElasticLearningPenalty(l1=l1, l2=l2, weights=["coef"]),
    ).fit(np.zeros_like(X), y)
    assert model.t_ == -(-len(X) // batch_size)
    expected = start
    for _ in range(model.t_):
        expected = expected - lr * (l1 * np.sign(expected) + 2 * l2 * expected)
    np.testing.assert_allclose(model.get_state()["coef"].ravel(), expected, rtol=1e-4)


def test_both_apis_end_on_the_same_weights(onx_zero, data):
    X, y = data
    settings = dict(max_iter=3, batch_size=10, learning_rate=0.05, random_state=0)
    fb = OrtGradientForwardBackwardOptimizer(onx_zero, ["coef", "intercept"], **settings)
    whole = OrtGradientOptimizer(add_loss_output(onx_zero), ["coef", "intercept"], **settings)
    fb.fit(X, y)
    whole.fit(X, y)
    np.testing.assert_allclose(
        whole.get_state()["coef"], fb.get_state()["coef"], rtol=1e-4, atol=1e-4
    )


@pytest.mark.training_package
def test_frozen_weights_do_not_move(onx_zero, data, tmp_path):
    X, y = data
    _, _, load_training_artifacts, train_step = _artifacts_api()
    folder = _generate(add_loss_output(onx_zero), tmp_path, ["intercept"], ["coef", "shape_tensor"])
    state, module, optimizer = load_training_artifacts(folder)
    state.parameters["coef"] = np.ones((X.shape[1], 1), dtype=np.float32)
    optimizer.set_learning_rate(0.1)
    for _ in range(5):
        train_step(module, optimizer, X, y.reshape(-1, 1))
    np.testing.assert_array_equal(state.parameters["coef"].data, np.ones((X.shape[1], 1)))
    assert state.parameters["intercept"].data[0] != 0


@pytest.mark.training_package
@pytest.mark.parametrize("with_optimizer_state", [True, False])
def test_checkpoint_resumes_exactly_only_with_the_optimizer_state(
    onx_zero, data, tmp_path, with_optimizer_state
):
    X, y = data
    artifacts, CheckpointState, load_training_artifacts, train_step = _artifacts_api()
    y_col = y.reshape(-1, 1)
    artifacts.generate_artifacts(
        add_loss_output(onx_zero),
        requires_grad=["coef", "intercept"],
        frozen_params=["shape_tensor"],
        loss=None,
        optimizer=artifacts.OptimType.AdamW,
        artifact_directory=str(tmp_path),
    )

    def steps(module, optimizer, n):
        return [train_step(module, optimizer, X, y_col) for _ in range(n)]

    state, module, optimizer = load_training_artifacts(str(tmp_path))
    optimizer.set_learning_rate(0.1)
    uninterrupted = steps(module, optimizer, 6)

    state, module, optimizer = load_training_artifacts(str(tmp_path))
    optimizer.set_learning_rate(0.1)
    first = steps(module, optimizer, 3)
    path = str(tmp_path / "stop.ckpt")
    CheckpointState.save_checkpoint(state, path, include_optimizer_state=with_optimizer_state)
    state, module, optimizer = load_training_artifacts(str(tmp_path), checkpoint=path)
    optimizer.set_learning_rate(0.1)
    resumed = first + steps(module, optimizer, 3)
    same = np.allclose(resumed, uninterrupted, rtol=1e-6, atol=0)
    assert same == with_optimizer_state
