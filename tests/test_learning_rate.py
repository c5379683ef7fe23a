"""Learning rates: scikit-learn's schedules and update rules, checked in numpy."""
import numpy as np
import pytest
from onnxruntime import OrtValue

from helpers import LearningRateSGD, LearningRateSGDNesterov
from helpers.devices import Device
from helpers.learning_rate import make_learning_rate


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
def test_update_matches_numpy(rate, momentum, nesterov):
    rng = np.random.default_rng(0)
    shapes = [(3, 2), (2,)]
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    weights = [OrtValue.ortvalue_from_numpy(w.copy()) for w in start]
    rate.init_learning_rate(Device("cpu"), weights)
    ref = [w.astype(np.float64) for w in start]
    vel = [np.zeros_like(w) for w in ref]
    for t, g in enumerate(grads, start=1):
        rate.update_weights(weights, [OrtValue.ortvalue_from_numpy(x) for x in g], t)
        for k in range(2):
            vel[k] = momentum * vel[k] - 0.1 * g[k]
            ref[k] = ref[k] + (momentum * vel[k] - 0.1 * g[k] if nesterov else vel[k])
    for got, expected in zip(weights, ref):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)


def test_aliases_and_errors():
    assert isinstance(make_learning_rate("SGD"), LearningRateSGD)
    assert isinstance(make_learning_rate("Nesterov"), LearningRateSGDNesterov)
    with pytest.raises(ValueError, match="Unknown learning_rate 'adam'"):
        make_learning_rate("adam")
    with pytest.raises(ValueError, match="needs alpha > 0"):
        LearningRateSGD(alpha=0, learning_rate="optimal")
    with pytest.raises(ValueError, match=r"momentum must be in \(0, 1\)"):
        LearningRateSGDNesterov(momentum=1.0)
    with pytest.raises(RuntimeError, match="init_learning_rate"):
        LearningRateSGD().update_weights([], [], 1)
