"""Gradients of the shape and indexing operators (helpers.portable.gradients.shapes, .indexing,
.padding).

Every option is checked against float64 central differences run by onnx's reference
evaluator, on weights (initializers: static shapes) and on graph inputs (unknown dimensions: the
run-time forms), and against 1.19.2's gradient builder where it has the gradient (``Pad`` in
``reflect``, ``edge`` and ``wrap`` modes through the project's training graph, which rewrites
it as ``Gather`` nodes). 1.19.2 has none for ``DepthToSpace`` and ``SpaceToDepth``, and fails on
the cases listed by ``UNTRAINABLE``, ``SLICES_1192_FAILS`` and in the tests: finite differences
only there. onnx's reference evaluator cannot run ``Pad`` with negative pads (onnx 1.17 and
1.23 alike) nor ``GatherElements`` with indices shorter than the input: those run on
onnxruntime, compared with 1.19.2 or torch's float64 autograd. ``Dropout`` in training mode
draws its mask at random: its gradient is checked against ``dy * mask / (1 - ratio)`` from the
mask of the same run.
"""

import numpy as np
import pytest
import torch
from gradient_check import (
    check_against_training_package,
    check_node,
    loss_without_sum,
    run_on_runtime,
    single_node_case,
    single_node_loss,
    to_float64,
)
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.portable.gradients import NoGradientError, build_gradients

RNG = np.random.default_rng(20261128)
W = RNG.standard_normal((2, 3, 4)).astype(np.float32)
IMAGE = RNG.standard_normal((2, 8, 3, 4)).astype(np.float32)


def _ints(*values):
    return np.array(values, np.int64)


def _node(op, inputs, outputs=("y",), **attributes):
    return helper.make_node(op, list(inputs), list(outputs), **attributes)


# --- shapes ---------------------------------------------------------------------------------
SHAPE_CASES = {
    "reshape": (_node("Reshape", ["w", "s"]), {"s": _ints(6, -1)}),
    "reshape_zero": (_node("Reshape", ["w", "s"]), {"s": _ints(0, -1)}),
    "flatten_0": (_node("Flatten", ["w"], axis=0), {}),
    "flatten_2": (_node("Flatten", ["w"], axis=2), {}),
    "flatten_neg": (_node("Flatten", ["w"], axis=-1), {}),
    "squeeze_none": (_node("Squeeze", ["u"]), {}),
    "squeeze_axes": (_node("Squeeze", ["u", "a"]), {"a": _ints(1, -1)}),
    "unsqueeze": (_node("Unsqueeze", ["w", "a"]), {"a": _ints(0, -1)}),
    "transpose": (_node("Transpose", ["w"], perm=[2, 0, 1]), {}),
    "transpose_reverse": (_node("Transpose", ["w"]), {}),
    "expand_rank": (_node("Expand", ["c", "s"]), {"s": _ints(2, 3, 4)}),
    "expand_ones": (_node("Expand", ["w", "s"]), {"s": _ints(1, 1, 4)}),
    "tile": (_node("Tile", ["w", "r"]), {"r": _ints(2, 1, 3)}),
    "concat_0": (_node("Concat", ["w", "w2"], axis=0), {}),
    "concat_repeated": (_node("Concat", ["w", "w2", "w"], axis=0), {}),
    "concat_neg": (_node("Concat", ["w", "w3"], axis=-1), {}),
    "concat_one": (_node("Concat", ["w"], axis=1), {}),
    "split_input": (_node("Split", ["w", "s"], ["y0", "y1"], axis=2), {"s": _ints(1, 3)}),
    "split_equal": (_node("Split", ["w"], ["y0", "y1"], axis=0), {}),
    "depth_to_space_dcr": (_node("DepthToSpace", ["i"], blocksize=2, mode="DCR"), {}),
    "depth_to_space_crd": (_node("DepthToSpace", ["i"], blocksize=2, mode="CRD"), {}),
    "space_to_depth": (_node("SpaceToDepth", ["j"], blocksize=2), {}),
}
#: Operators 1.19.2 has no gradient for, and cases its builder fails on: an input read twice
#: by a node ("Duplicate definition of name (w_grad)"), a ``Transpose`` without ``perm``
#: (``IndexError: unordered_map::at``).
UNTRAINABLE = {"DepthToSpace", "SpaceToDepth", "concat_repeated", "transpose_reverse"}
FLOATS = {
    "w": W,
    "w2": W[:1] * 2,
    "w3": W[..., :2] * 3,
    "u": W.reshape(2, 1, 12, 1),
    "c": np.float32([[1.5], [-2.0], [0.5]]),
    "i": IMAGE,
    "j": IMAGE.reshape(2, 2, 6, 8),
}


