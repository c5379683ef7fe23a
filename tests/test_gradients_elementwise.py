"""Gradients of the elementwise operators (helpers.portable.gradients.activations, .arithmetic).

Every operator and option is checked against float64 central differences run by onnx's reference
evaluator, at inputs away from its kinks, and against 1.19.2's gradient builder where it has one.
1.19.2 has none for ``Sum``, ``Mean``, ``Mod``, ``Softsign``, ``ThresholdedRelu``, ``Shrink``,
``Mish``, the trigonometric functions but ``Sin`` and ``Cos``, ``Sign``, ``Floor``, ``Ceil`` and
``Round``, nor for a ``Pow``'s exponent; its ``Elu``, ``Celu``, ``Selu``, ``Softplus``,
``HardSigmoid``, ``HardSwish`` and ``PRelu`` are those of the training graph's rewrites
(:mod:`helpers.core.layers.activations`). Two of its gradients are wrong, finite differences only
there: ``LeakyRelu`` with a negative ``alpha`` (it tests the output's sign) and ``Gelu`` with
``approximate="tanh"`` (it writes the exact ``GeluGrad``).

At the kinks, the gradients (run in float64 by the reference evaluator and in float32 by
onnxruntime) are compared with torch's float64 autograd, and so are those of the models torch
exports for its activation modules at opset 17. Broadcasting covers a scalar, a row, a column,
both operands broadcast, a rank difference, an operand with a free batch dimension, and
operands whose dimensions are all unknown (the reduction found at run time).
"""

import zlib

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    loss_without_sum,
    run_on_runtime,
    single_node_loss,
    to_float64,
)
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers import export_for_training
from helpers.core.layers.activations import activations_with_gradients
from helpers.portable.gradients import NoGradientError, build_gradients

RNG_SEED = 2024
#: The points the drawn inputs keep away from (kinks, steps, thresholds of the cases).
KINKS = np.array(sorted({k / 2 for k in range(-8, 9)} | {-0.7, -0.3, 0.3, 0.7}))


def _rng(*key):
    """A generator seeded by the test's seed and ``key`` (the case)."""
    return np.random.default_rng([RNG_SEED, zlib.crc32(repr(key).encode())])


def _draw(rng, shape, low, high, gap=0.02):
    """Uniform values in ``[low, high)``, each at least ``gap`` from every point of KINKS."""
    values = rng.uniform(low, high, shape)
    near = np.abs(values[..., None] - KINKS).min(axis=-1) < gap
    return np.where(near, values + 2.5 * gap, values).astype(np.float32)


def _model(node, weights, inputs=None, opset=17, extra_nodes=(), seed=0):
    """``single_node_loss`` of ``node``, whose output ``y`` has the broadcast shape of the
    arrays given."""
    inputs = dict(inputs or {})
    shape = np.broadcast_shapes(*[v.shape for v in [*weights.values(), *inputs.values()]])
    if node.op_type == "Gelu" and not inputs:  # the reference evaluator expands Gelu's function
        inputs["unused"] = np.zeros(1, np.float32)  # only in a graph with inputs
    return single_node_loss(node, inputs, weights, {"y": shape}, seed, opset, extra_nodes)


def _gradients64(model, wrt, feeds):
    """The gradients built on ``model``, run in float64 by the reference evaluator."""
    built = build_gradients(model, list(wrt))
    run = ReferenceEvaluator(to_float64(built.model))
    feeds = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    return dict(zip(wrt, run.run([built.gradients[n] for n in wrt], feeds)))


def _gradients32(model, wrt, feeds):
    """The gradients built on ``model``, run in float32 by onnxruntime."""
    built = build_gradients(model, list(wrt))
    names = [built.gradients[n] for n in wrt]
    values = run_on_runtime(built.model, feeds, names)
    return {n: values[g] for n, g in zip(wrt, names)}


