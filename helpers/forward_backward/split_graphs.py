"""The forward/backward API on any onnxruntime: a forward graph and a backward graph in standard
ONNX.

With ``backend="onnx"``, :class:`helpers.OrtGradientForwardBackward` differentiates its training
graph with :func:`helpers.portable.gradients.build_gradients`, seeded by one gradient input per
output (the caller's output gradients), then cuts the result in two, as onnxruntime-training's
``YieldOp`` does: the forward graph computes the outputs and the values the backward pass reads
(the *frontier*: activations, masks); the backward graph takes the output gradients, the frontier
and the inputs it reads again, and returns the gradients. Two ``InferenceSession`` run them;
:class:`SplitGraphRunner` passes the frontier from one to the other.
"""

from collections import namedtuple

import onnx
from onnx import helper

from ..core.export.gradient_model import with_shapes_of_a_run
from ..core.machine.runtime import explain_no_gradient
from ..core.machine.sessions import make_session
from ..core.model_graphs.onnx_graph import initializers_to_inputs
from ..portable.gradients import NoGradientError, build_gradients
from ..portable.lowering import lower_model

#: Suffix of the backward graph's inputs holding the output gradients.
SEED_SUFFIX = "__output_grad"

SplitGraphs = namedtuple(
    "SplitGraphs",
    [
        "forward",
        "backward",
        "frontier",
        "seeds",
        "gradients",
        "backward_inputs",
        "full",
        "n_outputs",
    ],
)
SplitGraphs.__doc__ = """What :func:`split_graphs` returns.

``forward``: the model computing the outputs, then the ``frontier`` values; ``backward``: the
model computing ``gradients`` (one name per differentiated value, in order) from its
``backward_inputs``: the output gradients ``seeds`` (output name to input name, the outputs that
take one), the frontier and the forward inputs it reads again; ``full``: the gradient graph before
it is cut; ``n_outputs``: the number of outputs of the forward graph before the frontier (the
outputs, then the extra outputs).

Examples
--------
>>> SplitGraphs._fields[:3]
('forward', 'backward', 'frontier')
"""


def _reaching(nodes, targets):
    """The indices of the ``nodes`` needed to compute ``targets``."""
    producers = {out: i for i, node in enumerate(nodes) for out in node.output}
    needed, stack = set(), list(targets)
    while stack:
        index = producers.get(stack.pop())
        if index is not None and index not in needed:
            needed.add(index)
            stack.extend(nodes[index].input)
    return needed


def _declared(model):
    """Every value's declaration (inputs, outputs, value_info), by name."""
    graph = model.graph
    return {v.name: v for v in [*graph.value_info, *graph.input, *graph.output]}


def _sub_model(model, nodes, inputs, outputs, declared):
    """A model of ``nodes`` with these inputs and outputs, the initializers it reads."""
    read = {name for node in nodes for name in node.input}
    initializers = [t for t in model.graph.initializer if t.name in read and t.name not in inputs]
    produced = {o for node in nodes for o in node.output}

    def declare(name):
        return declared.get(name) or helper.make_empty_tensor_value_info(name)

    graph = helper.make_graph(
        nodes,
        model.graph.name,
        [declare(name) for name in inputs],
        [declare(name) for name in outputs],
        initializers,
        value_info=[v for name, v in declared.items() if name in produced and name not in outputs],
    )
    sub = helper.make_model(graph, opset_imports=list(model.opset_import))
    sub.ir_version = model.ir_version
    return sub