def _floats(node):
    return {k: FLOATS[k] for k in dict.fromkeys(node.input) if k in FLOATS}


@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_shape_gradients_on_weights(case):
    node, constants = SHAPE_CASES[case]
    training = not UNTRAINABLE & {node.op_type, case}
    check_node(node, {**_floats(node), **constants}, training=training)


@pytest.mark.parametrize("case", sorted(set(SHAPE_CASES) - {"depth_to_space_crd"}))
def test_shape_gradients_of_unknown_dimensions(case):
    """The same nodes on graph inputs whose dimensions shape inference does not know (but
    ``DepthToSpace`` in CRD mode, refused below)."""
    node, constants = SHAPE_CASES[case]
    check_node(node, constants, _floats(node), training=False)


@pytest.mark.parametrize(
    "opset, attributes, count",
    [(13, {}, 3), (18, {"num_outputs": 3}, 3), (18, {"num_outputs": 2}, 2)],
)
def test_split_forms_and_an_output_without_gradient(opset, attributes, count):
    """Opset 13 (equal parts) and 18 (``num_outputs``, uneven last part). A loss that reads
    all outputs but the second, whose gradient is zeros, by finite differences only: 1.19.2's
    builder concatenates the gradients that exist (a wrong shape); with all outputs, both."""
    x = RNG.standard_normal((2, 5 if count == 2 else 6)).astype(np.float32)
    outputs = [f"y{k}" for k in range(count)]
    node = _node("Split", ["x"], outputs, axis=1, **attributes)
    used = [o for o in outputs if o != "y1"]
    check_node(node, {"x": x}, opset=opset)
    check_node(node, {"x": x}, opset=opset, outputs=used, training=False)
    check_node(node, {}, {"x": x}, opset=opset, outputs=used, training=False)


def test_tile_with_repeats_computed_at_run_time():
    node = _node("Tile", ["w", "r"])
    check_node(node, {"w": W}, {"r": _ints(1, 2, 2)}, training=False)


def test_crd_depth_to_space_needs_the_channels():
    node = _node("DepthToSpace", ["x"], blocksize=2, mode="CRD")
    model, _ = single_node_case(node, {}, {"x": IMAGE})
    with pytest.raises(NoGradientError, match="number of channels"):
        build_gradients(model, ["x"])


def test_shape_and_size_pass_no_gradient():
    """``Shape``, ``Size`` and a round trip through integers: their outputs are integers, no
    gradient flows back through them."""
    nodes = [
        _node("Shape", ["w"], ["shape"]),
        _node("Size", ["w"], ["size"]),
        _node("Cast", ["w"], ["w_int"], to=TensorProto.INT64),
        _node("Cast", ["w_int"], ["w_back"], to=TensorProto.FLOAT),
        _node("ReduceSum", ["shape"], ["total"], keepdims=0),
        _node("Add", ["total", "size"], ["count"]),
        _node("Cast", ["count"], ["count_float"], to=TensorProto.FLOAT),
        _node("Mul", ["w_back", "count_float"], ["scaled"]),
    ]
    node = _node("Add", ["w", "scaled"])
    grads = check_node(node, {"w": W}, extra_nodes=nodes, training=False)
    assert not np.any(grads["w"] == 0)


# --- Dropout --------------------------------------------------------------------------------
@pytest.mark.parametrize("training", [None, False])
def test_dropout_in_inference_mode_is_the_identity(training):
    inputs = ["w", "r"] + (["t"] if training is not None else [])
    node = _node("Dropout", inputs, ["y", "mask"])
    constants = {"r": np.array(0.4, np.float32)}
    if training is not None:
        constants["t"] = np.array(training)
    model, feeds = single_node_case(node, {"w": W, **constants}, outputs=["y"])
    built = build_gradients(model, ["w"])
    (grad,) = ReferenceEvaluator(built.model).run([built.gradients["w"]], feeds)
    np.testing.assert_array_equal(grad, _loss_weights(model)[0])


