"""Step models written by hand for the portable runner's tests, and their numpy reference.

A linear regression ``X @ coef + intercept`` trained on the mean squared error (weighted when
the step takes sample weights), by plain SGD at a constant rate, or by SGD with momentum at an
inverse-scaling rate ``learning_rate / sqrt(step)`` (so that the step count matters); with
``dropout``, the features go through a dropout whose mask is a random input the runner draws. The
models follow :mod:`helpers.portable.step_format` and need no exporter and no training package:
onnx and numpy only.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from helpers.portable.random_draws import RandomDraw
from helpers.portable.step_format import (
    StepRecord,
    initial_state,
    read_record,
    write_initial_state,
    write_record,
)

OPSET = 17
IR_VERSION = 10
FLOAT = TensorProto.FLOAT
TRAINED = ["coef", "intercept"]
#: The random input of a step with dropout.
MASK = "dropout_mask"


def _value(name, shape, elem_type=FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model(nodes, name, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION  # onnx 1.18 and later stamp IR 11, which 1.19.2 refuses
    return model


def inference_graph(n_features):
    """``variable = X @ coef + intercept``, the weights left out (the record adds them)."""
    nodes = [
        helper.make_node("MatMul", ["X", "coef"], ["product"]),
        helper.make_node("Add", ["product", "intercept"], ["variable"]),
    ]
    return _model(
        nodes,
        "linear_regression",
        [_value("X", [None, n_features])],
        [_value("variable", [None, 1])],
    )


def _gradient_nodes(weighted):
    """Loss and gradients: ``loss = sum(w d^2) / sum(w)``, ``d = prediction - label``."""
    nodes = [
        helper.make_node("MatMul", ["X", "coef"], ["product"]),
        helper.make_node("Add", ["product", "intercept"], ["prediction"]),
        helper.make_node("Sub", ["prediction", "label"], ["diff"]),
    ]
    if weighted:
        nodes += [
            helper.make_node("Unsqueeze", ["weight", "axis1"], ["weight_column"]),
            helper.make_node("ReduceSum", ["weight_column"], ["total"], keepdims=0),
        ]
    else:
        nodes += [
            helper.make_node("Shape", ["X"], ["rows"], end=1),
            helper.make_node("Cast", ["rows"], ["rows_float"], to=FLOAT),
            helper.make_node("ReduceSum", ["rows_float"], ["total"], keepdims=0),
            helper.make_node("Identity", ["diff"], ["weighted_diff"]),
        ]
    if weighted:
        nodes.append(helper.make_node("Mul", ["diff", "weight_column"], ["weighted_diff"]))
    nodes += [
        helper.make_node("Mul", ["weighted_diff", "diff"], ["squares"]),
        helper.make_node("ReduceSum", ["squares"], ["sum_squares"], keepdims=0),
        helper.make_node("Div", ["sum_squares", "total"], ["loss"]),
        helper.make_node("Div", ["weighted_diff", "total"], ["half_grad"]),
        helper.make_node("Mul", ["half_grad", "two"], ["grad"]),
        helper.make_node("Transpose", ["X"], ["X_t"]),
        helper.make_node("MatMul", ["X_t", "grad"], ["coef.grad"]),
        helper.make_node("ReduceSum", ["grad", "axis0"], ["intercept.grad"], keepdims=0),
    ]
    return nodes


def _update_nodes(momentum):
    """``w.next = w - rate * g``; with momentum ``b.next = mu b + g`` and ``g`` replaced by it."""
    if momentum is None:
        return [
            node
            for name in TRAINED
            for node in (
                helper.make_node("Mul", [f"{name}.grad", "learning_rate"], [f"{name}.delta"]),
                helper.make_node("Sub", [name, f"{name}.delta"], [f"{name}.next"]),
            )
        ]
    nodes = [
        helper.make_node("Cast", ["step"], ["step_float"], to=FLOAT),
        helper.make_node("Sqrt", ["step_float"], ["root_step"]),
        helper.make_node("Div", ["learning_rate", "root_step"], ["rate"]),
    ]
    for name in TRAINED:
        buffer = f"{name}.momentum_buffer"
        nodes += [
            helper.make_node("Mul", [buffer, "momentum"], [f"{buffer}.kept"]),
            helper.make_node("Add", [f"{buffer}.kept", f"{name}.grad"], [f"{buffer}.next"]),
            helper.make_node("Mul", [f"{buffer}.next", "rate"], [f"{name}.delta"]),
            helper.make_node("Sub", [name, f"{name}.delta"], [f"{name}.next"]),
        ]
    return nodes


def linear_step(
    n_features=3,
    learning_rate=0.05,
    momentum=None,
    weighted=False,
    seed=0,
    parameters=None,
    dropout=None,
):
    """The step model of a linear regression (:mod:`helpers.portable.step_format`'s layout).

    Parameters
    ----------
    n_features : int
    learning_rate : float
    momentum : float or None
        None: plain SGD at a constant rate; a float: SGD with momentum at
        ``learning_rate / sqrt(step)``, one buffer per weight in the state.
    weighted : bool
        The step takes sample weights (a third batch input, ``weight``).
    seed : int
        Seed of the initial weights.
    parameters : dict or None
        The record's training parameters (the runner's defaults).
    dropout : float or None
        The ratio of a dropout on the features, its mask an input (:data:`MASK`).

    Returns
    -------
    onnx.ModelProto
    """
    rng = np.random.default_rng(seed)
    initial = {
        "coef": rng.standard_normal((n_features, 1)).astype(np.float32),
        "intercept": np.array([0.5], dtype=np.float32),
    }
    state = list(TRAINED)
    if momentum is not None:
        for name in TRAINED:
            initial[f"{name}.momentum_buffer"] = np.zeros_like(initial[name])
            state.append(f"{name}.momentum_buffer")
    batch = [_value("X", [None, n_features]), _value("label", [None, 1])]
    if weighted:
        batch.append(_value("weight", [None]))
    constants = {
        "learning_rate": np.array(learning_rate, dtype=np.float32),
        "two": np.array(2.0, dtype=np.float32),
        "axis0": np.array([0], dtype=np.int64),
    }
    if weighted:
        constants["axis1"] = np.array([1], dtype=np.int64)
    if momentum is not None:
        constants["momentum"] = np.array(momentum, dtype=np.float32)
    nodes = _gradient_nodes(weighted) + _update_nodes(momentum)
    draws = []
    if dropout is not None:
        for node in nodes:  # the gradient reads the kept features
            node.input[:] = ["X_kept" if name == "X" else name for name in node.input]
        nodes.insert(0, helper.make_node("Mul", ["X", MASK], ["X_kept"]))
        draw = RandomDraw(MASK, "dropout", (dropout,), np.dtype(np.float32), operator="Dropout")
        draws.append(draw.to_record([[0, 1], [n_features, 0]]))
    model = _model(
        nodes,
        "linear_regression_step",
        batch
        + [_value("step", [], TensorProto.INT64)]
        + [_value(name, list(initial[name].shape)) for name in state]
        + [_value(MASK, [None, n_features])] * bool(draws),
        [_value("loss", [])]
        + [_value(f"{name}.next", list(initial[name].shape)) for name in state],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    write_initial_state(model, initial)
    record = StepRecord(
        batch_inputs=[v.name for v in batch],
        state=state,
        trained=list(TRAINED),
        inference=inference_graph(n_features).SerializeToString(),
        prediction_output="variable",
        parameters=dict(parameters or {}),
        draws=draws,
    )
    write_record(model, record)
    onnx.checker.check_model(model)
    return model


def reference_fit(
    model,
    X,
    y,
    epochs,
    batch_size,
    random_state,
    learning_rate,
    momentum=None,
    sample_weight=None,
    dropout=None,
):
    """The same training in numpy (float32), on the batches of :mod:`helpers.portable.batch_order`
    (and its masks, from :func:`~helpers.portable.batch_order.draws_generator`).

    Returns the loss of each step and the final weights.
    """
    from helpers.portable.batch_order import batch_bounds, draws_generator, epoch_order
    from helpers.portable.batch_order import random_state as make_rng

    masks = draws_generator(random_state)

    state = initial_state(model)
    y = y.reshape(-1, 1)
    weights = np.ones(len(X), np.float32) if sample_weight is None else sample_weight
    rng, losses, step = make_rng(random_state), [], 0
    for _ in range(epochs):
        order = epoch_order(rng, len(X))
        for start, end in batch_bounds(len(X), batch_size):
            rows = order[start:end]
            xb, yb, wb = X[rows], y[rows], weights[rows][:, None]
            if dropout is not None:
                draw = RandomDraw(MASK, "dropout", (dropout,), np.dtype(np.float32))
                xb = xb * draw.sample(masks, xb.shape)
            step += 1
            diff = xb @ state["coef"] + state["intercept"] - yb
            total = wb.sum(dtype=np.float32)
            losses.append(float((wb * diff * diff).sum(dtype=np.float32) / total))
            grad = np.float32(2) * (wb * diff) / total
            grads = {"coef": xb.T @ grad, "intercept": grad.sum(axis=0)}
            rate = np.float32(learning_rate)
            if momentum is not None:
                rate = rate / np.sqrt(np.float32(step))
            for name in TRAINED:
                if momentum is not None:
                    buffer = f"{name}.momentum_buffer"
                    state[buffer] = state[buffer] * np.float32(momentum) + grads[name]
                    grads[name] = state[buffer]
                state[name] = state[name] - rate * grads[name]
    return losses, state


def regression_data(n_rows=37, n_features=3, seed=1):
    """float32 features and a 1-D float32 label with a little noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    coef = rng.standard_normal(n_features).astype(np.float32)
    y = (X @ coef + 0.3 + 0.1 * rng.standard_normal(n_rows)).astype(np.float32)
    return X, y


