"""The step model of both optimizers trains as their own fit does.

Each test exports the step model of an optimizer, trains it with a plain
``onnxruntime.InferenceSession`` (no training API) on exactly the batches ``fit`` draws (one
``RandomState(random_state).permutation`` per epoch, consecutive slices of ``batch_size`` rows,
the last one smaller), and compares the epoch losses (means of the batch losses weighted by
rows, as ``train_losses_``) and the final weights, running statistics included, with the
optimizer's fit, to float32 rounding. The whole-training API runs ``'sgd'`` and ``'adamw'`` with
onnxruntime's optimizer kernels, whose float32 rounding differs from torch's formulas: the
tolerances cover that.
"""

import os
import pickle

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from helpers import (
    ElasticLearningPenalty,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
    export_for_training,
)
from helpers.portable.lowering import LOWERINGS, UnsupportedOperatorError
from helpers.portable.step_format import inference_model, initial_state, read_record
from helpers.teaching.model_factories import mlp_onnx

APIS = ["whole", "forward_backward"]
ROWS, BATCH, EPOCHS = 40, 16, 2
PENALTY = ElasticLearningPenalty(l1=0.01, l2=0.02, weights=["coefficient0"])
#: Losses, schedules: the learning rate and alpha that keep each one's steps small.
SCHEDULES = {
    "constant": {"learning_rate": 0.05},
    "invscaling": {"learning_rate": 0.1, "power_t": 0.5},
    "optimal": {"alpha": 100.0},
}


def make(api, model, loss="squared_error", weighted=False, penalty=None, **params):
    """An optimizer of ``api`` training ``model`` on ``loss``, seeded, no validation."""
    settings = {"max_iter": EPOCHS, "batch_size": BATCH, "random_state": 0, "validation_every": 0}
    settings["learning_rate"] = 0.05
    settings.update(params)
    if api == "whole":
        onx_loss = add_loss_output(
            model, score_name=loss, weight_name="weight" if weighted else None, penalty=penalty
        )
        return OrtGradientOptimizer(onx_loss, **settings)
    return OrtGradientForwardBackwardOptimizer(
        model, learning_loss=loss, learning_penalty=penalty, **settings
    )


def regression_data(n_outputs=1):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((ROWS, 3)).astype(np.float32)
    y = (X @ rng.standard_normal((3, n_outputs))).astype(np.float32)
    return X, y, rng.uniform(0.5, 2.0, ROWS).astype(np.float32)


def train_step_model(path, arrays, epochs, skip_epochs=0, state=None):
    """Train the step model at ``path`` as ``fit`` would; return the epoch losses and the state.

    ``arrays``: the batch inputs' data, in the record's order. ``skip_epochs``: epochs already
    trained (their permutations are drawn and dropped); the steps count from the record's
    ``steps_done``.
    """
    model = onnx.load(path)
    record = read_record(model)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.RandomState(record.parameters["random_state"])
    batch_size, n = record.parameters["batch_size"], len(arrays[0])
    for _ in range(skip_epochs):
        rng.permutation(n)
    t, state, losses = record.parameters["steps_done"], dict(state or initial_state(model)), []
    for _ in range(epochs):
        order, total = rng.permutation(n), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            t += 1
            feeds = {name: a[rows] for name, a in zip(record.batch_inputs, arrays)}
            loss, *after = session.run(None, {**feeds, "step": np.array(t, np.int64), **state})
            total += float(loss) * len(rows)
            state = dict(zip(record.state, after))
        losses.append(total / n)
    return losses, state


def batch_arrays(api, X, y, w, weighted):
    """The arrays of the step's batch inputs: the forward/backward step always takes weights."""
    if api == "forward_backward" or weighted:
        return [X, y, w if weighted else np.ones(len(X), np.float32)]
    return [X, y]


def fitted_state(opt):
    return {**opt.get_state(), **opt.get_running_statistics()}


