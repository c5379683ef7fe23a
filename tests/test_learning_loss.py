"""Losses of the forward/backward API: values against numpy, gradients against
finite differences (the seeds' L1 gradient had the wrong sign)."""

import numpy as np
import pytest

from helpers import (
    AbsoluteLearningLoss,
    ElasticLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from helpers.core.machine.devices import Device
from helpers.forward_backward.losses import make_learning_loss

CPU = Device("cpu")


def _data(shape=(8, 2), seed=0):
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(shape).astype(np.float32)
    # predictions at least 0.05 away from the labels: no kink of |d| within eps
    d = rng.uniform(0.05, 1.0, shape) * rng.choice([-1, 1], shape)
    return y, (y + d).astype(np.float32), rng.uniform(0.5, 2.0, shape[0]).astype(np.float32)


def _sigmoid(s):
    return 1 / (1 + np.exp(-s))


def _softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


#: The loss of a sample is the mean over its outputs, as torch's MSELoss and L1Loss reduce.
REGRESSION = [
    (SquareLearningLoss(), lambda y, p: ((p - y) ** 2).mean(axis=1)),
    (AbsoluteLearningLoss(), lambda y, p: np.abs(p - y).mean(axis=1)),
    (
        ElasticLearningLoss(0.2, 0.8),
        lambda y, p: (0.2 * np.abs(p - y) + 0.8 * (p - y) ** 2).mean(axis=1),
    ),
]


@pytest.mark.parametrize("loss, numpy_loss", REGRESSION, ids=lambda x: repr(x)[:20])
def test_regression_loss_values(loss, numpy_loss):
    y, p, w = _data()
    per_sample = numpy_loss(y.astype(np.float64), p.astype(np.float64))
    value, _ = loss.loss_gradient(CPU, y, p)
    np.testing.assert_allclose(value.numpy(), per_sample.mean(), rtol=1e-5)
    value, _ = loss.loss_gradient(CPU, y, p, w)
    np.testing.assert_allclose(value.numpy(), (w * per_sample).mean(), rtol=1e-5)
    np.testing.assert_allclose(loss.loss_scores(CPU, y, p, w).numpy(), w * per_sample, rtol=1e-5)


def _finite_differences(loss, y, p, w, eps=1e-3):
    grad = np.zeros(p.shape)
    for idx in np.ndindex(p.shape):
        values = []
        for sign in (1, -1):
            q = p.astype(np.float64).copy()
            q[idx] += sign * eps
            values.append(float(loss.loss_gradient(CPU, y, q.astype(np.float32), w)[0].numpy()))
        grad[idx] = (values[0] - values[1]) / (2 * eps)
    return grad


ALL = [loss for loss, _ in REGRESSION] + [NegLogLearningLoss()]


@pytest.mark.parametrize("loss", ALL, ids=repr)
@pytest.mark.parametrize("shape", [(8,), (8, 1), (6, 3)])
def test_gradient_matches_finite_differences(loss, shape):
    y, p, w = _data(shape)
    if isinstance(loss, NegLogLearningLoss):
        y = (y > 0).astype(np.float32)
    _, grad = loss.loss_gradient(CPU, y, p, w)
    assert grad.shape() == list(shape)
    np.testing.assert_allclose(
        grad.numpy(), _finite_differences(loss, y, p, w), rtol=1e-2, atol=2e-4
    )


def test_absolute_gradient_sign():
    """d|p - y|/dp is +1 when the prediction is above the label."""
    y = np.zeros((2, 1), dtype=np.float32)
    p = np.array([[1.0], [-1.0]], dtype=np.float32)
    _, grad = AbsoluteLearningLoss().loss_gradient(CPU, y, p)
    np.testing.assert_allclose(grad.numpy(), [[0.5], [-0.5]])


def test_neglog_sigmoid_values():
    rng = np.random.default_rng(2)
    s = rng.standard_normal((10, 1)).astype(np.float32)
    y = (rng.uniform(size=(10, 1)) > 0.5).astype(np.float32)
    value, grad = NegLogLearningLoss().loss_gradient(CPU, y, s)
    p = _sigmoid(s.astype(np.float64))
    np.testing.assert_allclose(
        value.numpy(), -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(), rtol=1e-5
    )
    np.testing.assert_allclose(grad.numpy(), (p - y) / 10, rtol=1e-5, atol=1e-7)


def test_neglog_softmax_values_and_gradient():
    rng = np.random.default_rng(3)
    s = rng.standard_normal((7, 4)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 7)]
    w = rng.uniform(0.5, 2.0, 7).astype(np.float32)
    loss = NegLogLearningLoss(probability_function="softmax")
    value, grad = loss.loss_gradient(CPU, y, s, w)
    p = _softmax(s.astype(np.float64))
    np.testing.assert_allclose(value.numpy(), (w * -(y * np.log(p)).sum(axis=1)).mean(), rtol=1e-5)
    np.testing.assert_allclose(grad.numpy(), w[:, None] * (p - y) / 7, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(
        grad.numpy(), _finite_differences(loss, y, s, w), rtol=1e-2, atol=2e-4
    )


def test_aliases_and_errors():
    assert isinstance(make_learning_loss("square_error"), SquareLearningLoss)
    assert isinstance(make_learning_loss("SquareLearningLoss"), SquareLearningLoss)
    assert make_learning_loss("elastic", l1_weight=0.1, l2_weight=0.9).get_params() == {
        "l1_weight": 0.1,
        "l2_weight": 0.9,
    }
    loss = AbsoluteLearningLoss()
    assert make_learning_loss(loss) is loss
    with pytest.raises(ValueError, match="Unknown learning_loss 'hinge'"):
        make_learning_loss("hinge")
    with pytest.raises(ValueError, match="must be 'sigmoid' or 'softmax'"):
        NegLogLearningLoss(probability_function="tanh")
    with pytest.raises(ValueError, match="not both 0"):
        ElasticLearningLoss(0, 0)


def test_softmax_cross_entropy_value_equals_torch_for_confident_scores():
    """The value is not clipped: a confidently wrong score costs what torch says (it was capped at
    -log(1e-5))."""
    import torch

    from helpers import CrossEntropyLearningLoss, NegLogLearningLoss
    from helpers.core.machine.devices import Device

    rng = np.random.default_rng(0)
    scores = (rng.standard_normal((16, 5)) * 30).astype(np.float32)
    labels = rng.integers(0, 5, 16)
    one_hot = np.eye(5, dtype=np.float32)[labels]
    expected = torch.nn.functional.cross_entropy(
        torch.from_numpy(scores), torch.from_numpy(labels)
    ).item()
    assert expected > 11.6  # above the old cap, -log(1e-5)
    for loss in (CrossEntropyLearningLoss(), NegLogLearningLoss(probability_function="softmax")):
        value, gradient = loss.loss_gradient(Device("cpu"), one_hot, scores)
        assert float(value.numpy()) == pytest.approx(expected, rel=1e-5)
        softmax = torch.softmax(torch.from_numpy(scores), dim=1).numpy()
        np.testing.assert_allclose(gradient.numpy(), (softmax - one_hot) / 16, atol=1e-6)


@pytest.mark.parametrize("probability_function", ["sigmoid", "softmax"])
def test_neglog_gradient_stays_p_minus_y_where_the_probability_underflows(probability_function):
    # Scores so wrong that float32 rounds the probability of the true class to 0: the
    # gradient through p would be NaN (-1/p times p) or 0 (p clipped), the one on the
    # scores is still p - y, pushing at full strength.
    if probability_function == "sigmoid":
        s = np.array([[4.0], [-12.0], [-110.0]], dtype=np.float32)
        y = np.ones_like(s)
        p = _sigmoid(s.astype(np.float64))
    else:
        s = np.array([[110.0, 0.0, -5.0], [0.0, 1.0, 2.0]], dtype=np.float32)
        y = np.array([[0, 0, 1], [0, 1, 0]], dtype=np.float32)
        p = _softmax(s.astype(np.float64))
    assert (p * y).sum(axis=1).min() < 1e-45  # underflows in float32
    loss = NegLogLearningLoss(eps=1e-5, probability_function=probability_function)
    value, grad = loss.loss_gradient(CPU, y, s)
    assert np.isfinite(value.numpy()).all()
    np.testing.assert_allclose(grad.numpy() * len(s), p - y, atol=1e-6)
