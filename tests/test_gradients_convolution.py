"""Gradients of the convolutions and poolings (helpers.portable.gradients.convolution, .pooling).

Each case is checked up to three ways:

* ``fd``: float64 central differences, the model run by onnx's reference evaluator;
* ``ort``: 1.19.2's gradient builder on the project's training graph, which writes ``auto_pad``
  as explicit pads (1.19.2's own ``ConvGrad`` is wrong with ``SAME_UPPER``), a ``ConvTranspose``
  as a ``Conv``, an ``AveragePool`` as a depthwise ``Conv`` and ``ceil_mode`` windows as torch
  has them; the input is then a weight too, so that its gradient is compared;
* ``torch``: the gradients run on onnxruntime 1.19.2 (float32) against torch's float64 autograd.

``torch`` stands in for ``fd`` where onnx 1.17's reference evaluator is wrong: ``Conv`` with
``auto_pad`` ``SAME_*`` or ``VALID`` and strides above one (its output size or pads), a
``ConvTranspose`` of several groups (it fails to reshape the weight: the input gradient of a
grouped ``Conv`` with strides above one is one), a ``ConvTranspose`` with ``output_shape`` and no
``auto_pad``, and a ``MaxPool`` of strides and dilations one (its ``Indices`` are positions in
the window, without the image and the channel, and its output is transposed with uneven pads).
``AveragePool`` with ``ceil_mode`` and a kernel shorter than the stride is wrong there too
(fixed in onnx 1.18): that case runs on newer onnx only. 1.19.2 has no gradient for
``GlobalMaxPool``, nor for a ``ConvTranspose`` with ``auto_pad`` or ``output_shape`` that its
training graph cannot rewrite, nor for a grouped 3-D ``Conv`` (the training graph refuses it);
with ``ceil_mode`` and a window that starts in the padding or runs past it, 1.19.2 computes
other windows than torch: finite differences only there.
"""

import importlib.util

import numpy as np
import onnx
import pytest
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    loss_without_sum,
    run_on_runtime,
    single_node_loss,
)
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.portable.gradients import NoGradientError, build_gradients

#: Whether onnx's reference ``AveragePool`` computes ``ceil_mode`` windows right (onnx 1.18).
REFERENCE_CEIL_POOLS = tuple(int(v) for v in onnx.__version__.split(".")[:2]) >= (1, 18)
#: Whether 1.19.2's training package is here (the maintained environment runs the rest).
TRAINING_PACKAGE = importlib.util.find_spec("onnxruntime.training") is not None


def _forward_shape(node, values, opset, runtime):
    """The shape of ``node``'s first output on ``values`` (``"fd"``: the reference evaluator,
    else onnxruntime)."""
    inputs = [
        helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in values.items()
    ]
    output = [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "forward", inputs, output)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    if runtime == "fd":
        return ReferenceEvaluator(model).run(None, values)[0].shape
    return run_on_runtime(model, values, [node.output[0]])[node.output[0]].shape


def _case(op, x_shape, w_shape=None, bias=False, opset=17, seed=0, outputs=1, **attrs):
    """A node and its random values: ``X`` and, for a convolution, ``W`` and ``B``."""
    rng = np.random.default_rng(seed)
    values = {"X": rng.standard_normal(x_shape).astype(np.float32)}
    if w_shape:
        values["W"] = rng.standard_normal(w_shape).astype(np.float32)
    if bias:
        group = attrs.get("group", 1)
        channels = w_shape[1] * group if op == "ConvTranspose" else w_shape[0]
        values["B"] = rng.standard_normal(channels).astype(np.float32)
    names = ["Y", "Indices"][:outputs]
    return helper.make_node(op, list(values), names, name=f"/{op}", **attrs), values


