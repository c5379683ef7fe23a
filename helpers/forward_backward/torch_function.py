"""The forward/backward function as a ``torch.autograd.Function``: onnxruntime inside torch's
autograd.

:class:`OrtAutogradFunction` runs the training forward of an
:class:`~helpers.forward_backward.passes.OrtGradientForwardBackwardFunction`
on torch tensors and keeps its state in autograd's context; autograd's
backward hands the output gradients back, and onnxruntime's backward pass
returns the gradients of the weights (and of the inputs that require one).
Tensors cross between the two frameworks through DLPack: onnxruntime reads
the inputs, the weights and the output gradients in torch's memory, and torch
reads the gradients in onnxruntime's. The outputs of a training forward are
copied once: they live in memory the forward's state owns, which a later
forward reuses once that state is released.

Examples
--------
>>> import torch
>>> from helpers import OrtGradientForwardBackward
>>> from helpers.teaching.model_factories import mlp_onnx
>>> from onnx import numpy_helper
>>> model = mlp_onnx(3, hidden=(4,))
>>> weights = [
...     torch.tensor(numpy_helper.to_array(i), requires_grad=True) for i in model.graph.initializer
... ]
>>> fn = OrtGradientForwardBackward(model).new_instance()
>>> (prediction,) = OrtAutogradFunction.apply(fn, 1, torch.ones(2, 3), *weights)
>>> prediction.sum().backward()
>>> weights[-1].grad  # the last intercept: one per row
tensor([2.])
"""

import numpy as np
import onnxruntime
import torch
from onnxruntime.capi import _pybind_state as C
from torch.utils import dlpack


class TorchGenerator:
    """The random draws of a training forward, from torch's default generator.

    A function built with ``random_draws`` (the masks of its ``Dropout`` nodes as inputs,
    :mod:`helpers.core.model_graphs.random_draws`) draws them here inside torch: with
    ``torch.manual_seed(s)``, a training loop is repeatable. The masks are torch's uniform
    draws compared with the ratio, not those ``torch.nn.Dropout`` would draw.

    Examples
    --------
    >>> generator = TorchGenerator()
    >>> _ = torch.manual_seed(0)
    >>> first = generator.random((2, 3), dtype=np.float32)
    >>> _ = torch.manual_seed(0)
    >>> bool((generator.random((2, 3), dtype=np.float32) == first).all()), first.dtype
    (True, dtype('float32'))
    """

    def random(self, size, dtype=np.float64):
        """Uniform values on [0, 1) (``torch.rand``), as numpy's ``Generator.random``."""
        return torch.rand(size, dtype=_torch_dtype(dtype)).numpy()

    def standard_normal(self, size, dtype=np.float64):
        """Standard normal values (``torch.randn``), as numpy's ``Generator.standard_normal``."""
        return torch.randn(size, dtype=_torch_dtype(dtype)).numpy()


def _torch_dtype(dtype):
    return torch.float64 if np.dtype(dtype) == np.float64 else torch.float32


#: What :class:`OrtAutogradFunction` draws the random inputs of its training forwards with.
TORCH_GENERATOR = TorchGenerator()

#: ONNX element types and the torch dtypes that feed them.
_TORCH_DTYPES = {
    1: torch.float32,
    6: torch.int32,
    7: torch.int64,
    10: torch.float16,
    11: torch.float64,
}


def torch_device_of(device):
    """The torch device of a training device (:class:`helpers.core.machine.devices.Device`).

    Examples
    --------
    >>> from helpers.core.machine.devices import Device
    >>> torch_device_of(Device("cpu")), torch_device_of(Device("cuda", 1))
    (device(type='cpu'), device(type='cuda', index=1))
    """
    if device not in _TORCH_DEVICES:
        _TORCH_DEVICES[device] = (
            torch.device("cpu") if device.type == "cpu" else torch.device("cuda", device.index)
        )
    return _TORCH_DEVICES[device]


_TORCH_DEVICES = {}


def to_ortvalue(tensor, device, name="tensor"):
    """An ``OrtValue`` that reads ``tensor``'s memory (DLPack), on the training device.

    Parameters
    ----------
    tensor : torch.Tensor
    device : helpers.core.machine.devices.Device
        Where onnxruntime runs: the tensor must be there already.
    name : str
        Named in the error message.

    Raises
    ------
    ValueError
        When the tensor is on another device.

    Examples
    --------
    >>> from helpers.core.machine.devices import Device
    >>> to_ortvalue(torch.ones(2, 3), Device("cpu")).shape()
    [2, 3]
    """
    if tensor.device != torch_device_of(device):
        raise ValueError(
            f"{name} is on {tensor.device}, but onnxruntime runs this function on {device}: "
            f"move it with .to('{device}') (inputs and weights must share one device)."
        )
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return onnxruntime.OrtValue(C.OrtValue.from_dlpack(dlpack.to_dlpack(tensor), False))


def to_tensor(value):
    """A torch tensor that reads an ``OrtValue``'s memory (DLPack).

    Examples
    --------
    >>> import numpy as np
    >>> value = onnxruntime.OrtValue.ortvalue_from_numpy(np.ones((2, 2), dtype=np.float32))
    >>> to_tensor(value)
    tensor([[1., 1.],
            [1., 1.]])
    """
    return dlpack.from_dlpack(value._ortvalue.to_dlpack())


