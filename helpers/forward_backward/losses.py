"""Losses of the forward/backward API, with their gradients, as ONNX graphs.

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

from ..core.graphs.loss_graphs import (
    LOSS_ALIASES,
    GraphAppender,
    canonical_loss_name,
    per_sample_loss,
)
from ..core.graphs.onnx_function import IR_VERSION, OnnxFunction, make_model, to_ortvalue
from ..core.inputs.validation import check_finite_number
from ..core.updates.configurable import Configurable

_LABEL, _PRED, _WEIGHT = "label", "prediction", "weight"


def _skeleton(rank, weighted):
    """An empty model with inputs label, prediction and, if ``weighted``, weight."""
    shape = ["N"] + [f"d{i}" for i in range(1, rank)]
    inputs = [(_LABEL, shape), (_PRED, shape)] + ([(_WEIGHT, ["N"])] if weighted else [])
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
                per_sample = app.node("Mul", [per_sample, _WEIGHT])
            if what == "scores":
                app.node("Identity", [per_sample], output="scores")
                model.graph.output.append(helper.make_tensor_value_info("scores", 1, None))
            else:
                app.node("ReduceMean", [per_sample], output="loss", keepdims=0)
                # the number of values the loss is the mean of: every element, or every row
                count = (
                    app.node("Size", [_PRED])
                    if self.averages_outputs
                    else app.node("Shape", [_PRED], start=0, end=1)
                )
                n = app.node("Cast", [count], to=onnx.TensorProto.FLOAT)
                if weighted:
                    w = _WEIGHT
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


class SquareLearningLoss(BaseLearningLoss):
    """Squared error ``mean_j (p - y)**2`` per sample, torch's ``MSELoss``.

    The mean over the ``k`` outputs of a sample, then over the batch: the
    mean over every element, whatever ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> y = np.array([[1.0], [2.0]], dtype=np.float32)
    >>> p = np.array([[1.5], [1.0]], dtype=np.float32)

    The mean of 0.25 and 1, and the gradient ``2 * (p - y) / N``:

    >>> loss, grad = SquareLearningLoss().loss_gradient(Device("cpu"), y, p)
    >>> print(loss.numpy(), grad.numpy().ravel())
    0.625 [ 0.5 -1. ]

    With two outputs, the mean of four squares, and the gradient ``2 * (p - y) / (N * k)``:

    >>> y2, p2 = np.hstack([y, y]), np.hstack([p, y])
    >>> loss, grad = SquareLearningLoss().loss_gradient(Device("cpu"), y2, p2)
    >>> print(loss.numpy(), grad.numpy().tolist())
    0.3125 [[0.25, 0.0], [-0.5, 0.0]]
    """

    def _build(self, app, rank):
        per_sample = per_sample_loss(app, "squared_error", _PRED, _LABEL, rank, {})
        diff = app.node("Sub", [_PRED, _LABEL])
        return per_sample, app.node("Mul", [diff, app.const(2.0)])


class AbsoluteLearningLoss(BaseLearningLoss):
    """Absolute error ``mean_j |p - y|`` per sample, torch's ``L1Loss``; its gradient is the sign.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> y = np.array([[1.0], [2.0]], dtype=np.float32)
    >>> p = np.array([[1.5], [1.0]], dtype=np.float32)

    The mean of 0.5 and 1, and the gradient ``sign(p - y) / N``:

    >>> loss, grad = AbsoluteLearningLoss().loss_gradient(Device("cpu"), y, p)
    >>> print(loss.numpy(), grad.numpy().ravel())
    0.75 [ 0.5 -0.5]
    """

    def _build(self, app, rank):
        per_sample = per_sample_loss(app, "absolute_error", _PRED, _LABEL, rank, {})
        return per_sample, app.node("Sign", [app.node("Sub", [_PRED, _LABEL])])


class ElasticLearningLoss(BaseLearningLoss):
    """``mean_j l1_weight * |p - y| + l2_weight * (p - y)**2`` per sample.

    Parameters
    ----------
    l1_weight, l2_weight : float
        Weights of the absolute and squared errors.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> y = np.array([[1.0], [2.0]], dtype=np.float32)
    >>> p = np.array([[1.5], [1.0]], dtype=np.float32)

    Half the absolute error plus half the squared error: the mean of 0.375
    and 1, and the gradient ``(0.5 * sign(p - y) + (p - y)) / N``.

    >>> elastic = ElasticLearningLoss(l1_weight=0.5, l2_weight=0.5)
    >>> loss, grad = elastic.loss_gradient(Device("cpu"), y, p)
    >>> print(loss.numpy(), grad.numpy().ravel())
    0.6875 [ 0.5  -0.75]
    """

    def __init__(self, l1_weight=0.5, l2_weight=0.5):
        super().__init__()
        check_finite_number("l1_weight", l1_weight)
        check_finite_number("l2_weight", l2_weight)
        if l1_weight < 0 or l2_weight < 0 or l1_weight + l2_weight == 0:
            raise ValueError(
                f"l1_weight and l2_weight must be >= 0 and not both 0, got {l1_weight}, "
                f"{l2_weight}."
            )
        self.l1_weight, self.l2_weight = float(l1_weight), float(l2_weight)

    def get_params(self, deep=True):
        return {"l1_weight": self.l1_weight, "l2_weight": self.l2_weight}

    def _build(self, app, rank):
        params = self.get_params()
        per_sample = per_sample_loss(app, "elastic", _PRED, _LABEL, rank, params)
        diff = app.node("Sub", [_PRED, _LABEL])
        l1 = app.node("Mul", [app.node("Sign", [diff]), app.const(self.l1_weight)])
        l2 = app.node("Mul", [diff, app.const(2 * self.l2_weight)])
        return per_sample, app.node("Add", [l1, l2])


class NegLogLearningLoss(BaseLearningLoss):
    """Log loss of a classifier whose output is a raw score (a logit).

    Parameters
    ----------
    eps : float
        With ``'sigmoid'``, probabilities are clipped to ``[eps, 1 - eps]``
        in the loss value (not in the gradient, which needs no clipping).
        The softmax loss needs no clipping: it is computed from the
        log-softmax of the scores, exactly, as torch's ``cross_entropy``
        and ``add_loss_output(..., score_name='cross_entropy')`` compute it.
    probability_function : {'sigmoid', 'softmax'}
        ``'sigmoid'``: binary, one score per sample, labels 0 or 1.
        ``'softmax'``: multiclass, one score per class, labels one-hot (the
        optimizer also takes one class index per sample and encodes it).

    Notes
    -----
    With ``p = sigmoid(s)`` the gradient of ``-y log p - (1 - y) log(1 - p)``
    with respect to the score ``s`` is ``p - y``; with ``p = softmax(s)`` and
    the multiclass loss ``-sum_j y_j log p_j`` it is ``p - y`` too.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> y = np.array([[1.0], [0.0]], dtype=np.float32)
    >>> scores = np.zeros((2, 1), dtype=np.float32)

    Scores of 0 are probabilities of 0.5: the loss is ``log 2`` and the
    gradient ``(sigmoid(s) - y) / N``.

    >>> loss, grad = NegLogLearningLoss().loss_gradient(Device("cpu"), y, scores)
    >>> print(round(float(loss.numpy()), 4), grad.numpy().ravel())
    0.6931 [-0.25  0.25]
    """

    def __init__(self, eps=1e-5, probability_function="sigmoid"):
        super().__init__()
        if probability_function not in ("sigmoid", "softmax"):
            raise ValueError(
                "probability_function must be 'sigmoid' or 'softmax', got "
                f"{probability_function!r}."
            )
        if not 0 < eps < 0.5:
            raise ValueError(f"eps must be in (0, 0.5), got {eps!r}.")
        self.eps, self.probability_function = float(eps), probability_function

    def get_params(self, deep=True):
        return {"eps": self.eps, "probability_function": self.probability_function}

    @property
    def takes_class_labels(self):
        return self.probability_function == "softmax"

    @property
    def averages_outputs(self):
        return self.probability_function == "sigmoid"

    def _build(self, app, rank):
        if self.probability_function == "sigmoid":
            proba = app.node("Sigmoid", [_PRED])
            per_sample = per_sample_loss(app, "log", proba, _LABEL, rank, {"eps": self.eps})
        else:
            if rank != 2:
                raise ValueError("The softmax log loss needs scores of shape (N, n_classes).")
            proba = app.node("Softmax", [_PRED], axis=-1)
            per_sample = per_sample_loss(app, "cross_entropy", _PRED, _LABEL, rank, {})
        return per_sample, app.node("Sub", [proba, _LABEL])


class CrossEntropyLearningLoss(NegLogLearningLoss):
    """Softmax cross-entropy on raw scores, with one-hot labels: ``'cross_entropy'``.

    The same loss as ``add_loss_output(..., score_name='cross_entropy')``;
    :class:`NegLogLearningLoss` with ``probability_function='softmax'``.
    ``OrtGradientForwardBackwardOptimizer.fit`` takes class indices too (one
    integer per sample, ``0 .. n_classes - 1``) and encodes them as one-hot
    rows, as torch's ``CrossEntropyLoss`` takes class indices.

    The value is computed from the log-softmax, exactly, whatever the
    scores: a confident wrong prediction costs what it costs in torch.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> scores, labels = np.zeros((1, 2), dtype=np.float32), np.array([[1, 0]], dtype=np.float32)
    >>> value, gradient = CrossEntropyLearningLoss().loss_gradient(Device("cpu"), labels, scores)
    >>> round(float(value.numpy()), 4), gradient.numpy().tolist()  # log 2, softmax - one_hot
    (0.6931, [[-0.5, 0.5]])
    >>> wrong = np.array([[0.0, 40.0]], dtype=np.float32)  # p(class 0) = exp(-40)
    >>> round(
    ...     float(
    ...         CrossEntropyLearningLoss().loss_gradient(Device("cpu"), labels, wrong)[0].numpy()
    ...     ),
    ...     3,
    ... )
    40.0
    """

    def __init__(self):
        super().__init__(probability_function="softmax")

    def get_params(self, deep=True):
        return {}


#: The loss classes, by the names of :data:`helpers.core.graphs.loss_graphs.LOSSES`:
#: ``'squared_error'`` :class:`SquareLearningLoss`, ``'absolute_error'``
#: :class:`AbsoluteLearningLoss`, ``'elastic'`` :class:`ElasticLearningLoss`, ``'log'``
#: :class:`NegLogLearningLoss`, ``'cross_entropy'`` :class:`CrossEntropyLearningLoss`.
LEARNING_LOSSES = {
    "squared_error": SquareLearningLoss,
    "absolute_error": AbsoluteLearningLoss,
    "elastic": ElasticLearningLoss,
    "log": NegLogLearningLoss,
    "cross_entropy": CrossEntropyLearningLoss,
}


def make_learning_loss(learning_loss, **kwargs):
    """Return a loss object from an instance, a loss name or a class name.

    Parameters
    ----------
    learning_loss : BaseLearningLoss or str
        An instance, a name of :data:`helpers.core.graphs.loss_graphs.LOSSES` or one
        of its aliases (``'square_error'``, ``'neglog'``...), or a class name
        (``'SquareLearningLoss'``).
    **kwargs
        Passed to the class when ``learning_loss`` is a string.

    Examples
    --------
    >>> make_learning_loss("square_error")
    SquareLearningLoss()
    >>> make_learning_loss("elastic", l1_weight=0.2)
    ElasticLearningLoss(l1_weight=0.2, l2_weight=0.5)
    """
    if isinstance(learning_loss, BaseLearningLoss):
        if kwargs:
            raise ValueError("Extra arguments are only accepted with a loss given by name.")
        return learning_loss
    by_class = {cls.__name__: cls for cls in LEARNING_LOSSES.values()}
    if isinstance(learning_loss, str) and learning_loss in by_class:
        return by_class[learning_loss](**kwargs)
    try:
        name = canonical_loss_name(learning_loss)
    except ValueError:
        raise ValueError(
            f"Unknown learning_loss {learning_loss!r}: use a BaseLearningLoss, one of "
            f"{list(LEARNING_LOSSES)} (or an alias: {sorted(LOSS_ALIASES)}) or a class name "
            f"{sorted(by_class)}."
        ) from None
    return LEARNING_LOSSES[name](**kwargs)
