"""The losses of the forward/backward API, and :func:`make_learning_loss`, which names them.

Squared, absolute and elastic errors for regression, the log loss and the
softmax cross-entropy for classification: each writes its per-sample loss
and gradient in ONNX, and :class:`~helpers.forward_backward.base_loss.BaseLearningLoss`
compiles and runs them with the conventions of :func:`helpers.add_loss_output`.
"""

from ..core.graphs.loss_graphs import LOSS_ALIASES, canonical_loss_name, per_sample_loss
from ..core.inputs.validation import check_finite_number
from .base_loss import LABEL, PREDICTION, BaseLearningLoss


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
        per_sample = per_sample_loss(app, "squared_error", PREDICTION, LABEL, rank, {})
        diff = app.node("Sub", [PREDICTION, LABEL])
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
        per_sample = per_sample_loss(app, "absolute_error", PREDICTION, LABEL, rank, {})
        return per_sample, app.node("Sign", [app.node("Sub", [PREDICTION, LABEL])])


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
        per_sample = per_sample_loss(app, "elastic", PREDICTION, LABEL, rank, params)
        diff = app.node("Sub", [PREDICTION, LABEL])
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
            proba = app.node("Sigmoid", [PREDICTION])
            per_sample = per_sample_loss(app, "log", proba, LABEL, rank, {"eps": self.eps})
        else:
            if rank != 2:
                raise ValueError("The softmax log loss needs scores of shape (N, n_classes).")
            proba = app.node("Softmax", [PREDICTION], axis=-1)
            per_sample = per_sample_loss(app, "cross_entropy", PREDICTION, LABEL, rank, {})
        return per_sample, app.node("Sub", [proba, LABEL])


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
