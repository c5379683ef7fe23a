"""The benchmark building blocks compare like with like: same start, same step."""

import json
import time
import warnings

import numpy as np
import onnxruntime
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDRegressor

from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import matmul_references as mr
from benchmarks.workloads import models as bm
from benchmarks.workloads import trainers as bt
from helpers.core.machine.runtime import has_training_package
from helpers.measure.conditions import timing_caveat


@pytest.fixture(scope="module")
def data():
    return bm.make_data(300, 6, random_state=1)


@pytest.fixture(scope="module")
def mlp_and_onnx(data):
    return bm.initial_mlp(data.X_train, data.y_train, hidden=12, batch_size=20, learning_rate=0.01)


@pytest.fixture(scope="module")
def batches(data):
    return bm.draw_batches(data.X_train, data.y_train, batch_size=16, n_batches=4, random_state=3)


def numpy_sgd_step(layers, X, y, lr):
    """One SGD step on mean((p - y) ** 2), gradients written by hand."""
    (W1, b1), (W2, b2) = layers
    z = X @ W1 + b1
    h = np.maximum(z, 0)
    p = h @ W2 + b2
    g = 2 * (p - y) / X.shape[0]
    grad_W2, grad_b2 = h.T @ g, g.sum(axis=0)
    grad_h = (g @ W2.T) * (z > 0)
    grad_W1, grad_b1 = X.T @ grad_h, grad_h.sum(axis=0)
    return [(W1 - lr * grad_W1, b1 - lr * grad_b1), (W2 - lr * grad_W2, b2 - lr * grad_b2)]


