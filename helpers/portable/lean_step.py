"""A step model without the nodes it does not need: folded, and specialised to a batch size.

A step built by a gradient builder computes much that does not depend on the data: the
``1/N`` of a mean from the batch's shape (``Shape``, ``Size``, ``Gather``, ``Cast``,
``Reciprocal``...), constants cast at every step, values computed twice, copies
(``Identity``). Each node costs the runtime about half a microsecond a step, which is most of
the step of a small model. :func:`lean_step` removes them:

* nodes whose inputs are all constants are run once, by onnxruntime itself (the kernels the
  step would run, so the values are the same to the last bit), and replaced by their results,
  unless a result is larger than what it is computed from (an ``Expand`` to a batch's shape
  stays a node);
* with ``batch_size``, the batch inputs get that many rows: ``Shape`` and ``Size`` of values
  whose shape is then known are constants too, and so is everything computed from them;
* ``Identity`` nodes are bypassed, and nodes no output needs are removed.

The result trains bit for bit as the step it comes from, on batches of ``batch_size`` rows
(tests/portable and tests/test_lean_zoo_steps.py check every model of the zoo).
:class:`~helpers.portable.trainer.PortableTrainer` makes one for the batch size of a fit and
one for its last, smaller batch.
"""

import itertools

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

from .node_attributes import names_read, node_attributes, subgraphs
from .random_draws import shape_for_rows
from .runtime_support import make_session
from .step_format import read_record

#: Operators never folded: they draw random values, or hold a graph.
NOT_FOLDED = {
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "Dropout",
    "If",
    "Loop",
    "Scan",
}
#: A folded value may hold this many elements even when its inputs hold fewer.
SMALL_VALUE = 1024


def _subgraph_inputs(node):
    """The names the subgraphs of ``node`` read (an outer value they use must stay a value)."""
    return set().union(*(names_read(graph) for graph in subgraphs(node)))


def _static_shapes(model):
    """Value name to shape (a tuple of ints) where onnx's shape inference knows every dimension.

    Declarations of a symbolic shape or of a folded value are left out: shape inference keeps a
    declared ``batch`` dimension where the rows are now known."""
    model = _copy(model)
    constants = {i.name for i in model.graph.initializer}
    known = [
        v
        for v in model.graph.value_info
        if v.name not in constants
        and all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)
    ]
    del model.graph.value_info[:]
    model.graph.value_info.extend(known)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    graph = inferred.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    return shapes


def _shape_value(node, shape):
    """What ``Shape`` or ``Size`` of a value of static ``shape`` returns."""
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    attributes = node_attributes(node)
    start, end = attributes.get("start", 0), attributes.get("end", len(shape))
    return np.array(shape[start:end], dtype=np.int64)


def _foldable(graph, shapes, rows):
    """The nodes to run once, the values known before any runs (initializers, shapes), and the
    values computed from the shapes of ``rows`` (the values with a row per sample)."""
    inputs = {i.name for i in graph.input}
    known = {i.name: numpy_helper.to_array(i) for i in graph.initializer if i.name not in inputs}
    constant = set(known) | {""}
    folded, of_rows = [], set()
    for node in graph.node:
        if node.op_type in ("Shape", "Size") and node.input[0] in shapes:
            known[node.output[0]] = _shape_value(node, shapes[node.input[0]])
            constant.add(node.output[0])
            if node.input[0] in rows:
                of_rows.add(node.output[0])
        elif node.op_type not in NOT_FOLDED and node.domain in ("", "ai.onnx"):
            if all(name in constant for name in node.input):
                folded.append(node)
                constant.update(node.output)
                if of_rows & set(node.input):
                    of_rows.update(node.output)
    return folded, known, of_rows


def _run_once(model, nodes, known):
    """The outputs of ``nodes`` (whose inputs are the ``known`` values), run by onnxruntime."""
    outputs = [o for node in nodes for o in node.output if o]
    if not outputs:
        return {}
    needed = {name for node in nodes for name in node.input} & set(known)
    graph = helper.make_graph(
        nodes,
        "folded",
        [],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(known[name], name) for name in sorted(needed)],
    )
    constants = helper.make_model(graph, opset_imports=model.opset_import)
    constants.ir_version = model.ir_version
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = make_session(constants, ["CPUExecutionProvider"], session_options=options)
    return dict(zip(outputs, session.run(outputs, {})))


def _grows(node, values):
    """Whether a folded ``node`` makes a value larger than its inputs and than SMALL_VALUE."""
    size = max(np.size(values[o]) for o in node.output if o)
    return size > max(SMALL_VALUE, sum(np.size(values[i]) for i in node.input if i))


