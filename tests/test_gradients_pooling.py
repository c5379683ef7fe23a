"""Gradients of the poolings (helpers.portable.gradients.pooling), checked by finite differences
(``fd``), against 1.19.2's builder (``ort``) or torch (``torch``): see :mod:`spatial_check`.

``torch`` stands in for ``fd`` where onnx 1.17's reference evaluator is wrong: a ``MaxPool`` of
strides and dilations one (its ``Indices`` are positions in the window, without the image and the
channel, and its output is transposed with uneven pads) and a ``GlobalMaxPool`` but in 2-D (it
reduces the wrong axes). ``AveragePool`` with ``ceil_mode`` and a kernel shorter than the stride
is wrong there too (fixed in onnx 1.18): that case runs on newer onnx only. 1.19.2 has no
gradient for ``GlobalMaxPool``, nor for an ``AveragePool`` its training graph rewrites into a
grouped 3-D ``Conv`` (refused there); with ``ceil_mode`` and a window that starts in the padding
or runs past it, 1.19.2 computes other windows than torch: finite differences only there.
"""

import numpy as np
import pytest
from spatial_check import (
    REFERENCE_CEIL_POOLS,
    assert_matches_torch,
    check_at_opset,
    check_batch_size_stays_free,
    loss_model,
    node_case,
    run_checks,
    torch_pad,
)

from helpers.portable.gradients import NoGradientError, build_gradients


def torch_max_pool(kernel, strides, pads):
    """torch's ``MaxPool`` of ``X`` (pads of minus infinity)."""
    import torch.nn.functional as F

    def forward(t):
        x = torch_pad(pads, -np.inf)(t["X"])
        return getattr(F, f"max_pool{x.dim() - 2}d")(x, kernel, strides)

    return forward


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
    node, values = node_case("MaxPool", x_shape, outputs=outputs, **attrs)
    rank = len(x_shape) - 2
    forward = torch_max_pool(
        attrs["kernel_shape"], attrs.get("strides", 1), attrs.get("pads", [0] * 2 * rank)
    )
    run_checks(node, values, checks.split(), forward, opset, samples=values["X"].size)


def test_max_pool_reuses_its_indices_and_ties_go_to_the_first_maximum():
    node, values = node_case(
        "MaxPool", (2, 2, 5, 5), outputs=2, kernel_shape=[3, 3], pads=[1, 1, 1, 1]
    )
    values["X"] = np.random.default_rng(3).integers(-2, 3, (2, 2, 5, 5)).astype(np.float32)
    model, feeds, _ = loss_model(node, values, "torch")
    built = build_gradients(model, ["X"])
    assert [n.op_type for n in built.model.graph.node].count("MaxPool") == 1
    assert_matches_torch(model, ["X"], feeds, torch_max_pool([3, 3], 1, [1, 1, 1, 1]))
    run_checks(node, values, ["ort"])


def test_overlapping_max_pool_before_opset_16_is_refused():
    node, values = node_case("MaxPool", (2, 3, 9), kernel_shape=[3], strides=[2])
    model = loss_model(node, values, "fd", opset=15)[0]
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
    node, values = node_case("AveragePool", x_shape, **attrs)
    if not static and "auto_pad" in attrs:
        with pytest.raises(NoGradientError, match="spatial size"):
            build_gradients(loss_model(node, values, "fd", opset, static)[0], ["X"])
        return
    checks = checks.split() if static else ["fd"]
    run_checks(node, values, checks, opset=opset, static=static, samples=values["X"].size)


@pytest.mark.parametrize("static", [True, False], ids=["fixed-size", "free-size"])
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3, 7), (1, 2, 3, 2, 3)])
def test_global_average_pool(x_shape, static):
    node, values = node_case("GlobalAveragePool", x_shape)
    run_checks(node, values, ["fd", "ort"] if static else ["fd"], static=static)


@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3, 7), (1, 2, 3, 2, 3)])
def test_global_max_pool(x_shape):
    """onnx's reference ``GlobalMaxPool`` reduces the wrong axes but in 2-D: torch there."""
    node, values = node_case("GlobalMaxPool", x_shape)

    def forward(t):
        return t["X"].amax(dim=tuple(range(2, t["X"].dim())), keepdim=True)

    run_checks(
        node, values, ["fd" if len(x_shape) == 4 else "torch"], forward, samples=x_shape[-1] * 6
    )


def test_global_max_pool_ties_go_to_the_first_maximum():
    node, values = node_case("GlobalMaxPool", (2, 3, 3, 4))
    values["X"] = np.random.default_rng(5).integers(0, 3, (2, 3, 3, 4)).astype(np.float32)
    model, feeds, _ = loss_model(node, values, "torch")

    def forward(t):
        import torch.nn.functional as F

        return F.adaptive_max_pool2d(t["X"], 1)

    assert_matches_torch(model, ["X"], feeds, forward)


OPSETS = [
    ("AveragePool", (1, 2, 7, 6), None, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), False),
    ("GlobalAveragePool", (2, 3, 4, 5), None, {}, False),
    ("GlobalMaxPool", (2, 3, 4, 5), None, {}, False),
]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("case", OPSETS, ids=lambda c: c[0])
def test_opsets_13_and_21(case, opset):
    """The gradients in the forms of the oldest and newest opsets, on inputs of free size."""
    check_at_opset(case, opset)


BATCH_FREE = [
    ("MaxPool", (3, 2, 7, 6), None, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", (3, 2, 7, 6), None, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("GlobalAveragePool", (3, 2, 4, 5), None, {}),
    ("GlobalMaxPool", (3, 2, 4, 5), None, {}),
]


@pytest.mark.parametrize("case", BATCH_FREE, ids=lambda c: c[0])
def test_batch_size_stays_free(case):
    check_batch_size_stays_free(case)
