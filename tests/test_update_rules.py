"""Update rules: torch's optimizers step by step, in both APIs.

Each rule runs on the same weights and gradients as its torch optimizer;
the learning rate changes between steps (invscaling), which is where
torch's momentum buffer and scikit-learn's velocity part ways.
"""

import numpy as np
import pytest
import torch
from conftest import make_optimizer
from onnxruntime import OrtValue

from helpers.core.updates.learning_rates import LearningRateSchedule
from helpers.core.updates.update_rules import UPDATE_RULES, make_update_rule
from helpers.core.updates.weight_updater import WeightUpdater, build_update_graph
from helpers.teaching.model_factories import mlp_onnx

SHAPES = [(3, 2), (1, 2), (2,)]
HYPER = {"momentum": 0.8, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.05}


def torch_optimizer(solver, params, lr):
    if solver == "adamw":
        return torch.optim.AdamW(
            params,
            lr=lr,
            betas=HYPER["betas"],
            eps=HYPER["eps"],
            weight_decay=HYPER["weight_decay"],
        )
    momentum = HYPER["momentum"] if solver != "sgd" else 0.0
    return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=solver == "nesterov")


def rule(solver):
    return make_update_rule(solver, **HYPER)


@pytest.mark.parametrize("solver", list(UPDATE_RULES))
def test_updater_matches_torch_step_by_step(solver):
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    params = [torch.tensor(w, requires_grad=True) for w in start]
    reference = torch_optimizer(solver, params, lr=1.0)
    weights = [OrtValue.ortvalue_from_numpy(w.copy()) for w in start]
    buffers = [w.data_ptr() for w in weights]
    updater = WeightUpdater(rule(solver), SHAPES)
    schedule = LearningRateSchedule(0.1, learning_rate="invscaling", power_t=0.5)
    for t in range(1, 6):
        grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        lr = schedule.value(t)
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        for group in reference.param_groups:
            group["lr"] = lr
        reference.step()
        updater.update(weights, [OrtValue.ortvalue_from_numpy(g) for g in grads], lr, t)
        for got, expected in zip(weights, params):
            np.testing.assert_allclose(
                got.numpy(), expected.detach().numpy(), rtol=2e-6, atol=1e-7, err_msg=f"step {t}"
            )
    assert [w.data_ptr() for w in weights] == buffers  # updated in place
    names = rule(solver).state_names
    expected_state = [reference.state[p][name].numpy() for p in params for name in names]
    assert len(updater.get_state()) == len(expected_state)
    for got, expected in zip(updater.get_state(), expected_state):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)


def test_momentum_is_not_scikit_learns_velocity_when_the_rate_changes():
    """torch scales the whole buffer by the current rate; scikit-learn's velocity keeps the old
    rates."""
    weight = OrtValue.ortvalue_from_numpy(np.zeros(1, dtype=np.float32))
    grad = OrtValue.ortvalue_from_numpy(np.ones(1, dtype=np.float32))
    updater = WeightUpdater(make_update_rule("momentum", momentum=0.5), [(1,)])
    updater.update([weight], [grad], 1.0, 1)
    updater.update([weight], [grad], 0.1, 2)
    # torch: b = 1, w = -1; b = 1.5, w = -1 - 0.15. scikit-learn: v = -1, w = -1; v = -0.6, w = -1.6
    np.testing.assert_allclose(weight.numpy(), [-1.15], rtol=1e-6)


def test_state_round_trip_and_errors():
    updater = WeightUpdater(rule("adamw"), SHAPES)
    values = [np.full(s, float(i), dtype=np.float32) for s in SHAPES for i in (1, 2)]
    updater.set_state(values)
    for got, expected in zip(updater.get_state(), values):
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="keeps 6 buffers"):
        updater.set_state(values[:1])
    assert WeightUpdater("sgd", SHAPES).get_state() == []
    with pytest.raises(ValueError, match="Unknown solver 'adam'"):
        make_update_rule("adam")
    with pytest.raises(ValueError, match=r"momentum must be in \(0, 1\)"):
        make_update_rule("nesterov", momentum=1.0)


def test_graph_inputs():
    graph = build_update_graph(rule("momentum"), 2).graph
    assert [i.name for i in graph.input] == [
        "lr",
        "mu",
        "W0",
        "G0",
        "momentum_buffer0",
        "W1",
        "G1",
        "momentum_buffer1",
    ]
    assert [o.name for o in graph.output] == [
        "W0_new",
        "momentum_buffer0_new",
        "W1_new",
        "momentum_buffer1_new",
    ]


def test_new_weight_buffers_are_bound_again():
    grad = OrtValue.ortvalue_from_numpy(np.ones(2, dtype=np.float32))
    updater = WeightUpdater("sgd", [(2,)])
    first = OrtValue.ortvalue_from_numpy(np.zeros(2, dtype=np.float32))
    second = OrtValue.ortvalue_from_numpy(np.full(2, 5.0, dtype=np.float32))
    updater.update([first], [grad], 1.0, 1)
    updater.update([second], [grad], 1.0, 2)
    np.testing.assert_allclose(first.numpy(), [-1.0, -1.0])
    np.testing.assert_allclose(second.numpy(), [4.0, 4.0])


def _torch_mlp(onx):
    weights = {
        i.name: torch.tensor(
            np.frombuffer(i.raw_data, dtype=np.float32).reshape(i.dims).copy(), requires_grad=True
        )
        for i in onx.graph.initializer
    }

    def forward(X):
        hidden = torch.tanh(X @ weights["coefficient0"] + weights["intercept0"])
        return hidden @ weights["coefficient1"] + weights["intercept1"]

    return weights, forward


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
@pytest.mark.parametrize("solver", list(UPDATE_RULES))
def test_optimizers_match_torch_step_by_step(api, solver):
    """Full-batch steps with an invscaling rate: the weights follow torch's after each step."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((32, 3)).astype(np.float32)
    y = (X @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    onx = mlp_onnx(3, hidden=(5,), activation="tanh", random_state=2)
    params = dict(
        batch_size=len(X),
        learning_rate=0.05,
        learning_rate_schedule="invscaling",
        power_t=0.5,
        solver=solver,
        max_iter=1,
        warm_start=True,
        validation_every=0,
        random_state=0,
        **HYPER,
    )
    opt = make_optimizer(api, onx, **params)
    weights, forward = _torch_mlp(onx)
    names = list(weights)
    reference = torch_optimizer(solver, [weights[n] for n in names], lr=0.05)
    schedule = LearningRateSchedule(0.05, learning_rate="invscaling", power_t=0.5)
    for t in range(1, 5):
        opt.fit(X, y)
        for group in reference.param_groups:
            group["lr"] = schedule.value(t)
        reference.zero_grad()
        torch.mean((forward(torch.tensor(X)) - torch.tensor(y)) ** 2).backward()
        reference.step()
        state = opt.get_state()
        for name in names:
            np.testing.assert_allclose(
                state[name],
                weights[name].detach().numpy(),
                rtol=1e-4,
                atol=1e-6,
                err_msg=f"{name} after step {t}",
            )