def _torch_gradients(model, wrt, feeds, forward):
    """torch's float64 gradients of ``sum(forward(**values) * loss_r0)``, ``values`` the
    model's initializers and ``feeds``."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in {**values, **feeds}.items()}
    for name in wrt:
        values[name].requires_grad_(True)
    loss = (forward(values) * values["loss_r0"]).sum()
    return dict(zip(wrt, (g.numpy() for g in torch.autograd.grad(loss, [values[n] for n in wrt]))))


def _assert_torch_gradients(model, wrt, feeds, forward, reference=True):
    """Ours in float64 (by the reference evaluator, unless ``reference`` is false) and in float32
    (by onnxruntime) equal torch's float64."""
    theirs = _torch_gradients(model, wrt, feeds, forward)
    runs = [_gradients32(model, wrt, feeds)]
    if reference:
        runs.append(_gradients64(model, wrt, feeds))
    for ours in runs:
        for name in wrt:
            tolerance = 1e-6 if ours[name].dtype == np.float64 else 1e-5
            np.testing.assert_allclose(ours[name], theirs[name], rtol=tolerance, atol=tolerance)


# one operand ----------------------------------------------------------------------------------

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
    ("Neg", {}, 17, (-2, 2), True),
    ("Identity", {}, 17, (-2, 2), True),
    ("Sign", {}, 17, (-2, 2), False),
    ("Floor", {}, 17, (-3, 3), False),
    ("Ceil", {}, 17, (-3, 3), False),
    ("Round", {}, 17, (-3, 3), False),
]


def _unary_model(op_type, attributes, opset, bounds, shape=(3, 4)):
    rng = _rng(op_type, attributes, opset)
    weights = {"w": _draw(rng, shape, *bounds)}
    inputs = ["w"]
    if op_type == "PRelu":  # a slope per column, trained too
        weights["slope"] = rng.uniform(0.1, 0.5, shape[-1:]).astype(np.float32)
        inputs.append("slope")
    node = helper.make_node(op_type, inputs, ["y"], **attributes)
    model, feeds = _model(node, weights, opset=opset)
    return model, feeds, inputs


@pytest.mark.parametrize("op_type, attributes, opset, bounds, compare", UNARY)
def test_unary(op_type, attributes, opset, bounds, compare):
    model, feeds, wrt = _unary_model(op_type, attributes, opset, bounds)
    grads = check_finite_differences(model, wrt, feeds)
    if op_type in ("Sign", "Floor", "Ceil", "Round"):  # no gradient: the builder's zeros
        assert not grads["w"].any()
    if compare:
        check_against_training_package(loss_without_sum(model), wrt, feeds)


@pytest.mark.parametrize("op_type", ["Floor", "Sign"])
def test_piecewise_constant_beside_another_path(op_type):
    """``y = floor(w) * w``: the only gradient is the other path's, ``floor(w)``."""
    w = _draw(_rng(op_type), (3, 4), -3, 3)
    step = helper.make_node(op_type, ["w"], ["f"])
    node = helper.make_node("Mul", ["f", "w"], ["y"])
    model, feeds = _model(node, {"w": w}, extra_nodes=[step])
    check_finite_differences(model, ["w"], feeds)


@pytest.mark.parametrize("opset", [13, 15, 17])
@pytest.mark.parametrize("op_type", ["Cast", "CastLike"])
def test_casts(op_type, opset):
    """float32 to float64 and back: the gradient is cast back each time (a ``Cast`` at every
    opset, so opset 13 has no ``CastLike``)."""
    if op_type == "CastLike" and opset < 15:
        pytest.skip("CastLike is an operator of opset 15")
    w = _draw(_rng(op_type, opset), (3, 4), -2, 2)
    like = {"like64": np.zeros(1, np.float64), "like32": np.zeros(1, np.float32)}
    if op_type == "Cast":
        first = helper.make_node("Cast", ["w"], ["w64"], to=TensorProto.DOUBLE)
        node = helper.make_node("Cast", ["w64"], ["y"], to=TensorProto.FLOAT)
        inputs = {}
    else:
        first = helper.make_node("CastLike", ["w", "like64"], ["w64"])
        node = helper.make_node("CastLike", ["w64", "like32"], ["y"])
        inputs = like
    model, feeds = _model(node, {"w": w}, inputs, opset=opset, extra_nodes=[first])
    check_finite_differences(model, ["w"], feeds)
    onnx.checker.check_model(build_gradients(model, ["w"]).model, full_check=True)
    if op_type == "Cast":
        check_against_training_package(loss_without_sum(model), ["w"], feeds)


# two operands, broadcast ----------------------------------------------------------------------

