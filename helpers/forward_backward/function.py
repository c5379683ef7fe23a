"""The forward/backward API: onnxruntime computes a layer, the caller the rest.

``OrtModuleGraphBuilder`` turns an ONNX graph into one graph holding its
forward and its backward pass, separated by a ``YieldOp``, and
``TrainingAgent`` runs either half. Nothing else is done for the caller: the
loss gradient, the weight update and any regularization come from outside
(:mod:`helpers.forward_backward.losses`, :mod:`helpers.core.updates.learning_rates`,
:mod:`helpers.core.updates.penalties`, or torch).
"""

import onnx
import onnxruntime

from ..core.machine.backends import resolve_backend
from ..core.machine.devices import resolve_device
from ..core.machine.runtime import check_model_ir_version, explain_untrainable
from ..core.machine.sessions import is_profiling, make_session
from ..core.machine.threads import check_n_threads, resolved_threads
from ..core.machine.training_cache import GRADIENT_GRAPHS, content_key
from ..core.model_graphs.inference_mode import inference_graph
from ..core.model_graphs.onnx_graph import (
    check_weights_to_train,
    initializers_to_inputs,
    with_outputs,
)
from ..core.model_graphs.training_graph import training_graph
from .passes import OrtGradientForwardBackwardFunction
from .split_graphs import build_split