def check_input_dtypes(tensors, model_inputs):
    """Refuse inputs whose dtype the ONNX inputs do not take, with the conversion to make.

    Parameters
    ----------
    tensors : sequence of torch.Tensor
    model_inputs : sequence of onnx.ValueInfoProto

    Raises
    ------
    TypeError

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    >>> doubles = torch.ones(2, 3, dtype=torch.float64)
    >>> check_input_dtypes([doubles], [x])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    TypeError: Input 'x' is torch.float64, but the ONNX model takes torch.float32: convert it with
    .to(torch.float32).
    """
    for tensor, info in zip(tensors, model_inputs):
        expected = _TORCH_DTYPES.get(info.type.tensor_type.elem_type)
        if expected is not None and tensor.dtype != expected:
            raise TypeError(
                f"Input {info.name!r} is {tensor.dtype}, but the ONNX model takes {expected}: "
                f"convert it with .to({expected})."
            )


class OrtAutogradFunction(torch.autograd.Function):
    """onnxruntime's forward and backward passes as one node of torch's autograd graph.

    ``OrtAutogradFunction.apply(fn, n_inputs, *inputs, *weights)`` with
    ``fn`` an :class:`~helpers.forward_backward.passes.OrtGradientForwardBackwardFunction`
    whose parent was built with ``input_names_require_grad`` naming the
    inputs that require a gradient. It returns the outputs as a tuple of
    tensors, followed, for a model with batch normalization, by the batch
    statistics (``fn.parent.statistics.output_names``, no gradient). Several forwards may be in
    flight, in one thread or several sharing ``fn``: each keeps its own
    state in its autograd context, and their backwards may come in any
    order, each paired with its own forward. A
    second backward through the same forward (``retain_graph=True``), a
    double backward (``create_graph=True``), or an input that requires a
    gradient ``fn`` was not built to return, raise.

    Two forwards in flight, their backwards in the order they came:

    Examples
    --------
    >>> from helpers import OrtGradientForwardBackward
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> from onnx import numpy_helper
    >>> model = mlp_onnx(2, hidden=(3,))
    >>> weights = [
    ...     torch.tensor(numpy_helper.to_array(i), requires_grad=True)
    ...     for i in model.graph.initializer
    ... ]
    >>> fn = OrtGradientForwardBackward(model).new_instance()
    >>> (first,) = OrtAutogradFunction.apply(fn, 1, torch.ones(4, 2), *weights)
    >>> (second,) = OrtAutogradFunction.apply(fn, 1, torch.ones(1, 2), *weights)
    >>> first.sum().backward()
    >>> second.sum().backward()
    >>> weights[-1].grad  # four rows, then one
    tensor([5.])
    """

    @staticmethod
    def forward(ctx, fn, n_inputs, *tensors):
        """Run onnxruntime's training forward on ``tensors`` (the inputs, then the weights); keep
        its state in ``ctx``."""
        device = fn.parent.device
        names = fn.parent.input_names + fn.parent.weights_to_train
        given = set(fn.parent.input_names_require_grad)
        for name, needed in zip(
            fn.parent.input_names[:n_inputs], ctx.needs_input_grad[2 : 2 + n_inputs]
        ):
            if needed and name not in given:
                raise ValueError(
                    f"Input {name!r} requires a gradient, but the function was built without it: "
                    f"OrtGradientForwardBackward(..., input_names_require_grad=[{name!r}, ...]) "
                    "returns it (or detach the input)."
                )
        values = [to_ortvalue(t, device, repr(name)) for t, name in zip(tensors, names)]
        # the forward's state goes to this context only: a forward of another
        # thread (or of this one) in between never takes it
        outputs, state = fn.training_forward(values, TORCH_GENERATOR)
        ctx.ort_state = (fn, state)
        ctx.n_inputs = n_inputs
        # saved for torch's check that no tensor changed in place before the backward
        ctx.save_for_backward(*tensors)
        # The outputs live in memory the forward's state owns: once a state is
        # released, the next forward reuses it. They are the one copy made.
        tensors = tuple(to_tensor(o).clone() for o in outputs)
        n_statistics = len(fn.parent.statistics.output_names)
        if n_statistics:  # batch statistics of batch normalization: no gradient
            ctx.mark_non_differentiable(*tensors[-n_statistics:])
        return tensors

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Run onnxruntime's backward pass of ``ctx``'s forward; return the gradients autograd asks
        for."""
        if (
            torch.is_grad_enabled()
        ):  # create_graph=True: torch would differentiate these gradients again
            raise RuntimeError(
                "onnxruntime's backward pass cannot be differentiated: create_graph=True (double "
                "backward, a gradient penalty, Hessian-vector products) is not available through "
                "OrtAutogradFunction or OrtTorchModule. Compute such terms with the torch module "
                "itself."
            )
        ctx.saved_tensors  # noqa: B018  (raises if a weight or input was modified in place)
        if ctx.ort_state is None:
            raise RuntimeError(
                "onnxruntime ran the backward pass of this forward already: its state is gone. "
                "retain_graph=True cannot replay it; run the forward again."
            )
        (fn, state), ctx.ort_state = ctx.ort_state, None
        device = fn.parent.device
        n_outputs = len(grad_outputs) - len(fn.parent.statistics.output_names)
        grads = fn.backward(
            [
                to_ortvalue(g, device, f"the gradient of output {i}")
                for i, g in enumerate(grad_outputs[:n_outputs])
            ],
            state=state,
        )
        n_weights = len(fn.parent.weights_to_train)
        weight_grads = [to_tensor(g) for g in grads[:n_weights]]
        input_grads = dict(
            zip(fn.parent.input_names_require_grad, (to_tensor(g) for g in grads[n_weights:]))
        )
        inputs = [input_grads.get(name) for name in fn.parent.input_names[: ctx.n_inputs]]
        return (None, None, *inputs, *weight_grads)