def fold_constants(model, batch_size=None):
    """``model`` with the values that do not depend on its inputs computed once.

    Parameters
    ----------
    model : onnx.ModelProto
        A model whose nodes are in topological order (every ONNX model is).
    batch_size : int, optional
        For a step model: the rows of every batch it will be given. The batch inputs (and the
        random draws, which have a row per sample) get that many rows, so that their shapes
        fold too.

    Returns
    -------
    onnx.ModelProto
        A new model.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> nodes = [helper.make_node("Size", ["x"], ["n"]),  # the rows times 3
    ...          helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
    ...          helper.make_node("Div", ["x", "nf"], ["y"])]
    >>> model = helper.make_model(helper.make_graph(nodes, "mean", [x], [y]),
    ...                           opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    >>> len(fold_constants(model).graph.node), len(fold_constants(model, 2).graph.node)
    (3, 1)
    """
    if batch_size and (int(batch_size) != batch_size or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}.")
    rows = _batch_shapes(model, int(batch_size)) if batch_size else {}
    model = _with_shapes(model, rows)
    graph = model.graph
    folded, known, of_rows = _foldable(graph, _static_shapes(model), rows)
    values = {**known, **_run_once(model, folded, known)}
    kept = [n for n in folded if _grows(n, values)]
    folded_outputs = {o for n in folded if n not in kept for o in n.output} | set(known)
    nodes = [n for n in graph.node if n in kept or not set(n.output) <= folded_outputs]
    read = {name for n in nodes for name in [*n.input, *_subgraph_inputs(n)]}
    read |= {o.name for o in graph.output}
    inputs = {i.name for i in graph.input}
    initializers = [i for i in graph.initializer if i.name in inputs]
    initializers += [
        numpy_helper.from_array(np.asarray(values[name]), name)
        for name in sorted(read & folded_outputs)
    ]
    # a float the batch's size decides stays an input (with its value as default), as it was a
    # computed value: onnxruntime would fuse a constant into a neighbour (a scale into a
    # MatMul), which rounds otherwise than the step as it is
    graph.input.extend(
        helper.make_tensor_value_info(
            name,
            helper.np_dtype_to_tensor_dtype(np.asarray(values[name]).dtype),
            np.shape(values[name]),
        )
        for name in sorted(read & of_rows)
        if np.issubdtype(np.asarray(values[name]).dtype, np.floating)
    )
    del graph.node[:], graph.initializer[:]
    graph.node.extend(nodes)
    graph.initializer.extend(initializers)
    model = without_copies(without_repeats(model))
    return without_dead_nodes(without_copies(_no_ops_as_copies(model)))


def without_repeats(model):
    """``model`` with each computation made once: a node with the operator, inputs and
    attributes of an earlier one reads that one's outputs instead.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
    ...          helper.make_node("Add", ["a", "b"], ["y"])]
    >>> lean = without_repeats(helper.make_model(helper.make_graph(nodes, "g", [x], [y])))
    >>> [list(n.input) for n in lean.graph.node]
    [['x'], ['a', 'a']]
    """
    model = _copy(model)
    graph = model.graph
    outputs = {o.name for o in graph.output}
    seen, renamed, nodes = {}, {}, []
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
        key = (
            node.domain,
            node.op_type,
            tuple(node.input),
            tuple(a.SerializeToString() for a in node.attribute),
        )
        first = seen.get(key)
        repeat = node.op_type not in NOT_FOLDED and first is not None
        if repeat and not outputs & set(node.output) and len(first.output) == len(node.output):
            renamed.update(zip(node.output, first.output))
            continue
        seen.setdefault(key, node)
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