class OrtGradientForwardBackward:
    """Build the gradient graph of an ONNX model and the agent that runs it.

    Parameters
    ----------
    onnx_model : onnx.ModelProto
        The layer to train: inputs, float initializers (the weights), outputs.
    weights_to_train : list of str, optional
        Float initializers to train; None means all of them.
    input_names : list of str, optional
        The inputs that feed the layer; None means all graph inputs that are
        not initializers.
    output_names : list of str, optional
        The outputs; None means all graph outputs.
    device : str
        ``'cpu'``, ``'cuda'``, ``'cuda:N'`` or ``'auto'``.
    n_threads : int, optional
        Threads of the sessions (intra-op); None lets onnxruntime choose, or
        takes :func:`helpers.set_num_threads`.
    fast_gradients : bool
        Build the gradient graph from a copy of the model whose ``Relu``
        nodes are rewritten into an exact equivalent with a faster gradient
        and, when the model has one input, whose first dimension is named as
        the batch (:mod:`helpers.core.rewrites.gradient_rewrites`). Predictions
        (``training=False``) run the model as given. The rewrites without
        which onnxruntime cannot train some layers (layer and batch
        normalization, average pooling: :mod:`helpers.core.model_graphs.training_graph`)
        are always applied.
    input_names_require_grad : list of str, optional
        Inputs whose gradient the backward pass returns too, after the
        weights' (a torch caller needs them when an input requires a
        gradient). None or empty: the weights' only.
    random_draws : bool
        The random operators (``Dropout`` in training mode...) take their values as inputs,
        drawn by each training forward from the generator it is given
        (:mod:`helpers.core.model_graphs.random_draws`): a seeded generator makes the run
        repeatable. False leaves them to onnxruntime's own generator, which nothing seeds.
    backend : {"auto", "onnxruntime-training", "onnx"}
        Who builds and runs the gradient graph (:mod:`helpers.core.machine.backends`):
        onnxruntime-training's ``OrtModuleGraphBuilder`` and ``TrainingAgent``
        (:mod:`helpers.forward_backward.training_agent`), or this package's gradients in
        standard ONNX cut into a forward and a backward graph
        (:mod:`helpers.forward_backward.split_graphs`), which any onnxruntime runs.
    spin : bool
        Whether the sessions' idle threads spin
        (:func:`helpers.core.machine.sessions.session_options`): False inside
        another framework's loop.

    Attributes
    ----------
    backend : str
        The backend that trains: ``'onnxruntime-training'`` or ``'onnx'``.
    gradient_model_ : onnx.ModelProto
        Forward and backward graph: as ``OrtModuleGraphBuilder`` built it (a ``YieldOp`` between
        the two passes), or this package's gradient graph before it is cut in two.
    graph_info_ : object
        Backend ``"onnxruntime-training"`` only: what ``OrtModuleGraphBuilder`` reports about the
        graph it built (``user_input_names``, ``initializer_names_to_train``,
        ``module_output_gradient_name``, ``frontier_node_arg_map``...).
    split_graphs_ : helpers.forward_backward.split_graphs.SplitGraphs
        Backend ``"onnx"`` only: the forward graph and the backward graph the sessions run, the
        values the first hands to the second (``frontier``), the output gradients the second
        takes (``seeds``).
    feed_names_ : list of str
        The inputs of the gradient graph, in the order the agent binds them
        (by position, never by name): user inputs, then weights.
    grad_names_ : list of str
        The gradients it returns, in order.
    draws : helpers.core.model_graphs.random_draws.RandomDraws
        The random inputs of the gradient graph (empty without ``random_draws`` or without a
        random operator).
    statistics : helpers.core.layers.running_statistics.RunningStatistics
        The running statistics of the model's batch normalization layers
        (empty without any), with their initial values: a training forward
        returns the batch statistics they are updated from, and a
        prediction reads them.

    Notes
    -----
    The gradient graph and the sessions are built once per process for a
    given model and settings (:mod:`helpers.core.machine.training_cache`): building the
    same model again, as a refit does, reuses them.

    The agent binds its inputs by position. The seeds therefore required
    weight names in alphabetical order. Here the order is read from the
    gradient graph, and :meth:`OrtGradientForwardBackwardFunction.forward`
    takes the weights in the order of ``weights_to_train``, whatever their
    names.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> fb = OrtGradientForwardBackward(mlp_onnx(3, hidden=(4,)))
    >>> fb.input_names, fb.output_names
    (['X'], ['variable'])
    >>> fb.weights_to_train
    ['coefficient0', 'intercept0', 'coefficient1', 'intercept1']
    >>> fb.grad_names_
    ['coefficient0_grad', 'intercept0_grad', 'coefficient1_grad', 'intercept1_grad']
    """

    def __init__(
        self,
        onnx_model,
        weights_to_train=None,
        input_names=None,
        output_names=None,
        device="cpu",
        n_threads=None,
        fast_gradients=True,
        input_names_require_grad=None,
        spin=True,
        random_draws=False,
        backend="auto",
    ):
        if not isinstance(onnx_model, onnx.ModelProto):
            raise TypeError(
                f"onnx_model must be an onnx.ModelProto, got {type(onnx_model).__name__}."
            )
        check_model_ir_version(onnx_model)
        self.onnx_model = onnx_model
        self.weights_to_train = check_weights_to_train(onnx_model, weights_to_train)
        initializers = {i.name for i in onnx_model.graph.initializer}
        graph_inputs = [i.name for i in onnx_model.graph.input if i.name not in initializers]
        self.input_names = list(input_names) if input_names is not None else graph_inputs
        self.output_names = (
            list(output_names)
            if output_names is not None
            else [o.name for o in onnx_model.graph.output]
        )
        unknown = set(self.input_names) - set(graph_inputs)
        if unknown:
            raise ValueError(f"Unknown input names {sorted(unknown)}; inputs are {graph_inputs}.")
        self.input_names_require_grad = list(input_names_require_grad or [])
        unknown = set(self.input_names_require_grad) - set(self.input_names)
        if unknown:
            raise ValueError(
                f"input_names_require_grad names {sorted(unknown)}, which are not inputs; inputs "
                f"are {self.input_names}."
            )
        self.device = resolve_device(device)
        check_n_threads(n_threads)
        self.n_threads = n_threads
        self.fast_gradients = fast_gradients
        self.spin = spin
        self.random_draws = random_draws
        self.backend = resolve_backend(backend)
        key = content_key(
            onnx_model,
            self.weights_to_train,
            self.input_names,
            self.output_names,
            str(self.device),
            resolved_threads(n_threads),
            fast_gradients,
            self.input_names_require_grad,
            spin,
            random_draws,
            self.backend,
            onnxruntime.__version__,
        )
        # sessions that write profiles are never shared through the cache
        built = self._build() if is_profiling() else GRADIENT_GRAPHS.get_or_build(key, self._build)
        self.__dict__.update(built)

    def _build(self):
        """Build the gradient graph and its sessions; return them as attributes."""
        try:
            return self._build_sessions()
        except Exception as exc:  # the runtime raises its own types
            clear = explain_untrainable(self.onnx_model, exc)
            if clear is None:
                raise
            raise clear from None

    def _build_sessions(self):
        # one user input holds one row per sample: its first dimension is the batch
        batch_inputs = self.input_names if len(self.input_names) == 1 else ()
        graph = training_graph(
            self.onnx_model, batch_inputs, self.fast_gradients, self.random_draws
        )
        model = with_outputs(graph.model, graph.statistics.output_names)
        if self.backend == "onnx":
            built = build_split(self, model, graph)
        else:
            from .training_agent import build_agent  # noqa: PLC0415 - the training package

            built = build_agent(self, model, graph)
        eval_model = initializers_to_inputs(
            inference_graph(self.onnx_model), self.weights_to_train + graph.statistics.names
        )
        return {
            **built,
            "eval_model_": eval_model,
            "_eval_sess": make_session(
                eval_model, self.device, self.n_threads, "predict", spin=self.spin
            ),
            "statistics": graph.statistics,
            "draws": graph.draws,
        }

    def new_instance(self):
        """Return a fresh :class:`OrtGradientForwardBackwardFunction`."""
        return OrtGradientForwardBackwardFunction(self)