#: ``(name, (kind, shape) of a, (kind, shape) of b)``: "w" a weight, "x" a graph input whose
#: dimensions are all unknown (``[None] * rank``).
BROADCASTS = [
    ("same", ("w", (3, 4)), ("w", (3, 4))),
    ("scalar", ("w", (3, 4)), ("w", ())),
    ("row", ("w", (3, 4)), ("w", (4,))),
    ("column", ("w", (3, 4)), ("w", (3, 1))),
    ("both", ("w", (3, 1)), ("w", (1, 4))),
    ("rank", ("w", (2, 3, 4)), ("w", (3, 1))),
    ("scalar_first", ("w", ()), ("w", (2, 3))),
    ("free_batch", ("x", (5, 4)), ("w", (4,))),
    ("run_time", ("x", (3, 1)), ("x", (1, 4))),
    ("run_time_rank", ("x", (2, 3)), ("x", (3,))),
]

#: ``(op_type, attributes, draw of a, draw of b, compared with 1.19.2)``.
BINARY = [
    ("Add", {}, (-2, 2), (-2, 2), True),
    ("Sub", {}, (-2, 2), (-2, 2), True),
    ("Mul", {}, (-2, 2), (-2, 2), True),
    ("Div", {}, (-2, 2), (0.5, 2), True),
    ("Pow", {}, (0.5, 2), (-1.5, 1.5), True),
    ("Max", {}, (-2, 2), (-2, 2), True),
    ("Min", {}, (-2, 2), (-2, 2), True),
    ("Mod", {"fmod": 1}, (-3, 3), (0.6, 1.9), False),
]


def _operands(rng, op_type, kinds, draws):
    """The arrays of ``a`` and ``b``, away from ties (``Max``, ``Min``) and from the steps of a
    ``Mod``'s quotient; ``b`` of either sign where it is a divisor."""
    for _ in range(100):
        a, b = (_draw(rng, shape, *draw) for (_, shape), draw in zip(kinds, draws))
        if op_type in ("Div", "Mod"):
            b = np.where(rng.random(b.shape) < 0.5, -b, b).astype(np.float32)
        a64, b64 = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
        quotient = a64 / b64
        if op_type in ("Max", "Min") and np.abs(a64 - b64).min() < 0.01:
            continue
        if op_type == "Mod" and np.abs(quotient - np.round(quotient)).min() < 0.01:
            continue
        return a, b
    raise AssertionError("no operands away from the steps")


@pytest.mark.parametrize("case, kind_a, kind_b", BROADCASTS, ids=[c[0] for c in BROADCASTS])
@pytest.mark.parametrize(
    "op_type, attributes, draw_a, draw_b, compare", BINARY, ids=[f"{b[0]}{b[1]}" for b in BINARY]
)
def test_binary(op_type, attributes, draw_a, draw_b, compare, case, kind_a, kind_b):
    rng = _rng(op_type, attributes, case)
    a, b = _operands(rng, op_type, [kind_a, kind_b], [draw_a, draw_b])
    names = ["a", "b"]
    weights = {n: v for n, (k, _), v in zip(names, [kind_a, kind_b], [a, b]) if k == "w"}
    inputs = {n: v for n, (k, _), v in zip(names, [kind_a, kind_b], [a, b]) if k == "x"}
    node = helper.make_node(op_type, names, ["y"], **attributes)
    model, feeds = _model(node, weights, inputs)
    check_finite_differences(model, names, feeds)
    if case.startswith("run_time"):  # no shape tells the axes: they are found at run time
        built = build_gradients(model, names)
        assert "NonZero" in {n.op_type for n in built.model.graph.node}
    trained = list(weights)
    if op_type == "Pow":  # 1.19.2: the base only, and not summed back to its shape
        trained = [
            n for n in trained if n == "a" and a.shape == np.broadcast_shapes(a.shape, b.shape)
        ]
    if compare and trained:
        check_against_training_package(loss_without_sum(model), trained, feeds)