def _model(node, values, check, opset=17, static=True):
    """The loss model of ``node`` for ``check``, its feeds and the values to differentiate.

    ``X`` is a graph input (of fixed spatial size if ``static``, the batch free), the rest are
    weights. For ``"ort"``, ``X`` is the input times a weight ``S`` shaped like one image, so
    that 1.19.2's gradient for ``X`` is compared (through ``S``'s): with ``X`` a weight of its
    own, 1.19.2's ``MaxPoolGrad`` finds no declared shape for it and the process dies.
    """
    shape = _forward_shape(node, values, opset, "fd" if check == "fd" else "ort")
    weights = {k: v for k, v in values.items() if k != "X"}
    extra, x = [], values["X"]
    if check == "ort":
        scale = np.random.default_rng(7).uniform(0.5, 1.5, (1, *x.shape[1:]))
        weights = {"S": scale.astype(np.float32), **weights}
        extra = [helper.make_node("Mul", ["X0", "S"], ["X"])]
    inputs = {"X0" if extra else "X": x}
    model, feeds = single_node_loss(
        node, inputs, weights, {"Y": shape}, opset=opset, extra_nodes=extra
    )
    if static:
        dims = model.graph.input[0].type.tensor_type.shape.dim
        for dim, size in zip(dims[1:], x.shape[1:]):
            dim.dim_value = size
        dims[0].dim_param = "N"
    return model, feeds, list(weights) if extra else list(values)


def _check(node, values, checks, forward=None, opset=17, static=True, samples=8):
    """Run ``checks`` on ``node``; finite differences at ``samples`` elements of each value
    (all of them for a pooling: a maximum's gradient is mostly zeros, an average's differs at
    the edges)."""
    for check in checks:
        if check == "ort" and not TRAINING_PACKAGE:
            continue
        model, feeds, wrt = _model(node, values, check, opset, static)
        if check == "fd":
            check_finite_differences(model, wrt, feeds, samples=samples)
        elif check == "ort":
            check_against_training_package(loss_without_sum(model), wrt, feeds)
        else:
            assert_matches_torch(model, wrt, feeds, forward)


def assert_matches_torch(model, wrt, feeds, forward, rtol=2e-5):
    """The gradients built for ``model`` (run on onnxruntime) equal torch's float64 autograd of
    ``sum(forward(values) * loss_r0)``, ``forward`` taking the values by name as tensors."""
    import torch

    built = build_gradients(model, list(wrt))
    ours = run_on_runtime(built.model, feeds, [built.gradients[n] for n in wrt])
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer} | feeds
    tensors = {
        k: torch.tensor(v.astype(np.float64), requires_grad=k in wrt) for k, v in values.items()
    }
    (forward(tensors) * tensors["loss_r0"]).sum().backward()
    for name in wrt:
        expected = tensors[name].grad.numpy()
        scale = max(float(np.abs(expected).max()), 1e-12)
        error = float(np.abs(ours[built.gradients[name]] - expected).max())
        assert error <= rtol * scale, (name, error, scale)


def _torch_pad(pads, value=0.0):
    """torch's ``F.pad`` of ``x`` by ONNX's ``pads`` (begins, then ends)."""
    import torch.nn.functional as F

    rank = len(pads) // 2
    order = [p for axis in reversed(range(rank)) for p in (pads[axis], pads[axis + rank])]
    return lambda x: F.pad(x, order, value=value)


def torch_conv(strides, pads, dilations=None, group=1):
    """torch's ``Conv`` of the tensors ``X``, ``W`` and ``B`` (if any)."""
    import torch.nn.functional as F

    def forward(t):
        x = _torch_pad(pads)(t["X"])
        conv = getattr(F, f"conv{x.dim() - 2}d")
        return conv(x, t["W"], t.get("B"), strides, 0, dilations or 1, group)

    return forward


def torch_conv_transpose(strides, begin, end, extra, group=1, dilations=1):
    """torch's ``ConvTranspose``: its full output and ``extra`` zeros, cropped by the pads."""
    import torch.nn.functional as F

    def forward(t):
        rank = t["X"].dim() - 2
        transposed = getattr(F, f"conv_transpose{rank}d")
        full = transposed(t["X"], t["W"], None, strides, groups=group, dilation=dilations)
        full = _torch_pad([0] * rank + list(extra))(full)
        crop = [slice(b, n - e) for b, e, n in zip(begin, end, full.shape[2:])]
        y = full[(slice(None), slice(None), *crop)]
        return y if "B" not in t else y + t["B"].reshape(1, -1, *[1] * rank)

    return forward


def torch_max_pool(kernel, strides, pads):
    """torch's ``MaxPool`` of ``X`` (pads of minus infinity)."""
    import torch.nn.functional as F

    def forward(t):
        x = _torch_pad(pads, -np.inf)(t["X"])
        return getattr(F, f"max_pool{x.dim() - 2}d")(x, kernel, strides)

    return forward