def test_make_data(data):
    assert data.X_train.dtype == data.X_val.dtype == data.y_train.dtype == np.float32
    assert data.X_train.shape == (240, 6) and data.X_val.shape == (60, 6)
    assert data.y_train.ndim == 1
    np.testing.assert_allclose(data.X_train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(data.X_train.std(axis=0), 1, atol=1e-4)
    # the standardized target plus noise 0.3: variance about 1 + 0.09
    assert 0.7 < data.y_train.var() < 1.5


def test_random_regression():
    X, y = bm.random_regression(500, 8, random_state=0)
    assert X.dtype == y.dtype == np.float32 and X.shape == (500, 8) and y.shape == (500,)
    assert 0.7 < y.var() < 1.5


def test_draw_batches_distinct_rows(data):
    batches = bm.draw_batches(data.X_train, data.y_train, 10, 3)
    assert len(batches) == 3
    for X, y in batches:
        assert X.shape == (10, 6) and y.shape == (10, 1) and X.flags.c_contiguous
        assert len({row.tobytes() for row in X}) == 10
    with pytest.raises(ValueError, match="larger"):
        bm.draw_batches(data.X_train, data.y_train, 1000, 1)


def test_layers_predict_as_sklearn_and_onnxruntime(data, mlp_and_onnx):
    mlp, onx = mlp_and_onnx
    layers = bm.mlp_layers(onx)
    assert [W.shape for W, _ in layers] == [(6, 12), (12, 1)]
    pred = bm.numpy_predict(layers, data.X_val)
    np.testing.assert_allclose(pred.ravel(), mlp.predict(data.X_val), rtol=1e-5, atol=1e-5)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_pred = sess.run(None, {sess.get_inputs()[0].name: data.X_val})[0]
    np.testing.assert_allclose(pred, ort_pred, rtol=1e-5, atol=1e-5)


def test_torch_mlp_predicts_as_onnx(data, mlp_and_onnx):
    import torch

    _, onx = mlp_and_onnx
    model = bm.torch_mlp(onx)
    with torch.no_grad():
        pred = model(torch.from_numpy(data.X_val)).numpy()
    np.testing.assert_allclose(
        pred, bm.numpy_predict(bm.mlp_layers(onx), data.X_val), rtol=1e-5, atol=1e-5
    )
    assert bm.max_weight_difference(bm.torch_layers(model), bm.mlp_layers(onx)) == 0


def test_mlp_layers_refuses_other_activations(data):
    from skl2onnx import to_onnx
    from sklearn.neural_network import MLPRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPRegressor(hidden_layer_sizes=(4,), activation="tanh", max_iter=1).fit(
            data.X_train, data.y_train
        )
    with pytest.raises(ValueError, match="Tanh"):
        bm.mlp_layers(to_onnx(mlp, data.X_train[:1]))


def test_zero_linear_onnx():
    onx = bm.zero_linear_onnx(5)
    layers = bm.mlp_layers(onx)
    assert len(layers) == 1 and layers[0][0].shape == (5, 1)
    assert not any(np.any(a) for a in layers[0])


@pytest.mark.parametrize("trainer", ["numpy", "torch", "whole", "forward-backward"])
def test_sgd_steps_give_the_same_weights(mlp_and_onnx, batches, trainer):
    """Four SGD steps from the same start on the same batches: the same weights."""
    _, onx = mlp_and_onnx
    lr = 0.05
    expected = bm.mlp_layers(onx)
    for X, y in batches:
        expected = numpy_sgd_step(expected, X.astype(np.float64), y.astype(np.float64), lr)
    if trainer == "numpy":
        # the reference itself moved the weights: the check below is not vacuous
        assert bm.max_weight_difference(expected, bm.mlp_layers(onx)) > 1e-3
        return
    tr = {
        "torch": lambda: bt.TorchTrainer(onx, "sgd", lr),
        "whole": lambda: bt.OrtWholeTrainer(onx, "sgd", lr),
        "forward-backward": lambda: bt.OrtForwardBackwardTrainer(onx, lr),
    }[trainer]()
    losses = bt.run_batches(tr, [tr.prepare(*b) for b in batches])
    assert len(losses) == 4 and all(np.isfinite(losses))
    first = bm.mean_squared_error(
        bm.numpy_predict(bm.mlp_layers(onx), batches[0][0]), batches[0][1]
    )
    assert losses[0] == pytest.approx(first, rel=1e-5)
    assert bm.max_weight_difference(tr.layers(), expected) < 1e-5


def test_adamw_steps_agree(mlp_and_onnx, batches):
    """torch's AdamW and onnxruntime's differ only in where eps goes."""
    _, onx = mlp_and_onnx
    trainers = [bt.TorchTrainer(onx, "adamw", 0.01), bt.OrtWholeTrainer(onx, "adamw", 0.01)]
    for tr in trainers:
        bt.run_batches(tr, [tr.prepare(*b) for b in batches])
    torch_layers, ort_layers = (tr.layers() for tr in trainers)
    assert bm.max_weight_difference(torch_layers, bm.mlp_layers(onx)) > 0.02  # 4 steps of 0.01
    assert bm.max_weight_difference(ort_layers, torch_layers) < 1e-3


def test_ort_learning_rate_reproduces_mlpregressor(data, mlp_and_onnx, batches):
    """Half scikit-learn's learning rate gives scikit-learn's update."""
    mlp, onx = mlp_and_onnx
    mlp = bm.copy_estimator(mlp)
    X, y = batches[0]
    with warnings.catch_warnings():  # the batch is smaller than batch_size: one update
        warnings.simplefilter("ignore", UserWarning)
        mlp.partial_fit(X, y.ravel())
    tr = bt.OrtWholeTrainer(onx, "sgd", bm.ort_learning_rate(mlp.learning_rate_init))
    tr.step(*tr.prepare(X, y))
    sk_layers = list(zip(mlp.coefs_, mlp.intercepts_))
    assert bm.max_weight_difference(tr.layers(), bm.mlp_layers(onx)) > 1e-4
    assert bm.max_weight_difference(tr.layers(), sk_layers) < 1e-6


def test_ort_learning_rate_reproduces_sgdregressor(data):
    """Per-sample steps at half the learning rate give SGDRegressor's weights."""
    X, y = data.X_train[:30], data.y_train[:30]
    sgd = SGDRegressor(
        learning_rate="constant", eta0=0.01, penalty=None, max_iter=1, tol=None, shuffle=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sgd.fit(X, y)
    onx = bm.zero_linear_onnx(X.shape[1])
    tr = bt.OrtForwardBackwardTrainer(onx, bm.ort_learning_rate(0.01))
    for i in range(X.shape[0]):
        tr.step(*tr.prepare(X[i : i + 1], y[i : i + 1]))
    ((W, b),) = tr.layers()
    np.testing.assert_allclose(W.ravel(), sgd.coef_, atol=1e-5)
    np.testing.assert_allclose(b, sgd.intercept_, atol=1e-5)


def test_numpy_matmul_products(mlp_and_onnx, batches):
    _, onx = mlp_and_onnx
    nm = mr.NumpyMatmul(bm.mlp_layers(onx))
    assert len(nm.PRODUCTS) == 5
    assert nm.step(*nm.prepare(*batches[0])) == 0.0
    # 16 rows, 6 features, 12 hidden, 1 output: 2 * 16 * (6*12 + 3 * 12 + 6*12)
    assert nm.flops(16) == 2 * 16 * (72 + 36 + 72)
    with pytest.raises(ValueError, match="one hidden layer"):
        mr.NumpyMatmul(bm.mlp_layers(bm.zero_linear_onnx(3)))


def test_ort_step_products(mlp_and_onnx, batches):
    """The runtime's bound: the same products as numpy's, the network's weights, its own threads."""
    _, onx = mlp_and_onnx
    layers = bm.mlp_layers(onx)
    bound = mr.OrtStepProducts(layers, n_threads=1)
    assert bound.PRODUCTS == mr.NumpyMatmul.PRODUCTS
    np.testing.assert_array_equal(bound.products.w1, layers[0][0])
    np.testing.assert_array_equal(bound.products.w2, layers[1][0])
    prepared = bound.prepare(*batches[0])
    assert len(prepared) == 1 and prepared[0].shape == (16, 6) and prepared[0].dtype == np.float32
    assert bound.step(*prepared) == 0.0
    assert bound.flops(16) == mr.NumpyMatmul(layers).flops(16)
    assert bound.products._session.get_session_options().intra_op_num_threads == 1
    assert fw.ORT_BOUND in fw.BOUNDS and fw.NUMPY_MATMUL in fw.BOUNDS
    with pytest.raises(ValueError, match="one hidden layer"):
        mr.OrtStepProducts(bm.mlp_layers(bm.zero_linear_onnx(3)))


def test_ort_trainers_take_n_threads(mlp_and_onnx, monkeypatch):
    """n_threads reaches the sessions that run the model, in both trainers."""
    from helpers.core.machine import sessions, training_cache

    training_cache.clear_training_caches()  # the whole-training sessions are made anew
    _, onx = mlp_and_onnx
    fb = bt.OrtForwardBackwardTrainer(onx, 0.01, n_threads=1)
    assert fb.gradient.n_threads == 1
    assert fb.gradient._train_sess.get_session_options().intra_op_num_threads == 1
    calls = []
    real = sessions.session_options

    def spy(n_threads=None, label="session", spin=True):
        calls.append((n_threads, label))
        return real(n_threads, label, spin)

    monkeypatch.setattr(sessions, "session_options", spy)
    if has_training_package():  # its Module takes the options from the session layer's module
        from helpers.whole_training import session

        monkeypatch.setattr(session, "session_options", spy)
    whole = bt.OrtWholeTrainer(onx, "sgd", 0.01, n_threads=1)
    assert (1, "model") in calls
    assert np.isfinite(
        whole.step(*whole.prepare(np.ones((4, 6), np.float32), np.ones(4, np.float32)))
    )


def test_marginal_step_cost_with_a_fake_clock():
    """(t(e2) - t(e1)) / extra steps, best of the repeats, fits in turn after one warm-up each."""
    now = [0.0]
    calls = []
    costs = {"a": (0.5, 0.01), "b": (0.1, 0.002)}  # fixed seconds, seconds per step

    def fit_of(name):
        def fit(epochs):
            calls.append((name, epochs))
            fixed, step = costs[name]
            # the first timed round is slower: the best of the repeats must ignore it
            slow = 2.0 if sum(c[0] == name for c in calls) <= 3 else 1.0
            now[0] += slow * (fixed + step * 10 * epochs)

        return fit

    out = bm.marginal_step_cost(
        {"a": fit_of("a"), "b": fit_of("b")},
        steps_per_epoch=10,
        e1=1,
        e2=4,
        repeats=2,
        clock=lambda: now[0],
    )
    assert calls == [("a", 1), ("b", 1)] + [("a", 1), ("a", 4), ("b", 1), ("b", 4)] * 2
    assert out["a"]["step_s"] == pytest.approx(0.01) and out["a"]["fixed_s"] == pytest.approx(0.5)
    assert out["b"]["step_s"] == pytest.approx(0.002) and out["b"]["fixed_s"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="e2 > e1"):
        bm.marginal_step_cost({}, 10, e1=2, e2=2)


def test_marginal_step_cost_is_never_negative():
    """A long fit timed faster than the short one (a noisy machine) gives NaN, not a negative
    step."""
    now = [0.0]

    def fit(epochs):
        now[0] += 1.0 if epochs == 4 else 1.5

    out = bm.marginal_step_cost(
        {"noisy": fit}, steps_per_epoch=10, repeats=1, clock=lambda: now[0], pause_s=0
    )
    assert np.isnan(out["noisy"]["step_s"]) and np.isnan(out["noisy"]["fixed_s"])


def test_run_epoch_counts_updates(data):
    class Count:
        def __init__(self):
            self.rows = []

        def prepare(self, X, y):
            return X, y

        def step(self, X, y):
            self.rows.append(X.shape[0])
            return 0.0

    counter = Count()
    steps = bt.run_epoch(counter, data.X_train, data.y_train, 100, np.random.default_rng(0))
    assert steps == 3 and counter.rows == [100, 100, 40]


def test_fit_times_prepares_each_run():
    calls = []
    times = bm.fit_times(lambda: calls.append("prepare"), lambda: calls.append("fit"), repeat=2)
    assert calls == ["prepare", "fit", "prepare", "fit"]
    assert times["repeat"] == 2 and times["min"] <= times["median"] <= times["max"]


def test_is_comparable():
    assert bm.is_comparable(1.05, 1.0) and bm.is_comparable(0.95, 1.0)
    assert not bm.is_comparable(1.2, 1.0)
    assert bm.is_comparable(1.2, 1.0, tolerance=0.25)
    assert not bm.is_comparable(float("nan"), 1.0) and not bm.is_comparable(None, 1.0)


def test_make_row_schema():
    row = bm.make_row(
        benchmark="torch", framework=fw.TORCH, fit_time_s=np.float64(1.5), setup_time_s=2.0
    )
    assert set(bm.ROW_KEYS) <= set(row) and row["setup_time_s"] == 2.0
    assert row["error"] is None and type(row["fit_time_s"]) is float
    json.dumps(row)


def test_interleaved_fit_times_takes_turns():
    calls = []
    fits = {
        "a": (lambda: calls.append("prepare a"), lambda: calls.append("fit a")),
        "b": (lambda: calls.append("prepare b"), lambda: calls.append("fit b")),
    }
    times = bm.interleaved_fit_times(fits, repeat=2)
    assert calls == ["prepare a", "fit a", "prepare b", "fit b"] * 2
    assert set(times) == {"a", "b"} and times["a"]["repeat"] == 2 and times["a"]["number"] == 1


def test_interleaved_measure_takes_turns_and_calibrates():
    order = []
    slow = lambda: (order.append("slow"), time.sleep(0.002))  # noqa: E731
    fast = lambda: order.append("fast")  # noqa: E731
    timings = bm.interleaved_measure({"slow": slow, "fast": fast}, repeat=3, min_time=0.01)
    assert timings["fast"]["number"] > timings["slow"]["number"] >= 1
    assert timings["slow"]["median"] >= 0.002 > timings["fast"]["median"]
    assert timings["slow"]["repeat"] == 3
    # after calibration, one run of each in turn: the names alternate in blocks
    tail = order[-(3 * (timings["slow"]["number"] + timings["fast"]["number"])) :]
    blocks = [name for i, name in enumerate(tail) if i == 0 or tail[i - 1] != name]
    assert blocks == ["slow", "fast"] * 3


def test_timing_note_words_are_the_timing_caveat():
    assert bm.timing_note({"min": 1.0, "max": 1.5}) == ""
    assert bm.timing_note({"min": 1.0, "max": 3.0}) == "noisy: repeats spread 3.0x"
    assert bm.timing_note({"min": 1.0, "max": 3.0}) == timing_caveat(spread=3.0)
    assert bm.timing_note({"min": 0.0, "max": 1.0}) == "noisy: a repeat gave no estimate"


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_layers_are_snapshots_and_adamw_agrees(mlp_and_onnx, optimizer):
    """layers() does not change with later steps; both onnxruntime APIs take torch's AdamW steps
    alike."""
    _, onx = mlp_and_onnx
    rng = np.random.default_rng(0)
    X, y = (
        rng.standard_normal((16, 6)).astype(np.float32),
        rng.standard_normal(16).astype(np.float32),
    )
    trainers = [
        bt.OrtForwardBackwardTrainer(onx, 0.05, optimizer=optimizer),
        bt.OrtWholeTrainer(onx, optimizer, 0.05),
    ]
    batches = [trainer.prepare(X, y) for trainer in trainers]
    before = [trainer.layers() for trainer in trainers]
    for trainer, batch in zip(trainers, batches):
        for _ in range(3):
            trainer.step(*batch)
    after = [trainer.layers() for trainer in trainers]
    for old, new in zip(before, after):
        assert bm.max_weight_difference(old, new) > 1e-3
    assert bm.max_weight_difference(*after) < 1e-5
