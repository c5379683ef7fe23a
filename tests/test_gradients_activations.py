"""Gradients of the activations and of the elementary functions
(helpers.portable.gradients.activations, .elementary).

Every operator and option is checked against float64 central differences run by onnx's reference
evaluator, at inputs away from its kinks, and against 1.19.2's gradient builder where it has one.
1.19.2 has none for ``Softsign``, ``ThresholdedRelu``, ``Shrink``, ``Mish`` and the
trigonometric functions but ``Sin`` and ``Cos``; its ``Elu``, ``Celu``, ``Selu``, ``Softplus``,
``HardSigmoid``, ``HardSwish`` and ``PRelu`` are those of the training graph's rewrites
(:mod:`helpers.core.layers.activations`). Two of its gradients are wrong, finite differences only
there: ``LeakyRelu`` with a negative ``alpha`` (it tests the output's sign) and ``Gelu`` with
``approximate="tanh"`` (it writes the exact ``GeluGrad``).

At the kinks, the gradients (run in float64 by the reference evaluator and in float32 by
onnxruntime) are compared with torch's float64 autograd, and so are those of the models torch
exports for its activation modules at opset 17. ``PRelu``'s slope is broadcast in every way
torch's modules use it.
"""

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from elementwise_check import (
    assert_torch_gradients,
    check_unary,
    check_valid_in_float64,
    draw,
    node_model,
    rng,
    unary_cases,
)
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    gradients_float64,
    loss_without_sum,
)
from onnx import TensorProto, helper, numpy_helper

from helpers import export_for_training
from helpers.core.layers.activations import activations_with_gradients

#: ``(op_type, attributes, opset, input range, compared with 1.19.2)``.
UNARY = [
    ("Relu", {}, 17, (-2, 2), True),
    ("LeakyRelu", {}, 13, (-2, 2), True),
    ("LeakyRelu", {"alpha": 0.2}, 16, (-2, 2), True),
    ("LeakyRelu", {"alpha": -0.3}, 17, (-2, 2), False),
    ("PRelu", {}, 17, (-2, 2), True),
    ("Elu", {}, 17, (-3, 2), True),
    ("Elu", {"alpha": 0.5}, 13, (-3, 2), True),
    ("Celu", {}, 17, (-3, 2), True),
    ("Celu", {"alpha": 0.7}, 13, (-3, 2), True),
    ("Selu", {}, 17, (-3, 2), True),
    ("Selu", {"alpha": 1.5, "gamma": 0.8}, 13, (-3, 2), True),
    ("Softplus", {}, 17, (-4, 4), True),
    ("Softsign", {}, 17, (-3, 3), False),
    ("HardSigmoid", {}, 17, (-4, 4), True),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, 13, (-4, 4), True),
    ("HardSwish", {}, 14, (-4, 4), True),
    ("ThresholdedRelu", {}, 17, (-2, 3), False),
    ("ThresholdedRelu", {"alpha": 0.3}, 13, (-2, 3), False),
    ("Shrink", {}, 17, (-2, 2), False),
    ("Shrink", {"bias": 0.2, "lambd": 0.7}, 13, (-2, 2), False),
    ("Sigmoid", {}, 13, (-4, 4), True),
    ("Tanh", {}, 17, (-3, 3), True),
    ("Gelu", {}, 20, (-3, 3), True),
    ("Gelu", {"approximate": "none"}, 21, (-3, 3), True),
    ("Gelu", {"approximate": "tanh"}, 20, (-3, 3), False),
    ("Mish", {}, 18, (-4, 4), False),
    ("Sin", {}, 17, (-3, 3), True),
    ("Cos", {}, 13, (-3, 3), True),
    ("Tan", {}, 17, (-1.2, 1.2), False),
    ("Asin", {}, 17, (-0.9, 0.9), False),
    ("Acos", {}, 17, (-0.9, 0.9), False),
    ("Atan", {}, 17, (-3, 3), False),
    ("Sinh", {}, 17, (-2, 2), False),
    ("Cosh", {}, 17, (-2, 2), False),
    ("Asinh", {}, 17, (-3, 3), False),
    ("Acosh", {}, 17, (1.1, 3), False),
    ("Atanh", {}, 17, (-0.9, 0.9), False),
    ("Sqrt", {}, 17, (0.2, 3), True),
    ("Exp", {}, 17, (-2, 2), True),
    ("Log", {}, 13, (0.2, 3), True),
    ("Reciprocal", {}, 17, (0.3, 2), True),
    ("Abs", {}, 17, (-2, 2), True),
    ("Erf", {}, 17, (-2, 2), True),
]