# (x shape, w shape, bias, attributes, checks)
CONVOLUTIONS = [
    ((2, 3, 6, 5), (4, 3, 3, 3), True, dict(pads=[1, 1, 1, 1]), "fd ort"),
    (
        (2, 3, 7, 6),
        (4, 3, 3, 2),
        False,
        dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 2, 1], dilations=[2, 1]),
        "fd ort",
    ),
    ((2, 4, 6, 5), (6, 2, 3, 3), False, dict(pads=[1, 1, 1, 1], group=2), "fd ort"),
    ((2, 3, 6, 5), (3, 1, 3, 3), True, dict(pads=[1, 1, 1, 1], group=3), "fd ort"),
    ((2, 3, 9), (4, 3, 3), True, dict(strides=[2], pads=[1, 1], dilations=[2]), "fd ort"),
    ((2, 4, 9), (4, 2, 3), False, dict(pads=[1, 0], group=2), "fd ort"),
    (
        (1, 2, 4, 4, 3),
        (3, 2, 2, 2, 2),
        True,
        dict(strides=[1, 2, 1], pads=[1, 0, 0, 0, 1, 1]),
        "fd ort",
    ),
    ((1, 4, 3, 4, 3), (4, 2, 2, 2, 2), False, dict(group=2), "fd"),  # 1.19.2: refused
    ((2, 3, 4, 5), (4, 3, 1, 1), True, {}, "fd ort"),
    ((2, 3, 6, 5), (4, 3, 4, 3), True, dict(auto_pad="SAME_UPPER"), "fd ort"),
    ((2, 3, 6, 5), (4, 3, 4, 3), False, dict(auto_pad="SAME_LOWER", dilations=[1, 2]), "fd"),
    # the reference evaluator is wrong below: see the module's documentation
    ((2, 3, 6, 5), (4, 3, 3, 2), False, dict(auto_pad="VALID"), "torch ort"),
    ((2, 4, 6, 5), (6, 2, 3, 3), True, dict(strides=[2, 1], group=2), "torch ort"),
    (
        (2, 3, 5, 5),
        (6, 1, 3, 3),
        False,
        dict(strides=[2, 2], pads=[1, 1, 0, 0], group=3),
        "torch ort",
    ),
    ((2, 3, 7, 6), (4, 3, 3, 2), True, dict(auto_pad="SAME_UPPER", strides=[2, 2]), "torch ort"),
    ((2, 3, 9), (4, 3, 4), False, dict(auto_pad="SAME_LOWER", strides=[2]), "torch ort"),
    ((2, 3, 7, 6), (4, 3, 3, 3), False, dict(auto_pad="VALID", strides=[2, 3]), "torch ort"),
]