#: Operators that change no value, only the shape, when their output has as many elements as
#: their input.
SHAPE_ONLY = {"Reshape", "Expand", "Squeeze", "Unsqueeze", "Flatten"}
#: Reductions that change no value when they reduce axes of one element (their output then has
#: as many elements as their input): the sum, mean, product, maximum or minimum of one number is
#: that number.
REDUCTIONS = {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin"}


def _no_ops_as_copies(model):
    """``model`` with the nodes that return their input's values unchanged written as
    ``Identity`` (:func:`without_copies` then bypasses them) or, where only the shape changes,
    as one ``Reshape`` of the value they start from: a reshape, squeeze, expand... that keeps
    every element, a reduction over axes of one element, and chains of them."""
    model = _copy(model)
    graph = model.graph
    shapes = _static_shapes(model)
    origin = {}  # a value to the value whose elements it holds, unchanged and in order
    shape_constants = {}
    used = {name for n in graph.node for name in n.output} | {i.name for i in graph.initializer}
    used |= {i.name for i in graph.input}
    fresh = (f"lean_shape_{k}" for k in itertools.count() if f"lean_shape_{k}" not in used)
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in SHAPE_ONLY | REDUCTIONS:
            continue
        source, target = node.input[0], node.output[0]
        before, after = shapes.get(source), shapes.get(target)
        if len(node.output) != 1 or before is None or after is None or 0 in after:
            continue
        if np.prod(before, dtype=np.int64) != np.prod(after, dtype=np.int64):
            continue
        source = origin.get(source, source)
        origin[target] = source
        node.Clear()
        node.output.append(target)
        if shapes.get(source) == after:
            node.op_type, node.name = "Identity", f"unchanged_{target}"
            node.input.append(source)
            continue
        if after not in shape_constants:
            shape_constants[after] = next(fresh)
        shape_name = shape_constants[after]
        node.op_type, node.name = "Reshape", f"reshaped_{target}"
        node.input.extend([source, shape_name])
    graph.initializer.extend(
        numpy_helper.from_array(np.array(shape, np.int64), name)
        for shape, name in shape_constants.items()
    )
    return model


def without_copies(model):
    """``model`` with its ``Identity`` nodes bypassed (its inputs and outputs keep their names).

    Examples
    --------
    >>> from onnx import TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    >>> lean = without_copies(helper.make_model(helper.make_graph(nodes, "g", [x], [y])))
    >>> [(n.op_type, list(n.output)) for n in lean.graph.node]
    [('Relu', ['y'])]
    """
    model = _copy(model)
    graph = model.graph
    kept_names = {i.name for i in graph.input} | {o.name for o in graph.output}
    kept_names |= {name for n in graph.node for name in _subgraph_inputs(n)}
    produced = {o: n for n in graph.node for o in n.output}
    renamed = {}
    removed = []
    for node in graph.node:
        if node.op_type != "Identity" or node.domain not in ("", "ai.onnx"):
            continue
        source, target = renamed.get(node.input[0], node.input[0]), node.output[0]
        if target not in kept_names:
            renamed[target] = source  # readers of the copy read the original
        elif source in produced and source not in kept_names:
            producer = produced.pop(source)  # the original takes the output's name
            producer.output[list(producer.output).index(source)] = target
            renamed[source] = target
            produced[target] = producer
            kept_names.add(target)
        else:
            continue
        removed.append(node)
    nodes = [n for n in graph.node if all(n is not r for r in removed)]
    for node in nodes:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def without_dead_nodes(model):
    """``model`` without the nodes and initializers that none of its outputs needs.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])]
    >>> model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    >>> len(without_dead_nodes(model).graph.node)
    1
    """
    model = _copy(model)
    graph = model.graph
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(graph.node):
        if needed & set(node.output):
            kept.append(node)
            needed.update(node.input)
            needed.update(_subgraph_inputs(node))
    inputs = {i.name for i in graph.input}
    initializers = [i for i in graph.initializer if i.name in needed or i.name in inputs]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(reversed(kept))
    graph.initializer.extend(initializers)
    return model


def lean_step(step, batch_size=None):
    """A step model that trains as ``step`` does, with fewer nodes.

    Parameters
    ----------
    step : onnx.ModelProto
        A step model (:mod:`helpers.portable.step_format`).
    batch_size : int, optional
        Rows of every batch the lean step will be given: its batch inputs get that many
        rows, and what their shapes decide is folded too. None keeps the batch size free.

    Returns
    -------
    onnx.ModelProto
        The lean step: same inputs, outputs, record and initial state.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> nodes = [helper.make_node("Shape", ["x"], ["shape"], end=1),  # x / its rows
    ...          helper.make_node("Cast", ["shape"], ["rows"], to=TensorProto.FLOAT),
    ...          helper.make_node("Div", ["x", "rows"], ["y"])]
    >>> model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
    ...                           opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    >>> [n.op_type for n in lean_step(model).graph.node]
    ['Shape', 'Cast', 'Div']
    >>> [n.op_type for n in lean_step(model, batch_size=4).graph.node]
    ['Div']
    """
    lean = fold_constants(step, batch_size)
    computed = {o for node in lean.graph.node for o in node.output}
    kept = [v for v in lean.graph.value_info if v.name in computed]
    del lean.graph.value_info[:]
    lean.graph.value_info.extend(kept)
    return lean


def _copy(model):
    copied = onnx.ModelProto()
    copied.CopyFrom(model)
    return copied


def _batch_shapes(model, rows):
    """Input name to its shape for batches of ``rows`` rows: the batch inputs' first dimension,
    and every dimension of the random draws of a step model."""
    try:
        record = read_record(model)
    except ValueError:  # not a step model: the first dimension of every input
        return {i.name: {0: rows} for i in model.graph.input}
    shapes = {name: {0: rows} for name in record.batch_inputs}
    for fields in record.draws:
        shape = shape_for_rows(fields["dims"], rows)
        shapes[fields["name"]] = dict(enumerate(shape))
    return shapes


def _with_shapes(model, shapes):
    """A copy of ``model`` whose inputs have the dimensions ``shapes`` gives (input name to axis
    to size)."""
    model = _copy(model)
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        for axis, size in shapes.get(value.name, {}).items():
            if axis < len(dims):
                dims[axis].Clear()
                dims[axis].dim_value = int(size)
    return model
