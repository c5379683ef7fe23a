"""ConvGrad lowered to standard operators gives 1.19.2's ConvGrad kernel's gradients.

One-node models over a grid of attributes: 1-D, 2-D and 3-D, strides, asymmetric pads,
dilations, plain, grouped and depthwise convolutions, batch 1 and 3, odd sizes, every subset
of the outputs. Where the kernel is wrong (``auto_pad=SAME_UPPER``: it ignores the padding),
torch's autograd is the reference.
"""

import numpy as np
import pytest
import torch
from lowering_check import RTOL, assert_lowered_equal, model_of, run_outputs
from onnx import helper

from helpers.portable.lowering import LoweringContext, lower_model
from helpers.portable.lowering.convolution import applicable_formulations, conv_grad_nodes

#: Each lowering is compared with the kernel it replaces, which only onnxruntime-training
#: 1.19.2 runs: skipped where that package is missing.
pytestmark = pytest.mark.training_package

#: (batch, in channels, out channels, spatial, kernel, strides, pads, dilations, groups)
CASES = [
    (3, 4, 6, (7, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 4, 6, (7, 9), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (3, 4, 6, (8, 9), (3, 2), (2, 3), (1, 0, 2, 1), (2, 1), 2),
    (3, 6, 6, (9, 7), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),
    (2, 6, 12, (9, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),
    (3, 3, 8, (11, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    (3, 6, 9, (5, 6), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (3, 6, 9, (5, 6), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 3),
    (2, 4, 4, (6, 10), (1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 4),
    (3, 4, 6, (13,), (3,), (1,), (0, 0), (1,), 1),
    (3, 4, 6, (13,), (5,), (1,), (2, 2), (1,), 1),
    (1, 6, 6, (12,), (3,), (2,), (1, 0), (2,), 6),
    (3, 6, 4, (11,), (2,), (3,), (1, 2), (1,), 2),
    (3, 6, 12, (11,), (1,), (1,), (0, 0), (1,), 1),
    (2, 4, 6, (5, 6, 7), (3, 2, 3), (1, 2, 1), (1, 0, 1, 1, 1, 0), (1, 1, 2), 2),
]

OUTPUTS = [
    ("dX", "dW", "dB"),
    ("dX", "dW"),
    ("", "dW", "dB"),
    ("dX",),
    ("", "dW"),
    ("dX", "", "dB"),
]


def conv_grad_case(case, outputs=("dX", "dW", "dB"), **extra):
    """The model of one ``ConvGrad`` and its random inputs."""
    n, c, m, spatial, kernel, strides, pads, dilations, group = case
    rank = len(spatial)
    rng = np.random.default_rng(sum(spatial) + n + group)
    x = rng.standard_normal((n, c, *spatial)).astype(np.float32)
    w = rng.standard_normal((m, c // group, *kernel)).astype(np.float32)
    out = [
        (spatial[i] + pads[i] + pads[i + rank] - dilations[i] * (kernel[i] - 1) - 1) // strides[i]
        + 1
        for i in range(rank)
    ]
    d_y = rng.standard_normal((n, m, *out)).astype(np.float32)
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations))
    attrs.update(group=group, **(extra or {"pads": list(pads)}))
    node = helper.make_node(
        "ConvGrad", ["dY", "X", "W"], list(outputs), domain="com.microsoft", **attrs
    )
    model = model_of([node], {"dY": None, "X": None, "W": None}, {o: None for o in outputs if o})
    return model, {"dY": d_y, "X": x, "W": w}


@pytest.mark.parametrize("case", CASES)
def test_conv_grad_equals_kernel(case):
    assert_lowered_equal(*conv_grad_case(case))


@pytest.mark.parametrize("outputs", OUTPUTS)
@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[6], CASES[12]])
def test_conv_grad_output_subsets(case, outputs):
    model, feeds = conv_grad_case(case, outputs)
    lowered = lower_model(model)
    produced = {o for n in lowered.graph.node for o in n.output}
    assert produced >= {o for o in outputs if o}
    assert_lowered_equal(model, feeds)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dims", [1, 2])
def test_same_upper_padding_gives_torch_gradients(dims):
    """1.19.2's kernel ignores auto_pad; the lowering pads as Conv does, as torch's 'same'."""
    spatial, kernel, dilations = (9, 8)[:dims], (4, 3)[:dims], (1, 2)[:dims]
    case = (3, 4, 6, spatial, kernel, (1,) * dims, (0,) * 2 * dims, dilations, 2)
    model, feeds = conv_grad_case(case, auto_pad="SAME_UPPER")
    feeds["dY"] = np.random.default_rng(1).standard_normal((3, 6, *spatial)).astype(np.float32)
    actual = run_outputs(lower_model(model), feeds)
    x = torch.from_numpy(feeds["X"]).double().requires_grad_()
    w = torch.from_numpy(feeds["W"]).double().requires_grad_()
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d)[dims - 1]
    y = conv(x, w, None, 1, "same", dilations, 2)
    y.backward(torch.from_numpy(feeds["dY"]).double())
    expected = [x.grad.numpy(), w.grad.numpy(), feeds["dY"].sum(axis=(0, *range(2, 2 + dims)))]
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * np.abs(e).max())
    kernel_dw = run_outputs(model, feeds)[1]
    assert not np.allclose(kernel_dw, expected[1], rtol=1e-3, atol=1e-3 * np.abs(expected[1]).max())


def test_same_padding_with_strides_is_refused_by_name():
    case = (1, 2, 2, (8, 8), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1)
    model, _ = conv_grad_case(case, auto_pad="SAME_LOWER")
    with pytest.raises(ValueError, match="auto_pad=SAME_LOWER.*explicit pads"):
        lower_model(model)


def _formulation_pairs():
    for case in CASES:
        node = conv_grad_case(case)[0].graph.node[0]
        inputs, weights = applicable_formulations(node)
        for i, w in zip(inputs + inputs[-1:] * len(weights), weights + weights[-1:] * len(inputs)):
            yield pytest.param(case, i, w, id=f"{CASES.index(case)}-{i}-{w}")


@pytest.mark.parametrize(("case", "inputs", "weights"), list(_formulation_pairs()))
def test_every_formulation_equals_kernel(case, inputs, weights):
    """The formulations the benchmark compares are all exact where they apply."""
    model, feeds = conv_grad_case(case)
    ctx = LoweringContext(17, graph=model.graph)
    nodes = conv_grad_nodes(model.graph.node[0], ctx, inputs, weights)
    lowered = model_of(nodes, {n: None for n in feeds}, {o: None for o in ("dX", "dW", "dB")})
    lowered.graph.initializer.extend(ctx.initializers)
    expected, actual = run_outputs(model, feeds), run_outputs(lowered, feeds)
    for e, a in zip(expected, actual):
        assert float(np.abs(a - e).max()) <= RTOL * float(np.abs(e).max())