def _same_pads(sizes, kernel, strides, dilations, auto_pad):
    """ONNX's ``SAME_*`` pads, for torch."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max(0, (-(-n // s) - 1) * s + d * (k - 1) + 1 - n)
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        begins.append(begin)
        ends.append(total - begin)
    return begins + ends


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: str(c[3]))
def test_conv(case):
    x_shape, w_shape, bias, attrs, checks = case
    node, values = _case("Conv", x_shape, w_shape, bias, **attrs)
    rank = len(x_shape) - 2
    strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    if attrs.get("auto_pad", "VALID") != "VALID":
        pads = _same_pads(x_shape[2:], w_shape[2:], strides, dilations, attrs["auto_pad"])
    forward = torch_conv(strides, pads, dilations, attrs.get("group", 1))
    _check(node, values, checks.split(), forward, static=rank != 1 or "auto_pad" in attrs)


@pytest.mark.parametrize("wanted", [["W"], ["X"], ["B"], ["X", "B"]])
def test_conv_computes_only_the_gradients_wanted(wanted):
    node, values = _case("Conv", (2, 3, 6, 5), (4, 3, 3, 3), True, strides=[2, 1])
    model, feeds, _ = _model(node, values, "fd")
    built = build_gradients(model, wanted)
    ops = {n.op_type for n in built.model.graph.node}
    assert ("ConvTranspose" in ops) == ("X" in wanted)
    assert ("MatMul" in ops) == ("W" in wanted)  # the windows of X times dY
    check_finite_differences(model, wanted, feeds, samples=3)


def test_conv_same_padding_on_a_free_size_is_refused():
    node, values = _case("Conv", (2, 3, 7), (4, 3, 3), auto_pad="SAME_UPPER", strides=[2])
    model = _model(node, values, "fd", static=False)[0]
    with pytest.raises(NoGradientError, match="spatial size"):
        build_gradients(model, ["W"])


# (x shape, w shape, bias, attributes, checks)
TRANSPOSED = [
    (
        (2, 3, 4, 3),
        (3, 2, 3, 3),
        True,
        dict(strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0], dilations=[1, 2]),
        "fd ort",
    ),
    ((2, 3, 5), (3, 2, 3), True, dict(strides=[2], output_padding=[1]), "fd ort"),
    (
        (1, 2, 3, 2, 3),
        (2, 2, 2, 2, 2),
        False,
        dict(strides=[2, 1, 2], pads=[0, 1, 0, 1, 0, 1]),
        "fd ort",
    ),
    (
        (2, 4, 4, 3),
        (4, 3, 3, 2),
        True,
        dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1]),
        "torch ort",
    ),
    # 1.19.2's training graph refuses auto_pad and output_shape
    ((2, 3, 4, 3), (3, 2, 3, 3), True, dict(strides=[2, 2], auto_pad="SAME_UPPER"), "fd"),
    ((2, 3, 4, 3), (3, 2, 3, 2), False, dict(strides=[2, 1], auto_pad="SAME_LOWER"), "fd"),
    ((2, 3, 4), (3, 2, 4), False, dict(strides=[2], output_shape=[9], auto_pad="SAME_UPPER"), "fd"),
    ((2, 3, 4, 3), (3, 2, 3, 3), True, dict(strides=[2, 2], output_shape=[8, 6]), "torch"),
]


def _transposed_pads(x_sizes, kernel, attrs):
    """ONNX's begin and end pads of a ``ConvTranspose``, for torch."""
    rank = len(kernel)
    strides, extra = attrs.get("strides", [1] * rank), attrs.get("output_padding", [0] * rank)
    if "output_shape" not in attrs:
        pads = attrs.get("pads", [0] * 2 * rank)
        return pads[:rank], pads[rank:]
    full = [s * (n - 1) + e + k for s, n, e, k in zip(strides, x_sizes, extra, kernel)]
    totals = [f - t for f, t in zip(full, attrs["output_shape"])]
    begins = [t - t // 2 for t in totals]
    return begins, [t - b for t, b in zip(totals, begins)]


@pytest.mark.parametrize("case", TRANSPOSED, ids=lambda c: str(c[3]))
def test_conv_transpose(case):
    x_shape, w_shape, bias, attrs, checks = case
    node, values = _case("ConvTranspose", x_shape, w_shape, bias, **attrs)
    rank = len(x_shape) - 2
    begin, end = _transposed_pads(x_shape[2:], w_shape[2:], attrs)
    extra = attrs.get("output_padding", [0] * rank)
    forward = torch_conv_transpose(
        attrs.get("strides", 1), begin, end, extra, attrs.get("group", 1), attrs.get("dilations", 1)
    )
    _check(node, values, checks.split(), forward)


def test_conv_transpose_output_shape_on_a_free_size_is_refused():
    node, values = _case("ConvTranspose", (2, 3, 4), (3, 2, 3), strides=[2], output_shape=[9])
    model = _model(node, values, "fd", static=False)[0]
    with pytest.raises(NoGradientError, match="output_shape"):
        build_gradients(model, ["W"])


@pytest.mark.parametrize("attrs", [dict(auto_pad="SAME_UPPER"), dict(output_shape=[10])])
def test_conv_transpose_longer_than_its_full_output_is_refused(attrs):
    """onnxruntime and onnx's reference put the extra zeros at different ends."""
    node, values = _case("ConvTranspose", (2, 3, 3), (3, 2, 2), strides=[3], **attrs)
    model = single_node_loss(node, {"X": values["X"]}, {"W": values["W"]}, {"Y": (2, 2, 9)})[0]
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 3]))
    with pytest.raises(NoGradientError, match="runtimes disagree"):
        build_gradients(model, ["W"])


