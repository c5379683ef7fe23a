"""Kernel families of both frameworks, their work counted from shapes, the side-by-side table."""

import math

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.profiles.ab_timing import WHOLE
from benchmarks.profiles.survey.kernel_families import (
    CONV,
    CONV_GRAD,
    ELEMENTWISE,
    EMBED_GRAD,
    FIXED,
    NORM,
    OPTIMIZER,
    OTHER,
    POOL,
    POOL_GRAD,
    PRODUCTS,
    ort_family,
    side_by_side,
    torch_family,
)
from benchmarks.profiles.survey.kernel_flops import (
    conv_flops,
    ort_flops,
    product_flops,
    torch_flops,
)
from benchmarks.profiles.survey.kernels_side_by_side import cases, compare, conclusions
from benchmarks.profiles.survey.ort_kernels import profile_ort
from benchmarks.profiles.survey.profiled_models import make_optimizer
from benchmarks.profiles.survey.torch_kernels import profile_torch, torch_step
from helpers.teaching.torch_reference import TORCH_LOSSES


@pytest.mark.parametrize(
    "op_type, family",
    [
        ("Conv", CONV),
        ("FusedConv", CONV),
        ("ConvGrad", CONV_GRAD),
        ("MaxPool", POOL),
        ("MaxPoolGrad", POOL_GRAD),
        ("GatherNDGrad", EMBED_GRAD),
        ("GatherGrad", EMBED_GRAD),
        ("Gemm", PRODUCTS),
        ("FusedMatMul", PRODUCTS),
        ("MatMul", PRODUCTS),
        ("BatchNormalizationGrad", NORM),
        ("LayerNormalizationGrad", NORM),
        ("Where", ELEMENTWISE),
        ("GeluGrad", ELEMENTWISE),
        ("SoftmaxCrossEntropyLossInternal", ELEMENTWISE),
        ("SGDOptimizerV2", OPTIMIZER),
        ("InPlaceAccumulatorV2", OPTIMIZER),
        ("Reshape", OTHER),
        ("Shape", OTHER),
    ],
)
def test_ort_families(op_type, family):
    assert ort_family(op_type) == family


def test_batch_norm_decomposition_is_normalization():
    """The project's batch normalization (elementwise operators) and its gradients' nodes."""
    _, onx, _, X, y, _, _ = next(cases(["small"], 1, ["batchnorm"]))
    optimizer = make_optimizer(WHOLE, onx, "squared_error", "sgd", True, 8, 1e-3, 1)
    kernels = profile_ort(optimizer, X[:16], y[:16], warmup=1)
    norm = kernels[kernels["family"] == NORM]
    assert {"ReduceMean", "Sub", "Div", "Sqrt"} <= set(norm["name"])  # forward
    assert len(norm) > 2 * len(norm[["name"]].drop_duplicates())  # and gradients
    assert "BatchNormalization" not in set(kernels["name"])
    assert ort_family("Sub", "batch_norm__1__centered_Grad/Neg_0_kernel_time") == NORM
    assert ort_family("Sub", "/1/Sub_kernel_time") == ELEMENTWISE


@pytest.mark.parametrize(
    "names, family",
    [
        (
            ["aten::mkldnn_convolution", "aten::_convolution", "aten::convolution", "aten::conv2d"],
            CONV,
        ),
        (["aten::convolution_backward", "ConvolutionBackward0"], CONV_GRAD),
        (["aten::empty", "aten::convolution_backward", "ConvolutionBackward0"], CONV_GRAD),
        (["aten::max_pool2d_with_indices", "aten::max_pool2d"], POOL),
        (["aten::max_pool2d_with_indices_backward", "MaxPool2DWithIndicesBackward0"], POOL_GRAD),
        (
            ["aten::fill_", "aten::zero_", "aten::zeros", "aten::embedding_dense_backward"],
            EMBED_GRAD,
        ),
        (["aten::mm", "AddmmBackward0"], PRODUCTS),
        (["aten::addmm", "aten::linear"], PRODUCTS),
        (["aten::native_batch_norm_backward", "NativeBatchNormBackward0"], NORM),
        (["aten::native_layer_norm", "aten::layer_norm"], NORM),
        (["aten::threshold_backward", "ReluBackward0"], ELEMENTWISE),
        (["aten::gelu_backward"], ELEMENTWISE),
        (
            ["aten::fill_"],
            ELEMENTWISE,
        ),  # a fill_ of its own is elementwise work, inside an embedding's gradient not
        (["aten::_foreach_add_", "Optimizer.step#SGD.step"], OPTIMIZER),
        (
            [
                "aten::detach",
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            ],
            OPTIMIZER,
        ),
        (["aten::view", "aten::flatten"], OTHER),
        (["aten::t"], OTHER),
        (["Optimizer.step#SGD.step"], None),
        (["autograd::engine::evaluate_function: AddmmBackward0"], None),
    ],
)
def test_torch_families(names, family):
    assert torch_family(names) == family


def test_product_flops_by_hand():
    m, k, n = 7, 5, 3
    hand = 2 * m * k * n
    assert product_flops([m, k], [k, n], [m, n]) == hand
    assert product_flops([k, m], [n, k], [m, n]) == hand  # Gemm(transA=1, transB=1)
    assert product_flops([4, m, k], [k, n], [4, m, n]) == 4 * hand
    assert product_flops([m, k], [4, k, n], [4, m, n]) == 4 * hand
    assert ort_flops("Gemm", [[m, k], [n, k], [n]], [[m, n]]) == hand
    assert torch_flops("aten::addmm", [[n], [m, k], [k, n], [], []], [None] * 5) == hand
    assert torch_flops("aten::mm", [[m, k], [k, n]], [None, None]) == hand