@pytest.mark.parametrize("op_type, attributes, opset, bounds, compare", UNARY)
def test_unary(op_type, attributes, opset, bounds, compare):
    check_unary(op_type, attributes, opset, bounds, compare)


@pytest.mark.parametrize(
    "x_shape, slope_shape, x_kind",
    [
        ((2, 3, 4), (4,), "w"),
        ((2, 3, 4), (3, 1), "w"),
        ((2, 3, 4), (1,), "w"),
        ((2, 3, 4), (), "w"),
        ((2, 3, 4), (2, 3, 4), "w"),
        ((2, 3, 4, 5), (3, 1, 1), "x"),  # torch's PReLU(3) on images, a free batch
    ],
)
def test_prelu_slope_broadcast(x_shape, slope_shape, x_kind):
    """The slope's gradient is summed to the slope's shape."""
    generator = rng("PRelu", x_shape, slope_shape)
    x = draw(generator, x_shape, -2, 2)
    slope = generator.uniform(-0.5, 0.5, slope_shape).astype(np.float32)
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    weights = {"slope": slope, **({"x": x} if x_kind == "w" else {})}
    model, feeds = node_model(node, weights, {} if x_kind == "w" else {"x": x})
    check_finite_differences(model, ["x", "slope"], feeds)
    check_against_training_package(loss_without_sum(model), list(weights), feeds)


# kinks against torch ----------------------------------------------------------------------------

ALPHA_32 = float(np.float32(0.7))
#: ``(op_type, attributes, opset, inputs, torch's function)``: the inputs hit the kinks exactly.
KINK_CASES = [
    ("Relu", {}, 17, [0.0, -1.0, 1.0], F.relu),
    ("LeakyRelu", {"alpha": 0.25}, 17, [0.0, -1.0, 1.0], lambda x: F.leaky_relu(x, 0.25)),
    ("LeakyRelu", {"alpha": -0.25}, 17, [0.0, -1.0, 1.0], lambda x: F.leaky_relu(x, -0.25)),
    ("Elu", {"alpha": 0.5}, 17, [0.0, -1.0, 1.0], lambda x: F.elu(x, 0.5)),
    ("Elu", {"alpha": -0.5}, 17, [0.0, -1.0, 1.0], lambda x: F.elu(x, -0.5)),
    ("Celu", {"alpha": 0.7}, 17, [0.0, -1.0, 1.0], lambda x: F.celu(x, ALPHA_32)),
    ("Selu", {}, 17, [0.0, -1.0, 1.0], F.selu),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, 17, [-3.0, 3.0, 0.0, -4.0, 4.0], F.hardsigmoid),
    ("HardSwish", {}, 17, [-3.0, 3.0, 0.0, -4.0, 4.0], F.hardswish),
    ("ThresholdedRelu", {"alpha": 1.0}, 17, [1.0, 0.5, 2.0], lambda x: F.threshold(x, 1.0, 0.0)),
    ("Shrink", {"bias": 0.5}, 17, [0.5, -0.5, 0.0, 1.0, -1.0], lambda x: F.softshrink(x, 0.5)),
    ("Shrink", {}, 17, [0.5, -0.5, 0.0, 1.0, -1.0], lambda x: F.hardshrink(x, 0.5)),
    ("Abs", {}, 17, [0.0, -1.0, 1.0], torch.abs),
    ("Softplus", {}, 17, [0.0, 30.0, -30.0], F.softplus),
    ("Mish", {}, 18, [0.0, 50.0, -50.0], F.mish),
    ("Gelu", {}, 20, [0.0, 1.0, -1.0], F.gelu),
    (
        "Gelu",
        {"approximate": "tanh"},
        20,
        [0.0, 1.0, -1.0],
        lambda x: F.gelu(x, approximate="tanh"),
    ),
]


@pytest.mark.parametrize(
    "op_type, attributes, opset, values, function",
    KINK_CASES,
    ids=[f"{c[0]}{c[1]}" for c in KINK_CASES],
)
def test_kinks_against_torch(op_type, attributes, opset, values, function):
    w = np.array(values, np.float32)
    node = helper.make_node(op_type, ["w"], ["y"], **attributes)
    model, feeds = node_model(node, {"w": w}, opset=opset)
    assert_torch_gradients(model, ["w"], feeds, lambda v: function(v["w"]))


