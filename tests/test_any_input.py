"""Inputs of any rank and type, and the state batch normalization adds, in both optimizers."""

import copy
import pickle

import numpy as np
import pytest
import torch
from conftest import APIS, make_seeded_optimizer
from torch import nn

from helpers import export_for_training
from helpers.core.machine.devices import Device
from helpers.core.training.batches import Batches


def _optimizer(api, onx, classes=False, max_iter=2, batch_size=8, learning_rate=0.05, **params):
    loss = "cross_entropy" if classes else "squared_error"
    return make_seeded_optimizer(api, onx, max_iter, batch_size, learning_rate, loss, **params)


@pytest.fixture(scope="module")
def images():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 6 * 6, 1))
    X = np.random.default_rng(0).standard_normal((20, 1, 8, 8)).astype(np.float32)
    return export_for_training(module, torch.from_numpy(X[:2])), X, X[:, 0, 0, :1].copy()


@pytest.mark.parametrize("api", APIS)
def test_images_train_predict_and_name_their_shape(api, images):
    onx, X, y = images
    opt = _optimizer(api, onx).fit(X, y)
    assert opt.sample_shape_in_ == (1, 8, 8)
    assert not hasattr(opt, "n_features_in_")  # scikit-learn's convention is for rows of features
    assert opt.predict(X[:3]).shape == (3, 1)
    with pytest.raises(
        ValueError, match=r"samples of shape \(64,\).*x\[N, 1, 8, 8\].*X.reshape\(-1, 1, 8, 8\)"
    ):
        opt.predict(X.reshape(20, 64))
    with pytest.raises(ValueError, match=r"samples of shape \(1, 7, 7\)"):
        opt.fit(X[:, :, :7, :7], y)


@pytest.fixture(scope="module")
def tokens():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Embedding(10, 3), nn.Flatten(), nn.Linear(12, 4))
    ids = np.random.default_rng(0).integers(0, 10, (30, 4))
    return export_for_training(module, torch.from_numpy(ids[:2])), ids, ids[:, 0] % 4


@pytest.mark.parametrize("api", APIS)
def test_token_ids_train_and_are_checked_against_the_vocabulary(api, tokens):
    onx, ids, labels = tokens
    opt = _optimizer(api, onx, classes=True, max_iter=5).fit(ids, labels)
    assert opt.n_features_in_ == 4 and opt.sample_shape_in_ == (4,)
    assert opt.train_losses_[-1] < opt.train_losses_[0]
    assert opt.predict(ids[:2]).shape == (2, 4)
    with pytest.raises(
        ValueError,
        match=r"ids from 0 to 10, but .* indexes '0.weight', which has 10 rows: ids must be in "
        r"0..9",
    ):
        opt.predict(np.array([[0, 1, 2, 10]]))
    with pytest.raises(ValueError, match="not whole numbers"):
        opt.predict(ids[:2] + 0.5)


def test_batches_gather_integer_arrays_on_the_device_graph():
    ids = np.arange(12, dtype=np.int64).reshape(6, 2)
    values = np.arange(6, dtype=np.float32)
    batches = Batches([ids, values], Device("cpu"), on_device=True)
    first = next(batches.epoch(np.array([5, 4, 3, 2, 1, 0]), 2))
    assert first.arrays[0].data_type() == "tensor(int64)"
    np.testing.assert_array_equal(first.arrays[0].numpy(), [[10, 11], [8, 9]])
    np.testing.assert_array_equal(first.arrays[1].numpy(), [5.0, 4.0])


@pytest.fixture(scope="module")
def batch_norm():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 1))
    X = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    y = np.tanh(X[:, :2].sum(axis=1, keepdims=True)).astype(np.float32)
    return module, export_for_training(module, torch.from_numpy(X[:2])), X, y


@pytest.mark.parametrize("api", APIS)
def test_pickle_keeps_the_running_statistics_and_a_warm_refit_continues(api, batch_norm):
    _, onx, X, y = batch_norm
    straight = _optimizer(api, onx, max_iter=4).fit(X, y)
    half = _optimizer(api, onx, max_iter=2, warm_start=True).fit(X, y)
    restored = pickle.loads(pickle.dumps(half))
    np.testing.assert_array_equal(
        restored.get_running_statistics()["1.running_var"],
        half.get_running_statistics()["1.running_var"],
    )
    np.testing.assert_allclose(restored.predict(X), half.predict(X), rtol=1e-6)
    restored.fit(X, y)
    np.testing.assert_allclose(restored.train_losses_, straight.train_losses_, rtol=1e-5)
    for name, value in straight.get_running_statistics().items():
        np.testing.assert_allclose(restored.get_running_statistics()[name], value, rtol=1e-5)


def test_a_checkpoint_keeps_the_running_statistics(batch_norm, tmp_path):
    _, onx, X, y = batch_norm
    straight = _optimizer("whole", onx, max_iter=4).fit(X, y)
    path = str(tmp_path / "train.ckpt")
    _optimizer("whole", onx, max_iter=2, checkpoint_path=path).fit(X, y)
    resumed = _optimizer("whole", onx, max_iter=2, warm_start=True).load_checkpoint(path).fit(X, y)
    np.testing.assert_allclose(resumed.train_losses_, straight.train_losses_, rtol=1e-5)
    for name, value in straight.get_running_statistics().items():
        np.testing.assert_allclose(resumed.get_running_statistics()[name], value, rtol=1e-5)


@pytest.mark.parametrize("api", APIS)
def test_score_and_validation_normalize_with_the_running_statistics(api, batch_norm):
    module, onx, X, y = batch_norm
    opt = _optimizer(api, onx, max_iter=3, validation_every=1).fit(X, y, X_val=X[:10], y_val=y[:10])
    trained = copy.deepcopy(module)
    state = {**opt.get_state(), **opt.get_running_statistics()}
    trained.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    trained.eval()
    with torch.no_grad():
        expected = float(
            nn.functional.mse_loss(trained(torch.from_numpy(X[:10])), torch.from_numpy(y[:10]))
        )
    assert opt.validation_losses_[-1] == pytest.approx(expected, rel=1e-5)
    assert -opt.score(X[:10], y[:10]) == pytest.approx(expected, rel=1e-5)