@pytest.mark.parametrize("op_type", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (4,), (3, 1)], [(2, 1, 4), (), (3, 1)]])
def test_variadic(op_type, shapes):
    """One operand, three broadcast ones (the first too)."""
    if op_type == "Mean" and shapes[0] == (2, 1, 4):
        pytest.skip("the reference evaluator's Mean fails: test_mean_of_a_broadcast_first_operand")
    rng = _rng(op_type, shapes)
    weights = {f"w{k}": _draw(rng, shape, -2, 2) for k, shape in enumerate(shapes)}
    node = helper.make_node(op_type, list(weights), ["y"])
    model, feeds = _model(node, weights)
    check_finite_differences(model, list(weights), feeds)
    if op_type in ("Max", "Min"):  # 1.19.2 has no gradient for Sum and Mean
        check_against_training_package(loss_without_sum(model), list(weights), feeds)


def test_mean_of_a_broadcast_first_operand_against_torch():
    """The reference evaluator's ``Mean`` accumulates into its first operand, which fails when
    that one is broadcast: onnxruntime runs the gradients, compared with torch's."""
    rng = _rng("Mean first broadcast")
    shapes = [(2, 1, 4), (), (3, 1)]
    weights = {f"w{k}": _draw(rng, shape, -2, 2) for k, shape in enumerate(shapes)}
    model, feeds = _model(helper.make_node("Mean", list(weights), ["y"]), weights)
    forward = lambda v: (v["w0"] + v["w1"] + v["w2"]) / 3  # noqa: E731
    _assert_torch_gradients(model, list(weights), feeds, forward, reference=False)


def test_mod_of_floats_needs_fmod():
    """``fmod=0`` is not a ``Mod`` of floats the standard allows: refused."""
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=0)
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 0.7, np.float32)
    model, _ = _model(node, {"a": a, "b": b})
    with pytest.raises(NoGradientError, match="fmod=1"):
        build_gradients(model, ["a", "b"])


@pytest.mark.parametrize("shapes", [[(3, 4), (3, 4)], [(3, 1), (4,)], [(), (3, 4)]])
def test_where(shapes):
    rng = _rng("Where", shapes)
    weights = {n: _draw(rng, s, -2, 2) for n, s in zip(("a", "b"), shapes)}
    condition = rng.random((3, 4)) < 0.5
    node = helper.make_node("Where", ["c", "a", "b"], ["y"])
    model, feeds = _model(node, weights, {"c": condition})
    check_finite_differences(model, ["a", "b"], feeds)
    same = [n for n, shape in zip(("a", "b"), shapes) if shape == (3, 4)]
    if same:  # 1.19.2 does not sum a broadcast branch's gradient back to its shape
        check_against_training_package(loss_without_sum(model), same, feeds)


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
    rng = _rng("PRelu", x_shape, slope_shape)
    x = _draw(rng, x_shape, -2, 2)
    slope = rng.uniform(-0.5, 0.5, slope_shape).astype(np.float32)
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    weights = {"slope": slope, **({"x": x} if x_kind == "w" else {})}
    model, feeds = _model(node, weights, {} if x_kind == "w" else {"x": x})
    check_finite_differences(model, ["x", "slope"], feeds)
    check_against_training_package(loss_without_sum(model), list(weights), feeds)


#: ``(name, bounds as (name, value) with "" for an absent one, trained bounds)``.
CLIPS = [
    ("none", [], False),
    ("min", [("low", -0.5)], False),
    ("max", [("", None), ("high", 0.7)], False),
    ("both", [("low", -0.5), ("high", 0.7)], False),
    ("both_trained", [("low", -0.5), ("high", 0.7)], True),
    ("min_trained", [("low", -0.5)], True),
    ("max_trained", [("", None), ("high", 0.7)], True),
    ("crossed_trained", [("low", 0.7), ("high", -0.5)], True),
]


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("case, bounds, trained", CLIPS, ids=[c[0] for c in CLIPS])
def test_clip(case, bounds, trained, opset):
    """Absent bounds, one bound, both, trained bounds (each receives the gradient of the
    values beyond it), a lower bound above the upper one (all values are the upper bound)."""
    x = _draw(_rng("Clip", case, opset), (3, 4), -2, 2)
    weights = {"x": x, **{n: np.array(v, np.float32) for n, v in bounds if n}}
    node = helper.make_node("Clip", ["x", *[n for n, _ in bounds]], ["y"])
    model, feeds = _model(node, weights, opset=opset)
    wrt = ["x", *[n for n, _ in bounds if n and trained]]
    check_finite_differences(model, wrt, feeds)
    if not trained:
        check_against_training_package(loss_without_sum(model), ["x"], feeds)