def assert_same_training(losses, state, opt, rtol=2e-5, atol=2e-6):
    np.testing.assert_allclose(losses, opt.train_losses_, rtol=rtol)
    for name, value in fitted_state(opt).items():
        np.testing.assert_allclose(state[name], value, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("penalized", [False, True], ids=["plain", "penalty_weights"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("solver", ["sgd", "momentum", "nesterov", "adamw"])
@pytest.mark.parametrize("api", APIS)
def test_step_model_trains_as_fit(api, solver, schedule, penalized, tmp_path):
    """Every solver and schedule; the penalized runs weight their samples too."""
    X, y, w = regression_data()
    params = {"learning_rate": 0.05, **SCHEDULES[schedule], "learning_rate_schedule": schedule}
    opt = make(
        api,
        mlp_onnx(3, hidden=(4,)),
        weighted=penalized,
        penalty=PENALTY if penalized else None,
        solver=solver,
        **params,
    )
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    assert record.parameters["steps_done"] == 0 and record.trained == opt.weights_to_train_
    opt.fit(X, y, sample_weight=w if penalized else None)
    losses, state = train_step_model(path, batch_arrays(api, X, y, w, penalized), EPOCHS)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize(
    "settings",
    [{"fast_gradients": False}, {"weights_to_train": ["3.weight", "3.bias"]}],
    ids=["no_fast_gradients", "frozen_weights"],
)
@pytest.mark.parametrize("api", APIS)
def test_rewrites_and_frozen_weights(api, settings, tmp_path):
    """The training graph without the speed rewrites; weights left out of training are
    constants of the step (and the statistics of a frozen layer still move)."""
    X, y, w = regression_data()
    opt = make(api, batch_norm_model(0.2), solver="momentum", **settings)
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    assert record.trained == opt.weights_to_train_
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, w, False), EPOCHS)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize("api", APIS)
def test_weights_in_another_order(api, tmp_path):
    """The state follows ``weights_to_train``'s order, and the penalty its weight."""
    X, y, w = regression_data()
    order = ["intercept1", "coefficient0", "coefficient1", "intercept0"]
    opt = make(api, mlp_onnx(3, hidden=(4,)), penalty=PENALTY, weights_to_train=order)
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    assert record.trained == record.state == order
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, w, False), EPOCHS)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize(
    "loss", ["squared_error", "absolute_error", "elastic", "log", "cross_entropy"]
)
@pytest.mark.parametrize("api", APIS)
def test_every_loss(api, loss, tmp_path):
    """The loss of either API: the forward/backward's log loss takes raw scores (its sigmoid
    inside), the whole-training one probabilities (the model's sigmoid)."""
    X, y, w = regression_data(n_outputs=3 if loss == "cross_entropy" else 1)
    model = mlp_onnx(3, hidden=(4,), n_outputs=y.shape[1])
    if loss == "log":
        y = (y > 0).astype(np.float32)
        if api == "whole":
            model = _with_output_sigmoid(model)
    if loss == "cross_entropy":
        y = np.eye(3, dtype=np.float32)[y.argmax(axis=1)]
    opt = make(api, model, loss, weighted=True, solver="momentum")
    path = str(tmp_path / "step.onnx")
    opt.export_training_step(path)
    opt.fit(X, y, sample_weight=w)
    losses, state = train_step_model(path, batch_arrays(api, X, y, w, True), EPOCHS)
    assert_same_training(losses, state, opt)