def _events(module, x):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        module(x).sum().backward()
    return {e.name: e for e in profiler.events()}


@pytest.mark.parametrize(
    "stride, padding, dilation, groups, input_grad",
    [(1, 0, 1, 1, False), (2, 1, 1, 2, True), (1, 2, 2, 1, True), (3, 1, 1, 4, False)],
)
def test_conv_flops_by_hand(stride, padding, dilation, groups, input_grad):
    n, c_in, c_out, size, k = 2, 4, 8, 11, 3
    conv = torch.nn.Conv2d(
        c_in, c_out, k, stride=stride, padding=padding, dilation=dilation, groups=groups
    )
    x = torch.randn(n, c_in, size, size, requires_grad=input_grad)
    out = (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    assert conv(x).shape[-1] == out
    hand = 2 * (n * c_out * out * out) * (c_in // groups) * k * k
    assert conv_flops([n, c_out, out, out], list(conv.weight.shape)) == hand
    events = _events(conv, x)
    forward, backward = events["aten::mkldnn_convolution"], events["aten::convolution_backward"]
    assert torch_flops(forward.name, forward.input_shapes, forward.concrete_inputs) == hand
    assert (
        torch_flops(backward.name, backward.input_shapes, backward.concrete_inputs)
        == (1 + input_grad) * hand
    )
    dy, w = [n, c_out, out, out], list(conv.weight.shape)
    dx = [[n, c_in, size, size]] if input_grad else []
    assert (
        ort_flops("ConvGrad", [dy, [n, c_in, size, size], w], [*dx, w, [c_out]])
        == (1 + input_grad) * hand
    )
    assert ort_flops("Conv", [[n, c_in, size, size], w, [c_out]], [dy]) == hand


def test_torch_profile_counts_each_call_once():
    """Every profiled step has its own kernels, each call once, with the work of the products."""
    module = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    X, y = np.ones((8, 6), np.float32), np.zeros((8, 1), np.float32)
    kernels = profile_torch(module, X, y, "regression", threads=1, steps=2, warmup=1)
    assert sorted(kernels["step"].unique()) == [0, 1]
    assert (kernels.groupby("step")["name"].apply(lambda s: (s == "aten::addmm").sum()) == 2).all()
    assert (kernels.groupby("step")["name"].apply(lambda s: (s == "aten::mm").sum()) == 3).all()
    flops = kernels[kernels["family"] == PRODUCTS].groupby("step")["flops"].sum()
    assert (
        flops == 2 * 8 * (6 * 5 + 5 * 1) + 2 * 8 * (6 * 5 + 5 * 1 + 5 * 1)
    ).all()  # forward; weights, input


@pytest.mark.parametrize(
    "task, loss, y",
    [
        ("regression", "squared_error", np.arange(8, dtype=np.float32).reshape(4, 2)),
        ("classification", "cross_entropy", np.array([0, 1, 1, 0])),
    ],
)
def test_the_profiled_torch_step_uses_the_torch_loops_loss(task, loss, y):
    """The torch side profiles the loss of the torch loop: mean over every element and output."""
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    X = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    with torch.no_grad():
        before = TORCH_LOSSES[loss](module(torch.from_numpy(X)), torch.from_numpy(y)).item()
    assert torch_step(module, X, y, task)() == pytest.approx(before, rel=1e-6)
    assert torch_step(module, X, y, task)() < before  # the first step updated the weights


@pytest.fixture(scope="module")
def tiny_cnn():
    name, onx, make_module, X, y, task, _ = next(cases(["small"], 1, ["image_cnn_small"]))
    timing, tables = compare((name, onx, make_module, X[:16], y[:16], task, 4), 1, 1, rounds=0)
    return side_by_side(tables["ORT"], tables["torch"], 100.0), timing, tables


@pytest.mark.training_package
def test_side_by_side_table_of_a_tiny_cnn(tiny_cnn):
    rows, timing, tables = tiny_cnn
    assert timing == []
    families = [row["family"] for row in rows]
    assert families[:4] == [CONV, CONV_GRAD, POOL, POOL_GRAD] and families[-1] == "step"
    assert FIXED in families  # torch's step, timed without profiler, minus its kernels
    for side in ("ORT", "torch"):
        assert math.isclose(
            sum(float(r[f"{side} share (%)"]) for r in rows[:-1]), 100.0, abs_tol=0.5
        )
        assert (
            rows[0][f"{side} GFLOP/s (% peak)"] != "-"
            and rows[1][f"{side} GFLOP/s (% peak)"] != "-"
        )
    # the same work on both sides: two convolutions forward, three gradients (not the input's)
    for family in (CONV, CONV_GRAD, PRODUCTS):
        assert tables["ORT"][family][1] == tables["torch"][family][1], family
    forward = conv_flops([4, 8, 26, 26], [8, 1, 3, 3]) + conv_flops([4, 16, 11, 11], [16, 8, 3, 3])
    assert tables["torch"][CONV][1] == forward
    assert tables["torch"][CONV_GRAD][1] == forward + conv_flops([4, 16, 11, 11], [16, 8, 3, 3])
    assert conclusions({"tiny": tables}).startswith("- **")
