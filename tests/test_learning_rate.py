"""Learning rates: scikit-learn's schedules, the seeds' objects, and the one place both optimizers
resolve them."""

import numpy as np
import pytest
from conftest import APIS, make_optimizer
from onnxruntime import OrtValue

from helpers import LearningRateSGD, LearningRateSGDNesterov
from helpers.core.machine.devices import Device
from helpers.core.updates.learning_rates import LearningRateSchedule, resolve_learning_rate
from helpers.core.updates.update_rules import AdamWRule, MomentumRule, NesterovRule, SGDRule


def test_schedules():
    assert LearningRateSGD(eta0=0.1, learning_rate="constant").value(50) == 0.1
    assert LearningRateSGD(eta0=0.1, power_t=0.5).value(4) == pytest.approx(0.05)
    alpha = 0.01
    optimal = LearningRateSGD(alpha=alpha, learning_rate="optimal")
    typw = np.sqrt(1.0 / np.sqrt(alpha))  # scikit-learn's initial rate for the squared loss
    assert optimal.value(1) == pytest.approx(typw)
    assert optimal.value(11) == pytest.approx(1 / (alpha * (1 / (alpha * typw) + 10)))


@pytest.mark.parametrize(
    "rate, momentum, nesterov",
    [
        (LearningRateSGD(eta0=0.1, learning_rate="constant"), 0.0, False),
        (LearningRateSGDNesterov(eta0=0.1, momentum=0.8), 0.8, True),
        (LearningRateSGDNesterov(eta0=0.1, momentum=0.8, nesterov=False), 0.8, False),
    ],
    ids=["sgd", "nesterov", "momentum"],
)
def test_hand_written_loop_matches_numpy(rate, momentum, nesterov):
    """init_learning_rate/update_weights, torch's buffer in numpy (constant rate)."""
    rng = np.random.default_rng(0)
    shapes = [(3, 2), (2,)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    weights = [OrtValue.ortvalue_from_numpy(w.copy()) for w in start]
    rate.init_learning_rate(Device("cpu"), weights)
    ref = [w.astype(np.float64) for w in start]
    buf = [np.zeros_like(w) for w in ref]
    for t, g in enumerate(grads, start=1):
        rate.update_weights(weights, [OrtValue.ortvalue_from_numpy(x) for x in g], t)
        for k in range(2):
            buf[k] = momentum * buf[k] + g[k]
            ref[k] = ref[k] - 0.1 * (g[k] + momentum * buf[k] if nesterov else buf[k])
    for got, expected in zip(weights, ref):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)


def test_resolve_float_and_objects():
    schedule, rule = resolve_learning_rate(
        0.1, "invscaling", power_t=0.5, solver="adamw", weight_decay=0.01
    )
    assert type(schedule) is LearningRateSchedule and schedule.value(4) == pytest.approx(0.05)
    assert isinstance(rule, AdamWRule) and rule.weight_decay == 0.01
    given = LearningRateSGDNesterov(eta0=0.2, momentum=0.5)
    schedule, rule = resolve_learning_rate(given)
    assert schedule == given and schedule is not given
    assert isinstance(rule, NesterovRule) and rule.momentum == 0.5
    assert isinstance(resolve_learning_rate("SGD")[1], SGDRule)
    assert isinstance(
        resolve_learning_rate(LearningRateSGDNesterov(nesterov=False))[1], MomentumRule
    )
    # the object's own rule, named again, is no contradiction
    assert isinstance(resolve_learning_rate(given, solver="nesterov")[1], NesterovRule)


def test_resolve_errors():
    with pytest.raises(ValueError, match="Unknown learning_rate 'adam'"):
        resolve_learning_rate("adam")
    with pytest.raises(ValueError, match="contradict"):
        resolve_learning_rate(LearningRateSGD(), solver="adamw")
    with pytest.raises(ValueError, match="contradict"):
        resolve_learning_rate(LearningRateSGD(), learning_rate_schedule="optimal")
    with pytest.raises(ValueError, match="power_t=0.5 contradict"):
        resolve_learning_rate("SGD", power_t=0.5)
    with pytest.raises(ValueError, match="momentum=0.5 contradict"):
        resolve_learning_rate(LearningRateSGDNesterov(momentum=0.8), momentum=0.5)
    assert (
        resolve_learning_rate(LearningRateSGDNesterov(momentum=0.8), momentum=0.8)[1].momentum
        == 0.8
    )
    with pytest.raises(TypeError, match="learning_rate must be a float"):
        resolve_learning_rate(True)
    with pytest.raises(ValueError, match="Unknown learning-rate schedule 'adaptive'"):
        resolve_learning_rate(0.1, "adaptive")
    with pytest.raises(ValueError, match="needs alpha > 0"):
        LearningRateSGD(alpha=0, learning_rate="optimal")
    with pytest.raises(ValueError, match=r"momentum must be in \(0, 1\)"):
        LearningRateSGDNesterov(momentum=1.0)
    with pytest.raises(RuntimeError, match="init_learning_rate"):
        LearningRateSGD().update_weights([], [], 1)


@pytest.mark.parametrize("api", APIS)
def test_both_optimizers_give_the_same_error(api, linear_onnx, linear_data):
    """One vocabulary: the same bad parameter fails the same way in both APIs."""
    X, y = linear_data
    with pytest.raises(ValueError, match="Unknown solver 'adam'"):
        make_optimizer(api, linear_onnx, solver="adam").fit(X, y)
    with pytest.raises(ValueError, match="contradict"):
        make_optimizer(api, linear_onnx, learning_rate=LearningRateSGD(), solver="momentum").fit(
            X, y
        )
    with pytest.raises(ValueError, match="on_divergence must be one of"):
        make_optimizer(api, linear_onnx, on_divergence="ignore").fit(X, y)