def constant_step(learning_rate=0.1, parameters=None):
    """A step without features: it fits a constant ``c`` to the labels (mean squared error).

    Its only batch input is the label, and its inference model takes no input (it returns ``c``).
    """
    nodes = [
        helper.make_node("Sub", ["c", "label"], ["diff"]),
        helper.make_node("Mul", ["diff", "diff"], ["squares"]),
        helper.make_node("ReduceMean", ["squares"], ["loss"], keepdims=0),
        helper.make_node("ReduceMean", ["diff"], ["mean_diff"], axes=[0], keepdims=0),
        helper.make_node("Mul", ["mean_diff", "two_rate"], ["delta"]),
        helper.make_node("Sub", ["c", "delta"], ["c.next"]),
    ]
    constants = {"two_rate": np.array(2 * learning_rate, dtype=np.float32)}
    model = _model(
        nodes,
        "constant_step",
        [_value("label", [None, 1]), _value("step", [], TensorProto.INT64), _value("c", [1])],
        [_value("loss", []), _value("c.next", [1])],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    write_initial_state(model, {"c": np.zeros(1, np.float32)})
    inference = _model(
        [helper.make_node("Identity", ["c"], ["variable"])],
        "constant",
        [],
        [_value("variable", [1])],
    )
    record = StepRecord(["label"], ["c"], ["c"], inference.SerializeToString(), "variable")
    record.parameters = dict(parameters or {})
    write_record(model, record)
    onnx.checker.check_model(model)
    return model


def renamed_step(step, names):
    """``step`` with its inputs, state values and intermediate values renamed (``names``: old
    name to new), everywhere: graph, initial state, record and inference model."""
    renamed = onnx.ModelProto()
    renamed.CopyFrom(step)
    names = {**names, **{f"{old}.next": f"{new}.next" for old, new in names.items()}}

    def rename_graph(graph):
        for value in [*graph.input, *graph.output]:
            value.name = names.get(value.name, value.name)
        for node in graph.node:
            node.input[:] = [names.get(name, name) for name in node.input]
            node.output[:] = [names.get(name, name) for name in node.output]

    rename_graph(renamed.graph)
    values = {names.get(name, name): value for name, value in initial_state(step).items()}
    write_initial_state(renamed, values)
    record = read_record(renamed)
    for field in ("batch_inputs", "state", "trained"):
        setattr(record, field, [names.get(name, name) for name in getattr(record, field)])
    inference = onnx.ModelProto()
    inference.ParseFromString(record.inference)
    rename_graph(inference.graph)
    record.inference = inference.SerializeToString()
    write_record(renamed, record)
    onnx.checker.check_model(renamed)
    return renamed
