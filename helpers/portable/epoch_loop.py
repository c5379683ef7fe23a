"""Whole batches of an epoch in one call: the step model inside an ONNX ``Scan`` over them.

:func:`epoch_model` turns a step model (:mod:`helpers.portable.step_format`) into the model of
the whole batches of an epoch. Its graph:

* inputs: each batch input with every row of the data set (same names as the step's), the order
  of the rows the batches take (int64 ``[N]``, the epoch's permutation drawn as
  :mod:`helpers.portable.batch_order` draws it, cut to a multiple of the batch size), the rows
  of a batch (int64 scalar), ``step`` (int64 scalar: the count of the first step), then the
  state, each value without a default (the trainer feeds it);
* outputs: ``NAME.next`` for each state value after the last step, then the loss of each step
  (float ``[N / batch_size]``).

The names the model adds (the order, the batch size, the losses and every value of its own)
begin with a prefix that no name of the step begins with, ``epoch_loop/`` unless the step uses
it (:func:`loop_names`): a step whose inputs or state are named ``order``, ``batch_size`` or
``losses`` has an epoch model too.

The order is reshaped to one row of indices per batch, which ``Scan`` hands its body one at a
time: the body gathers those rows of each batch input, runs the step's nodes unchanged, and
carries the state (and the step count, when a node reads it) to the next batch. That is one
node of bookkeeping per batch input a step, which matters on a small model: the runtime spends
about half a microsecond on each node a step runs. The last batch of an epoch, smaller when the
batch size does not divide the rows, is a step of its own
(:class:`~helpers.portable.step_session.StepSession`). The runtime runs the same kernels on the
same values as one call per step: the losses and the state agree bit for bit (tests/portable
check it on 1.19.2 and on the maintained runtime).
"""

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .node_attributes import names_read, subgraphs
from .runtime_support import default_opset
from .step_format import LOSS_OUTPUT, STEP_INPUT, read_record

#: The prefix of the names the loop adds, unless the step has a name that begins with it.
PREFIX = "epoch_loop/"
#: The first opset of the default domain whose ``Scan`` takes scan inputs of any length.
SCAN_OPSET = 9


@dataclasses.dataclass(frozen=True)
class LoopNames:
    """The names an epoch model adds to its step's: all begin with :attr:`prefix`.

    Attributes
    ----------
    prefix : str
        ``epoch_loop/``, or ``epoch_loop_2/``, ``epoch_loop_3/``... when the step has a name
        that begins with the previous ones.

    Examples
    --------
    >>> names = LoopNames("epoch_loop/")
    >>> names.order, names.batch_size, names.losses
    ('epoch_loop/order', 'epoch_loop/batch_size', 'epoch_loop/losses')
    """

    prefix: str

    @property
    def order(self):
        """The input holding the order of the rows (a permutation, int64 ``[N]``)."""
        return self.prefix + "order"

    @property
    def batch_size(self):
        """The input holding the number of rows of a batch (int64 scalar)."""
        return self.prefix + "batch_size"

    @property
    def losses(self):
        """The output holding the loss of each step of the epoch."""
        return self.prefix + "losses"

    def own(self, name):
        """A value of the loop itself (its counter, its bounds...)."""
        return self.prefix + name

    def step_value(self, name):
        """The name inside the loop body of the step's input or output ``name`` (apart from the
        loop's own names: a state value named ``k`` is not the loop's counter)."""
        return self.prefix + "value/" + name


def _graph_names(graph):
    """Every name ``graph`` and its subgraphs use: values, initializers, nodes."""
    names = {value.name for value in [*graph.input, *graph.output, *graph.value_info]}
    names.update(tensor.name for tensor in graph.initializer)
    names.update(tensor.values.name for tensor in graph.sparse_initializer)
    for node in graph.node:
        names.update([*node.input, *node.output, node.name])
        for subgraph in subgraphs(node):
            names.update(_graph_names(subgraph))
    return names


def loop_names(step):
    """The names :func:`epoch_model` adds to ``step``'s: a prefix none of its names begins with.

    Parameters
    ----------
    step : onnx.ModelProto
        A step model.

    Returns
    -------
    LoopNames

    Examples
    --------
    >>> def step_with(name):
    ...     graph = helper.make_graph([helper.make_node("Identity", ["x"], [name])], "g", [], [])
    ...     return helper.make_model(graph)
    >>> loop_names(step_with("order")).order
    'epoch_loop/order'
    >>> loop_names(step_with("epoch_loop/order")).order
    'epoch_loop_2/order'
    """
    used = _graph_names(step.graph)
    prefix, count = PREFIX, 1
    while any(name.startswith(prefix) for name in used):
        count += 1
        prefix = f"epoch_loop_{count}/"
    return LoopNames(prefix)


def _rename_references(graph, names):
    """Rename the node inputs and outputs of ``graph`` (and of its subgraphs) found in ``names``."""
    for node in graph.node:
        node.input[:] = [names.get(name, name) for name in node.input]
        node.output[:] = [names.get(name, name) for name in node.output]
        for subgraph in subgraphs(node):
            _rename_references(subgraph, names)


