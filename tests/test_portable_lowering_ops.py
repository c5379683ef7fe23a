"""Each lowered gradient operator against onnxruntime-training 1.19.2's own kernel, one node.

Tolerance: 0 where the lowering does the kernel's operations in the kernel's order (Relu, Tanh,
Sigmoid gradients, Concat, Split, Slice, Dropout). Elsewhere a few float32 units (rtol 1e-6,
atol 1e-6 on values of order 1): the kernel's ``erf``/``exp`` (Eigen) are not the standard
operators' (MLAS), and sums (softmax's dot product, repeated gather indices, broadcast
reductions) add in another order.
"""

import numpy as np
import pytest
from lowering_cases import compare, lowered_and_checked, with_output_ranks

from helpers.portable.lowering import registry
from helpers.portable.lowering.single_node import single_node_model

#: Each lowering is compared with the kernel it replaces, which only onnxruntime-training
#: 1.19.2 runs: skipped where that package is missing.
pytestmark = pytest.mark.training_package

RNG = np.random.default_rng(0)
ROUNDING = {"rtol": 1e-6, "atol": 1e-6}


def _normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


SHAPES = [(1, 5), (7, 5), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "op_type, second, exact",
    [
        ("ReluGrad", "x", True),
        ("LeakyReluGrad", "x", True),
        ("SigmoidGrad", "probability", True),
        ("TanhGrad", "tanh", True),
        ("QuickGeluGrad", "x", False),
        ("GeluGrad", "x", False),
    ],
)
def test_activation_gradients(op_type, second, exact, shape):
    x = _normal(*shape)
    x.flat[0] = 0.0  # the kink of Relu
    values = {"x": x, "probability": 1 / (1 + np.exp(-x)), "tanh": np.tanh(x)}
    feeds = {"dy": _normal(*shape), "y": values[second].astype(np.float32)}
    attributes = {"alpha": 0.2} if op_type == "LeakyReluGrad" else {}
    model = single_node_model(op_type, feeds, {"dx": np.float32}, **attributes)
    compare(model, feeds, **({} if exact else ROUNDING))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op_type, attributes", [("Gelu", {}), ("QuickGelu", {"alpha": 1.0}),
                                                 ("QuickGelu", {"alpha": 1.702})])  # fmt: skip
def test_activations(op_type, attributes, shape):
    feeds = {"x": 3 * _normal(*shape)}
    compare(single_node_model(op_type, feeds, {"y": np.float32}, **attributes), feeds, **ROUNDING)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("op_type", ["SoftmaxGrad_13", "LogSoftmaxGrad_13"])
