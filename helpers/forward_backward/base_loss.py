"""BaseLearningLoss: a loss of the forward/backward API compiled as an ONNX graph, and run.

Its subclasses (:mod:`helpers.forward_backward.losses`) write a per-sample loss
and its elementwise gradient; this class adds the weights and the mean.

Each loss follows :func:`helpers.add_loss_output`'s conventions, so that both
APIs minimize the same function: with ``N`` rows in the batch and ``w`` the
per-sample weights (ones by default),
``loss = sum_i w_i * loss_i / N``, where the loss of a sample is the mean
of an elementwise loss over its ``k`` outputs (the sum over the classes for
the softmax cross-entropy). The gradient with respect to the prediction is
therefore ``w_i * dloss_ij / (N * k)`` (``w_i * dloss_ij / N`` for the
cross-entropy): it already carries the 1/N of the mean, and the learning
rate needs no rescaling with the batch size.
"""

import numpy as np
import onnx
from onnx import helper

from ..core.graphs.loss_graphs import GraphAppender
from ..core.graphs.onnx_function import IR_VERSION, OnnxFunction, make_model, to_ortvalue
from ..core.updates.configurable import Configurable

#: The inputs of every loss graph: the labels, the predictions, the per-sample weights.
LABEL, PREDICTION, WEIGHT = "label", "prediction", "weight"


def _skeleton(rank, weighted):
    """An empty model with inputs label, prediction and, if ``weighted``, weight."""
    shape = ["N"] + [f"d{i}" for i in range(1, rank)]
    inputs = [(LABEL, shape), (PREDICTION, shape)] + ([(WEIGHT, ["N"])] if weighted else [])
    return make_model([], inputs, [], "loss")


class BaseLearningLoss(Configurable):
    """A loss and its gradient with respect to the prediction.

    Subclasses write the per-sample loss and the gradient in ONNX
    (:meth:`_build`); this class compiles them for each device, rank of the
    prediction and presence of sample weights, and runs them. Without
    weights the graph has no weight input and no multiplication by ones:
    a training step runs this graph once, and its cost is mostly its
    number of nodes.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> from helpers.forward_backward.losses import SquareLearningLoss
    >>> loss = SquareLearningLoss()
    >>> isinstance(loss, BaseLearningLoss), loss == SquareLearningLoss()
    (True, True)
    >>> y = np.array([[1.0], [2.0]], dtype=np.float32)
    >>> p = np.array([[1.5], [1.0]], dtype=np.float32)
    >>> print(loss.loss_scores(Device("cpu"), y, p).numpy())
    [0.25 1.  ]

    The same loss, with the samples weighted 1 and 3:

    >>> w = np.array([1.0, 3.0], dtype=np.float32)
    >>> value, grad = loss.loss_gradient(Device("cpu"), y, p, weight=w)
    >>> print(value.numpy(), grad.numpy().ravel())
    1.625 [ 0.5 -3. ]
    """

    #: Whether the targets may be class indices, one-hot encoded by the optimizer
    #: (a softmax cross-entropy over the model's scores).
    takes_class_labels = False

    #: Whether the loss of a sample is the mean over its outputs (elementwise losses,
    #: as torch's ``MSELoss``), rather than their sum (a softmax cross-entropy).
    averages_outputs = True

    def __init__(self):
        self._functions = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_functions"] = {}
        return state

    def _build(self, app, rank):
        """Return (per-sample loss, elementwise gradient of the per-sample loss)."""
        raise NotImplementedError

    def _function(self, device, rank, what, weighted):
        key = (device, rank, what, weighted)
        if key not in self._functions:
            model = _skeleton(rank, weighted)
            app = GraphAppender(model, prefix="t_")
            per_sample, dloss = self._build(app, rank)
            if weighted:
                per_sample = app.node("Mul", [per_sample, WEIGHT])
            if what == "scores":
                app.node("Identity", [per_sample], output="scores")
                model.graph.output.append(helper.make_tensor_value_info("scores", 1, None))
            else:
                app.node("ReduceMean", [per_sample], output="loss", keepdims=0)
                # the number of values the loss is the mean of: every element, or every row
                count = (
                    app.node("Size", [PREDICTION])
                    if self.averages_outputs
                    else app.node("Shape", [PREDICTION], start=0, end=1)
                )
                n = app.node("Cast", [count], to=onnx.TensorProto.FLOAT)
                if weighted:
                    w = WEIGHT
                    if rank > 1:
                        w = app.node("Unsqueeze", [w, app.const(list(range(1, rank)), np.int64)])
                    dloss = app.node("Mul", [dloss, w])
                app.node("Div", [dloss, n], output="gradient")
                model.graph.output.extend(
                    [
                        helper.make_tensor_value_info("loss", 1, []),
                        helper.make_tensor_value_info("gradient", 1, None),
                    ]
                )
            model.ir_version = IR_VERSION
            self._functions[key] = OnnxFunction(model, device)
        return self._functions[key]

    def gradient_model(self, rank=2, weighted=False):
        """Return the ONNX graph computing the loss and its gradient.

        Parameters
        ----------
        rank : int
            Rank of the prediction (2 for an output of shape ``(N, k)``).
        weighted : bool
            Whether the graph takes per-sample weights.

        Returns
        -------
        onnx.ModelProto
            Inputs ``label``, ``prediction`` (and ``weight``); outputs
            ``loss`` and ``gradient``.

        Examples
        --------
        >>> from helpers.forward_backward.losses import SquareLearningLoss
        >>> model = SquareLearningLoss().gradient_model(rank=2)
        >>> [i.name for i in model.graph.input], [o.name for o in model.graph.output]
        (['label', 'prediction'], ['loss', 'gradient'])
        """
        from ..core.machine.devices import Device  # noqa: PLC0415

        return self._function(Device("cpu"), rank, "gradient", weighted).model

    def _run(self, what, device, expected, predicted, weight):
        predicted = to_ortvalue(predicted, device)
        rank = len(predicted.shape())
        if weight is None:
            return self._function(device, rank, what, False)(expected, predicted)
        return self._function(device, rank, what, True)(expected, predicted, weight)

    def loss_gradient(self, device, expected, predicted, weight=None):
        """Return the mean loss and its gradient with respect to ``predicted``.

        Parameters
        ----------
        device : helpers.core.machine.devices.Device
        expected, predicted : OrtValue or numpy.ndarray
            Labels and predictions, of the same shape ``(N, ...)``.
        weight : OrtValue or numpy.ndarray, optional
            Per-sample weights of shape ``(N,)``; None weighs every sample 1.

        Returns
        -------
        tuple of OrtValue
            The loss (a scalar) and the gradient (shape of ``predicted``).
        """
        return tuple(self._run("gradient", device, expected, predicted, weight))

    def loss_scores(self, device, expected, predicted, weight=None):
        """Return the loss of each sample (times its weight), shape ``(N,)``."""
        return self._run("scores", device, expected, predicted, weight)[0]
