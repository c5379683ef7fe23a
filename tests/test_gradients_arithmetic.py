"""Gradients of the arithmetic operators (helpers.portable.gradients.arithmetic).

Every operator and option is checked against float64 central differences run by onnx's reference
evaluator, at inputs away from its steps and ties, and against 1.19.2's gradient builder where it
has one. 1.19.2 has none for ``Sum``, ``Mean``, ``Mod``, ``Sign``, ``Floor``, ``Ceil`` and
``Round``, nor for a ``Pow``'s exponent, and it does not sum a broadcast ``Pow`` base's or
``Where`` branch's gradient back to its shape. Broadcasting covers a scalar, a row, a column,
both operands broadcast, a rank difference, an operand with a free batch dimension, and operands
whose dimensions are all unknown (the reduction found at run time). The ties of ``Max`` and
``Min``, ``Clip``'s bounds and a ``Pow`` at a base of 0 are compared with torch's float64
autograd.
"""

import numpy as np
import onnx
import pytest
import torch
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
    torch_gradients,
)
from onnx import TensorProto, helper, numpy_helper

from helpers.portable.gradients import NoGradientError, build_gradients

#: ``(op_type, attributes, opset, input range, compared with 1.19.2)``.
UNARY = [
    ("Neg", {}, 17, (-2, 2), True),
    ("Identity", {}, 17, (-2, 2), True),
    ("Sign", {}, 17, (-2, 2), False),
    ("Floor", {}, 17, (-3, 3), False),
    ("Ceil", {}, 17, (-3, 3), False),
    ("Round", {}, 17, (-3, 3), False),
]


@pytest.mark.parametrize("op_type, attributes, opset, bounds, compare", UNARY)
def test_unary(op_type, attributes, opset, bounds, compare):
    check_unary(op_type, attributes, opset, bounds, compare)


@pytest.mark.parametrize("op_type", ["Floor", "Sign"])
def test_piecewise_constant_beside_another_path(op_type):
    """``y = floor(w) * w``: the only gradient is the other path's, ``floor(w)``."""
    w = draw(rng(op_type), (3, 4), -3, 3)
    step = helper.make_node(op_type, ["w"], ["f"])
    node = helper.make_node("Mul", ["f", "w"], ["y"])
    model, feeds = node_model(node, {"w": w}, extra_nodes=[step])
    check_finite_differences(model, ["w"], feeds)


@pytest.mark.parametrize(
    "op_type, opset",
    [("Cast", 13), ("Cast", 15), ("Cast", 17), ("CastLike", 15), ("CastLike", 17)],
)
def test_casts(op_type, opset):
    """float32 to float64 and back: the gradient is cast back each time (a ``Cast`` at every
    opset, so opset 13 has no ``CastLike``; CastLike itself is an operator of opset 15)."""
    w = draw(rng(op_type, opset), (3, 4), -2, 2)
    like = {"like64": np.zeros(1, np.float64), "like32": np.zeros(1, np.float32)}
    if op_type == "Cast":
        first = helper.make_node("Cast", ["w"], ["w64"], to=TensorProto.DOUBLE)
        node = helper.make_node("Cast", ["w64"], ["y"], to=TensorProto.FLOAT)
        inputs = {}
    else:
        first = helper.make_node("CastLike", ["w", "like64"], ["w64"])
        node = helper.make_node("CastLike", ["w64", "like32"], ["y"])
        inputs = like
    model, feeds = node_model(node, {"w": w}, inputs, opset=opset, extra_nodes=[first])
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


def _operands(generator, op_type, kinds, draws):
    """The arrays of ``a`` and ``b``, away from ties (``Max``, ``Min``) and from the steps of a
    ``Mod``'s quotient; ``b`` of either sign where it is a divisor."""
    for _ in range(100):
        a, b = (draw(generator, shape, *bounds) for (_, shape), bounds in zip(kinds, draws))
        if op_type in ("Div", "Mod"):
            b = np.where(generator.random(b.shape) < 0.5, -b, b).astype(np.float32)
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
    generator = rng(op_type, attributes, case)
    a, b = _operands(generator, op_type, [kind_a, kind_b], [draw_a, draw_b])
    names = ["a", "b"]
    weights = {n: v for n, (k, _), v in zip(names, [kind_a, kind_b], [a, b]) if k == "w"}
    inputs = {n: v for n, (k, _), v in zip(names, [kind_a, kind_b], [a, b]) if k == "x"}
    node = helper.make_node(op_type, names, ["y"], **attributes)
    model, feeds = node_model(node, weights, inputs)
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


