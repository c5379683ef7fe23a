"""What the tests of the elementwise gradients share (test_gradients_activations.py,
test_gradients_arithmetic.py): inputs drawn away from the kinks, one-node models, the check of
a one-operand operator, the comparison with torch and the float64 check at an opset."""

import zlib

import numpy as np
import onnx
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    gradients_float64,
    loss_without_sum,
    run_on_runtime,
    single_node_loss,
    to_float64,
    torch_gradients,
)
from onnx import helper

from helpers.portable.gradients import build_gradients

RNG_SEED = 2024
#: The points the drawn inputs keep away from (kinks, steps, thresholds of the cases).
KINKS = np.array(sorted({k / 2 for k in range(-8, 9)} | {-0.7, -0.3, 0.3, 0.7}))
#: The operators whose gradient is 0 almost everywhere: the builder gives zeros.
PIECEWISE_CONSTANT = ("Sign", "Floor", "Ceil", "Round")


def rng(*key):
    """A generator seeded by the tests' seed and ``key`` (the case)."""
    return np.random.default_rng([RNG_SEED, zlib.crc32(repr(key).encode())])


def draw(generator, shape, low, high, gap=0.02):
    """Uniform values in ``[low, high)``, each at least ``gap`` from every point of KINKS."""
    values = generator.uniform(low, high, shape)
    near = np.abs(values[..., None] - KINKS).min(axis=-1) < gap
    return np.where(near, values + 2.5 * gap, values).astype(np.float32)


def node_model(node, weights, inputs=None, opset=17, extra_nodes=(), seed=0):
    """``single_node_loss`` of ``node``, whose output ``y`` has the broadcast shape of the
    arrays given."""
    inputs = dict(inputs or {})
    shape = np.broadcast_shapes(*[v.shape for v in [*weights.values(), *inputs.values()]])
    if node.op_type == "Gelu" and not inputs:  # the reference evaluator expands Gelu's function
        inputs["unused"] = np.zeros(1, np.float32)  # only in a graph with inputs
    return single_node_loss(node, inputs, weights, {"y": shape}, seed, opset, extra_nodes)


def unary_model(op_type, attributes, opset, bounds, shape=(3, 4)):
    """``(model, feeds, wrt)`` of one operand ``w`` drawn in ``bounds`` (and ``PRelu``'s slope,
    one per column, trained too)."""
    generator = rng(op_type, attributes, opset)
    weights = {"w": draw(generator, shape, *bounds)}
    inputs = ["w"]
    if op_type == "PRelu":
        weights["slope"] = generator.uniform(0.1, 0.5, shape[-1:]).astype(np.float32)
        inputs.append("slope")
    node = helper.make_node(op_type, inputs, ["y"], **attributes)
    model, feeds = node_model(node, weights, opset=opset)
    return model, feeds, inputs


def unary_cases(table, opset):
    """``(op_type, model, wrt)`` of each row ``(op_type, attributes, opset, bounds, compare)``
    of ``table`` at ``opset``, or at the row's opset where it is later."""
    return [
        (op_type, *unary_model(op_type, attributes, max(opset, since), bounds)[::2])
        for op_type, attributes, since, bounds, _ in table
    ]


def check_unary(op_type, attributes, opset, bounds, compare):
    """Finite differences, and 1.19.2's builder where ``compare``, on :func:`unary_model`."""
    model, feeds, wrt = unary_model(op_type, attributes, opset, bounds)
    grads = check_finite_differences(model, wrt, feeds)
    if op_type in PIECEWISE_CONSTANT:
        assert not grads["w"].any()
    if compare:
        check_against_training_package(loss_without_sum(model), wrt, feeds)


def assert_torch_gradients(model, wrt, feeds, forward, reference=True):
    """Ours in float64 (by the reference evaluator, unless ``reference`` is false) and in float32
    (by onnxruntime) equal torch's float64."""
    theirs = torch_gradients(model, wrt, feeds, forward)
    built = build_gradients(model, list(wrt))
    names = [built.gradients[n] for n in wrt]
    values = run_on_runtime(built.model, feeds, names)
    runs = [{n: values[g] for n, g in zip(wrt, names)}]
    if reference:
        runs.append(gradients_float64(model, wrt, feeds))
    for ours in runs:
        for name in wrt:
            tolerance = 1e-6 if ours[name].dtype == np.float64 else 1e-5
            np.testing.assert_allclose(ours[name], theirs[name], rtol=tolerance, atol=tolerance)


def check_valid_in_float64(cases):
    """The gradients of each ``(op_type, model, wrt)``, built on the model copied to float64,
    pass onnx's full check (operators of the model's opset, every constant of the model's type);
    the operators without float64 (``Celu``) are left out."""
    for op_type, model, wrt in cases:
        schema = onnx.defs.get_schema(op_type, model.opset_import[0].version)
        allowed = {t for c in schema.type_constraints for t in c.allowed_type_strs}
        if "tensor(double)" in allowed:
            built = build_gradients(to_float64(model), wrt)
            onnx.checker.check_model(built.model, full_check=True)
