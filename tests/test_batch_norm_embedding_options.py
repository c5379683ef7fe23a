"""Options of batch normalization and embeddings train as in torch, or are refused by name.

Each model trains from the same weights on the same batches (minibatches of
10, 10 and 4 rows, several epochs) in torch, in both optimizers and in
OrtTorchModule: losses, trained weights, running statistics (and batch
counters) and predictions agree.
"""

import copy
import pickle

import numpy as np
import pytest
import torch
from conftest import make_optimizer
from torch import nn

from helpers import (
    OrtGradientOptimizer,
    OrtTorchModule,
    UntrainableModelError,
    add_loss_output,
    export_for_training,
)
from helpers.teaching.torch_reference import torch_fit

N_SAMPLES, BATCH, EPOCHS, LEARNING_RATE = 24, 10, 3, 0.05
APIS = ["whole", "forward_backward", "ort_torch_module"]


def _regression(shape):
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((N_SAMPLES, *shape)) * [2.0] + 1.0).astype(np.float32)
    y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    return X, y


def _tokens(n_tokens=10):
    rng = np.random.default_rng(0)
    X = rng.integers(0, n_tokens, (N_SAMPLES, 5)).astype(np.int64)
    X[::3, 0], X[1::4, -1] = 0, n_tokens - 1  # both padding rows candidates appear
    return X, rng.integers(0, 3, N_SAMPLES)


def _epoch_means(step_losses):
    sizes = [min(BATCH, N_SAMPLES - start) for start in range(0, N_SAMPLES, BATCH)]
    per_epoch = [step_losses[i : i + len(sizes)] for i in range(0, len(step_losses), len(sizes))]
    return [sum(np.multiply(losses, sizes)) / N_SAMPLES for losses in per_epoch]


def _optimizer(api, onx, loss, fast_gradients=True, solver="sgd", epochs=EPOCHS, **options):
    common = dict(
        max_iter=epochs,
        batch_size=BATCH,
        learning_rate=LEARNING_RATE,
        solver=solver,
        random_state=0,
        validation_every=0,
        fast_gradients=fast_gradients,
        **options,
    )
    return make_optimizer(api, onx, loss, **common)


def _predict_torch(module, X):
    module.eval()
    with torch.no_grad():
        return module(torch.from_numpy(X)).numpy()


def _train_and_compare(build, X, y, api, loss="squared_error", fast_gradients=True, solver="sgd"):
    """Train in torch and in ``api``: losses, weights, buffers and predictions agree."""
    torch.manual_seed(0)
    module = build()
    reference = copy.deepcopy(module)
    _, torch_steps = torch_fit(reference, X, y, loss, BATCH, EPOCHS, LEARNING_RATE, solver)
    expected_buffers = {name: b.numpy() for name, b in reference.named_buffers()}
    if api == "ort_torch_module":
        example = torch.from_numpy(X[:2])
        ort = OrtTorchModule(copy.deepcopy(module), example, fast_gradients=fast_gradients)
        _, steps = torch_fit(ort, X, y, loss, BATCH, EPOCHS, LEARNING_RATE, solver)
        np.testing.assert_allclose(steps, torch_steps, rtol=1e-4, atol=1e-7)
        weights = {name: p.detach().numpy() for name, p in ort.module.named_parameters()}
        buffers = {name: b.numpy() for name, b in ort.module.named_buffers()}
        predictions = _predict_torch(ort, X)
    else:
        onx = export_for_training(module, torch.from_numpy(X[:2]))
        opt = _optimizer(api, onx, loss, fast_gradients, solver).fit(X, y)
        np.testing.assert_allclose(opt.train_losses_, _epoch_means(torch_steps), rtol=1e-4)
        weights, buffers = opt.get_state(), opt.get_running_statistics()
        # the optimizers keep the batch counter of cumulative averages only
        expected_buffers = {k: v for k, v in expected_buffers.items() if k in buffers or "run" in k}
        predictions = opt.predict(X)
    expected_weights = {name: p.detach().numpy() for name, p in reference.named_parameters()}
    assert sorted(weights) == sorted(expected_weights)
    for name, value in weights.items():
        expected = expected_weights[name]
        np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5, err_msg=name)
    assert sorted(buffers) == sorted(expected_buffers)
    for name, value in buffers.items():
        expected = expected_buffers[name]
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=name)
    expected = _predict_torch(reference, X)
    np.testing.assert_allclose(predictions.reshape(expected.shape), expected, rtol=1e-4, atol=1e-5)
    return weights, buffers


