"""More faults a user runs into: outputs that overflow, a full disk, temporary folders left by pools."""
import numpy as np
import pytest

from helpers import (
    OrtGradientForwardBackwardOptimizer, OrtGradientOptimizer, TrainingDivergedError, add_loss_output,
    get_train_initializer,
)
from helpers.teaching.model_factories import mlp_onnx

APIS = ["whole", "forward_backward"]
X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
Y = np.tanh(X[:, :2].sum(axis=1)).astype(np.float32)


def _optimizer(api, **params):
    settings = dict(max_iter=1, batch_size=40, learning_rate=0.05, solver="sgd", random_state=0, validation_every=0)
    settings.update(params)
    model = mlp_onnx(4, hidden=(5,))
    if api == "whole":
        return OrtGradientOptimizer(add_loss_output(model), **settings)
    return OrtGradientForwardBackwardOptimizer(model, learning_rate_schedule="constant", **settings)


@pytest.mark.parametrize("api", APIS)
def test_a_last_update_whose_outputs_overflow_is_a_divergence(api):
    """One step on features of 1e9: a finite loss, finite weights (about 1e17), yet infinite predictions."""
    huge = X * 1e9
    with pytest.raises(TrainingDivergedError, match="non-finite outputs on rows 0:40"):
        _optimizer(api, on_divergence="raise").fit(huge, Y)
    opt = _optimizer(api, on_divergence="stop")
    initial = get_train_initializer(opt.model_onnx)
    with pytest.warns(RuntimeWarning, match="weights are those of the start of the epoch"):
        opt.fit(huge, Y)
    assert opt.t_ == 0 and opt.n_iter_ == 0 and opt.train_losses_ == []
    for name, value in opt.get_state().items():
        np.testing.assert_array_equal(value, initial[name])
    assert np.isfinite(opt.predict(huge)).all()


@pytest.mark.parametrize("api", APIS)
def test_a_fit_that_ends_well_is_left_alone(api):
    """The check of the last batch changes nothing in a fit that does not diverge."""
    opt = _optimizer(api, max_iter=3, batch_size=8).fit(X, Y)
    assert opt.n_iter_ == 3 and len(opt.train_losses_) == 3
    np.testing.assert_allclose(-opt.score(X, Y), np.mean((opt.predict(X) - Y) ** 2), rtol=1e-5)