# Pow's exponents ------------------------------------------------------------------------------


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, 3.5, -1.0])
@pytest.mark.parametrize("source", ["initializer", "Constant"])
def test_pow_constant_exponent(exponent, source):
    """A constant scalar exponent writes ``b a**(b-1)`` with its value (no ``Pow`` for a
    square, nothing for 0), whether an initializer or a ``Constant`` node holds it."""
    a = _draw(_rng("Pow", exponent, source), (3, 4), 0.3, 2)
    value = np.array(exponent, np.float32)
    extra = []
    if source == "Constant":
        extra = [helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(value))]
    weights = {"a": a, **({"b": value} if source == "initializer" else {})}
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model, feeds = _model(node, weights, extra_nodes=extra)
    check_finite_differences(model, ["a"], feeds)
    built = build_gradients(model, ["a"])
    pows = [n for n in built.model.graph.node if n.op_type == "Pow"]
    assert len(pows) == (1 if exponent in (0.0, 1.0, 2.0) else 2)
    check_against_training_package(loss_without_sum(model), ["a"], feeds)


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("source", ["input", "initializer"])
def test_pow_integer_exponent(source, opset):
    """An int64 exponent tensor, an input or a constant: cast to the base's type (a ``Cast`` at
    opset 13, where there is no ``CastLike``)."""
    rng = _rng("Pow int", source, opset)
    a = _draw(rng, (3, 4), 0.3, 2)
    b = rng.integers(-2, 4, (3, 4)).astype(np.int64)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    weights = {"a": a, **({"b": b} if source == "initializer" else {})}
    model, feeds = _model(node, weights, {"b": b} if source == "input" else {}, opset=opset)
    check_finite_differences(model, ["a"], feeds)
    onnx.checker.check_model(build_gradients(model, ["a"]).model, full_check=True)


def test_pow_at_a_base_of_zero():
    """torch's values where the formulas are ``0 * inf``: ``da = 0`` for ``b = 0``, ``db = 0``
    for ``a = 0`` and ``b >= 0``; infinite where torch's are."""
    a = np.array([0.0, 0.0, 0.0, 0.0, 1.5, 2.0], np.float32)
    b = np.array([0.0, 2.0, 0.5, -1.0, 0.0, -0.5], np.float32)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model, feeds = _model(node, {"a": a, "b": b})
    theirs = _torch_gradients(model, ["a", "b"], feeds, lambda v: torch.pow(v["a"], v["b"]))
    ours = _gradients64(model, ["a", "b"], feeds)
    for name in ("a", "b"):
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-12)


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
    model, feeds = _model(node, {"w": w}, opset=opset)
    _assert_torch_gradients(model, ["w"], feeds, lambda v: function(v["w"]))


def test_prelu_at_zero_against_torch():
    x = np.array([[0.0, -1.0, 1.0], [0.0, 2.0, -2.0]], np.float32)
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    model, feeds = _model(node, {"x": x, "slope": np.array([0.25, -0.5, 0.1], np.float32)})
    _assert_torch_gradients(model, ["x", "slope"], feeds, lambda v: _prelu(v["x"], v["slope"]))


def _prelu(x, slope):
    return torch.where(x > 0, x, x * slope)  # F.prelu wants the slope on dimension 1


@pytest.mark.parametrize("op_type, function", [("Max", torch.maximum), ("Min", torch.minimum)])
def test_ties_against_torch(op_type, function):
    """torch's ``maximum`` and ``minimum`` share a tie evenly; so do ours, between three too."""
    a = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    b = np.array([1.0, 1.0, 3.0, -1.0], np.float32)
    node = helper.make_node(op_type, ["a", "b"], ["y"])
    model, feeds = _model(node, {"a": a, "b": b})
    _assert_torch_gradients(model, ["a", "b"], feeds, lambda v: function(v["a"], v["b"]))
    node = helper.make_node(op_type, ["a", "a2", "b"], ["y"])
    model, feeds = _model(node, {"a": a, "a2": a.copy(), "b": b})
    grads = _gradients64(model, ["a", "a2", "b"], feeds)
    r = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "loss_r0"))
    np.testing.assert_allclose(grads["a"][[0, 2]], r[[0, 2]] / 3, rtol=1e-7)
    np.testing.assert_allclose(grads["b"][[0, 2]], r[[0, 2]] / 3, rtol=1e-7)