# -- batch normalization ---------------------------------------------------------------------------


def _batch_norm_net(momentum, affine, dims=1, track=True):
    layers = {1: (nn.Conv1d, nn.BatchNorm1d, (2, 5)), 2: (nn.Conv2d, nn.BatchNorm2d, (2, 2, 2))}
    conv, norm, shape = layers[dims]

    def build():
        layer = norm(3, momentum=momentum, affine=affine, track_running_stats=track)
        features = 3 * int(np.prod(shape[1:]))
        return nn.Sequential(conv(2, 3, 1), layer, nn.Tanh(), nn.Flatten(), nn.Linear(features, 1))

    return build, shape


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("momentum", [None, 0.1, 0.5])
def test_batch_norm_momentum_matches_torch(momentum, affine, dims, api):
    """momentum=None is torch's cumulative average: the batch counter is kept and compared too."""
    build, shape = _batch_norm_net(momentum, affine, dims)
    _, buffers = _train_and_compare(build, *_regression(shape), api)
    counter = "1.num_batches_tracked"
    assert (counter in buffers) == (momentum is None or api == "ort_torch_module")
    if counter in buffers:
        assert int(buffers[counter]) == EPOCHS * 3


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("momentum", [None, 0.1])
def test_batch_norm_on_the_inputs_trains(momentum, api):
    """Batch normalization before any weight: its statistics depend on none (backward failed)."""

    def build():
        return nn.Sequential(nn.BatchNorm1d(9, momentum=momentum), nn.Linear(9, 1))

    _train_and_compare(build, *_regression((9,)), api)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_without_running_statistics_matches_torch(affine, dims, api):
    """track_running_stats=False normalizes with the batch's statistics, in eval mode too."""
    build, shape = _batch_norm_net(0.1, affine, dims, track=False)
    _train_and_compare(build, *_regression(shape), api)


@pytest.mark.parametrize("momentum", [None, 0.1])
def test_a_batch_norm_alone_trains_in_ort_torch_module(momentum):
    """Its counter is 'num_batches_tracked' (no prefix): it was taken for a foreign buffer and
    refused."""
    X = _regression((3,))[0]
    torch.manual_seed(0)
    module = nn.BatchNorm1d(3, momentum=momentum)
    reference, ort = copy.deepcopy(module), OrtTorchModule(module, torch.from_numpy(X[:2]))
    torch_steps = torch_fit(
        reference, X, np.tanh(X), "squared_error", BATCH, EPOCHS, LEARNING_RATE
    )[1]
    steps = torch_fit(ort, X, np.tanh(X), "squared_error", BATCH, EPOCHS, LEARNING_RATE)[1]
    np.testing.assert_allclose(steps, torch_steps, rtol=1e-4)
    for (name, expected), (_, value) in zip(reference.named_buffers(), module.named_buffers()):
        np.testing.assert_allclose(
            value.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )


def test_batch_norm_without_running_statistics_alone_exports():
    """The layer as the whole module, on (N, 3, 11): torch's exporter raised an AssertionError."""
    layer = nn.BatchNorm1d(3, track_running_stats=False)
    onx = export_for_training(layer, torch.zeros(2, 3, 11))
    assert [i.name for i in onx.graph.initializer] == ["weight", "bias"]
    assert "BatchNormalization" not in {n.op_type for n in onx.graph.node}


def test_cumulative_average_continues_after_pickle_and_warm_start():
    """Two epochs, a pickle, one warm epoch more: the statistics of three epochs in torch."""
    build, shape = _batch_norm_net(None, True)
    X, y = _regression(shape)
    torch.manual_seed(0)
    module = build()
    reference = copy.deepcopy(module)
    torch_fit(reference, X, y, "squared_error", BATCH, EPOCHS, LEARNING_RATE)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    for api in ("whole", "forward_backward"):
        opt = _optimizer(api, onx, "squared_error", epochs=2, warm_start=True).fit(X, y)
        opt = pickle.loads(pickle.dumps(opt))
        opt.set_params(max_iter=1).fit(X, y)
        statistics = opt.get_running_statistics()
        assert int(statistics["1.num_batches_tracked"]) == 9
        for name, value in reference.named_buffers():
            expected = value.numpy()
            got = statistics[name]
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=name)
        expected = _predict_torch(reference, X).ravel()
        np.testing.assert_allclose(opt.predict(X).ravel(), expected, rtol=1e-4, atol=1e-5)