def split_graphs(model, wrt, outputs, extra_outputs=()):
    """The forward and backward graphs of ``model`` for the values ``wrt``.

    Parameters
    ----------
    model : onnx.ModelProto
        The training graph, its weights as inputs.
    wrt : list of str
        The values to differentiate (weights, inputs).
    outputs : list of str
        The outputs whose gradients the caller gives.
    extra_outputs : list of str
        Other outputs of the forward graph, which take no gradient (batch statistics).

    Returns
    -------
    SplitGraphs

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> from helpers.core.model_graphs.onnx_graph import initializers_to_inputs
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> weights = [i.name for i in model.graph.initializer]
    >>> split = split_graphs(initializers_to_inputs(model, weights), weights, ["variable"])
    >>> split.seeds, split.gradients[-1]
    ({'variable': 'variable__output_grad'}, 'intercept1_grad')
    >>> [o.name for o in split.forward.graph.output][0], len(split.frontier) > 0
    ('variable', True)
    """
    declared = _declared(model)
    seeds = {name: f"{name}{SEED_SUFFIX}" for name in outputs}
    seeded = onnx.ModelProto()
    seeded.CopyFrom(model)
    for name, seed in seeds.items():
        source = declared.get(name)
        value = onnx.ValueInfoProto()
        if source is not None:
            value.CopyFrom(source)
        value.name = seed
        seeded.graph.input.append(value)
    built = build_gradients(seeded, list(wrt), list(outputs), list(seeds.values()))
    full = lower_model(built.model)
    nodes = list(full.graph.node)
    gradients = [built.gradients[name] for name in wrt]
    forward_index = _reaching(nodes, set(outputs) | set(extra_outputs))
    forward_nodes = [nodes[i] for i in sorted(forward_index)]
    backward_nodes = [nodes[i] for i in sorted(_reaching(nodes, set(gradients)) - forward_index)]
    produced_forward = {o for n in forward_nodes for o in n.output}
    produced_backward = {o for n in backward_nodes for o in n.output}
    graph_inputs = [i.name for i in full.graph.input]
    read = list(dict.fromkeys(name for node in backward_nodes for name in node.input if name))
    frontier = [name for name in read if name in produced_forward and name not in produced_backward]
    # a gradient may be a value of the forward graph itself (no node between): it is frontier
    frontier += [g for g in gradients if g in produced_forward and g not in frontier]
    declared = _declared(full)
    forward_inputs = [name for name in graph_inputs if name not in seeds.values()]
    forward_outputs = [*outputs, *extra_outputs]
    forward_outputs += [name for name in frontier if name not in forward_outputs]
    forward = _sub_model(full, forward_nodes, forward_inputs, forward_outputs, declared)
    backward_inputs = [name for name in graph_inputs if name in read or name in gradients]
    backward_inputs += [name for name in frontier if name not in backward_inputs]
    backward = _sub_model(full, backward_nodes, backward_inputs, gradients, declared)
    used_seeds = {out: seed for out, seed in seeds.items() if seed in backward_inputs}
    n_outputs = len(outputs) + len(extra_outputs)
    return SplitGraphs(
        forward, backward, frontier, used_seeds, gradients, backward_inputs, full, n_outputs
    )


