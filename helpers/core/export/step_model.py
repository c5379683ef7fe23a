"""One training step assembled as a standard ONNX model.

From the training model of ``generate_artifacts``
(:func:`~helpers.core.export.gradient_model.gradient_model`), :func:`build_step_model` writes
one graph with :mod:`helpers.portable.step_format`'s layout:

1. the forward pass, the loss and the gradients, as the training model computes them (the
   gradients taken before the accumulators);
2. optionally, the forward/backward API's own parts: its loss gradient with respect to the
   prediction in place of the one the gradient builder derived, and its penalty's gradient
   added to the weights' gradients (and the penalty to the loss);
3. the scalars of the step (:mod:`~helpers.core.export.step_scalars`) and the update of every
   weight and buffer: the update graph the optimizers run
   (:func:`~helpers.core.updates.weight_updater.build_update_graph`), inlined;
4. the running statistics of batch normalization, blended with the batch's as
   :class:`~helpers.core.layers.running_statistics.RunningStatistics` does it (torch's formula;
   a cumulative average counts its batches in the state);

then every node outside the standard domain rewritten by :func:`helpers.portable.lowering.
lower_model`, which names any operator it cannot rewrite, and what does not depend on the batch
folded (:func:`helpers.portable.lean_step.lean_step`).
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...portable.lean_step import lean_step
from ...portable.lowering import lower_model
from ...portable.lowering.registry import STANDARD_DOMAINS
from ...portable.step_format import LOSS_OUTPUT, STEP_INPUT, StepRecord, write_initial_state
from ..graphs.graph_nodes import nodes_reaching
from ..updates.weight_updater import build_update_graph
from .graph_inlining import inline_graph
from .step_scalars import step_scalar_nodes

#: The newest standard opset a step model may use (onnxruntime 1.19.2 reads up to 21).
MAX_OPSET = 21
#: The newest IR version a step model may have (onnxruntime 1.19.2 reads up to 10).
MAX_IR_VERSION = 10
#: The value the training model's loss is renamed to before the step adds to it.
DATA_LOSS = "step__data_loss"


def state_names(weights, statistics, rule):
    """The names of the values a step carries, in input order.

    The trained weights, the running statistics and the batch counters of the batch
    normalization layers, then the buffers of the update rule, weight by weight, named
    ``WEIGHT.BUFFER`` (torch's state names).

    Examples
    --------
    >>> from helpers.core.layers.running_statistics import RunningStatistics
    >>> from helpers.core.updates.update_rules import AdamWRule
    >>> state_names(["w"], RunningStatistics([], {}), AdamWRule())
    ['w', 'w.exp_avg', 'w.exp_avg_sq']
    """
    buffers = [f"{w}.{buffer}" for w in weights for buffer in rule.state_names]
    return [*weights, *statistics.names, *statistics.counts, *buffers]


def _renamed(nodes, old, new):
    for node in nodes:
        for field in (node.input, node.output):
            for i, name in enumerate(field):
                if name == old:
                    field[i] = new


def _value_info(name, value):
    dtype = helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype)
    return helper.make_tensor_value_info(name, dtype, list(np.shape(value)))


def _constant(value, dtype, name):
    tensor = numpy_helper.from_array(np.array(value, dtype=dtype), name)
    return helper.make_node("Constant", [], [name], name=name, value=tensor)


def _blend_factors(layer, tag):
    """Nodes computing the float32 weights of the running and of the batch statistic."""
    if layer.counter is None:  # numpy's float32 products with a Python float
        return [
            _constant(1.0 - layer.momentum, np.float32, f"{tag}__keep"),
            _constant(layer.momentum, np.float32, f"{tag}__take"),
        ]
    # a cumulative average: the batch weighs 1 / batches seen (this one included), in double
    count = StepRecord.next_name(layer.counter)
    return [
        _constant(1, np.int64, f"{tag}__one_int"),
        _constant(1.0, np.float64, f"{tag}__one"),
        helper.make_node("Add", [layer.counter, f"{tag}__one_int"], [count], name=count),
        helper.make_node("Cast", [count], [f"{tag}__n"], name=f"{tag}__n", to=TensorProto.DOUBLE),
        helper.make_node("Div", [f"{tag}__one", f"{tag}__n"], [f"{tag}__f"], name=f"{tag}__f"),
        helper.make_node("Sub", [f"{tag}__one", f"{tag}__f"], [f"{tag}__r"], name=f"{tag}__r"),
        helper.make_node("Cast", [f"{tag}__r"], [f"{tag}__keep"], name=f"{tag}__keep", to=1),
        helper.make_node("Cast", [f"{tag}__f"], [f"{tag}__take"], name=f"{tag}__take", to=1),
    ]


def _statistics_nodes(statistics):
    """The running statistics after the step, blended as ``RunningStatistics.update`` does:
    ``running * keep + batch * take``."""
    nodes = []
    for index, layer in enumerate(statistics.layers):
        tag = f"step_statistics__{index}"
        nodes += _blend_factors(layer, tag)
        for running, batch in (
            (layer.running_mean, layer.mean_output),
            (layer.running_var, layer.var_output),
        ):
            kept, taken = f"{tag}__{running}__kept", f"{tag}__{running}__taken"
            nodes += [
                helper.make_node("Mul", [running, f"{tag}__keep"], [kept], name=kept),
                helper.make_node("Mul", [batch, f"{tag}__take"], [taken], name=taken),
                helper.make_node(
                    "Add", [kept, taken], [StepRecord.next_name(running)], name=f"{tag}__{running}"
                ),
            ]
    return nodes


def _update_nodes(step, weights, gradients, schedule, rule):
    """The scalars of the step and the update of every weight and buffer."""
    nodes, scalars = step_scalar_nodes(step, schedule, rule)
    bindings = dict(scalars)
    for i, (w, g) in enumerate(zip(weights, gradients)):
        bindings[f"W{i}"], bindings[f"G{i}"] = w, g
        bindings[f"W{i}_new"] = StepRecord.next_name(w)
        for buffer in rule.state_names:
            bindings[f"{buffer}{i}"] = f"{w}.{buffer}"
            bindings[f"{buffer}{i}_new"] = StepRecord.next_name(f"{w}.{buffer}")
    update, initializers = inline_graph(
        build_update_graph(rule, len(weights)), bindings, "step_update__"
    )
    return nodes + update, initializers


def build_step_model(
    gradient,
    batch_inputs,
    values,
    constants,
    schedule,
    rule,
    prediction_gradient=None,
    penalty=None,
):
    """The step model of a training model, lowered to standard operators.

    Parameters
    ----------
    gradient : helpers.core.export.gradient_model.GradientModel
    batch_inputs : list of str
        Inputs of the training model holding one row per sample, in the step's order.
    values : dict
        Every name of :func:`state_names` to its value at export (the inputs' defaults).
    constants : dict
        Name to value of the training model's other inputs (the frozen weights).
    schedule : helpers.core.updates.learning_rates.LearningRateSchedule
    rule : helpers.core.updates.update_rules.BaseUpdateRule
    prediction_gradient : tuple, optional
        ``(model, bindings)``: a graph computing the loss's gradient with respect to the
        prediction, and its names bound to the step's. Its outputs bound (the gradient, to
        ``PREDICTION_grad``) replace the values of the same names the builder derived.
    penalty : onnx.ModelProto, optional
        The forward/backward API's penalty graph: inputs ``W<i>``, ``G<i>`` for each trained
        weight, outputs ``penalty`` (added to the loss) and ``G<i>_new`` (the gradients).

    Returns
    -------
    tuple
        ``(model, state)``: the step model (no record yet) and its state names.

    Raises
    ------
    helpers.portable.lowering.UnsupportedOperatorError
        For an operator without a standard formulation.

    Examples
    --------
    >>> from helpers import add_loss_output, get_train_initializer
    >>> from helpers.core.export.gradient_model import gradient_model
    >>> from helpers.core.updates.learning_rates import LearningRateSchedule
    >>> from helpers.core.updates.update_rules import MomentumRule
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx_loss = add_loss_output(mlp_onnx(3, hidden=(4,)))
    >>> gradient = gradient_model(onx_loss, ["coefficient1", "intercept1"])
    >>> values = dict(get_train_initializer(onx_loss))
    >>> values.update({f"{w}.momentum_buffer": 0 * values[w] for w in gradient.gradients})
    >>> model, state = build_step_model(
    ...     gradient, ["X", "label"], values, values, LearningRateSchedule(0.1), MomentumRule()
    ... )
    >>> state
    ['coefficient1', 'intercept1', 'coefficient1.momentum_buffer', 'intercept1.momentum_buffer']
    >>> [i.name for i in model.graph.input][:3], model.graph.output[1].name
    (['X', 'label', 'step'], 'coefficient1.next')
    """
    weights = list(gradient.gradients)
    state = state_names(weights, gradient.statistics, rule)
    source = onnx.ModelProto()
    source.CopyFrom(gradient.model)  # its nodes are renamed below
    nodes = list(source.graph.node)
    # the state's defaults are the values given, whatever the training model holds
    initializers = [i for i in source.graph.initializer if i.name not in state]
    if prediction_gradient is not None:
        model, bindings = prediction_gradient
        replaced = {bindings[o.name] for o in model.graph.output if o.name in bindings}
        where = [i for i, n in enumerate(nodes) if replaced & set(n.output)]
        if len(where) != len(replaced):
            raise RuntimeError(f"The training model computes no gradient named {replaced}.")
        added, constants_added = inline_graph(model, bindings, "step_loss_gradient__")
        kept = [n for n in nodes if not replaced & set(n.output)]
        nodes = kept[: where[0]] + added + kept[where[0] :]  # where the first one was
        initializers += constants_added
    loss = source.graph.output[0].name
    _renamed(nodes, loss, DATA_LOSS)
    grads = [gradient.gradients[w] for w in weights]
    if penalty is None:
        nodes.append(helper.make_node("Identity", [DATA_LOSS], [LOSS_OUTPUT], name="step__loss"))
    else:
        bindings = {f"W{i}": w for i, w in enumerate(weights)}
        bindings.update({f"G{i}": g for i, g in enumerate(grads)})
        grads = [f"step_penalty__{g}" for g in grads]
        bindings.update({f"G{i}_new": g for i, g in enumerate(grads)})
        bindings["penalty"] = "step__penalty"
        added, constants_added = inline_graph(penalty, bindings, "step_penalty__")
        nodes += added
        initializers += constants_added
        nodes.append(
            helper.make_node("Add", [DATA_LOSS, "step__penalty"], [LOSS_OUTPUT], name="step__loss")
        )
    added, constants_added = _update_nodes(STEP_INPUT, weights, grads, schedule, rule)
    nodes += added + _statistics_nodes(gradient.statistics)
    initializers += constants_added

    declared = {i.name: i for i in source.graph.input}
    inputs = [declared[name] for name in batch_inputs]
    inputs.append(helper.make_tensor_value_info(STEP_INPUT, TensorProto.INT64, []))
    inputs += [declared.get(name) or _value_info(name, values[name]) for name in state]
    inputs += [declared[name] for name in gradient.draws.names]  # drawn by the runner
    for name in declared:
        if name not in batch_inputs and name not in state and name not in gradient.draws.names:
            if name not in constants:
                raise RuntimeError(f"The training model's input {name!r} has no value.")
            initializers.append(numpy_helper.from_array(np.asarray(constants[name]), name))
    outputs = [helper.make_tensor_value_info(LOSS_OUTPUT, TensorProto.FLOAT, [])]
    outputs += [_value_info(StepRecord.next_name(name), values[name]) for name in state]

    graph = helper.make_graph(nodes, "training_step", inputs, outputs, initializers)
    graph.CopyFrom(_without_dead_nodes(graph))
    # the shapes the gradient model knows (onnxruntime plans a deep graph faster with them)
    computed = {o for node in graph.node for o in node.output} - {o.name for o in graph.output}
    graph.value_info.extend(v for v in source.graph.value_info if v.name in computed)
    model = helper.make_model(graph, opset_imports=list(source.opset_import))
    model.ir_version = min(source.ir_version, MAX_IR_VERSION)
    model = lean_step(lower_model(model))
    write_initial_state(model, {name: np.asarray(values[name]) for name in state})
    check_step_model(model)
    return model, state


def _without_dead_nodes(graph):
    """``graph`` without the nodes and initializers its outputs do not need."""
    nodes = nodes_reaching(graph, {o.name for o in graph.output})
    used = {name for node in nodes for name in node.input}
    inputs = {i.name for i in graph.input}
    kept = [i for i in graph.initializer if i.name in used or i.name in inputs]
    return helper.make_graph(nodes, graph.name, graph.input, graph.output, kept)


def check_step_model(model):
    """Raise ``ValueError`` unless ``model`` is standard ONNX that onnxruntime 1.19.2 loads.

    Standard domains only, a standard opset of at most :data:`MAX_OPSET`, an IR version of at
    most :data:`MAX_IR_VERSION`, and ``onnx.checker`` passes.

    Examples
    --------
    >>> graph = helper.make_graph([helper.make_node("Foo", [], ["y"], domain="x.y")], "g", [], [])
    >>> check_step_model(helper.make_model(graph))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: The step model uses the domains ['x.y'], ...
    """
    used = {n.domain for n in model.graph.node} | {o.domain for o in model.opset_import}
    domains = sorted(used - set(STANDARD_DOMAINS))
    opset = max((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), default=0)
    if domains or opset > MAX_OPSET or model.ir_version > MAX_IR_VERSION:
        raise ValueError(
            f"The step model uses the domains {domains}, opset {opset} and IR version "
            f"{model.ir_version}: a portable step needs standard domains only, an opset of at "
            f"most {MAX_OPSET} and an IR version of at most {MAX_IR_VERSION}."
        )
    onnx.checker.check_model(model)
