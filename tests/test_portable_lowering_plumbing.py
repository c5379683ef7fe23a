"""Scale, BroadcastGradientArgs and InPlaceAccumulatorV2 lowered, against 1.19.2's kernels.

These operators move values without rounding (a product by one factor, shapes, a sum of two):
the lowering must give the kernel's result bit for bit (tolerance 0)."""

import numpy as np
import pytest
from lowering_cases import compare, lowered_and_checked, run, with_output_ranks

from helpers.portable.lowering import lower_model
from helpers.portable.lowering.single_node import single_node_model

#: Each lowering is compared with the kernel it replaces, which only onnxruntime-training
#: 1.19.2 runs: skipped where that package is missing.
pytestmark = pytest.mark.training_package

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("scale_down", [0, 1])
@pytest.mark.parametrize("scale", [np.float32(3.0), np.float32(0.7), np.int64(64), np.int64(1)])
@pytest.mark.parametrize("shape", [(), (1,), (5, 3), (2, 3, 4)])
def test_scale_is_bit_exact(scale_down, scale, shape):
    data = RNG.standard_normal(shape).astype(np.float32)
    feeds = {"a": data, "s": np.array(scale)}
    expected, _ = compare(
        single_node_model("Scale", feeds, {"y": np.float32}, scale_down=scale_down), feeds
    )
    factor = 1 / np.float32(scale) if scale_down else np.float32(scale)
    assert not np.array_equal(expected["y"], data) or float(factor) == 1.0


def test_scale_takes_a_one_element_vector_as_its_factor():
    feeds = {"a": RNG.standard_normal((4, 2)).astype(np.float32), "s": np.array([7.0], np.float32)}
    compare(single_node_model("Scale", feeds, {"y": np.float32}, scale_down=1), feeds)


SHAPE_PAIRS = [
    ((64, 50), (50,)),  # a bias: the batch axis summed
    ((1, 50), (64, 50)),
    ((64, 1), (64, 50)),
    ((1, 1), (3, 4)),  # both axes, listed last first
    ((), (3, 4)),  # a scalar
    ((), ()),
    ((5,), (3, 4, 5)),  # missing leading axes
    ((4, 1), (3, 1, 1)),  # a missing axis where the other one is 1: still the shorter's
    ((2, 1, 5), (1, 3, 1)),
    ((7, 3), (7, 3)),  # nothing
    ((1,), (1,)),
    ((0, 3), (1, 3)),  # an empty batch
    ((8, 1, 6, 1), (7, 1, 5)),  # numpy's broadcasting example
]


@pytest.mark.parametrize("a_shape, b_shape", SHAPE_PAIRS + [(b, a) for a, b in SHAPE_PAIRS])
@pytest.mark.parametrize("outputs", [("ya", "yb"), ("ya", ""), ("", "yb")])
def test_broadcast_gradient_args_is_exact(a_shape, b_shape, outputs):
    feeds = {"a": np.array(a_shape, np.int64), "b": np.array(b_shape, np.int64)}
    model = single_node_model("BroadcastGradientArgs", feeds, dict.fromkeys(outputs, np.int64))
    expected, _ = compare(model, feeds)
    # summed over its axes, the broadcast result has the operand's size again
    full = np.broadcast_shapes(a_shape, b_shape)
    for name, shape in zip(outputs, (a_shape, b_shape)):
        if name:
            assert np.ones(full).sum(axis=tuple(expected[name])).size == np.prod(shape, dtype=int)


def test_broadcast_gradient_args_keeps_the_batch_size_free():
    feeds = {"a": np.array([64, 50], np.int64), "b": np.array([50], np.int64)}
    model = single_node_model("BroadcastGradientArgs", feeds, {"ya": np.int64, "yb": np.int64})
    lowered = lowered_and_checked(with_output_ranks(model, run(model, feeds)))
    for batch in (64, 7, 1):
        feeds["a"][0] = batch
        assert run(lowered, feeds)["yb"].tolist() == [0]


@pytest.mark.parametrize("overwrite", [None, True, False])
@pytest.mark.parametrize("shape", [(), (3,), (4, 5)])
@pytest.mark.parametrize("outputs", [("updated", "acc"), ("updated", "")])
def test_in_place_accumulator_v2_is_exact(overwrite, shape, outputs):
    feeds = {
        "buffer": RNG.standard_normal(shape).astype(np.float32),
        "value": RNG.standard_normal(shape).astype(np.float32),
    }
    if overwrite is not None:
        feeds["overwrite"] = np.array([overwrite])
    types = dict(zip(outputs, (np.bool_, np.float32)))
    expected, _ = compare(single_node_model("InPlaceAccumulatorV2", feeds, types), feeds)
    if "acc" in outputs:
        want = feeds["value"] if overwrite else feeds["buffer"] + feeds["value"]
        np.testing.assert_array_equal(expected["acc"], want)


@pytest.mark.parametrize("reset", [True, False])
def test_in_place_accumulator_v2_resolves_a_constant_overwrite(reset):
    """A step model's ``lazy_reset_grad`` is a constant True: the gradient passes through."""
    feeds = {
        "buffer": RNG.standard_normal((4, 3)).astype(np.float32),
        "value": RNG.standard_normal((4, 3)).astype(np.float32),
    }
    model = single_node_model(
        "InPlaceAccumulatorV2",
        feeds,
        {"updated": np.bool_, "acc": np.float32},
        constants={"reset": np.array([reset])},
    )
    expected = run(model, feeds)
    lowered = lowered_and_checked(with_output_ranks(model, expected))
    ops = [n.op_type for n in lowered.graph.node]
    assert ops == (["Constant", "Identity"] if reset else ["Constant", "Add"])
    np.testing.assert_array_equal(run(lowered, feeds)["acc"], expected["acc"])


def test_the_names_a_lowering_adds_take_the_prefix_given():
    """Two models lowered with two prefixes can be merged without a clash of names."""
    feeds = {"a": np.ones((2, 3), np.float32), "s": np.array(4, np.int64)}
    model = single_node_model("Scale", feeds, {"y": np.float32}, scale_down=1)
    added = {
        prefix: {t.name for t in lower_model(model, prefix=prefix).graph.initializer}
        for prefix in ("training", "optimizer")
    }
    assert added["training"] and all(n.startswith("training_") for n in added["training"])
    assert not added["training"] & added["optimizer"]
