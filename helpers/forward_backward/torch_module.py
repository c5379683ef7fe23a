"""``OrtTorchModule``: a torch module whose forward and backward passes run in onnxruntime.

onnxruntime's own torch integration, ORTModule, no longer imports with torch
2.9 and later. :class:`OrtTorchModule` does the part a training loop needs
with today's torch: the module is exported to ONNX once, its parameters stay
torch ``Parameter``\\ s, and each call runs onnxruntime's forward pass and,
through :class:`~helpers.forward_backward.torch_function.OrtAutogradFunction`,
its backward pass. Any torch loss, optimizer and scheduler work on it as on
the module itself.
"""

import threading

import onnx
import torch
from onnx import numpy_helper

from ..core.layers.batch_norm import running_statistic_names
from ..core.machine.backends import resolve_backend
from ..core.machine.devices import resolve_device
from ..core.model_graphs.from_torch import buffers_kept, export_for_training
from ..core.model_graphs.inference_mode import inference_graph
from ..core.model_graphs.onnx_graph import replace_initializers, static_dims
from .function import OrtGradientForwardBackward
from .torch_function import (
    TORCH_GENERATOR,
    OrtAutogradFunction,
    check_input_dtypes,
    to_ortvalue,
    to_tensor,
)


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class OrtTorchModule(torch.nn.Module):
    """A torch module whose forward and backward run in onnxruntime.

    Parameters
    ----------
    module : torch.nn.Module or onnx.ModelProto
        The network. A torch module is exported to ONNX once
        (:func:`~helpers.export_for_training`) and
        kept as the submodule ``module``: its parameters are this module's,
        trained in place. An ONNX model gets one ``Parameter`` per float
        initializer, initialised from it, in ``weights``.
    example_input : torch.Tensor or tuple of torch.Tensor, optional
        Inputs to export a torch module with (the first dimension is free:
        any batch size works). Not used for an ONNX model.
    n_threads : int, optional
        Threads of onnxruntime's sessions; None lets onnxruntime choose.
    fast_gradients : bool
        The faster, exact ``Relu`` gradient (:mod:`helpers.core.rewrites.gradient_rewrites`).
    backend : {"auto", "onnxruntime-training", "onnx"}
        Who builds and runs the gradients (:mod:`helpers.core.machine.backends`): the training
        package 1.19.2, or this package's in standard ONNX on the installed onnxruntime;
        ``'auto'`` picks the former where it is installed.

    Attributes
    ----------
    backend : str
        The backend that trains: ``'onnxruntime-training'`` or ``'onnx'`` (``'auto'`` resolved
        again where a pickle is loaded).
    onnx_model : onnx.ModelProto
        The forward graph onnxruntime runs.
    weight_names : list of str
        The ONNX initializers fed from the parameters, in order.

    Notes
    -----
    As in torch: in training mode with gradients enabled, a call runs
    onnxruntime's training forward (``Dropout`` drops units) and keeps what
    its backward needs; after ``.eval()``, ``Dropout`` drops nothing, and
    gradients still flow to the parameters and to inputs that require one
    (input saliency in eval mode works). Under ``torch.no_grad()``, or in
    eval mode when nothing requires a gradient, the inference session runs,
    without ``Dropout`` (even in training mode, unlike torch). Batch
    normalization behaves as torch's: in training mode, it normalizes with
    the batch's statistics and updates the module's running statistics
    (and its batch counter) with torch's formula, with or without
    gradients; in eval mode, it normalizes with them. Other buffers would
    be frozen into the graph: modules with other buffers are refused.
    Parameters the forward does not use are not trained (their ``grad``
    stays None, as in torch). Double backward
    (``create_graph=True``, gradient penalties) is not available and raises.

    Threads may share the module: each backward pairs with its own forward
    (its state lives in its autograd context), whatever the order of the
    forwards and backwards in and across threads. The gradients accumulate
    into the shared parameters' ``grad`` as torch's do (use
    ``torch.autograd.grad`` for a thread's own). Each training forward
    blends its batch statistics into the running statistics whole, under a
    lock of the module (torch updates them without one): two threads
    training one module give the statistics of their batches blended one
    after the other, in the order their forwards ended, not a mix.

    onnxruntime's threads sleep as soon as they are idle here, so that they
    leave the cores to torch's between two calls. torch's own OpenMP threads
    spin after each operator: ``OMP_WAIT_POLICY=PASSIVE``, set before Python
    starts, returns the favour (measured in ``benchmarks/bench_torch.ipynb``).

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> ort_net = OrtTorchModule(net, torch.zeros(2, 3))
    >>> optimizer = torch.optim.SGD(ort_net.parameters(), lr=0.1)
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> loss = torch.nn.functional.mse_loss(ort_net(x), y)
    >>> loss.backward()
    >>> optimizer.step()
    >>> torch.allclose(ort_net(x), net(x))  # the torch module holds the same, updated weights
    True
    >>> ort_net.weight_names
    ['0.weight', '0.bias', '2.weight', '2.bias']
    """

    def __init__(
        self, module, example_input=None, n_threads=None, fast_gradients=True, backend="auto"
    ):
        super().__init__()
        self._backend_asked = backend
        self.backend = resolve_backend(backend)
        if isinstance(module, onnx.ModelProto):
            onx = module
            self.module = None
            frozen = set(running_statistic_names(onx))  # no buffer to update them in: constants
            floats = [
                i
                for i in onx.graph.initializer
                if i.data_type == onnx.TensorProto.FLOAT and i.name not in frozen
            ]
            if not floats:
                raise ValueError(
                    "The ONNX model has no float initializer: there is nothing to train."
                )
            self.weights = torch.nn.ParameterDict(
                {
                    _key(i.name): torch.nn.Parameter(
                        torch.from_numpy(numpy_helper.to_array(i).copy())
                    )
                    for i in floats
                }
            )
            self.weight_names = [i.name for i in floats]
        elif isinstance(module, torch.nn.Module):
            if example_input is None:
                raise ValueError(
                    "example_input is needed to export a torch module: a batch of inputs of the "
                    "right shape."
                )
            example = _as_tuple(example_input)
            with buffers_kept(
                module
            ):  # a forward in training mode would update BatchNorm's statistics
                outputs = _as_tuple(module(*example))
                n_outputs, used = len(outputs), _used_parameters(module, outputs)
            onx = export_for_training(
                module,
                example,
                input_names=[f"input{i}" for i in range(len(example))]
                if len(example) > 1
                else ["input"],
                output_names=[f"output{i}" for i in range(n_outputs)]
                if n_outputs > 1
                else ["output"],
            )
            self.module = module
            self.weights = None
            _check_buffers(module, onx)
            initializers = {i.name for i in onx.graph.initializer}
            names = [name for name, _ in module.named_parameters() if name in used]
            lost = [name for name in names if name not in initializers]
            if lost:
                raise ValueError(
                    f"The export renamed or folded the parameters {lost}: they are not "
                    "initializers of the ONNX graph, so onnxruntime cannot train them."
                )
            self.weight_names = names
        else:
            raise TypeError(
                "module must be a torch.nn.Module or an onnx.ModelProto, got "
                f"{type(module).__name__}."
            )
        self.onnx_model = onx
        self.n_threads = n_threads
        self.fast_gradients = fast_gradients
        initializers = {i.name for i in onx.graph.initializer}
        self._inputs = [i for i in onx.graph.input if i.name not in initializers]
        self._functions = {}
        self._lock = threading.Lock()  # building functions, updating the running statistics
        self.statistic_names = running_statistic_names(onx) if self.module is not None else []

    def __getstate__(self):
        # the onnxruntime sessions and the lock cannot be copied or pickled: made again
        state = {**self.__dict__, "_functions": {}}
        del state["_lock"]
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lock = threading.Lock()
        # a module pickled where the training package was may be loaded where it is not
        self.backend = resolve_backend(self._backend_asked)

    def _parameters_in_order(self):
        """The parameters that feed ``weight_names``, looked up at each call
        (``load_state_dict(assign=True)`` replaces them)."""
        if self.module is None:
            return [self.weights[_key(name)] for name in self.weight_names]
        parameters = dict(self.module.named_parameters())
        return [parameters[name] for name in self.weight_names]

    def _statistics_in_order(self):
        """The buffers holding the running statistics of batch normalization, in ``statistic_names``
        order."""
        if not self.statistic_names:
            return []
        buffers = dict(self.module.named_buffers())
        return [buffers[name] for name in self.statistic_names]

    def function(self, device, input_names_require_grad=(), training=True):
        """The forward/backward function for ``device``, built once per device, input gradients and
        mode.

        Parameters
        ----------
        device : str
            ``'cpu'`` or ``'cuda:N'``.
        input_names_require_grad : sequence of str
            The inputs whose gradient the backward pass returns.
        training : bool
            False trains the inference graph (``Dropout`` drops nothing,
            batch normalization uses the running statistics), the graph of
            ``.eval()`` mode; it is built again when the running statistics
            have changed since.

        Examples
        --------
        >>> ort_net = OrtTorchModule(torch.nn.Linear(3, 1), torch.zeros(2, 3))
        >>> ort_net.function("cpu").parent.weights_to_train
        ['weight', 'bias']
        """
        device = resolve_device(device)
        with self._lock:  # one build per key, from statistics no other thread is updating
            return self._function(device, tuple(input_names_require_grad), training)

    def _function(self, device, input_names_require_grad, training):
        statistics = self._statistics_in_order()
        versions = () if training else tuple(b._version for b in statistics)
        key = (str(device), input_names_require_grad, training)
        if self._functions.get(key, (None, None))[1] != versions:
            model = self.onnx_model
            if not training:  # eval mode: the running statistics are constants of the graph
                values = {
                    name: b.detach().cpu().numpy()
                    for name, b in zip(self.statistic_names, statistics)
                }
                model = replace_initializers(inference_graph(model), values)
            function = OrtGradientForwardBackward(
                model,
                self.weight_names,
                device=device,
                n_threads=self.n_threads,
                fast_gradients=self.fast_gradients,
                input_names_require_grad=list(input_names_require_grad),
                # torch's threads work between two calls: spinning threads would take their cores
                spin=False,
                random_draws=True,  # from torch's generator: torch.manual_seed decides them
                backend=self.backend,
            ).new_instance()
            self._functions[key] = (function, versions)
        return self._functions[key][0]

    def _check_inputs(self, inputs):
        if len(inputs) != len(self._inputs):
            raise ValueError(
                f"The model takes {len(self._inputs)} input(s) {[i.name for i in self._inputs]}, "
                f"got {len(inputs)}."
            )
        check_input_dtypes(inputs, self._inputs)
        for tensor, info in zip(inputs, self._inputs):
            dims = static_dims(info)
            shape = ["N" if d is None else d for d in dims]
            if tensor.dim() != len(dims) or any(
                d is not None and d != got for d, got in zip(dims, tensor.shape)
            ):
                raise ValueError(
                    f"Input {info.name!r} has shape {tuple(tensor.shape)}, but the ONNX model "
                    f"takes shape {shape} (N: any size)."
                )

    def forward(self, *inputs):
        """Run the network in onnxruntime; one tensor, or a tuple for several outputs."""
        self._check_inputs(inputs)
        weights = self._parameters_in_order()
        device_name = _device_name(weights[0].device)
        if device_name.startswith("cuda"):  # onnxruntime's stream reads what torch's stream wrote
            torch.cuda.current_stream(weights[0].device).synchronize()
        tracked = torch.is_grad_enabled() and (
            self.training or any(t.requires_grad for t in (*inputs, *weights))
        )
        statistics = self._statistics_in_order()
        names = [info.name for info in self._inputs] + self.weight_names
        if tracked:
            needs = [info.name for info, t in zip(self._inputs, inputs) if t.requires_grad]
            fn = self.function(device_name, needs, training=self.training)
            outputs = OrtAutogradFunction.apply(fn, len(inputs), *inputs, *weights)
        elif (
            self.training and statistics
        ):  # torch's training mode normalizes with the batch, even without autograd
            fn = self.function(device_name)
            values = [
                to_ortvalue(t, fn.parent.device, repr(n))
                for t, n in zip([*inputs, *weights], names)
            ]
            # no backward will come: the state goes
            ort_outputs, _ = fn.training_forward(values, TORCH_GENERATOR)
            outputs = tuple(to_tensor(o).clone() for o in ort_outputs)
        else:
            fn = self.function(device_name)
            values = [
                to_ortvalue(t, fn.parent.device, repr(n))
                for t, n in zip([*inputs, *weights, *statistics], names + self.statistic_names)
            ]
            outputs = tuple(to_tensor(o) for o in fn.forward(values, training=False))
        n_outputs = len(self.onnx_model.graph.output)
        outputs, batch_statistics = (
            outputs[:n_outputs],
            outputs[n_outputs:],
        )  # a training forward adds them
        if batch_statistics and statistics:
            self._update_statistics(fn.parent.statistics, batch_statistics)
        return outputs[0] if len(outputs) == 1 else outputs

    def _update_statistics(self, statistics, batch_values):
        """Blend a training forward's batch statistics into the module's buffers, as torch's
        BatchNorm does."""
        buffers = dict(self.module.named_buffers())
        with self._lock, torch.no_grad():  # whole, even when threads share the module
            for (
                layer
            ) in statistics.layers:  # torch counts the batches of a layer with a momentum too
                counter = buffers.get(_counter_name(layer.running_mean))
                if layer.counter is None and counter is not None:
                    counter.add_(1)
            statistics.update(batch_values, buffers, buffers)

    def to_onnx(self):
        """The ONNX model with the current weights and running statistics, for inference anywhere.

        Examples
        --------
        >>> ort_net = OrtTorchModule(torch.nn.Linear(3, 1), torch.zeros(2, 3))
        >>> [i.name for i in ort_net.to_onnx().graph.initializer]
        ['weight', 'bias']
        """
        values = {
            name: p.detach().cpu().numpy()
            for name, p in zip(self.weight_names, self._parameters_in_order())
        }
        values.update(
            {
                name: b.detach().cpu().numpy()
                for name, b in zip(self.statistic_names, self._statistics_in_order())
            }
        )
        return replace_initializers(inference_graph(self.onnx_model), values)


