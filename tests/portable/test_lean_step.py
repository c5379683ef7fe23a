"""lean_step's exact rewrites on small graphs, and the epoch model's bookkeeping per step."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from step_models import linear_step

from helpers.portable.epoch_loop import epoch_model
from helpers.portable.lean_step import lean_step
from helpers.portable.step_format import read_record


def chain(reductions, axes_sizes=(3, 1)):
    """``x [N, *axes_sizes]`` through ``reductions`` (op_type, attributes) to ``y``."""
    nodes, value = [], "x"
    for k, (op_type, attributes) in enumerate(reductions):
        nodes.append(helper.make_node(op_type, [value], [f"r{k}"], **attributes))
        value = f"r{k}"
    nodes.append(helper.make_node("Neg", [value], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, *axes_sizes])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run(model, x):
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_reductions_over_one_element_become_one_reshape(op_type):
    """Reduce axis 2 (one element), then the batch's one row: a single Reshape, same values."""
    model = chain([(op_type, {"axes": [2], "keepdims": 0}), (op_type, {"keepdims": 0})], (1, 1))
    x = np.random.default_rng(0).normal(size=(1, 1, 1)).astype(np.float32)
    lean = lean_step(model, batch_size=1)
    assert [n.op_type for n in lean.graph.node] == ["Reshape", "Neg"]
    assert run(lean, x).shape == run(model, x).shape == ()
    np.testing.assert_array_equal(run(lean, x), run(model, x))


def test_a_sum_over_the_rows_of_a_one_row_batch_is_a_copy():
    """ReduceSum over the rows, keepdims: with one row, the value itself (no node left)."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    graph = helper.make_graph([*nodes, helper.make_node("Neg", ["y"], ["z"])], "g", [x], [])
    graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    graph.initializer.append(axes)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert [n.op_type for n in lean_step(model, batch_size=1).graph.node] == ["Neg"]
    assert [n.op_type for n in lean_step(model, batch_size=2).graph.node] == ["ReduceSum", "Neg"]


def test_a_reduction_over_several_elements_stays():
    model = chain([("ReduceMean", {"axes": [1], "keepdims": 0})])
    lean = lean_step(model, batch_size=2)
    assert [n.op_type for n in lean.graph.node] == ["ReduceMean", "Neg"]


def test_a_step_made_lean_twice_is_still_valid():
    """The shapes lean_step adds get names the step does not use yet."""
    model = chain([("ReduceMean", {"axes": [2], "keepdims": 0})])
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 1
    twice = lean_step(lean_step(model, batch_size=1), batch_size=1)
    x = np.ones((1, 3, 1), np.float32)
    np.testing.assert_array_equal(run(twice, x), run(model, x))


@pytest.mark.parametrize("momentum", [None, 0.9])
def test_a_scan_step_gathers_its_batch_and_nothing_more(momentum):
    """One Gather per batch input, and the step count only where a node reads it."""
    step = linear_step(momentum=momentum)
    body = next(n for n in epoch_model(step).graph.node if n.op_type == "Scan").attribute
    nodes = next(a.g.node for a in body if a.name == "body")
    extra = len(nodes) - len(step.graph.node)
    reads_step = any("step" in node.input for node in step.graph.node)
    assert extra == len(read_record(step).batch_inputs) + reads_step