def test_prelu_at_zero_against_torch():
    x = np.array([[0.0, -1.0, 1.0], [0.0, 2.0, -2.0]], np.float32)
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    model, feeds = node_model(node, {"x": x, "slope": np.array([0.25, -0.5, 0.1], np.float32)})
    assert_torch_gradients(model, ["x", "slope"], feeds, lambda v: _prelu(v["x"], v["slope"]))


def _prelu(x, slope):
    return torch.where(x > 0, x, x * slope)  # F.prelu wants the slope on dimension 1


# torch's exports ---------------------------------------------------------------------------------

TORCH_MODULES = [
    ("GELU", lambda: torch.nn.GELU(), [0.0, 1.0, -2.0]),
    ("GELU_tanh", lambda: torch.nn.GELU(approximate="tanh"), [0.0, 1.0, -2.0]),
    ("SiLU", lambda: torch.nn.SiLU(), [0.0, 1.0, -2.0]),
    ("Mish", lambda: torch.nn.Mish(), [0.0, 1.0, -2.0]),
    ("Hardswish", lambda: torch.nn.Hardswish(), [-3.0, 3.0, 0.0]),
    ("Hardsigmoid", lambda: torch.nn.Hardsigmoid(), [-3.0, 3.0, 0.0]),
    ("ELU", lambda: torch.nn.ELU(0.5), [0.0, 1.0, -2.0]),
    ("CELU", lambda: torch.nn.CELU(0.7), [0.0, 1.0, -2.0]),
    ("SELU", lambda: torch.nn.SELU(), [0.0, 1.0, -2.0]),
    ("Softplus", lambda: torch.nn.Softplus(), [0.0, 25.0, -2.0]),
    ("Softplus_2_5", lambda: torch.nn.Softplus(2.0, 5.0), [2.5, 2.6, 0.0]),
    ("LeakyReLU", lambda: torch.nn.LeakyReLU(0.2), [0.0, 1.0, -2.0]),
    ("PReLU", lambda: torch.nn.PReLU(3, init=0.3), [0.0, 1.0, -2.0]),
    ("Softsign", lambda: torch.nn.Softsign(), [0.0, 1.0, -2.0]),
    ("ReLU6", lambda: torch.nn.ReLU6(), [0.0, 6.0, 7.0]),
]


def _with_loss(model, r):
    """``model`` whose output ``y`` is reduced to ``loss = sum(y * loss_r0)``."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.initializer.append(numpy_helper.from_array(r, "loss_r0"))
    copy.graph.node.extend(
        [
            helper.make_node("Mul", ["y", "loss_r0"], ["loss_p0"]),
            helper.make_node("ReduceSum", ["loss_p0"], ["loss"], keepdims=0),
        ]
    )
    del copy.graph.output[:]
    copy.graph.output.append(helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    return copy


@pytest.mark.parametrize("name, make, kinks", TORCH_MODULES, ids=[m[0] for m in TORCH_MODULES])
def test_torch_exports(name, make, kinks):
    """The opset-17 export of each activation module, on inputs its kinks included: the input's
    (and ``PReLU``'s slope's) gradients equal torch's. ``ReLU6``'s ``Clip`` is the training
    graph's rewrite of it (its gradient is 0 at the bounds, not ``clamp``'s 1)."""
    generator = rng("export", name)
    module = make()
    x = np.concatenate([np.array(kinks, np.float32)[None], draw(generator, (3, 3), -3, 3)])
    model = export_for_training(module, torch.from_numpy(x))
    if name == "ReLU6":
        model = activations_with_gradients(model)
    r = generator.standard_normal(x.shape).astype(np.float32)
    model = _with_loss(model, r)
    weights = [t.name for t in model.graph.initializer if t.name != "loss_r0"]
    ours = gradients_float64(model, ["x", *weights], {"x": x})
    module = module.double()
    values = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = (module(values) * torch.from_numpy(r.astype(np.float64))).sum()
    theirs = torch.autograd.grad(loss, [values, *module.parameters()])
    for mine, torch_value in zip(ours.values(), theirs):
        np.testing.assert_allclose(mine, torch_value.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opset", [13, 21])
def test_every_operator_is_valid_at_the_opsets_in_float64(opset):
    """The gradients of every operator, built on a float64 model, pass onnx's full check at
    opsets 13 and 21 (from the operator's own opset where it is later)."""
    check_valid_in_float64(unary_cases(UNARY, opset))