@pytest.mark.parametrize("shape", [(1, 6), (8, 6), (3, 4, 5)])
def test_softmax_gradients(op_type, axis, shape):
    logits = _normal(*shape)
    shifted = logits - logits.max(axis=axis, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    y = log_softmax if op_type.startswith("Log") else np.exp(log_softmax)
    feeds = {"dy": _normal(*shape), "y": y.astype(np.float32)}
    compare(single_node_model(op_type, feeds, {"dx": np.float32}, axis=axis), feeds, **ROUNDING)


MATMUL_CASES = [
    # A shape, B shape (before the transpositions), attributes
    ((5, 4), (4, 3), {}),
    ((4, 5), (4, 3), {"transA": 1}),
    ((5, 4), (3, 4), {"transB": 1, "alpha": 0.3}),
    ((4, 5), (3, 4), {"transA": 1, "transB": 1, "alpha": -2.5}),
    ((1, 4), (4, 3), {"alpha": 0.7}),
    ((2, 5, 4), (2, 4, 3), {}),
    ((2, 4, 5), (2, 3, 4), {"transA": 1, "transB": 1}),
    ((2, 5, 4), (4, 3), {"alpha": 0.5}),  # batch broadcast
    ((5, 2, 4), (2, 4, 3), {"transBatchA": 1}),
    ((4, 2, 5), (2, 4, 3), {"transBatchA": 1, "transA": 1}),
    ((2, 5, 4), (4, 2, 3), {"transBatchB": 1}),
    ((2, 5, 4), (3, 2, 4), {"transBatchB": 1, "transB": 1, "alpha": 1.5}),
]


@pytest.mark.parametrize("a_shape, b_shape, attributes", MATMUL_CASES)
def test_fused_matmul(a_shape, b_shape, attributes):
    """Known ranks: ``Gemm`` for two matrices, else ``Transpose`` and ``MatMul``."""
    feeds = {"a": _normal(*a_shape), "b": _normal(*b_shape)}
    compare(
        single_node_model("FusedMatMul", feeds, {"y": np.float32}, **attributes), feeds, **ROUNDING
    )


@pytest.mark.parametrize(
    "a_shape, b_shape, attributes", [c for c in MATMUL_CASES if len(c[0]) == len(c[1])]
)
def test_fused_matmul_of_unknown_ranks(a_shape, b_shape, attributes, monkeypatch):
    """Ranks the model does not tell: the ``Einsum`` formulation (operands of one rank)."""
    monkeypatch.setattr(registry, "model_ranks", lambda model: {})
    feeds = {"a": _normal(*a_shape), "b": _normal(*b_shape)}
    model = single_node_model("FusedMatMul", feeds, {"y": np.float32}, **attributes)
    _, got = compare(model, feeds, **ROUNDING)
    lowered = lowered_and_checked(with_output_ranks(model, got))
    assert lowered.graph.node[0].op_type == "Einsum"


DIV_SHAPES = [((6, 4), (6, 4)), ((6, 4), (4,)), ((6, 1), (1, 4)), ((), (3, 2)), ((2, 3, 4), (3, 1))]


@pytest.mark.parametrize("a_shape, b_shape", DIV_SHAPES + [(b, a) for a, b in DIV_SHAPES])
@pytest.mark.parametrize("outputs", [("da", "db"), ("da", ""), ("", "db")])
def test_div_grad(a_shape, b_shape, outputs):
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    feeds = {"dy": _normal(*out_shape), "a": _normal(*a_shape),
             "b": (1.5 + RNG.random(b_shape)).astype(np.float32)}  # fmt: skip
    model = single_node_model("DivGrad", feeds, dict.fromkeys(outputs, np.float32))
    compare(model, feeds, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((10, 4), np.array([[1, 3, 1], [9, 0, 3]]), 0),  # repeated ids, a batch of sequences
        ((10, 4), np.array([2]), 0),
        ((10, 4), np.array(5), 0),  # a scalar index
        ((10, 4), np.array([-1, -10, 2, -1]), 0),  # negative indices
        ((3, 5, 2), np.array([[0, 4], [4, 4]]), 1),
        ((3, 5, 2), np.array([1, 0, 1]), -1),
        ((3, 5, 2), np.array([2, -3]), -3),
    ],
)
@pytest.mark.parametrize("index_type", [np.int64, np.int32])
def test_gather_grad(shape, indices, axis, index_type):
    data = np.zeros(shape, np.float32)
    out_shape = np.take(data, indices, axis=axis).shape
    feeds = {"shape": np.array(shape, np.int64), "indices": indices.astype(index_type),
             "dy": _normal(*out_shape)}  # fmt: skip
    compare(
        single_node_model("GatherGrad", feeds, {"dx": np.float32}, axis=axis), feeds, **ROUNDING
    )


@pytest.mark.parametrize(
    "shape, indices",
    [
        ((10, 4), np.array([[1], [3], [1], [9]])),  # rows, one repeated
        ((10, 4), np.array([[[2], [2]], [[0], [5]]])),  # a batch of sequences of ids
        ((3, 4, 2), np.array([[0, 1], [2, 3], [0, 1]])),  # pairs of indices
        ((3, 4), np.array([[0, 1], [2, 3], [0, 1]])),  # elements
    ],
)
def test_gather_nd_grad(shape, indices):
    gathered = np.zeros(shape)[tuple(np.moveaxis(indices, -1, 0))]
    feeds = {"shape": np.array(shape, np.int64), "indices": indices.astype(np.int64),
             "dy": _normal(*gathered.shape)}  # fmt: skip
    compare(single_node_model("GatherNDGrad", feeds, {"dx": np.float32}), feeds, **ROUNDING)


