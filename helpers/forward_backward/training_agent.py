"""The forward/backward API on onnxruntime-training 1.19.2: ``OrtModuleGraphBuilder`` and
``TrainingAgent``.

With ``backend="onnxruntime-training"``, :class:`helpers.OrtGradientForwardBackward` has the
training package's builder turn its training graph into one graph holding the forward and the
backward pass, separated by a ``YieldOp``, and a ``TrainingAgent`` runs either half
(:class:`AgentRunner`). The agent binds its inputs by position: the order is read back from the
gradient graph.
"""

from onnxruntime.capi import _pybind_state as C
from onnxruntime.capi._pybind_state import (
    OrtModuleGraphBuilder,
    OrtModuleGraphBuilderConfiguration,
    TrainingGraphTransformerConfiguration,
)

from ..core.machine.runtime_output import quiet_runtime_logs
from ..core.machine.sessions import make_session


class AgentRunner:
    """A ``TrainingAgent``'s two halves on lists of C ``OrtValue`` objects.

    ``forward(values)`` returns ``(outputs, state)``; ``backward(output_gradients, state)`` the
    gradients, in the gradient graph's output order. ``run_forward`` and ``run_backward`` are the
    agent's own calls.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackward
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> fb = OrtGradientForwardBackward(mlp_onnx(3, hidden=(4,)), backend="onnxruntime-training")
    >>> type(fb._agent).__name__, fb.grad_names_[-1]
    ('AgentRunner', 'intercept1_grad')
    """

    def __init__(self, agent):
        self.agent = agent
        # values inserted in the cache would replace graph values; nothing inserts any, so
        # the threads sharing the agent share no value through it
        self._cache = C.OrtValueCache()

    def run_forward(self, feeds, outputs, state):
        self.agent.run_forward(feeds, outputs, state, self._cache)

    def run_backward(self, feeds, gradients, state):
        self.agent.run_backward(feeds, gradients, state)

    def forward(self, values):
        feeds = C.OrtValueVector()
        feeds.reserve(len(values))
        for value in values:
            feeds.push_back(value)
        outputs = C.OrtValueVector()
        state = C.PartialGraphExecutionState()
        self.run_forward(feeds, outputs, state)
        return [outputs[i] for i in range(len(outputs))], state

    def backward(self, output_gradients, state):
        feeds = C.OrtValueVector()
        for value in output_gradients:
            feeds.push_back(value)
        gradients = C.OrtValueVector()
        self.run_backward(feeds, gradients, state)
        return [gradients[i] for i in range(len(gradients))]


def build_agent(fb, model, graph):
    """The gradient graph of ``model`` (the training graph of ``fb`` with its batch statistics
    as outputs) by ``OrtModuleGraphBuilder``, and its agent; as attributes of ``fb``.

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackward
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> fb = OrtGradientForwardBackward(mlp_onnx(3, hidden=(4,)), backend="onnxruntime-training")
    >>> [n.op_type for n in fb.gradient_model_.graph.node if n.op_type == "YieldOp"]
    ['YieldOp']
    """
    config = OrtModuleGraphBuilderConfiguration()
    config.initializer_names = fb.weights_to_train
    config.initializer_names_to_train = fb.weights_to_train
    config.input_names_require_grad = fb.input_names_require_grad
    config.build_gradient_graph = True
    config.loglevel = C.Severity.ERROR  # the builder logs with its own level
    quiet_runtime_logs()
    builder = OrtModuleGraphBuilder()
    builder.initialize(model.SerializeToString(), config)
    builder.build(TrainingGraphTransformerConfiguration())
    import onnx  # noqa: PLC0415

    gradient_model = onnx.load_from_string(builder.get_gradient_model())
    info = builder.get_graph_info()
    feed_names = [i.name for i in gradient_model.graph.input]
    grad_names = [o.name for o in gradient_model.graph.output]
    expected = list(info.user_input_names) + list(info.initializer_names_to_train)
    if sorted(expected) != sorted(feed_names):
        raise RuntimeError(
            f"Unexpected inputs of the gradient graph {feed_names}, expected {expected}."
        )
    # position of each weight (in weights_to_train order) among the gradient outputs
    grad_of = dict(zip(info.initializer_names_to_train, info.initializer_grad_names_to_train))
    user = list(info.user_input_names)
    fed = fb.input_names + graph.draws.names
    if user != [n for n in fed if n in user]:
        raise RuntimeError(f"Unexpected user inputs {user} for {fed}.")
    given = fed + fb.weights_to_train
    ort_device = fb.device.ort_device()
    train_sess = make_session(gradient_model, fb.device, fb.n_threads, "model", spin=fb.spin)
    n_fw = len(info.user_output_names) + len(info.frontier_node_arg_map)
    agent = C.TrainingAgent(
        train_sess._sess,
        feed_names,
        [ort_device] * n_fw,
        grad_names,
        [ort_device] * len(grad_names),
        0,
    )
    return {
        "gradient_model_": gradient_model,
        "graph_info_": info,
        "feed_names_": feed_names,
        "grad_names_": grad_names,
        "_grad_positions": [grad_names.index(grad_of[w]) for w in fb.weights_to_train]
        + [
            grad_names.index(info.user_input_grad_names[name])
            for name in fb.input_names_require_grad
        ],
        "_feed_order": [given.index(name) for name in feed_names],
        # the YieldOp takes no gradient for outputs that depend on no weight (batch statistics
        # of a batch normalization applied to the inputs): the backward feeds the others only
        "_differentiable_outputs": [
            i
            for i in range(len(info.user_output_names))
            if i not in set(info.output_grad_indices_non_differentiable)
        ],
        "_train_sess": train_sess,
        "_agent": AgentRunner(agent),
    }