@pytest.mark.parametrize("low, high", [(0.0, 6.0), (-0.5, 0.5), (1.0, -1.0), (0.5, 0.5)])
def test_clip_bounds_against_torch_clamp(low, high):
    """torch's ``clamp`` with tensor bounds, inputs on the bounds: the input keeps its gradient
    there; the bounds receive the rest."""
    x = np.array([low, high, -7.0, 7.0, (low + high) / 2, 0.0], np.float32)
    bounds = {"low": np.array(low, np.float32), "high": np.array(high, np.float32)}
    node = helper.make_node("Clip", ["x", "low", "high"], ["y"])
    model, feeds = _model(node, {"x": x, **bounds})
    forward = lambda v: torch.clamp(v["x"], v["low"], v["high"])  # noqa: E731
    _assert_torch_gradients(model, ["x", "low", "high"], feeds, forward)


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
    rng = _rng("export", name)
    module = make()
    x = np.concatenate([np.array(kinks, np.float32)[None], _draw(rng, (3, 3), -3, 3)])
    model = export_for_training(module, torch.from_numpy(x))
    if name == "ReLU6":
        model = activations_with_gradients(model)
    r = rng.standard_normal(x.shape).astype(np.float32)
    model = _with_loss(model, r)
    weights = [t.name for t in model.graph.initializer if t.name != "loss_r0"]
    ours = _gradients64(model, ["x", *weights], {"x": x})
    module = module.double()
    values = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = (module(values) * torch.from_numpy(r.astype(np.float64))).sum()
    theirs = torch.autograd.grad(loss, [values, *module.parameters()])
    for mine, torch_value in zip(ours.values(), theirs):
        np.testing.assert_allclose(mine, torch_value.numpy(), rtol=1e-6, atol=1e-7)


# every opset, float64 ----------------------------------------------------------------------------


def _several_operand_models(opset):
    """``(op_type, model, wrt)`` of the operators of several operands, all of them trained."""
    a, b = np.ones((3, 1), np.float32), np.full((4,), 2.0, np.float32)
    bounds = {"low": np.array(-0.5, np.float32), "high": np.array(0.7, np.float32)}
    nodes = [helper.make_node(op, ["a", "b"], ["y"], **attrs) for op, attrs, *_ in BINARY]
    nodes += [helper.make_node(op, ["a", "b", "a"], ["y"]) for op in ("Sum", "Mean", "Max", "Min")]
    for node in nodes:
        yield node.op_type, _model(node, {"a": a, "b": b}, opset=opset)[0], ["a", "b"]
    clip = helper.make_node("Clip", ["a", "low", "high"], ["y"])
    yield "Clip", _model(clip, {"a": a, **bounds}, opset=opset)[0], ["a", "low", "high"]
    where = helper.make_node("Where", ["c", "a", "b"], ["y"])
    model, _ = _model(where, {"a": a, "b": b}, {"c": np.ones((3, 4), bool)}, opset=opset)
    yield "Where", model, ["a", "b"]


@pytest.mark.parametrize("opset", [13, 21])
def test_every_operator_is_valid_at_the_opsets_in_float64(opset):
    """The gradients of every operator, built on a float64 model, pass onnx's full check at
    opsets 13 and 21 (operators of the model's opset, every constant of the model's type), the
    operators without float64 (``Celu``) left out."""
    cases = [
        (op, *_unary_model(op, attrs, max(opset, o), bounds)[::2])
        for op, attrs, o, bounds, _ in UNARY
    ]
    for op_type, model, wrt in [*cases, *_several_operand_models(opset)]:
        if _takes_float64(op_type, model.opset_import[0].version):
            built = build_gradients(to_float64(model), wrt)
            onnx.checker.check_model(built.model, full_check=True)


def _takes_float64(op_type, opset):
    """Whether the standard's ``op_type`` of ``opset`` computes in float64 (``Celu`` does not)."""
    schema = onnx.defs.get_schema(op_type, opset)
    allowed = {t for c in schema.type_constraints for t in c.allowed_type_strs}
    return "tensor(double)" in allowed
