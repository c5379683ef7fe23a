"""One epoch of training in one call: the step model inside an ONNX ``Loop`` over the batches.

:func:`epoch_model` turns a step model (:mod:`helpers.portable.step_format`) into the model of
a whole epoch. Its graph:

* inputs: each batch input with every row of the data set (same names as the step's), the
  epoch's order of the rows :data:`ORDER_INPUT` (int64 ``[N]``, a permutation drawn as
  :mod:`helpers.portable.batch_order` draws it), :data:`BATCH_SIZE_INPUT` (int64 scalar),
  ``step`` (int64 scalar: the count of the epoch's first step), then the state, each value with
  its default as in the step model;
* outputs: ``NAME.next`` for each state value after the epoch's last step, then
  :data:`LOSSES_OUTPUT`, the loss of each step (float ``[batches]``).

The loop body gathers the rows ``order[k * batch_size : (k + 1) * batch_size]`` of each batch
input (the last batch is smaller: ``Slice`` stops at the end), runs the step's nodes
unchanged with the step count ``step + k``, and carries the state to the next batch. The
runtime runs the same kernels on the same values as one call per step: the losses and the
state agree bit for bit (tests/portable check it on 1.19.2 and on the maintained runtime).
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .step_format import LOSS_OUTPUT, STEP_INPUT, read_record

#: The epoch model's input holding the order of the rows (a permutation, int64).
ORDER_INPUT = "order"
#: The epoch model's input holding the number of rows of a batch (int64 scalar).
BATCH_SIZE_INPUT = "batch_size"
#: The epoch model's output holding the loss of each step of the epoch.
LOSSES_OUTPUT = "losses"
#: The prefix of the names the loop adds, and of the step's interface names inside the body.
PREFIX = "epoch_loop/"


def _rename_references(graph, names):
    """Rename the node inputs and outputs of ``graph`` (and of its subgraphs) found in ``names``."""
    for node in graph.node:
        node.input[:] = [names.get(name, name) for name in node.input]
        node.output[:] = [names.get(name, name) for name in node.output]
        for attribute in node.attribute:
            for subgraph in [
                *([attribute.g] if attribute.HasField("g") else []),
                *attribute.graphs,
            ]:
                _rename_references(subgraph, names)


def _body(step, record, names):
    """The loop body: gather the batch, run the step's nodes, carry the state."""
    body_inputs = {i.name: i for i in step.graph.input}
    step_outputs = {o.name: o for o in step.graph.output}
    p = PREFIX
    nodes = [
        helper.make_node("Mul", [p + "k", BATCH_SIZE_INPUT], [p + "start"]),
        helper.make_node("Add", [p + "start", BATCH_SIZE_INPUT], [p + "end"]),
        helper.make_node("Reshape", [p + "start", p + "one_dim"], [p + "starts"]),
        helper.make_node("Reshape", [p + "end", p + "one_dim"], [p + "ends"]),
        helper.make_node("Slice", [ORDER_INPUT, p + "starts", p + "ends"], [p + "rows"]),
        *(
            helper.make_node("Gather", [name, p + "rows"], [names[name]], axis=0)
            for name in record.batch_inputs
        ),
        helper.make_node("Add", [STEP_INPUT, p + "k"], [names[STEP_INPUT]]),
        helper.make_node("Identity", [p + "cond"], [p + "cond_out"]),
    ]
    graph = onnx.GraphProto()
    graph.node.extend(step.graph.node)
    _rename_references(graph, names)
    nodes.extend(graph.node)

    def renamed(value_info):
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(value_info)
        copy.name = names[value_info.name]
        return copy

    return helper.make_graph(
        nodes,
        "epoch_body",
        [
            helper.make_tensor_value_info(p + "k", TensorProto.INT64, []),
            helper.make_tensor_value_info(p + "cond", TensorProto.BOOL, []),
            *(renamed(body_inputs[name]) for name in record.state),
        ],
        [
            helper.make_tensor_value_info(p + "cond_out", TensorProto.BOOL, []),
            *(renamed(step_outputs[record.next_name(name)]) for name in record.state),
            renamed(step_outputs[LOSS_OUTPUT]),
        ],
    )