_VARIADIC_SHAPES = [[(3, 4)], [(3, 4), (4,), (3, 1)], [(2, 1, 4), (), (3, 1)]]


@pytest.mark.parametrize(
    "op_type, shapes",
    [
        (op_type, shapes)
        for op_type in ("Sum", "Mean", "Max", "Min")
        for shapes in _VARIADIC_SHAPES
        # the reference evaluator's Mean fails on a broadcast first operand: that case is
        # test_mean_of_a_broadcast_first_operand, on onnxruntime against torch
        if not (op_type == "Mean" and shapes[0] == (2, 1, 4))
    ],
)
def test_variadic(op_type, shapes):
    """One operand, three broadcast ones (the first too)."""
    generator = rng(op_type, shapes)
    weights = {f"w{k}": draw(generator, shape, -2, 2) for k, shape in enumerate(shapes)}
    node = helper.make_node(op_type, list(weights), ["y"])
    model, feeds = node_model(node, weights)
    check_finite_differences(model, list(weights), feeds)
    if op_type in ("Max", "Min"):  # 1.19.2 has no gradient for Sum and Mean
        check_against_training_package(loss_without_sum(model), list(weights), feeds)


def test_mean_of_a_broadcast_first_operand_against_torch():
    """The reference evaluator's ``Mean`` accumulates into its first operand, which fails when
    that one is broadcast: onnxruntime runs the gradients, compared with torch's."""
    generator = rng("Mean first broadcast")
    shapes = [(2, 1, 4), (), (3, 1)]
    weights = {f"w{k}": draw(generator, shape, -2, 2) for k, shape in enumerate(shapes)}
    model, feeds = node_model(helper.make_node("Mean", list(weights), ["y"]), weights)
    forward = lambda v: (v["w0"] + v["w1"] + v["w2"]) / 3  # noqa: E731
    assert_torch_gradients(model, list(weights), feeds, forward, reference=False)


def test_mod_of_floats_needs_fmod():
    """``fmod=0`` is not a ``Mod`` of floats the standard allows: refused."""
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=0)
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 0.7, np.float32)
    model, _ = node_model(node, {"a": a, "b": b})
    with pytest.raises(NoGradientError, match="fmod=1"):
        build_gradients(model, ["a", "b"])


@pytest.mark.parametrize("shapes", [[(3, 4), (3, 4)], [(3, 1), (4,)], [(), (3, 4)]])
def test_where(shapes):
    generator = rng("Where", shapes)
    weights = {n: draw(generator, s, -2, 2) for n, s in zip(("a", "b"), shapes)}
    condition = generator.random((3, 4)) < 0.5
    node = helper.make_node("Where", ["c", "a", "b"], ["y"])
    model, feeds = node_model(node, weights, {"c": condition})
    check_finite_differences(model, ["a", "b"], feeds)
    same = [n for n, shape in zip(("a", "b"), shapes) if shape == (3, 4)]
    if same:  # 1.19.2 does not sum a broadcast branch's gradient back to its shape
        check_against_training_package(loss_without_sum(model), same, feeds)


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
    x = draw(rng("Clip", case, opset), (3, 4), -2, 2)
    weights = {"x": x, **{n: np.array(v, np.float32) for n, v in bounds if n}}
    node = helper.make_node("Clip", ["x", *[n for n, _ in bounds]], ["y"])
    model, feeds = node_model(node, weights, opset=opset)
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
    a = draw(rng("Pow", exponent, source), (3, 4), 0.3, 2)
    value = np.array(exponent, np.float32)
    extra = []
    if source == "Constant":
        extra = [helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(value))]
    weights = {"a": a, **({"b": value} if source == "initializer" else {})}
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model, feeds = node_model(node, weights, extra_nodes=extra)
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
    generator = rng("Pow int", source, opset)
    a = draw(generator, (3, 4), 0.3, 2)
    b = generator.integers(-2, 4, (3, 4)).astype(np.int64)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    weights = {"a": a, **({"b": b} if source == "initializer" else {})}
    model, feeds = node_model(node, weights, {"b": b} if source == "input" else {}, opset=opset)
    check_finite_differences(model, ["a"], feeds)
    onnx.checker.check_model(build_gradients(model, ["a"]).model, full_check=True)


