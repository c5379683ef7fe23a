import numpy as np
import pytest
from onnxruntime import OrtValue

from helpers.sgd_update import SGDUpdate, build_sgd_update_graph

SHAPES = [(3, 2), (1, 2), (2,)]


def _reference(weights, grads, lr, momentum, nesterov, steps):
    """scikit-learn's SGDOptimizer (multilayer perceptron) in numpy."""
    weights = [w.astype(np.float64) for w in weights]
    velocities = [np.zeros_like(w) for w in weights]
    for _ in range(steps):
        for k, g in enumerate(grads):
            velocities[k] = momentum * velocities[k] - lr * g
            if nesterov:
                weights[k] = weights[k] + momentum * velocities[k] - lr * g
            else:
                weights[k] = weights[k] + velocities[k]
    return weights, velocities


@pytest.mark.parametrize("momentum, nesterov", [(0.0, False), (0.9, False), (0.5, True)])
def test_steps_match_scikit_learn_rules(momentum, nesterov):
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    updater = SGDUpdate(SHAPES, momentum, nesterov)
    current = [OrtValue.ortvalue_from_numpy(w.copy()) for w in weights]
    grad_values = [OrtValue.ortvalue_from_numpy(g) for g in grads]
    buffers = [v.data_ptr() for v in current]
    for _ in range(3):
        updater.update(current, grad_values, 0.1)
    # in place: the weights keep their buffers
    assert [v.data_ptr() for v in current] == buffers
    expected, velocities = _reference(weights, grads, 0.1, momentum, nesterov, 3)
    for value, ref in zip(current, expected):
        np.testing.assert_allclose(value.numpy(), ref, rtol=1e-5)
    if momentum:
        for got, ref in zip(updater.get_velocities(), velocities):
            np.testing.assert_allclose(got, ref, rtol=1e-5)
    else:
        assert updater.get_velocities() == []


def test_set_velocities_round_trip():
    updater = SGDUpdate(SHAPES, 0.9)
    values = [np.full(s, 2.0, dtype=np.float32) for s in SHAPES]
    updater.set_velocities(values)
    for got, ref in zip(updater.get_velocities(), values):
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(ValueError, match="Expected 3 velocities"):
        updater.set_velocities(values[:1])


def test_graph_inputs():
    model = build_sgd_update_graph(2, momentum=True, nesterov=True)
    names = [i.name for i in model.graph.input]
    assert names == ["lr", "momentum", "W0", "G0", "V0", "W1", "G1", "V1"]
    with pytest.raises(ValueError, match="needs momentum"):
        build_sgd_update_graph(1, momentum=False, nesterov=True)


def test_learning_rate_change_is_applied():
    weight = OrtValue.ortvalue_from_numpy(np.zeros(2, dtype=np.float32))
    grad = OrtValue.ortvalue_from_numpy(np.ones(2, dtype=np.float32))
    updater = SGDUpdate([(2,)])
    updater.update([weight], [grad], 0.1)
    updater.update([weight], [grad], 0.5)
    np.testing.assert_allclose(weight.numpy(), [-0.6, -0.6], rtol=1e-6)


def test_new_weight_buffers_are_bound_again():
    grad = OrtValue.ortvalue_from_numpy(np.ones(2, dtype=np.float32))
    updater = SGDUpdate([(2,)])
    first = OrtValue.ortvalue_from_numpy(np.zeros(2, dtype=np.float32))
    second = OrtValue.ortvalue_from_numpy(np.full(2, 5.0, dtype=np.float32))
    updater.update([first], [grad], 1.0)
    updater.update([second], [grad], 1.0)
    np.testing.assert_array_equal(first.numpy(), [-1.0, -1.0])
    np.testing.assert_array_equal(second.numpy(), [4.0, 4.0])
