"""Device selection, its errors, and batches gathered on a device."""

import numpy as np
import onnxruntime
import pytest
from conftest import APIS, make_optimizer

from helpers import OrtGradientForwardBackwardOptimizer, OrtGradientOptimizer, add_loss_output
from helpers.core.machine.devices import Device, DeviceError, cuda_problem, resolve_device
from helpers.core.machine.runtime import has_training_package
from helpers.core.training.batches import Batches

HAS_GPU = cuda_problem(0) is None


def test_cpu_and_parsing():
    assert resolve_device("cpu") == Device("cpu")
    assert resolve_device(" CPU ") == Device("cpu")
    assert str(Device("cuda", 1)) == "cuda:1"
    with pytest.raises(ValueError, match="Unknown device 'gpu'.*'cuda:N'"):
        resolve_device("gpu")
    with pytest.raises(TypeError, match="device must be a string"):
        resolve_device(0)


def test_auto_says_what_it_chose(capsys):
    from helpers.core.machine.devices import _auto_device  # noqa: PLC0415

    _auto_device.cache_clear()
    device = resolve_device("auto")
    out = capsys.readouterr().out
    assert f"training on {device}" in out
    assert device == (Device("cuda", 0) if HAS_GPU else Device("cpu"))
    resolve_device("auto")
    assert capsys.readouterr().out == ""  # said once


@pytest.mark.skipif(HAS_GPU, reason="checks the error raised where no GPU can be used")
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_gpu_names_the_cause_and_fix(name):
    with pytest.raises(DeviceError, match=f"device='{name}' cannot be used: ") as caught:
        resolve_device(name)
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        package = "onnxruntime-training-cpu" if has_training_package() else "onnxruntime"
        fix = "make setup GPU=1" if has_training_package() else "onnxruntime-gpu==1.31.1"
        assert f"{package} {onnxruntime.__version__}, which has no CUDA provider" in str(
            caught.value
        )
        assert fix in str(caught.value)


def test_cuda_problem_does_not_trust_the_provider_list():
    problem = cuda_problem(0)
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        assert "no CUDA provider" in problem
    else:  # the GPU package lists the provider even without a GPU: it is run
        assert problem is None or "cuda" in problem.lower()


def test_optimizers_refuse_cuda_clearly(linear_onnx, linear_data):
    if HAS_GPU:
        pytest.skip("a GPU is there")
    X, y = linear_data
    for opt in [
        OrtGradientOptimizer(add_loss_output(linear_onnx), device="cuda", max_iter=1),
        OrtGradientForwardBackwardOptimizer(linear_onnx, device="cuda:0", max_iter=1),
    ]:
        with pytest.raises(DeviceError, match="cannot be used: ") as caught:
            opt.fit(X, y)
        assert caught.value.args[0] == f"device={opt.device!r} cannot be used: {cuda_problem(0)}."


@pytest.mark.parametrize("on_device", [False, True])
def test_batches_cover_each_row_once(on_device):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((23, 3)).astype(np.float32)
    y = np.arange(23, dtype=np.float32)
    order = rng.permutation(23)
    cut = Batches([X, y], Device("cpu"), on_device=on_device)
    for epoch in range(2):  # the second epoch refills the buffers of the first
        order = rng.permutation(23)
        batches = [
            (b.start, b.end, [v.numpy() for v in b.ortvalues()]) for b in cut.epoch(order, 5)
        ]
        assert [(s, e) for s, e, _ in batches] == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]
        rows = np.concatenate([b[1] for _, _, b in batches])
        np.testing.assert_array_equal(rows, order.astype(np.float32))
        np.testing.assert_array_equal(batches[0][2][0], X[order[:5]])


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU and the GPU package")
@pytest.mark.parametrize("solver", ["sgd", "nesterov"])
def test_whole_training_on_gpu_matches_cpu(linear_onnx, linear_data, solver):
    X, y = linear_data
    onx_loss = add_loss_output(linear_onnx)
    results = [
        OrtGradientOptimizer(
            onx_loss, solver=solver, learning_rate=0.01, max_iter=5, random_state=0, device=d
        )
        .fit(X, y)
        .get_state()
        for d in ("cpu", "cuda")
    ]
    for name in results[0]:
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-3, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU and the GPU package")
def test_forward_backward_on_gpu_matches_cpu(linear_onnx, linear_data):
    X, y = linear_data
    results = [
        OrtGradientForwardBackwardOptimizer(
            linear_onnx, learning_rate="Nesterov", max_iter=5, random_state=0, device=d
        )
        .fit(X, y)
        .get_state()
        for d in ("cpu", "cuda")
    ]
    for name in results[0]:
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("api", APIS)
def test_training_on_gathered_batches_matches_numpy_batches(
    linear_onnx, linear_data, monkeypatch, api
):
    """The GPU code path (OrtValue batches gathered by a graph), run on the CPU."""
    import helpers.core.training.estimator as base  # noqa: PLC0415

    X, y = linear_data

    def fit():
        opt = make_optimizer(api, linear_onnx, solver="nesterov", learning_rate=0.01)
        return opt.set_params(max_iter=3, random_state=0).fit(X, y)

    reference = fit()
    monkeypatch.setattr(
        base, "Batches", lambda arrays, device: Batches(arrays, device, on_device=True)
    )
    gathered = fit()
    np.testing.assert_allclose(gathered.train_losses_, reference.train_losses_, rtol=1e-6)
