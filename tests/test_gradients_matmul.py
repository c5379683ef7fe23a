"""Gradients of ``MatMul`` and ``Gemm`` (helpers.portable.gradients.matmul), and of an attention
block that chains them with ``Softmax``.

Each case is checked against float64 central differences run by onnx's reference evaluator,
with the operands as weights (static shapes) and as graph inputs (unknown dimensions), and
against 1.19.2's gradient builder on the weights: two activations multiplied (attention's
``Q K^T``), vector operands, broadcast batch axes; ``Gemm`` with every ``transA``, ``transB``,
``alpha``, ``beta`` and a ``C`` of each broadcastable shape. 1.19.2's builder refuses
``beta=0`` with a trained ``C`` (``ORT_ENFORCE(beta != 0)``), gives a scalar ``C`` scaled by
``beta != 1`` a gradient of shape ``[1]``, and fails on vector operands but a vector times
a matrix (finite differences only there). The attention block's weights' gradients are compared with
finite differences and with torch's float64 autograd.
"""

import math

import numpy as np
import pytest
import torch
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    check_node,
    loss_without_sum,
)
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261130)


def _draw(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


MATMULS = {
    "matrices": ((3, 4), (4, 5)),
    "attention_scores": ((2, 3, 5, 4), (2, 3, 4, 5)),
    "batch_by_matrix": ((2, 3, 4), (4, 5)),
    "matrix_by_batch": ((3, 4), (2, 4, 5)),
    "broadcast_batches": ((2, 1, 3, 4), (5, 4, 6)),
    "broadcast_ones": ((1, 3, 4), (2, 4, 5)),
    "vector_by_matrix": ((4,), (4, 5)),
    "matrix_by_vector": ((3, 4), (4,)),
    "vector_by_vector": ((4,), (4,)),
    "vector_by_batch": ((4,), (2, 4, 5)),
    "batch_by_vector": ((2, 3, 4), (4,)),
}


#: Vector operands 1.19.2's builder fails on (its ``FusedMatMul`` fails shape inference); it
#: handles a vector times a matrix.
VECTORS_1192_FAILS = {"matrix_by_vector", "vector_by_vector", "vector_by_batch", "batch_by_vector"}


@pytest.mark.parametrize("case", sorted(MATMULS))
def test_matmul(case):
    shape_a, shape_b = MATMULS[case]
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    values = {"a": _draw(*shape_a), "b": _draw(*shape_b)}
    check_node(node, values, training=case not in VECTORS_1192_FAILS)
    check_node(node, {}, values, training=False)
    check_node(node, {"a": values["a"]}, {"b": values["b"]}, training=False)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0), (-1.5, 0.0)])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (1, 5), (3, 1), (3, 5)])
def test_gemm(trans_a, trans_b, alpha, beta, c_shape):
    """``Y [3, 5] = alpha op(A) op(B) + beta C``."""
    a = _draw(4, 3) if trans_a else _draw(3, 4)
    b = _draw(5, 4) if trans_b else _draw(4, 5)
    values = {"a": a, "b": b}
    if c_shape is not None:
        values["c"] = _draw(*c_shape)
    attributes = dict(transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    node = helper.make_node("Gemm", list(values), ["y"], **attributes)
    check_node(node, values, training=c_shape is None or (beta != 0 and (c_shape or beta == 1)))
    check_node(node, {}, values, training=False)


def _attention_model(mask_value, heads=2, width=8, steps=5):
    """``x [B, T, E]`` -> ``Q, K, V`` projections, ``softmax(Q K^T / sqrt(d) + mask) V`` per
    head, an output projection; the loss a weighted sum of the output. The mask, a constant
    ``[T, T]`` broadcast over the batch and the heads, hides the future (``mask_value`` above
    the diagonal)."""
    depth = width // heads
    weights = {name: _draw(width, width) / 3 for name in ("wq", "wk", "wv", "wo")}
    mask = np.triu(np.full((steps, steps), mask_value, np.float32), 1)
    terms = _draw(2, steps, width)
    nodes = [helper.make_node("MatMul", ["x", f"w{k}"], [k]) for k in "qkv"]
    for k in "qkv":
        nodes += [
            helper.make_node("Reshape", [k, "heads_shape"], [f"{k}_split"]),
            helper.make_node("Transpose", [f"{k}_split"], [f"{k}_heads"], perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("Transpose", ["k_heads"], ["k_t"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q_heads", "k_t"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["attention"], axis=-1),
        helper.make_node("MatMul", ["attention", "v_heads"], ["mixed"]),
        helper.make_node("Transpose", ["mixed"], ["mixed_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["mixed_t", "merged_shape"], ["merged"]),
        helper.make_node("MatMul", ["merged", "wo"], ["out"]),
        helper.make_node("Mul", ["out", "terms"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0),
    ]
    constants = {
        "heads_shape": np.array([0, 0, heads, depth], np.int64),
        "merged_shape": np.array([0, 0, width], np.int64),
        "scale": np.array(math.sqrt(depth), np.float32),
        "mask": mask,
        "terms": terms,
    }
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", width])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(v, k) for k, v in {**weights, **constants}.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model, weights, constants


def _torch_attention(x, weights, constants, heads=2):
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    batch, steps, width = x.shape
    xt = torch.tensor(x, dtype=torch.float64)

    def split(value):
        return value.reshape(batch, steps, heads, width // heads).transpose(1, 2)

    q, k, v = (split(xt @ t[name]) for name in ("wq", "wk", "wv"))
    scores = q @ k.transpose(-1, -2) / math.sqrt(width // heads)
    scores = scores + torch.tensor(constants["mask"], dtype=torch.float64)
    mixed = torch.softmax(scores, dim=-1) @ v
    out = mixed.transpose(1, 2).reshape(batch, steps, width) @ t["wo"]
    (out * torch.tensor(constants["terms"], dtype=torch.float64)).sum().backward()
    return {k: value.grad.numpy() for k, value in t.items()}


@pytest.mark.parametrize("mask_value", [-np.inf, -1e9])
def test_attention_block(mask_value):
    """A causal self-attention block: its four weights' gradients against finite differences,
    torch's float64 autograd and 1.19.2's builder; an infinite mask gives no NaN."""
    model, weights, constants = _attention_model(mask_value)
    feeds = {"x": _draw(2, 5, 8)}
    wrt = list(weights)
    ours = check_finite_differences(model, wrt, feeds)
    theirs = _torch_attention(feeds["x"], weights, constants)
    for name in wrt:
        assert np.all(np.isfinite(ours[name]))
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-9, atol=1e-12)
    check_against_training_package(loss_without_sum(model), wrt, feeds)


def test_attention_input_gradient_for_the_forward_backward_api():
    """The gradient of the input ``x`` too, as the forward/backward API asks for it."""
    model, weights, constants = _attention_model(-1e9)
    feeds = {"x": _draw(2, 5, 8)}
    check_finite_differences(model, ["x", "wq"], feeds)
