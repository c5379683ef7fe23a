"""The forward and backward passes of one
:class:`~helpers.forward_backward.function.OrtGradientForwardBackward`.

:class:`OrtGradientForwardBackwardFunction` runs the training agent the
builder made: a training forward keeps its state until the matching
backward, several forwards may be in flight, and the inputs and outputs
stay alive as long as the runtime reads them.
:meth:`~OrtGradientForwardBackwardFunction.training_forward` hands the state
to its caller instead of keeping it: threads sharing one function pair each
backward with its own forward.
"""

import numpy as np
import onnxruntime

from ..core.graphs.onnx_function import ortvalue_of, to_ortvalue


def _to_ortvalue(value, device):
    """Return ``(OrtValue, keep_alive)`` for an OrtValue or an array."""
    if isinstance(value, onnxruntime.OrtValue):
        return value, None
    array = np.ascontiguousarray(value)
    return onnxruntime.OrtValue.ortvalue_from_numpy(array, device.type, device.index), array


class OrtGradientForwardBackwardFunction:
    """Forward and backward passes of one
    :class:`~helpers.forward_backward.function.OrtGradientForwardBackward`.

    Each training forward keeps its state until the matching backward; several
    may be in flight, and :meth:`backward` consumes the most recent one
    (last in, first out). :meth:`training_forward` returns the state
    instead, and :meth:`backward` takes it back, whatever the order and the
    thread (as torch's autograd needs, :mod:`helpers.forward_backward.torch_function`):
    nothing a training forward keeps is then shared with another.

    Parameters
    ----------
    parent : helpers.forward_backward.function.OrtGradientForwardBackward

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import numpy_helper
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = mlp_onnx(3, hidden=(4,))
    >>> weights = [numpy_helper.to_array(i) for i in model.graph.initializer]
    >>> from helpers import OrtGradientForwardBackward
    >>> fn = OrtGradientForwardBackward(model).new_instance()
    >>> X = np.arange(6, dtype=np.float32).reshape(2, 3) / 6

    A training forward on two rows, then the backward pass of an output
    gradient of ones: the gradient of the last intercept is the number of rows.

    >>> (prediction,) = fn.forward([X, *weights], training=True)
    >>> print(prediction.numpy().ravel().round(3))
    [-0.695 -0.307]
    >>> grads = fn.backward([np.ones((2, 1), dtype=np.float32)])
    >>> [g.shape() for g in grads], grads[-1].numpy()
    ([[3, 4], [4], [4, 1], [1]], array([2.], dtype=float32))
    """

    def __init__(self, parent):
        self.parent = parent
        self.states_ = []
        self._zero_gradients = {}

    def _zeros(self, shape):
        """A zero gradient of ``shape`` on the device, made once."""
        key = tuple(shape)
        if key not in self._zero_gradients:
            self._zero_gradients[key] = to_ortvalue(
                np.zeros(key, dtype=np.float32), self.parent.device
            )
        return self._zero_gradients[key]

    def _feeds(self, inputs, training):
        parent = self.parent
        expected = len(parent.input_names) + len(parent.weights_to_train)
        statistics = parent.statistics.names
        if not training and statistics and len(inputs) == expected:
            inputs = [*inputs, *(parent.statistics.values[name] for name in statistics)]
        elif not training:
            expected += len(statistics)
        if len(inputs) != expected:
            also = (
                f" then the running statistics {statistics}" if statistics and not training else ""
            )
            raise ValueError(
                f"forward expects {expected} values: the inputs {parent.input_names} "
                f"then the weights {parent.weights_to_train}{also}; got {len(inputs)}."
            )
        values, keep = [], []
        for value in inputs:
            if isinstance(value, onnxruntime.OrtValue):
                values.append(value)
            else:
                ort, ref = _to_ortvalue(value, parent.device)
                values.append(ort)
                keep.append(ref)
        return values, keep

    def forward(self, inputs, training=False, generator=None):
        """Run the forward pass.

        Parameters
        ----------
        inputs : list of OrtValue or numpy.ndarray
            The inputs ``parent.input_names`` followed by the weights in the
            order of ``parent.weights_to_train``. A prediction of a model
            with batch normalization may add the running statistics
            (``parent.statistics.names`` order; their initial values when
            left out).
        training : bool
            False computes predictions only. True keeps what the backward
            pass needs, until :meth:`backward` is called.
        generator : numpy.random.Generator, optional
            Where a training forward draws the random inputs of a graph built with
            ``random_draws`` (see :meth:`training_forward`).

        Returns
        -------
        list of OrtValue
            The outputs ``parent.output_names``, on the training device; a
            training forward of a model with batch normalization adds the
            batch statistics (``parent.statistics.output_names``). After a
            training forward they are valid until the matching
            :meth:`backward`: the backward pass may reuse their memory, so
            copy what must outlive it (``output.numpy().copy()``).
        """
        if training:
            outputs, state = self.training_forward(inputs, generator)
            self.states_.append(state)
            return outputs
        parent = self.parent
        values, _ = self._feeds(inputs, training)  # `_` keeps the arrays of `values` alive
        names = parent.input_names + parent.weights_to_train + parent.statistics.names
        feeds = {name: value._ortvalue for name, value in zip(names, values)}
        # the C session, indexed: see helpers.core.graphs.onnx_function.OnnxFunction
        result = parent._eval_sess._sess.run_with_ort_values(feeds, parent.output_names, None)
        return [onnxruntime.OrtValue(result[i]) for i in range(len(result))]

    def training_forward(self, inputs, generator=None):
        """Run a training forward whose state the caller keeps until :meth:`backward`.

        Parameters
        ----------
        inputs : list of OrtValue or numpy.ndarray
            As :meth:`forward`'s.
        generator : numpy.random.Generator, optional
            Draws the random inputs of a graph built with ``random_draws`` (``parent.draws``:
            the masks of its ``Dropout`` nodes...) for this batch: an object with
            ``random(size, dtype)`` and ``standard_normal(size, dtype)``. Required when there are
            some.

        Returns
        -------
        outputs : list of OrtValue
            As :meth:`forward`'s with ``training=True``, valid until the
            backward of ``state``.
        state : object
            What :meth:`backward` needs (opaque), to pass as its ``state``.
            It is never stored here: two threads, or two forwards of one
            thread, each get their own.

        Examples
        --------
        >>> from onnx import numpy_helper
        >>> from helpers import OrtGradientForwardBackward
        >>> from helpers.teaching.model_factories import mlp_onnx
        >>> model = mlp_onnx(2, hidden=(3,))
        >>> weights = [numpy_helper.to_array(i) for i in model.graph.initializer]
        >>> fn = OrtGradientForwardBackward(model).new_instance()
        >>> _, first = fn.training_forward([np.ones((4, 2), dtype=np.float32), *weights])
        >>> _, second = fn.training_forward([np.ones((1, 2), dtype=np.float32), *weights])
        >>> fn.backward([np.ones((4, 1), dtype=np.float32)], state=first)[-1].numpy()
        array([4.], dtype=float32)
        """
        parent = self.parent
        values, keep = self._feeds(inputs, True)
        if parent.draws:
            n_inputs = len(parent.input_names)
            batch = dict(zip(parent.input_names, values[:n_inputs]))
            drawn = parent.draws.values(generator, batch, parent.device)
            values = [
                *values[:n_inputs],
                *(ortvalue_of(a, parent.device) for a in drawn),
                *values[n_inputs:],
            ]
        feeds = [values[position]._ortvalue for position in parent._feed_order]
        outputs, state = parent._agent.forward(feeds)
        # The runtime reads the inputs again during backward: they stay alive
        # (arrays and OrtValues) until then, and so do the outputs, whose
        # shapes the output gradients are checked against.
        state = (state, values, keep, outputs)
        return [onnxruntime.OrtValue(outputs[i]) for i in range(len(outputs))], state

    def backward(self, grad_outputs, state=None):
        """Run the backward pass of the most recent training forward, or of ``state``.

        Parameters
        ----------
        grad_outputs : list of OrtValue or numpy.ndarray
            The gradient of the loss with respect to each output
            (``parent.output_names``), with the output's shape and dtype
            float32. The batch statistics a training forward adds take no
            gradient.
        state : object, optional
            What :meth:`training_forward` returned with the outputs whose
            backward this is; None takes the most recent :meth:`forward`'s.

        Returns
        -------
        list of OrtValue
            The gradient of each weight, in the order of
            ``parent.weights_to_train``, then of each input of
            ``parent.input_names_require_grad``.
        """
        if state is None and not self.states_:
            raise RuntimeError(
                "backward needs a training forward first: call forward(inputs, training=True)."
            )
        parent = self.parent
        taken = state is not None
        state, _, _, outputs = state if taken else self.states_[-1]
        n_outputs = len(outputs) - len(parent.statistics.output_names)
        if len(grad_outputs) != n_outputs:
            raise ValueError(
                f"backward expects {n_outputs} output gradients, got {len(grad_outputs)}."
            )
        gradients = {}
        keep = []
        for i, grad in enumerate(grad_outputs):
            if not isinstance(grad, onnxruntime.OrtValue):
                grad, ref = _to_ortvalue(grad, parent.device)
                keep.append(ref)
            value = grad._ortvalue
            if value.data_type() != "tensor(float)":
                raise TypeError(
                    f"The gradient of output {i} has type {value.data_type()}, expected "
                    "tensor(float): convert it with .astype(numpy.float32)."
                )
            shape = outputs[i].shape()
            if value.shape() != shape:
                raise ValueError(
                    f"The gradient of output {i} has shape {value.shape()}, but the output has "
                    f"shape {shape}: they must be equal."
                )
            gradients[i] = value
        feeds = [
            # batch statistics: no gradient flows back through them
            gradients[i] if i < n_outputs else self._zeros(outputs[i].shape())._ortvalue
            for i in parent._differentiable_outputs
        ]
        # the forward's inputs (a drawn mask has no other owner) live until the backward ran
        forward = None if taken else self.states_.pop()
        gradients = parent._agent.backward(feeds, state)
        del forward
        return [onnxruntime.OrtValue(gradients[p]) for p in parent._grad_positions]