def _check_buffers(module, onx):
    """Refuse buffers other than batch normalization's: their values would be frozen into the
    graph."""
    statistics = set(running_statistic_names(onx))
    counters = {_counter_name(name) for name in statistics}
    others = [name for name, _ in module.named_buffers() if name not in statistics | counters]
    if others:
        raise ValueError(
            f"The module has buffers {others}: their values would be frozen into the ONNX graph. "
            "OrtTorchModule updates the running statistics of batch normalization and no other "
            "buffer."
        )


def _counter_name(running_mean):
    """The name of torch's batch counter beside the running statistic ``running_mean``."""
    prefix = running_mean.rsplit(".", 1)[0] + "." if "." in running_mean else ""
    return f"{prefix}num_batches_tracked"


def _device_name(device):
    """The training device of a torch device; only the CPU and CUDA GPUs run onnxruntime here."""
    if device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"The parameters are on {device}: onnxruntime runs on the CPU or on a CUDA GPU. "
            "Move the module with .to('cpu') or .to('cuda')."
        )
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


def _used_parameters(module, outputs):
    """Names of the parameters ``outputs`` (of a forward of ``module``) may depend on (frozen ones
    included)."""
    every = {name for name, _ in module.named_parameters()}
    named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    outputs = [o for o in outputs if o.requires_grad]
    if not named or not outputs:
        return every
    grads = torch.autograd.grad(
        outputs, [p for _, p in named], [torch.ones_like(o) for o in outputs], allow_unused=True
    )
    return every - {name for (name, _), g in zip(named, grads) if g is None}


def _key(name):
    """A ``ParameterDict`` key for an initializer name (no dots allowed)."""
    return name.replace(".", "__")