# (x shape, attributes, outputs, opset, checks)
MAX_POOLS = [
    ((1, 2, 7, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 1, 17, "fd ort"),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]), 2, 17, "fd ort"),
    ((1, 2, 7, 6), dict(kernel_shape=[2, 2], strides=[2, 1], storage_order=1), 2, 17, "fd"),
    ((1, 2, 7, 6), dict(kernel_shape=[2, 2], dilations=[2, 1]), 1, 17, "fd ort"),
    (
        (1, 2, 7, 6),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        1,
        17,
        "fd ort",
    ),
    ((1, 2, 6, 8), dict(kernel_shape=[1, 2], strides=[2, 3], ceil_mode=1), 1, 17, "fd"),
    (
        (1, 2, 7, 6),
        dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        1,
        17,
        "fd ort",
    ),
    ((2, 2, 8), dict(kernel_shape=[2], strides=[2]), 1, 13, "fd"),
    ((2, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1]), 1, 16, "fd ort"),
    ((1, 1, 4, 5, 4), dict(kernel_shape=[2, 2, 2], strides=[2, 1, 1]), 1, 17, "fd ort"),
    ((1, 2, 6, 5), dict(kernel_shape=[2, 3], pads=[0, 1, 1, 1]), 1, 17, "torch ort"),
]


@pytest.mark.parametrize("case", MAX_POOLS, ids=lambda c: str(c[1]))
def test_max_pool(case):
    x_shape, attrs, outputs, opset, checks = case
    node, values = _case("MaxPool", x_shape, outputs=outputs, **attrs)
    rank = len(x_shape) - 2
    forward = torch_max_pool(
        attrs["kernel_shape"], attrs.get("strides", 1), attrs.get("pads", [0] * 2 * rank)
    )
    _check(node, values, checks.split(), forward, opset, samples=values["X"].size)


def test_max_pool_reuses_its_indices_and_ties_go_to_the_first_maximum():
    node, values = _case("MaxPool", (2, 2, 5, 5), outputs=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    values["X"] = np.random.default_rng(3).integers(-2, 3, (2, 2, 5, 5)).astype(np.float32)
    model, feeds, _ = _model(node, values, "torch")
    built = build_gradients(model, ["X"])
    assert [n.op_type for n in built.model.graph.node].count("MaxPool") == 1
    assert_matches_torch(model, ["X"], feeds, torch_max_pool([3, 3], 1, [1, 1, 1, 1]))
    _check(node, values, ["ort"])


def test_overlapping_max_pool_before_opset_16_is_refused():
    node, values = _case("MaxPool", (2, 3, 9), kernel_shape=[3], strides=[2])
    model = _model(node, values, "fd", opset=15)[0]
    with pytest.raises(NoGradientError, match="opset 16"):
        build_gradients(model, ["X"])


# (x shape, attributes, opset, checks)
AVERAGE_POOLS = [
    ((1, 2, 7, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 17, "fd ort"),
    (
        (1, 2, 7, 6),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        17,
        "fd ort",
    ),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1]), 17, "fd ort"),
    ((1, 2, 8, 6), dict(kernel_shape=[2, 2], strides=[2, 2]), 17, "fd ort"),
    (
        (1, 2, 6, 7),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        17,
        "fd",  # the training graph refuses ceil_mode there
    ),
    # the last window runs past the padded input: 1.19.2 divides it by 9, torch by 6
    (
        (1, 2, 6, 7),
        dict(
            kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1
        ),
        17,
        "fd",
    ),
    ((1, 2, 8, 7), dict(kernel_shape=[2, 2], strides=[3, 3], ceil_mode=1), 17, "newer-fd"),
    (
        (2, 2, 9),
        dict(kernel_shape=[3], strides=[2], pads=[0, 2], count_include_pad=1),
        17,
        "fd ort",
    ),
    (
        (1, 1, 4, 5, 4),
        dict(kernel_shape=[2, 2, 2], strides=[2, 1, 1], pads=[1, 0, 0, 0, 1, 1]),
        17,
        "fd",  # the training graph refuses its grouped 3-D convolution
    ),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"), 17, "fd ort"),
    ((1, 2, 7, 6), dict(kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 1, 0, 1]), 19, "fd ort"),
]


