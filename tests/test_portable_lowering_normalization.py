"""LayerNormalizationGrad and SimplifiedLayerNormalizationGrad lowered to standard operators
give 1.19.2's kernels' gradients.

Each model computes the forward normalization (its mean and inverse standard deviation, which
the gradient reads) and the gradient, over axes (negative and positive), ranks 2 to 4, batch 1
and more, and every subset of the outputs.
"""

import numpy as np
import pytest
import torch
from lowering_check import RTOL, assert_lowered_equal, model_of, run_outputs
from onnx import helper

from helpers.portable.lowering import lower_model

#: Each lowering is compared with the kernel it replaces, which only onnxruntime-training
#: 1.19.2 runs: skipped where that package is missing.
pytestmark = pytest.mark.training_package

#: (input shape, axis)
CASES = [
    ((5, 8), -1),
    ((1, 8), 1),
    ((3, 4, 5), -1),
    ((3, 4, 5), -2),
    ((3, 4, 5), 1),
    ((2, 3, 4, 5), 2),
    ((2, 3, 4, 5), -3),
    ((2, 3, 7, 1), -2),
]

OUTPUTS = [("dX", "dS", "dB"), ("dX",), ("", "dS", "dB"), ("", "", "dB"), ("dX", "dS")]


def layer_norm_case(shape, axis, outputs=("dX", "dS", "dB"), simplified=False):
    """A model of the normalization and its gradient, and its random inputs."""
    rng = np.random.default_rng(len(shape) * 10 + axis)
    normalized = shape[axis:]
    feeds = {
        "X": (rng.standard_normal(shape) * 3 + 1).astype(np.float32),
        "S": rng.standard_normal(normalized).astype(np.float32),
        "dY": rng.standard_normal(shape).astype(np.float32),
    }
    attrs = dict(axis=axis, epsilon=1e-5)
    if simplified:
        # onnxruntime's SimplifiedLayerNormalization is no standard operator: its inverse root
        # mean square is computed here
        rows = feeds["X"].reshape(int(np.prod(shape[:axis])), -1).astype(np.float64)
        inv = 1 / np.sqrt((rows**2).mean(axis=1) + 1e-5)
        feeds["inv"] = inv.reshape(shape[:axis] + (1,) * len(normalized)).astype(np.float32)
        nodes, grad_inputs, outputs = [], ["dY", "X", "S", "inv"], outputs[:2]
    else:
        feeds["B"] = rng.standard_normal(normalized).astype(np.float32)
        nodes = [
            helper.make_node("LayerNormalization", ["X", "S", "B"], ["Y", "mean", "inv"], **attrs)
        ]
        grad_inputs = ["dY", "X", "S", "mean", "inv"]
    op = "SimplifiedLayerNormalizationGrad" if simplified else "LayerNormalizationGrad"
    width = 2 if simplified else 3
    grad_outputs = list(outputs) + [""] * (width - len(outputs))
    nodes.append(helper.make_node(op, grad_inputs, grad_outputs, domain="com.microsoft", **attrs))
    model = model_of(nodes, {n: None for n in feeds}, {o: None for o in outputs if o})
    return model, feeds


@pytest.mark.parametrize(("shape", "axis"), CASES)
def test_layer_norm_grad_equals_kernel(shape, axis):
    assert_lowered_equal(*layer_norm_case(shape, axis))


@pytest.mark.parametrize("outputs", OUTPUTS)
def test_layer_norm_grad_output_subsets(outputs):
    """The kernel needs all three outputs; the lowering computes the ones asked for."""
    expected = dict(zip(("dX", "dS", "dB"), run_outputs(*layer_norm_case((3, 4, 5), -1))))
    model, feeds = layer_norm_case((3, 4, 5), -1)
    grad = model.graph.node[-1]
    for i, name in enumerate(grad.output):
        grad.output[i] = name if name in outputs else ""
    kept = [o for o in model.graph.output if o.name in outputs]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    lowered = lower_model(model)
    assert {o for n in lowered.graph.node for o in n.output} & {"dX", "dS", "dB"} == {
        o for o in outputs if o
    }
    for output, actual in zip(kept, run_outputs(lowered, feeds)):
        np.testing.assert_allclose(actual, expected[output.name], rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize(("shape", "axis"), CASES[:4])
def test_simplified_layer_norm_grad_equals_kernel(shape, axis):
    assert_lowered_equal(*layer_norm_case(shape, axis, simplified=True))


def test_normalized_size_one_gives_torch_gradients():
    """1.19.2's kernel stops on a normalized size of one; the lowering gives torch's values."""
    model, feeds = layer_norm_case((4, 1), -1)
    d_x, d_s, d_b = run_outputs(lower_model(model), feeds)
    x = torch.from_numpy(feeds["X"]).double().requires_grad_()
    s = torch.from_numpy(feeds["S"]).double().requires_grad_()
    b = torch.from_numpy(feeds["B"]).double().requires_grad_()
    torch.nn.functional.layer_norm(x, (1,), s, b, 1e-5).backward(
        torch.from_numpy(feeds["dY"]).double()
    )
    for actual, expected in [(d_x, x.grad), (d_s, s.grad), (d_b, b.grad)]:
        np.testing.assert_allclose(actual, expected.numpy(), rtol=1e-6, atol=1e-6)