def _with_output_sigmoid(model):
    """``model`` with a sigmoid on its output: a probability, as the log loss of the
    whole-training API takes it."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    output = copy.graph.output[0]
    raw = output.name + "_raw"
    for node in copy.graph.node:
        node.output[:] = [raw if name == output.name else name for name in node.output]
    copy.graph.node.append(onnx.helper.make_node("Sigmoid", [raw], [output.name]))
    return copy


def batch_norm_model(momentum):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 4, bias=False),
        torch.nn.BatchNorm1d(4, momentum=momentum),
        torch.nn.ReLU(),
        torch.nn.Linear(4, 1),
    )
    return export_for_training(net, torch.zeros(4, 3))


@pytest.mark.parametrize("momentum", [0.3, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("api", APIS)
def test_batch_norm_running_statistics(api, momentum, tmp_path):
    X, y, w = regression_data()
    opt = make(api, batch_norm_model(momentum), solver="nesterov")
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    counters = ["1.num_batches_tracked"] if momentum is None else []
    assert record.state[len(record.trained) :] == ["1.running_mean", "1.running_var", *counters] + [
        f"{name}.momentum_buffer" for name in record.trained
    ]
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, w, False), EPOCHS)
    assert_same_training(losses, state, opt)
    if momentum is None:
        assert int(state["1.num_batches_tracked"]) == EPOCHS * 3  # 40 rows, batches of 16


@pytest.mark.parametrize("api", APIS)
def test_convolutional_network(api, tmp_path):
    """Convolution, batch normalization, max pooling, their rewrites and gradients lowered."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(3),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(12, 1),
    )
    model = export_for_training(net, torch.zeros(4, 2, 4, 4))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((ROWS, 2, 4, 4)).astype(np.float32)
    y = rng.standard_normal((ROWS, 1)).astype(np.float32)
    opt = make(api, model, solver="momentum")
    path = str(tmp_path / "step.onnx")
    opt.export_training_step(path)
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, None, False), EPOCHS)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize("api", APIS)
def test_layer_norm_and_gelu(api, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.LayerNorm(8), torch.nn.GELU(), torch.nn.Linear(8, 1)
    )
    X, y, _ = regression_data()
    opt = make(api, export_for_training(net, torch.zeros(4, 3)), solver="adamw")
    path = str(tmp_path / "step.onnx")
    opt.export_training_step(path)
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, None, False), EPOCHS)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize("api", APIS)
def test_embedding_padding_row_stays_zero(api, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Embedding(10, 3, padding_idx=0), torch.nn.Flatten(), torch.nn.Linear(12, 1)
    )
    with torch.no_grad():
        net[0].weight[0] = 0
    model = export_for_training(net, torch.zeros(2, 4, dtype=torch.long))
    rng = np.random.default_rng(0)
    X = rng.integers(0, 10, (ROWS, 4)).astype(np.int64)
    y = rng.standard_normal((ROWS, 1)).astype(np.float32)
    opt = make(api, model, solver="adamw", weight_decay=0.1)
    path = str(tmp_path / "step.onnx")
    opt.export_training_step(path)
    opt.fit(X, y)
    losses, state = train_step_model(path, batch_arrays(api, X, y, None, False), EPOCHS)
    assert_same_training(losses, state, opt, atol=1e-5)
    assert not state["0.weight"][0].any() and state["0.weight"][1:].all()


@pytest.mark.parametrize(
    "api, solver, pickled",
    [
        ("whole", "momentum", False),
        ("whole", "adamw", False),
        ("whole", "adamw", True),
        ("forward_backward", "adamw", True),
        ("forward_backward", "sgd", False),
    ],
)
def test_fitted_export_continues_as_warm_start(api, solver, pickled, tmp_path):
    """A fitted optimizer's step continues from its weights, buffers (onnxruntime's AdamW
    moments too), running statistics and step count; an unpickled one's as well."""
    X, y, w = regression_data()
    opt = make(api, batch_norm_model(None), solver=solver, warm_start=True)
    opt.fit(X, y)
    if pickled:
        opt = pickle.loads(pickle.dumps(opt))
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    assert (record.parameters["epochs_done"], record.parameters["steps_done"]) == (2, 6)
    opt.fit(X, y)  # two more epochs
    losses, state = train_step_model(
        path, batch_arrays(api, X, y, w, False), EPOCHS, skip_epochs=EPOCHS
    )
    np.testing.assert_allclose(losses, opt.train_losses_[EPOCHS:], rtol=2e-5)
    for name, value in fitted_state(opt).items():
        np.testing.assert_allclose(state[name], value, rtol=2e-5, atol=2e-6, err_msg=name)


def test_changed_parameters_are_refused(tmp_path):
    X, y, _ = regression_data()
    opt = make("forward_backward", mlp_onnx(3, hidden=(4,)), max_iter=1).fit(X, y)
    opt.set_params(solver="momentum")
    with pytest.raises(ValueError, match="changed since this optimizer was fitted.*update rule"):
        opt.export_training_step(str(tmp_path / "step.onnx"))