def _loss_weights(model):
    """The random weights of the loss's terms (the outputs' gradients)."""
    return [
        numpy_helper.to_array(t) for t in model.graph.initializer if t.name.startswith("loss_r")
    ]


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("ratio", [None, 0.25, 0.0])
@pytest.mark.parametrize("mode", ["constant", "input_true", "input_false"])
def test_dropout_in_training_mode_scales_by_the_mask(opset, ratio, mode):
    """``dy * mask / (1 - ratio)`` with the mask the forward pass drew (ratio 0.5 when absent,
    the identity for ratio 0), on onnxruntime; a ``training_mode`` input chooses at run time."""
    inputs = ["w", "r" if ratio is not None else "", "t"]
    weights = {"w": W}
    if ratio is not None:
        weights["r"] = np.array(ratio, np.float32)
    feeds = {}
    if mode == "constant":
        weights["t"] = np.array(True)
    else:
        feeds["t"] = np.array(mode == "input_true")
    node = _node("Dropout", inputs, ["y", "mask"])
    model, feeds = single_node_loss(node, feeds, weights, {"y": W.shape}, opset=opset)
    built = build_gradients(model, ["w"])
    found = run_on_runtime(built.model, feeds, [built.gradients["w"], "mask"])
    grad, mask = found[built.gradients["w"]], found["mask"]
    keep = 1 - (0.5 if ratio is None else ratio)
    expected = _loss_weights(model)[0] * mask / keep
    if mode == "input_false" or ratio == 0.0:
        expected = _loss_weights(model)[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-6)


def test_dropout_in_training_mode_needs_its_mask():
    node = _node("Dropout", ["w", "", "t"])
    model, _ = single_node_loss(node, {}, {"w": W, "t": np.array(True)}, {"y": W.shape})
    with pytest.raises(NoGradientError, match="mask"):
        build_gradients(model, ["w"])


# --- Gather, GatherElements, GatherND -------------------------------------------------------
TABLE = RNG.standard_normal((10, 4)).astype(np.float32)
IDS = np.array([[1, 3, 3, 9], [-1, 0, 3, -10]], np.int64)  # repeats, negative ids


@pytest.mark.parametrize("opset", [13, 16])
@pytest.mark.parametrize(
    "axis, ids",
    [(0, IDS), (1, IDS % 4), (-1, np.array(2, np.int64)), (0, IDS.astype(np.int32)), (2, IDS % 4)],
)
def test_gather(opset, axis, ids):
    """Any axis, repeated and negative ids, a scalar id, int32 ids; opset 16 (``ScatterND``
    add) and 13 (one-hot ``MatMul``)."""
    table = TABLE if axis != 2 else W
    node = _node("Gather", ["w", "i"], axis=axis)
    check_node(node, {"w": table, "i": ids}, opset=opset)
    check_node(node, {"i": ids}, {"w": table}, opset=opset, training=False)


@pytest.mark.parametrize("opset", [13, 16])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(opset, axis):
    """Repeated and negative indices along each axis."""
    size = W.shape[axis]
    ids = RNG.integers(-size, size, W.shape).astype(np.int64)
    node = _node("GatherElements", ["w", "i"], axis=axis)
    check_node(node, {"w": W, "i": ids}, opset=opset)
    check_node(node, {"i": ids}, {"w": W}, opset=opset, training=False)


