"""The scalars a step model computes from its ``step`` input are the float32 values ``fit``
gives its update graph: the schedule's learning rate and the rule's ``step_scalars``, in double
precision, then cast."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

from helpers.core.export.step_scalars import step_scalar_nodes
from helpers.core.updates.learning_rates import LearningRateSchedule
from helpers.core.updates.update_rules import make_update_rule

SCHEDULES = [
    LearningRateSchedule(0.05),
    LearningRateSchedule(0.1, learning_rate="invscaling", power_t=0.3),
    LearningRateSchedule(alpha=0.01, learning_rate="optimal"),
]


def scalar_session(schedule, rule):
    nodes, names = step_scalar_nodes("step", schedule, rule)
    graph = helper.make_graph(
        nodes,
        "scalars",
        [helper.make_tensor_value_info("step", TensorProto.INT64, [])],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, []) for value in names.values()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    return onnxruntime.InferenceSession(model.SerializeToString()), list(names)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.learning_rate)
@pytest.mark.parametrize("solver", ["sgd", "momentum", "nesterov", "adamw"])
def test_scalars_equal_the_python_formulas(solver, schedule):
    rule = make_update_rule(solver, momentum=0.7, betas=(0.8, 0.99), weight_decay=0.1)
    session, names = scalar_session(schedule, rule)
    for t in (1, 2, 7, 1000, 123457):
        expected = rule.step_scalars(schedule.value(t), t)
        got = dict(zip(names, session.run(None, {"step": np.array(t, np.int64)})))
        assert set(got) == set(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], np.float32(value), err_msg=f"{name}, t={t}")


def test_a_changing_scalar_without_formula_is_refused():
    class Decaying(type(make_update_rule("sgd"))):
        name = "decaying"

        def step_scalars(self, learning_rate, t):
            return {"lr": learning_rate, "shrink": 0.5**t}

    with pytest.raises(NotImplementedError, match="'shrink'"):
        step_scalar_nodes("step", SCHEDULES[0], Decaying())