def _body(step, record, loop, counts_steps):
    """The scan body: gather the batch, run the step's nodes, carry the state (and the step
    count when ``counts_steps``)."""
    body_inputs = {i.name: i for i in step.graph.input}
    step_outputs = {o.name: o for o in step.graph.output}
    own, inner = loop.own, loop.step_value
    nodes = [
        helper.make_node("Gather", [name, own("rows")], [inner(name)], axis=0)
        for name in record.batch_inputs
    ]
    if counts_steps:
        nodes.append(helper.make_node("Add", [inner(STEP_INPUT), own("one")], [own("next_step")]))
    interface = [
        *record.batch_inputs,
        STEP_INPUT,
        *record.state,
        LOSS_OUTPUT,
        *(record.next_name(name) for name in record.state),
    ]
    graph = onnx.GraphProto()
    graph.node.extend(step.graph.node)
    _rename_references(graph, {name: inner(name) for name in interface})
    nodes.extend(graph.node)

    def renamed(value_info):
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(value_info)
        copy.name = inner(value_info.name)
        return copy

    count = [helper.make_tensor_value_info(inner(STEP_INPUT), TensorProto.INT64, [])]
    next_count = [helper.make_tensor_value_info(own("next_step"), TensorProto.INT64, [])]
    return helper.make_graph(
        nodes,
        "epoch_body",
        [
            *(renamed(body_inputs[name]) for name in record.state),
            *count * counts_steps,
            helper.make_tensor_value_info(own("rows"), TensorProto.INT64, [own("batch_rows")]),
        ],
        [
            *(renamed(step_outputs[record.next_name(name)]) for name in record.state),
            *next_count * counts_steps,
            renamed(step_outputs[LOSS_OUTPUT]),
        ],
    )


def _every_row(value, rows):
    """The declaration of a batch input that holds every row (a step's may fix a batch's rows)."""
    every = onnx.ValueInfoProto()
    every.CopyFrom(value)
    dims = every.type.tensor_type.shape.dim
    if len(dims):
        dims[0].Clear()
        dims[0].dim_param = rows
    return every


def epoch_model(step):
    """The model of the whole batches of an epoch of ``step``: a ``Scan`` over them.

    Parameters
    ----------
    step : onnx.ModelProto
        A step model (:mod:`helpers.portable.step_format`).

    Returns
    -------
    onnx.ModelProto
        Same IR version and opsets as ``step``; inputs and outputs as the module says, the
        loop's own named by :func:`loop_names`.

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
    ...     value("total", [])], [value("loss", []), value("total.next", [])])
    >>> step = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> step.ir_version = 10
    >>> write_record(step, StepRecord(["X"], ["total"], [], b""))
    >>> session = onnxruntime.InferenceSession(epoch_model(step).SerializeToString(),
    ...                                        providers=["CPUExecutionProvider"])
    >>> loop = loop_names(step)
    >>> total, losses = session.run(None, {  # rows 4 and 3, then 2 and 1
    ...     "X": np.arange(5, dtype=np.float32), loop.order: np.array([4, 3, 2, 1]),
    ...     loop.batch_size: np.array(2), "step": np.array(1), "total": np.array(0, np.float32)})
    >>> losses.tolist(), float(total)
    ([7.0, 3.0], 10.0)
    """
    record = read_record(step)
    loop = loop_names(step)
    own = loop.own
    opset = default_opset(step)
    if opset < SCAN_OPSET:
        raise ValueError(
            f"The step model imports opset {opset} of the ONNX domain; its epoch model runs the "
            f"batches in a Scan, which needs opset {SCAN_OPSET}: export the step with opset "
            f"{SCAN_OPSET} or later, or train it with epoch_loop=False."
        )
    counts_steps = STEP_INPUT in names_read(step.graph)
    nodes = [
        helper.make_node("Reshape", [loop.batch_size, own("one_dim")], [own("batch_dim")]),
        helper.make_node(
            "Concat", [own("any_dim"), own("batch_dim")], [own("batch_shape")], axis=0
        ),
        helper.make_node("Reshape", [loop.order, own("batch_shape")], [own("batches")]),
        helper.make_node(
            "Scan",
            [*record.state, *[STEP_INPUT] * counts_steps, own("batches")],
            [
                *(record.next_name(name) for name in record.state),
                *[own("last_step")] * counts_steps,
                loop.losses,
            ],
            body=_body(step, record, loop, counts_steps),
            num_scan_inputs=1,
        ),
    ]
    constants = [
        numpy_helper.from_array(np.array([1], np.int64), own("one_dim")),
        numpy_helper.from_array(np.array([-1], np.int64), own("any_dim")),
        *[numpy_helper.from_array(np.array(1, np.int64), own("one"))] * counts_steps,
    ]
    step_inputs = {i.name: i for i in step.graph.input}
    defaults = [i.name for i in step.graph.initializer if i.name in step_inputs]
    step_outputs = {o.name: o for o in step.graph.output}
    graph = helper.make_graph(
        nodes,
        "epoch",
        [
            *(_every_row(step_inputs[name], own("rows")) for name in record.batch_inputs),
            helper.make_tensor_value_info(loop.order, TensorProto.INT64, [own("N")]),
            helper.make_tensor_value_info(loop.batch_size, TensorProto.INT64, []),
            step_inputs[STEP_INPUT],
            *(step_inputs[name] for name in record.state),
            *(step_inputs[name] for name in defaults),  # a lean step's: not constants
        ],
        [
            *(step_outputs[record.next_name(name)] for name in record.state),
            helper.make_tensor_value_info(loop.losses, TensorProto.FLOAT, [own("steps")]),
        ],
        initializer=[*step.graph.initializer, *constants],
    )
    model = helper.make_model(graph, opset_imports=list(step.opset_import))
    model.ir_version = step.ir_version
    return model