@pytest.mark.parametrize("opset", [13, 16])
@pytest.mark.parametrize("axis", [0, 2])
def test_gather_elements_with_shorter_indices_against_torch(opset, axis):
    """Indices shorter than the input on the other axes, run on onnxruntime and compared with
    torch's ``gather`` (onnx's reference evaluator refuses such indices)."""
    ids = RNG.integers(0, W.shape[axis], (2, 2, 3)).astype(np.int64)
    node = _node("GatherElements", ["w", "i"], axis=axis)
    model, feeds = single_node_loss(node, {}, {"w": W, "i": ids}, {"y": ids.shape}, opset=opset)
    built = build_gradients(model, ["w"])
    ours = run_on_runtime(built.model, feeds, [built.gradients["w"]])[built.gradients["w"]]
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    gathered = torch.gather(w, axis, torch.tensor(ids))
    (gathered * torch.tensor(_loss_weights(model)[0], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(ours, w.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 16])
@pytest.mark.parametrize(
    "batch_dims, ids",
    [
        (0, np.array([[0, 2], [1, -1], [0, 2]], np.int64)),
        (0, np.array([[[1], [0]], [[-1], [1]]], np.int64)),
        (1, np.array([[[2, 1], [0, 0], [2, 1]], [[1, 3], [-1, -4], [0, 0]]], np.int64)),
        (2, np.array([[[1], [3], [1]], [[0], [0], [2]]], np.int64)),
    ],
)
def test_gather_nd(opset, batch_dims, ids):
    """Index tuples of 1 and 2 values, repeated and negative; ``batch_dims`` 0 to 2."""
    node = _node("GatherND", ["w", "i"], batch_dims=batch_dims)
    check_node(node, {"w": W, "i": ids}, opset=opset)
    check_node(node, {"i": ids}, {"w": W}, opset=opset, training=False)


def test_gather_nd_needs_the_length_of_its_tuples():
    node = _node("GatherND", ["w", "i"], batch_dims=1)
    model, _ = single_node_case(node, {"w": W}, {"i": np.zeros((2, 1), np.int64)})
    with pytest.raises(NoGradientError, match="index tuples"):
        build_gradients(model, ["w"])


# --- Slice, Pad -----------------------------------------------------------------------------
BIG = np.iinfo(np.int64).max
SLICES = {
    "unit": (_ints(1, 0), _ints(3, 2), None, None),
    "axes": (_ints(1, -3), _ints(BIG, 1), _ints(-1, 0), None),
    "step_2": (_ints(0, 1), _ints(BIG, 4), _ints(1, 2), _ints(2, 2)),
    "reverse": (_ints(-1), _ints(-100), _ints(2), _ints(-1)),
    "reverse_2": (_ints(3, 2), _ints(0, -100), _ints(2, 1), _ints(-2, -3)),
    "reverse_to_min": (_ints(-1), _ints(-BIG - 1), _ints(2), _ints(-1)),
    "clamped": (_ints(-10, 1), _ints(10, -1), _ints(0, 2), None),
    "empty": (_ints(2), _ints(1), _ints(1), None),
}
#: Slices 1.19.2 fails on: negative steps ("SliceGrad ... narrowing_error"), an empty one
#: (its session stops at initialization, "Should be unreachable if CanRemoveNodeAndMergeEdges
#: is in sync").
SLICES_1192_FAILS = {"reverse", "reverse_2", "reverse_to_min", "empty"}


def _slice_node(case):
    starts, ends, axes, steps = SLICES[case]
    names = ["w", "s", "e", "a" if axes is not None else "", "p" if steps is not None else ""]
    while not names[-1]:
        names.pop()
    values = dict(zip("seap", (starts, ends, axes, steps)))
    return _node("Slice", names), {k: v for k, v in values.items() if v is not None}


@pytest.mark.parametrize("case", sorted(SLICES))
def test_slice_with_constant_bounds(case):
    """Unit, larger and negative steps, negative axes, bounds past the ends: one ``Pad`` and
    ``Gather``s of constant positions; on inputs of unknown length, the ``SliceGrad``
    lowering."""
    node, bounds = _slice_node(case)
    check_node(node, {"w": W, **bounds}, training=case not in SLICES_1192_FAILS)
    check_node(node, bounds, {"w": W}, training=False)


@pytest.mark.parametrize("case", ["unit", "axes", "reverse_2"])
def test_slice_with_bounds_computed_at_run_time(case):
    node, bounds = _slice_node(case)
    check_node(node, {"w": W}, bounds, training=False)


PADS = {
    "both_sides": _ints(0, 1, 2, 0, 1, 1),
    "one_axis": _ints(0, 0, 3, 0, 0, 2),
    "all_axes": _ints(1, 2, 3, 1, 2, 3),
}


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("case", sorted(PADS))
def test_pad(mode, case):
    """Each mode with constant pads on a weight and pads computed at run time on an input of
    unknown shape (1.19.2 has a gradient for ``constant`` mode only; ``wrap`` is opset 19).
    Pads computed at run time in ``constant`` mode give a ``Pad`` by negative pads: compared
    with 1.19.2 only (the reference evaluator cannot run it)."""
    pads = PADS[case] if mode != "reflect" else np.minimum(PADS[case], 1)
    opset = 19 if mode == "wrap" else 17
    node = _node("Pad", ["w", "p"], mode=mode)
    check_node(node, {"w": W, "p": pads}, opset=opset)
    if mode != "constant":
        check_node(node, {}, {"w": W, "p": pads}, opset=opset, training=False)
        return
    model, feeds = single_node_case(node, {"w": W}, {"p": pads}, opset=opset)
    check_against_training_package(loss_without_sum(model), ["w"], feeds)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_with_axes_and_a_padding_value(mode):
    """Opset 18's ``axes`` input (negative too) and a trained padding value (constant mode)."""
    node = _node("Pad", ["w", "p", "v" if mode == "constant" else "", "a"], mode=mode)
    weights = {"w": IMAGE, "p": _ints(1, 0, 2, 1), "a": _ints(-1, 2)}
    if mode == "constant":
        weights["v"] = np.array(0.75, np.float32)
    check_node(node, weights, opset=19 if mode == "wrap" else 18, training=mode != "constant")


def test_pad_refuses_pads_beyond_its_mode():
    node = _node("Pad", ["w", "p"], mode="edge")
    model, _ = single_node_loss(node, {}, {"w": W, "p": _ints(0, -1, 0, 0, 0, 0)}, {"y": (2, 2, 4)})
    with pytest.raises(NoGradientError, match="pads from 0"):
        build_gradients(model, ["w"])


def test_pad_with_negative_pads_against_torch():
    """Negative pads crop: the gradient pads back (a ``Pad`` onnx's reference cannot run)."""
    pads = _ints(0, -1, 2, 1, 1, -1)
    node = _node("Pad", ["w", "p"], mode="constant")
    model, feeds = single_node_loss(node, {}, {"w": W, "p": pads}, {"y": (3, 3, 5)})
    built = build_gradients(to_float64(model), ["w"])
    ours = run_on_runtime(built.model, feeds, [built.gradients["w"]])[built.gradients["w"]]
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    torch_pads = [int(p) for k in reversed(range(3)) for p in (pads[k], pads[k + 3])]
    padded = torch.nn.functional.pad(w, torch_pads)
    (padded * torch.tensor(_loss_weights(model)[0], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(ours, w.grad.numpy(), rtol=1e-12)


FLOAT64_CASES = {
    "gather": (_node("Gather", ["w", "i"], axis=1), {"i": IDS % 3}, {}),
    "gather_nd": (_node("GatherND", ["w", "i"]), {"i": np.array([[0, 2], [1, -1]], np.int64)}, {}),
    "slice": (_slice_node("reverse_2")[0], {}, _slice_node("reverse_2")[1]),
}


@pytest.mark.parametrize("case", sorted(FLOAT64_CASES))
def test_lowered_gradients_of_a_float64_model(case):
    """A model in float64 (not made float64 after the gradients are built): the lowerings'
    float32 zeros take its type; run on onnxruntime, equal to the float64 finite-difference
    check of the float32 model's gradients."""
    node, constants, feeds = FLOAT64_CASES[case]
    expected = check_node(node, {"w": W, **constants}, feeds, opset=16, training=False)
    model, feeds = single_node_case(node, {"w": W, **constants}, feeds, opset=16)
    built = build_gradients(to_float64(model), ["w"])
    ours = run_on_runtime(built.model, feeds, [built.gradients["w"]])[built.gradients["w"]]
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, expected["w"], rtol=1e-12)


@pytest.mark.parametrize("opset", [13, 17])
def test_dropout_gradient_of_a_float64_model(opset):
    node = _node("Dropout", ["w", "r", "t"], ["y", "mask"])
    weights = {"w": W, "r": np.array(0.25, np.float32), "t": np.array(True)}
    model, feeds = single_node_loss(node, {}, weights, {"y": W.shape}, opset=opset)
    built = build_gradients(to_float64(model), ["w"])
    found = run_on_runtime(built.model, feeds, [built.gradients["w"], "mask"])
    expected = _loss_weights(model)[0].astype(np.float64) * found["mask"] / 0.75
    np.testing.assert_allclose(found[built.gradients["w"]], expected, rtol=1e-12)