def test_cumulative_average_continues_from_a_checkpoint(tmp_path):
    build, shape = _batch_norm_net(None, True)
    X, y = _regression(shape)
    torch.manual_seed(0)
    onx = add_loss_output(export_for_training(build(), torch.from_numpy(X[:2])))
    options = dict(batch_size=BATCH, learning_rate=LEARNING_RATE, random_state=0)
    options["validation_every"] = 0
    path = str(tmp_path / "ckpt")
    whole = OrtGradientOptimizer(onx, max_iter=EPOCHS, **options).fit(X, y)
    first = OrtGradientOptimizer(onx, max_iter=2, checkpoint_path=path, **options).fit(X, y)
    assert int(first.get_running_statistics()["1.num_batches_tracked"]) == 6
    resumed = OrtGradientOptimizer(onx, max_iter=1, warm_start=True, **options)
    statistics = resumed.load_checkpoint(path).fit(X, y).get_running_statistics()
    for name, value in whole.get_running_statistics().items():
        np.testing.assert_allclose(statistics[name], value, rtol=1e-6, err_msg=name)


# -- embeddings ------------------------------------------------------------------------------------


def _embedding_net(padding_idx):
    def build():
        embedding = nn.Embedding(10, 4, padding_idx=padding_idx)
        return nn.Sequential(embedding, nn.Flatten(), nn.Linear(20, 3))

    return build


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("fast_gradients", [True, False])
@pytest.mark.parametrize("padding_idx", [0, -1, None])
def test_embedding_padding_row_stays_as_in_torch(padding_idx, fast_gradients, api):
    build = _embedding_net(padding_idx)
    weights, _ = _train_and_compare(build, *_tokens(), api, "cross_entropy", fast_gradients)
    table = weights["0.weight"]
    if padding_idx is not None:
        np.testing.assert_array_equal(table[padding_idx], 0)
    assert np.all(np.abs(table[1:-1]).sum(axis=1) > 0)


@pytest.mark.parametrize("api", APIS)
def test_embedding_padding_row_under_adamw(api):
    """AdamW decays every row, in torch and in onnxruntime: a zero padding row stays zero."""
    X, y = _tokens()
    _train_and_compare(_embedding_net(3), X, y, api, "cross_entropy", solver="adamw")
    if api != "ort_torch_module":
        torch.manual_seed(0)
        onx = export_for_training(_embedding_net(3)(), torch.from_numpy(X[:2]))
        opt = _optimizer(api, onx, "cross_entropy", solver="adamw", weight_decay=0.1).fit(X, y)
        np.testing.assert_array_equal(opt.get_state()["0.weight"][3], 0)


def test_embedding_with_a_non_zero_padding_row_is_refused():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Embedding(10, 4, padding_idx=0), nn.Flatten(), nn.Linear(20, 3))
    with torch.no_grad():
        net[0].weight[0] = 1.0
    X, y = _tokens()
    onx = export_for_training(net, torch.from_numpy(X[:2]))
    for api in ("whole", "forward_backward"):
        with pytest.raises(UntrainableModelError, match=r"padding row 0 of embedding table '0.w"):
            _optimizer(api, onx, "cross_entropy").fit(X, y)


def test_embedding_max_norm_is_refused_by_name():
    net = nn.Sequential(nn.Embedding(10, 4, max_norm=1.0), nn.Flatten(), nn.Linear(20, 3))
    example = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"module '0' \(Embedding\) has max_norm=1.0"):
        export_for_training(net, example)
    with pytest.raises(ValueError, match="max_norm"):
        OrtTorchModule(net, example)


# -- exporter failures -----------------------------------------------------------------------------


class _SingularValues(nn.Module):
    def forward(self, x):
        return torch.linalg.svdvals(x)


class _Failing(nn.Module):
    def forward(self, x):
        raise RuntimeError("this forward fails")


@pytest.mark.parametrize(
    "inner, origin",
    [(_SingularValues(), "UnsupportedOperatorError"), (_Failing(), "RuntimeError: this forward")],
)
def test_exporter_failures_name_the_module(inner, origin):
    net = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Identity(), inner))
    name = type(inner).__name__
    # OrtTorchModule runs the module in torch first: a failing forward raises there, as written
    exports = [export_for_training] + [OrtTorchModule] * isinstance(inner, _SingularValues)
    message = rf"failed on module '1.1' \({name}\) of Sequential: {origin}"
    for export in exports:
        with pytest.raises(ValueError, match=message) as info:
            export(net, torch.zeros(2, 4))
        assert info.value.__cause__ is not None