class SplitGraphRunner:
    """Runs the two graphs of :func:`split_graphs`: a training forward, then its backward.

    ``forward(values)`` takes the forward graph's inputs (``OrtValue`` objects of the C API, in
    ``split.forward``'s input order) and returns ``(outputs, state)``: the outputs (then the
    frontier, which the caller leaves alone) and what :meth:`backward` needs.
    ``backward(output_gradients, state)`` takes the gradients of the outputs listed in
    ``split.seeds``, in that order, and returns the gradients.

    Parameters
    ----------
    split : SplitGraphs
    forward_session, backward_session : onnxruntime.InferenceSession

    Examples
    --------
    >>> import numpy as np
    >>> from onnxruntime import InferenceSession, OrtValue
    >>> from helpers.core.model_graphs.onnx_graph import initializers_to_inputs
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(2, hidden=())  # a linear regression: coefficient0, intercept0
    >>> split = split_graphs(initializers_to_inputs(model, ["coefficient0", "intercept0"]),
    ...                      ["coefficient0", "intercept0"], ["variable"])
    >>> runner = SplitGraphRunner(*(split, *(InferenceSession(m.SerializeToString())
    ...                                      for m in (split.forward, split.backward))))
    >>> def value(array):
    ...     return OrtValue.ortvalue_from_numpy(np.asarray(array, np.float32))._ortvalue
    >>> feeds = [value([[1, 2], [3, 4]]), value([[1], [1]]), value([0])]
    >>> outputs, state = runner.forward(feeds)
    >>> _, intercept = runner.backward([value([[1], [1]])], state)  # two rows of gradient 1
    >>> outputs[0].numpy().ravel().tolist(), intercept.numpy().tolist()
    ([3.0, 7.0], [2.0])
    """

    def __init__(self, split, forward_session, backward_session):
        self.forward_inputs = [i.name for i in split.forward.graph.input]
        self.forward_outputs = [o.name for o in split.forward.graph.output]
        self.seeds = list(split.seeds.values())
        self._visible = split.n_outputs
        self.gradients = list(split.gradients)
        position = {name: i for i, name in enumerate(self.forward_outputs)}
        given = {name: i for i, name in enumerate(self.forward_inputs)}
        # each backward input: ("seed", k), ("output", i) or ("input", i)
        self._sources = []
        for name in split.backward_inputs:
            if name in self.seeds:
                self._sources.append((0, self.seeds.index(name), name))
            elif name in position:
                self._sources.append((1, position[name], name))
            else:
                self._sources.append((2, given[name], name))
        self.forward_session = forward_session
        self._forward = forward_session._sess
        self._backward = backward_session._sess

    def forward(self, values):
        """Run the forward graph on ``values``; return its outputs and the backward's state."""
        feeds = dict(zip(self.forward_inputs, values))
        outputs = self._forward.run_with_ort_values(feeds, self.forward_outputs, None)
        outputs = [outputs[i] for i in range(len(self.forward_outputs))]
        return outputs[: self._visible], (values, outputs)

    def backward(self, output_gradients, state):
        """Run the backward graph for the forward of ``state``; return the gradients."""
        values, outputs = state
        chosen = (output_gradients, outputs, values)
        feeds = {name: chosen[kind][i] for kind, i, name in self._sources}
        result = self._backward.run_with_ort_values(feeds, self.gradients, None)
        return [result[i] for i in range(len(self.gradients))]


def build_split(fb, model, graph):
    """The forward and backward graphs of ``model`` (the training graph of ``fb`` with its batch
    statistics as outputs) and their sessions; as attributes of ``fb``, the same as
    :func:`helpers.forward_backward.training_agent.build_agent` gives.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackward
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> fb = OrtGradientForwardBackward(mlp_onnx(3, hidden=(4,)), backend="onnx")
    >>> type(fb._agent).__name__, fb.feed_names_[:2], fb.grad_names_[-1]
    ('SplitGraphRunner', ['X', 'coefficient0'], 'intercept1_grad')
    """
    weights = initializers_to_inputs(model, fb.weights_to_train)
    wrt = fb.weights_to_train + fb.input_names_require_grad
    try:
        split = split_graphs(
            with_shapes_of_a_run(weights), wrt, fb.output_names, graph.statistics.output_names
        )
    except NoGradientError as error:
        raise explain_no_gradient(error) from None
    feed_names = [i.name for i in split.forward.graph.input]
    given = fb.input_names + graph.draws.names + fb.weights_to_train
    runner = SplitGraphRunner(
        split,
        make_session(split.forward, fb.device, fb.n_threads, "model", spin=fb.spin),
        make_session(split.backward, fb.device, fb.n_threads, "model", spin=fb.spin),
    )
    return {
        "gradient_model_": split.full,
        "split_graphs_": split,
        "feed_names_": feed_names,
        "grad_names_": list(split.gradients),
        "_grad_positions": list(range(len(wrt))),
        "_feed_order": [given.index(name) for name in feed_names],
        "_differentiable_outputs": [
            i for i, name in enumerate(fb.output_names) if name in split.seeds
        ],
        "_train_sess": runner.forward_session,
        "_agent": runner,
    }