def epoch_model(step):
    """The model of one epoch of ``step``: a ``Loop`` over its batches.

    Parameters
    ----------
    step : onnx.ModelProto
        A step model (:mod:`helpers.portable.step_format`).

    Returns
    -------
    onnx.ModelProto
        Same IR version and opsets as ``step``; inputs and outputs as the module says.

    Examples
    --------
    >>> import numpy as np, onnxruntime
    >>> from helpers.portable.step_format import StepRecord, write_record
    >>> def value(name, shape, elem=TensorProto.FLOAT):
    ...     return helper.make_tensor_value_info(name, elem, shape)
    >>> nodes = [helper.make_node("ReduceSum", ["X"], ["loss"], keepdims=0),  # loss: sum of X
    ...          helper.make_node("Add", ["total", "loss"], ["total.next"])]  # state: running sum
    >>> graph = helper.make_graph(
    ...     nodes, "step", [value("X", [None]), value("step", [], TensorProto.INT64),
    ...     value("total", [])], [value("loss", []), value("total.next", [])],
    ...     initializer=[numpy_helper.from_array(np.array(0, np.float32), "total")])
    >>> step = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> step.ir_version = 10
    >>> write_record(step, StepRecord(["X"], ["total"], [], b""))
    >>> session = onnxruntime.InferenceSession(epoch_model(step).SerializeToString(),
    ...                                        providers=["CPUExecutionProvider"])
    >>> total, losses = session.run(None, {
    ...     "X": np.arange(5, dtype=np.float32), "order": np.array([4, 3, 2, 1, 0]),
    ...     "batch_size": np.array(2), "step": np.array(1)})
    >>> losses.tolist(), float(total)
    ([7.0, 3.0, 0.0], 10.0)
    """
    record = read_record(step)
    interface = [
        *record.batch_inputs,
        STEP_INPUT,
        *record.state,
        LOSS_OUTPUT,
        *(record.next_name(name) for name in record.state),
    ]
    names = {name: PREFIX + name for name in interface}
    p = PREFIX
    nodes = [
        helper.make_node("Shape", [ORDER_INPUT], [p + "n_rows"]),
        helper.make_node("Sub", [BATCH_SIZE_INPUT, p + "one"], [p + "last_row"]),
        helper.make_node("Add", [p + "n_rows", p + "last_row"], [p + "padded_rows"]),
        helper.make_node("Div", [p + "padded_rows", BATCH_SIZE_INPUT], [p + "batches"]),
        helper.make_node("Reshape", [p + "batches", p + "scalar_shape"], [p + "trip_count"]),
        helper.make_node(
            "Loop",
            [p + "trip_count", "", *record.state],
            [*(record.next_name(name) for name in record.state), LOSSES_OUTPUT],
            body=_body(step, record, names),
        ),
    ]
    constants = [
        numpy_helper.from_array(np.array(1, np.int64), p + "one"),
        numpy_helper.from_array(np.array([1], np.int64), p + "one_dim"),
        numpy_helper.from_array(np.zeros(0, np.int64), p + "scalar_shape"),
    ]
    step_inputs = {i.name: i for i in step.graph.input}
    step_outputs = {o.name: o for o in step.graph.output}
    graph = helper.make_graph(
        nodes,
        "epoch",
        [
            *(step_inputs[name] for name in record.batch_inputs),
            helper.make_tensor_value_info(ORDER_INPUT, TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info(BATCH_SIZE_INPUT, TensorProto.INT64, []),
            step_inputs[STEP_INPUT],
            *(step_inputs[name] for name in record.state),
        ],
        [
            *(step_outputs[record.next_name(name)] for name in record.state),
            helper.make_tensor_value_info(LOSSES_OUTPUT, TensorProto.FLOAT, ["batches"]),
        ],
        initializer=[*step.graph.initializer, *constants],
    )
    model = helper.make_model(graph, opset_imports=list(step.opset_import))
    model.ir_version = step.ir_version
    return model
