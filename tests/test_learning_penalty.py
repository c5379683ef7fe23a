import numpy as np
import pytest
from onnxruntime import OrtValue

from helpers import ElasticLearningPenalty, NoLearningPenalty
from helpers.core.machine.devices import Device
from helpers.core.updates.penalties import make_learning_penalty

CPU = Device("cpu")


def _values(seed=0):
    rng = np.random.default_rng(seed)
    # weights away from 0: |W| has a kink there
    w = [rng.uniform(0.1, 1, s) * rng.choice([-1, 1], s) for s in [(3, 2), (2,)]]
    return [x.astype(np.float32) for x in w], [
        rng.standard_normal(x.shape).astype(np.float32) for x in w
    ]


def _ort(values):
    return [OrtValue.ortvalue_from_numpy(v) for v in values]


def test_value_and_gradient():
    weights, grads = _values()
    penalty = ElasticLearningPenalty(l1=0.3, l2=0.2)
    expected = sum(0.3 * np.abs(w).sum() + 0.2 * (w.astype(np.float64) ** 2).sum() for w in weights)
    assert penalty.penalty_loss(CPU, _ort(weights), ["a", "b"]) == pytest.approx(expected, rel=1e-5)
    new, value = penalty.update_gradients(CPU, _ort(weights), _ort(grads), ["a", "b"])
    assert float(value.numpy()) == pytest.approx(expected, rel=1e-5)
    for got, w, g in zip(new, weights, grads):
        np.testing.assert_allclose(got.numpy(), g + 0.3 * np.sign(w) + 0.4 * w, rtol=1e-5)


def test_gradient_matches_finite_differences():
    weights, grads = _values(1)
    penalty = ElasticLearningPenalty(l1=0.3, l2=0.2)
    zeros = [np.zeros_like(g) for g in grads]
    analytic, _ = penalty.update_gradients(CPU, _ort(weights), _ort(zeros), ["a", "b"])
    eps = 1e-3
    for k, w in enumerate(weights):
        numeric = np.zeros(w.shape)
        for idx in np.ndindex(w.shape):
            vals = []
            for sign in (1, -1):
                shifted = [x.copy() for x in weights]
                shifted[k][idx] += sign * eps
                vals.append(penalty.penalty_loss(CPU, _ort(shifted), ["a", "b"]))
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(analytic[k].numpy(), numeric, rtol=1e-2, atol=1e-3)


def test_only_named_weights_are_penalized():
    weights, grads = _values()
    penalty = ElasticLearningPenalty(l1=0.0, l2=1.0, weights=["b"])
    new, value = penalty.update_gradients(CPU, _ort(weights), _ort(grads), ["a", "b"])
    np.testing.assert_array_equal(new[0].numpy(), grads[0])
    np.testing.assert_allclose(new[1].numpy(), grads[1] + 2 * weights[1], rtol=1e-6)
    assert float(value.numpy()) == pytest.approx(
        (weights[1].astype(np.float64) ** 2).sum(), rel=1e-5
    )
    with pytest.raises(ValueError, match="which is not a float initializer"):
        ElasticLearningPenalty(weights=["c"]).penalty_loss(CPU, _ort(weights), ["a", "b"])


def test_no_penalty_and_aliases():
    weights, grads = _values()
    g = _ort(grads)
    assert NoLearningPenalty().update_gradients(CPU, _ort(weights), g, ["a", "b"]) == (g, 0.0)
    assert isinstance(make_learning_penalty(None), NoLearningPenalty)
    assert isinstance(make_learning_penalty("elastic"), ElasticLearningPenalty)
    with pytest.raises(ValueError, match="Unknown penalty"):
        make_learning_penalty("l3")
    with pytest.raises(ValueError, match=">= 0"):
        ElasticLearningPenalty(l1=-1)
