"""Epoch losses: read from the device in groups, they are the per-step losses, in order."""

import numpy as np
import pytest
from conftest import APIS, make_optimizer

from helpers import get_train_initializer


def _replay(X, y, coef, intercept, lr, batch_size, seed, epochs):
    """Minibatch SGD on the squared error in float64; the mean loss of each epoch."""
    X, y = X.astype(np.float64), y.astype(np.float64)
    rng = np.random.RandomState(seed)
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(y))
        total = 0.0
        for start in range(0, len(y), batch_size):
            rows = order[start : start + batch_size]
            residual = X[rows] @ coef + intercept - y[rows]
            total += (residual**2).mean() * len(rows)
            coef = coef - lr * 2 * X[rows].T @ residual / len(rows)
            intercept = intercept - lr * 2 * residual.mean()
        losses.append(total / len(y))
    return losses


@pytest.mark.parametrize("api", APIS)
def test_epoch_losses_are_the_means_of_the_step_losses(linear_onnx, linear_data, api):
    """300 rows, batches of 7: 43 steps an epoch, 215 over 5 epochs (the losses are read every
    64)."""
    X, y = linear_data
    init = get_train_initializer(linear_onnx)
    expected = _replay(
        X, y, init["coef"].ravel().astype(np.float64), float(init["intercept"][0]), 0.01, 7, 3, 5
    )
    opt = make_optimizer(api, linear_onnx, learning_rate=0.01)
    opt.set_params(max_iter=5, batch_size=7, random_state=3, validation_every=0).fit(X, y)
    np.testing.assert_allclose(opt.train_losses_, expected, rtol=1e-4)
    assert opt.t_ == 5 * 43