@pytest.mark.parametrize(
    "shape, starts, ends, axes, steps",
    [
        ((6, 8), [1], [4], [1], None),
        ((6, 8), [1, 0], [-1, 8], [0, 1], [1, 2]),  # a negative end, a step
        ((6, 8), [5], [-100], [0], [-2]),  # backwards
        ((2, 3, 10), [2], [1000], [-1], None),  # an end past the axis, a negative axis
        ((1, 4), [0], [1], None, None),  # no axes: the first ones
        ((6, 8), [-3], [100], [1], None),
        ((6, 8), [4], [2], [0], None),  # empty
        ((2, 3, 10), [-100, 1], [5, -1], [-1, 1], None),
        ((2, 3, 10), [1, 0], [3, 2], [2, 0], [1, 1]),  # unit steps given at run time
    ],
)
@pytest.mark.parametrize("constant_steps", [False, True])
def test_slice_grad(shape, starts, ends, axes, steps, constant_steps):
    """Steps absent or constant ones: ``Pad``; others: a scatter of the positions."""
    grid = np.zeros(shape)
    axes_ = axes if axes is not None else list(range(len(starts)))
    index = [slice(None)] * len(shape)
    for k, axis in enumerate(axes_):
        index[axis] = slice(starts[k], ends[k], steps[k] if steps else 1)
    feeds = {"dy": _normal(*grid[tuple(index)].shape), "shape": np.array(shape, np.int64),
             "starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64)}  # fmt: skip
    if axes is not None:
        feeds["axes"] = np.array(axes, np.int64)
    constants = {}
    if steps is not None:
        (constants if constant_steps else feeds)["steps"] = np.array(steps, np.int64)
    if constant_steps and "axes" not in feeds:
        feeds["axes"] = np.arange(len(starts), dtype=np.int64)
    model = single_node_model("SliceGrad", feeds, {"dx": np.float32}, constants=constants)
    compare(model, feeds)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("lengths_output", [True, False])
def test_concat_training(axis, lengths_output):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, shape in enumerate(shapes):
        shape[axis] = k + 1
    feeds = {f"x{k}": _normal(*shape) for k, shape in enumerate(shapes)}
    outputs = {"y": np.float32, **({"lengths": np.int64} if lengths_output else {})}
    expected, _ = compare(single_node_model("ConcatTraining", feeds, outputs, axis=axis), feeds)
    if lengths_output:
        assert expected["lengths"].tolist() == [1, 2, 3]


@pytest.mark.parametrize("axis, split", [(0, [1, 3]), (1, [2, 2, 1]), (-1, [3, 0, 3])])
def test_split_training(axis, split):
    shape = [4, 5, 6]
    shape[axis] = sum(split)
    feeds = {"x": _normal(*shape), "split": np.array(split, np.int64)}
    outputs = {f"y{k}": np.float32 for k in range(len(split))}
    compare(single_node_model("SplitTraining", feeds, outputs, axis=axis), feeds)


@pytest.mark.parametrize("ratio", [None, 0.0, 0.3, 0.9])
@pytest.mark.parametrize("shape", [(1, 5), (6, 7)])
def test_dropout_grad(ratio, shape):
    feeds = {"dy": _normal(*shape), "mask": RNG.random(shape) < 0.6}
    if ratio is not None:
        feeds["ratio"] = np.array(ratio, np.float32)
    compare(single_node_model("DropoutGrad", feeds, {"dx": np.float32}), feeds)


def test_node_attributes_are_read_as_python_values_text_as_str():
    """The one reader of the gradients, the lowerings and the core's rewrites: text decoded,
    alone or in a list, a default for a missing attribute, and the whole set to copy a node."""
    from onnx import helper

    from helpers.portable.node_attributes import node_attribute, node_attributes

    node = helper.make_node(
        "GRU",
        ["x", "w", "r"],
        ["y"],
        direction="bidirectional",
        activations=["Sigmoid", "Tanh", "Relu", "Tanh"],
        hidden_size=4,
        clip=2.5,
    )
    assert node_attribute(node, "direction", "forward") == "bidirectional"
    assert node_attribute(node, "activations") == ["Sigmoid", "Tanh", "Relu", "Tanh"]
    assert (node_attribute(node, "hidden_size"), node_attribute(node, "clip")) == (4, 2.5)
    assert node_attribute(node, "layout", 0) == 0 and node_attribute(node, "linear") is None
    copy = helper.make_node("GRU", ["x2", "w", "r"], ["y"], **node_attributes(node))
    assert copy.attribute == node.attribute