@pytest.mark.training_package
@pytest.mark.parametrize(
    "api, activation, operator",
    [("whole", "relu", "Scale"), ("forward_backward", "logistic", "SigmoidGrad")],
)
def test_an_operator_without_lowering_is_named(api, activation, operator, tmp_path, monkeypatch):
    """The whole-training loss's mean has a ``Scale`` in its gradient; the forward/backward step
    has its own loss gradient, and a sigmoid's gradient is a ``SigmoidGrad``."""
    monkeypatch.delitem(LOWERINGS, ("com.microsoft", operator))
    path = tmp_path / "step.onnx"
    opt = make(api, mlp_onnx(3, hidden=(4,), activation=activation))
    with pytest.raises(UnsupportedOperatorError, match=f"com.microsoft:{operator} ") as error:
        opt.export_training_step(str(path))
    assert error.value.op_type == operator and "Grad" in error.value.layer
    assert not os.listdir(tmp_path)  # nothing written, no temporary file left


@pytest.mark.parametrize("api", APIS)
def test_written_model_is_standard_onnx(api, tmp_path):
    X, y, _ = regression_data()
    opt = make(api, batch_norm_model(0.1), solver="adamw", max_iter=1).fit(X, y)
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert model.ir_version <= 10
    assert {o.domain for o in model.opset_import} <= {"", "ai.onnx"}
    assert {n.domain for n in model.graph.node} <= {"", "ai.onnx"}
    assert [o.version for o in model.opset_import] == [
        v.version for v in opt.model_onnx.opset_import if v.domain in ("", "ai.onnx")
    ]
    assert read_record(model) == record
    # the runner's defaults: the optimizer's parameters, and where its training stands
    params = opt.get_params()
    names = ["batch_size", "max_iter", "random_state", "solver", "learning_rate", "eps"]
    names += ["learning_rate_schedule", "power_t", "alpha", "weight_decay"]
    assert {k: record.parameters[k] for k in names} == {k: params[k] for k in names}
    assert record.parameters["betas"] == list(opt.betas)
    assert (record.parameters["epochs_done"], record.parameters["steps_done"]) == (1, 3)
    assert [i.name for i in model.graph.input] == [*record.batch_inputs, "step", *record.state]
    assert [o.name for o in model.graph.output] == ["loss"] + [f"{s}.next" for s in record.state]
    defaults = initial_state(model)
    for name, value in fitted_state(opt).items():
        np.testing.assert_array_equal(defaults[name], value)
    # the inference model with the state's values predicts as the optimizer does
    predictor = inference_model(record, defaults)
    assert not {i.name for i in onnx.load_from_string(record.inference).graph.initializer} & set(
        record.state
    )
    session = onnxruntime.InferenceSession(predictor.SerializeToString())
    (prediction,) = session.run([record.prediction_output], {session.get_inputs()[0].name: X})
    np.testing.assert_allclose(prediction, opt.predict(X).reshape(prediction.shape), rtol=1e-6)


def test_a_loss_of_another_name(tmp_path):
    """The step's loss output is ``loss`` whatever the loss model calls it."""
    X, y, _ = regression_data()
    onx_loss = add_loss_output(mlp_onnx(3, hidden=(4,)), loss_name="cost", label_name="target")
    opt = OrtGradientOptimizer(onx_loss, max_iter=1, batch_size=BATCH, random_state=0)
    path = str(tmp_path / "step.onnx")
    record = opt.export_training_step(path)
    assert record.batch_inputs == ["X", "target"]
    opt.fit(X, y)
    losses, state = train_step_model(path, [X, y], 1)
    assert_same_training(losses, state, opt)


@pytest.mark.parametrize("api", APIS)
def test_the_step_file_is_written_whole_with_the_mode_of_a_new_file(api, tmp_path, monkeypatch):
    """export_training_step writes through helpers.portable.atomic_files: synced, the umask's
    mode (not a temporary file's 0o600), and a failure while writing leaves the previous step."""
    from helpers.portable import atomic_files

    path = tmp_path / "step.onnx"
    opt = make(api, mlp_onnx(3, hidden=(4,)))
    synced, fsync = [], os.fsync
    monkeypatch.setattr(atomic_files.os, "fsync", lambda fd: synced.append(fd) or fsync(fd))
    previous = os.umask(0o022)
    try:
        opt.export_training_step(str(path))
    finally:
        os.umask(previous)
    assert len(synced) == 1 and path.stat().st_mode & 0o777 == 0o644
    written = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        make(api, mlp_onnx(3, hidden=(5,))).export_training_step(str(path))
    assert path.read_bytes() == written and os.listdir(tmp_path) == ["step.onnx"]
