"""Gradients of the convolutions (helpers.portable.gradients.convolution), checked by finite
differences (``fd``), against 1.19.2's builder (``ort``) or torch (``torch``): see
:mod:`spatial_check`.

``torch`` stands in for ``fd`` where onnx 1.17's reference evaluator is wrong: ``Conv`` with
``auto_pad`` ``SAME_*`` or ``VALID`` and strides above one (its output size or pads), a
``ConvTranspose`` of several groups (it fails to reshape the weight: the input gradient of a
grouped ``Conv`` with strides above one is one), and a ``ConvTranspose`` with ``output_shape``
and no ``auto_pad``. 1.19.2 has no gradient for a ``ConvTranspose`` with ``auto_pad`` or
``output_shape`` that its training graph cannot rewrite, nor for a grouped 3-D ``Conv`` (the
training graph refuses it): finite differences only there.
"""

import pytest
from gradient_check import check_finite_differences, single_node_loss
from onnx import TensorProto, helper
from spatial_check import (
    check_at_opset,
    check_batch_size_stays_free,
    loss_model,
    node_case,
    run_checks,
    torch_pad,
)

from helpers.portable.gradients import NoGradientError, build_gradients


def torch_conv(strides, pads, dilations=None, group=1):
    """torch's ``Conv`` of the tensors ``X``, ``W`` and ``B`` (if any)."""
    import torch.nn.functional as F

    def forward(t):
        x = torch_pad(pads)(t["X"])
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
        full = torch_pad([0] * rank + list(extra))(full)
        crop = [slice(b, n - e) for b, e, n in zip(begin, end, full.shape[2:])]
        y = full[(slice(None), slice(None), *crop)]
        return y if "B" not in t else y + t["B"].reshape(1, -1, *[1] * rank)

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
    node, values = node_case("Conv", x_shape, w_shape, bias, **attrs)
    rank = len(x_shape) - 2
    strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    if attrs.get("auto_pad", "VALID") != "VALID":
        pads = _same_pads(x_shape[2:], w_shape[2:], strides, dilations, attrs["auto_pad"])
    forward = torch_conv(strides, pads, dilations, attrs.get("group", 1))
    run_checks(node, values, checks.split(), forward, static=rank != 1 or "auto_pad" in attrs)


@pytest.mark.parametrize("wanted", [["W"], ["X"], ["B"], ["X", "B"]])
def test_conv_computes_only_the_gradients_wanted(wanted):
    node, values = node_case("Conv", (2, 3, 6, 5), (4, 3, 3, 3), True, strides=[2, 1])
    model, feeds, _ = loss_model(node, values, "fd")
    built = build_gradients(model, wanted)
    ops = {n.op_type for n in built.model.graph.node}
    assert ("ConvTranspose" in ops) == ("X" in wanted)
    assert ("MatMul" in ops) == ("W" in wanted)  # the windows of X times dY
    check_finite_differences(model, wanted, feeds, samples=3)


def test_conv_same_padding_on_a_free_size_is_refused():
    node, values = node_case("Conv", (2, 3, 7), (4, 3, 3), auto_pad="SAME_UPPER", strides=[2])
    model = loss_model(node, values, "fd", static=False)[0]
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
    node, values = node_case("ConvTranspose", x_shape, w_shape, bias, **attrs)
    rank = len(x_shape) - 2
    begin, end = _transposed_pads(x_shape[2:], w_shape[2:], attrs)
    extra = attrs.get("output_padding", [0] * rank)
    forward = torch_conv_transpose(
        attrs.get("strides", 1), begin, end, extra, attrs.get("group", 1), attrs.get("dilations", 1)
    )
    run_checks(node, values, checks.split(), forward)


def test_conv_transpose_output_shape_on_a_free_size_is_refused():
    node, values = node_case("ConvTranspose", (2, 3, 4), (3, 2, 3), strides=[2], output_shape=[9])
    model = loss_model(node, values, "fd", static=False)[0]
    with pytest.raises(NoGradientError, match="output_shape"):
        build_gradients(model, ["W"])


@pytest.mark.parametrize("attrs", [dict(auto_pad="SAME_UPPER"), dict(output_shape=[10])])
def test_conv_transpose_longer_than_its_full_output_is_refused(attrs):
    """onnxruntime and onnx's reference put the extra zeros at different ends."""
    node, values = node_case("ConvTranspose", (2, 3, 3), (3, 2, 2), strides=[3], **attrs)
    model = single_node_loss(node, {"X": values["X"]}, {"W": values["W"]}, {"Y": (2, 2, 9)})[0]
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 3]))
    with pytest.raises(NoGradientError, match="runtimes disagree"):
        build_gradients(model, ["W"])


OPSETS = [
    ("Conv", (2, 3, 6, 5), (4, 3, 3, 3), dict(strides=[2, 1], pads=[1, 1, 1, 1]), True),
    (
        "ConvTranspose",
        (2, 3, 4, 3),
        (3, 2, 3, 3),
        dict(strides=[2, 2], output_padding=[1, 0]),
        True,
    ),
]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("case", OPSETS, ids=lambda c: c[0])
def test_opsets_13_and_21(case, opset):
    """The gradients in the forms of the oldest and newest opsets, on inputs of free size."""
    check_at_opset(case, opset)


BATCH_FREE = [
    ("Conv", (3, 4, 6, 5), (6, 2, 3, 3), dict(strides=[2, 1], group=2, pads=[1, 0, 1, 0])),
    ("ConvTranspose", (3, 2, 4, 3), (2, 3, 3, 3), dict(strides=[2, 2], output_padding=[1, 1])),
]


@pytest.mark.parametrize("case", BATCH_FREE, ids=lambda c: c[0])
def test_batch_size_stays_free(case):
    check_batch_size_stays_free(case)