def test_pow_at_a_base_of_zero():
    """torch's values where the formulas are ``0 * inf``: ``da = 0`` for ``b = 0``, ``db = 0``
    for ``a = 0`` and ``b >= 0``; infinite where torch's are."""
    a = np.array([0.0, 0.0, 0.0, 0.0, 1.5, 2.0], np.float32)
    b = np.array([0.0, 2.0, 0.5, -1.0, 0.0, -0.5], np.float32)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model, feeds = node_model(node, {"a": a, "b": b})
    theirs = torch_gradients(model, ["a", "b"], feeds, lambda v: torch.pow(v["a"], v["b"]))
    ours = gradients_float64(model, ["a", "b"], feeds)
    for name in ("a", "b"):
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-12)


# ties and bounds against torch ------------------------------------------------------------------


@pytest.mark.parametrize("op_type, function", [("Max", torch.maximum), ("Min", torch.minimum)])
def test_ties_against_torch(op_type, function):
    """torch's ``maximum`` and ``minimum`` share a tie evenly; so do ours, between three too."""
    a = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    b = np.array([1.0, 1.0, 3.0, -1.0], np.float32)
    node = helper.make_node(op_type, ["a", "b"], ["y"])
    model, feeds = node_model(node, {"a": a, "b": b})
    assert_torch_gradients(model, ["a", "b"], feeds, lambda v: function(v["a"], v["b"]))
    node = helper.make_node(op_type, ["a", "a2", "b"], ["y"])
    model, feeds = node_model(node, {"a": a, "a2": a.copy(), "b": b})
    grads = gradients_float64(model, ["a", "a2", "b"], feeds)
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
    model, feeds = node_model(node, {"x": x, **bounds})
    forward = lambda v: torch.clamp(v["x"], v["low"], v["high"])  # noqa: E731
    assert_torch_gradients(model, ["x", "low", "high"], feeds, forward)


# every opset, float64 ----------------------------------------------------------------------------


def _several_operand_models(opset):
    """``(op_type, model, wrt)`` of the operators of several operands, all of them trained."""
    a, b = np.ones((3, 1), np.float32), np.full((4,), 2.0, np.float32)
    bounds = {"low": np.array(-0.5, np.float32), "high": np.array(0.7, np.float32)}
    nodes = [helper.make_node(op, ["a", "b"], ["y"], **attrs) for op, attrs, *_ in BINARY]
    nodes += [helper.make_node(op, ["a", "b", "a"], ["y"]) for op in ("Sum", "Mean", "Max", "Min")]
    for node in nodes:
        yield node.op_type, node_model(node, {"a": a, "b": b}, opset=opset)[0], ["a", "b"]
    clip = helper.make_node("Clip", ["a", "low", "high"], ["y"])
    yield "Clip", node_model(clip, {"a": a, **bounds}, opset=opset)[0], ["a", "low", "high"]
    where = helper.make_node("Where", ["c", "a", "b"], ["y"])
    model, _ = node_model(where, {"a": a, "b": b}, {"c": np.ones((3, 4), bool)}, opset=opset)
    yield "Where", model, ["a", "b"]


@pytest.mark.parametrize("opset", [13, 21])
def test_every_operator_is_valid_at_the_opsets_in_float64(opset):
    """The gradients of every operator, built on a float64 model, pass onnx's full check at
    opsets 13 and 21 (from the operator's own opset where it is later)."""
    check_valid_in_float64([*unary_cases(UNARY, opset), *_several_operand_models(opset)])