@pytest.mark.parametrize("static", [True, False], ids=["fixed-size", "free-size"])
@pytest.mark.parametrize("case", AVERAGE_POOLS, ids=lambda c: str(c[1]))
def test_average_pool(case, static):
    x_shape, attrs, opset, checks = case
    if checks == "newer-fd":
        if not REFERENCE_CEIL_POOLS:
            pytest.skip("onnx's reference AveragePool is wrong with ceil_mode before onnx 1.18")
        checks = "fd"
    node, values = _case("AveragePool", x_shape, **attrs)
    if not static and "auto_pad" in attrs:
        with pytest.raises(NoGradientError, match="spatial size"):
            build_gradients(_model(node, values, "fd", opset, static)[0], ["X"])
        return
    checks = checks.split() if static else ["fd"]
    _check(node, values, checks, opset=opset, static=static, samples=values["X"].size)


@pytest.mark.parametrize("static", [True, False], ids=["fixed-size", "free-size"])
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3, 7), (1, 2, 3, 2, 3)])
def test_global_average_pool(x_shape, static):
    node, values = _case("GlobalAveragePool", x_shape)
    _check(node, values, ["fd", "ort"] if static else ["fd"], static=static)


@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3, 7), (1, 2, 3, 2, 3)])
def test_global_max_pool(x_shape):
    """onnx's reference ``GlobalMaxPool`` reduces the wrong axes but in 2-D: torch there."""
    node, values = _case("GlobalMaxPool", x_shape)

    def forward(t):
        return t["X"].amax(dim=tuple(range(2, t["X"].dim())), keepdim=True)

    _check(node, values, ["fd" if len(x_shape) == 4 else "torch"], forward, samples=x_shape[-1] * 6)


def test_global_max_pool_ties_go_to_the_first_maximum():
    node, values = _case("GlobalMaxPool", (2, 3, 3, 4))
    values["X"] = np.random.default_rng(5).integers(0, 3, (2, 3, 3, 4)).astype(np.float32)
    model, feeds, _ = _model(node, values, "torch")

    def forward(t):
        import torch.nn.functional as F

        return F.adaptive_max_pool2d(t["X"], 1)

    assert_matches_torch(model, ["X"], feeds, forward)


OPSETS = [
    ("Conv", (2, 3, 6, 5), (4, 3, 3, 3), dict(strides=[2, 1], pads=[1, 1, 1, 1]), True),
    (
        "ConvTranspose",
        (2, 3, 4, 3),
        (3, 2, 3, 3),
        dict(strides=[2, 2], output_padding=[1, 0]),
        True,
    ),
    ("AveragePool", (1, 2, 7, 6), None, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), False),
    ("GlobalAveragePool", (2, 3, 4, 5), None, {}, False),
    ("GlobalMaxPool", (2, 3, 4, 5), None, {}, False),
]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("case", OPSETS, ids=lambda c: c[0])
def test_opsets_13_and_21(case, opset):
    """The gradients in the forms of the oldest and newest opsets (``ReduceSum``'s axes,
    ``CastLike``), on inputs of free size."""
    op, x_shape, w_shape, attrs, bias = case
    node, values = _case(op, x_shape, w_shape, bias, **attrs)
    _check(node, values, ["fd"], opset=opset, static=False, samples=values["X"].size)


BATCH_FREE = [
    ("Conv", (3, 4, 6, 5), (6, 2, 3, 3), dict(strides=[2, 1], group=2, pads=[1, 0, 1, 0])),
    ("ConvTranspose", (3, 2, 4, 3), (2, 3, 3, 3), dict(strides=[2, 2], output_padding=[1, 1])),
    ("MaxPool", (3, 2, 7, 6), None, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", (3, 2, 7, 6), None, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", (3, 2, 4, 5), None, {}),
    ("GlobalMaxPool", (3, 2, 4, 5), None, {}),
]


@pytest.mark.parametrize("case", BATCH_FREE, ids=lambda c: c[0])
def test_batch_size_stays_free(case):
    """One gradient model, run on a batch of 3 and on its first image: the same input gradient
    for that image (the loss weights each output the same way in every image)."""
    op, x_shape, w_shape, attrs = case
    node, values = _case(op, x_shape, w_shape, **attrs)
    model, feeds, _ = _model(node, values, "fd")
    weights = model.graph.initializer
    first = next(t for t in weights if t.name == "loss_r0")
    first.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first)[:1], "loss_r0"))
    built = build_gradients(model, ["X"])
    name = built.gradients["X"]
    whole = run_on_runtime(built.model, feeds, [name])[name]
    alone = run_on_runtime(built.model, {"X": feeds["X"][:1]}, [name])[name]
    np.testing.assert_allclose(alone, whole[:1], rtol=1e-5, atol=1e-6)
