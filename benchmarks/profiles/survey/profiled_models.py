"""The training steps the profiles run: models, data and optimizers, and the survey's list of them.

``small`` uses the sizes of the notebooks (10 features, 32 hidden units,
batches of 20 to 32; 64 features and 10 classes for the classifier, as the
digits) and the small models of the zoo (``benchmarks/example_models.py``);
``large`` a 500-500 network, batches of 1000 and the zoo's large models.
The zoo's models train on batches of :data:`ZOO_BATCH` with random data of
their input (:func:`zoo_model`, :mod:`benchmarks.workloads.model_inputs`).
:func:`make_optimizer` builds the optimizer of a configuration for either
API; :func:`configurations` lists those :mod:`~benchmarks.profiles.survey.kernel_survey`
profiles, with reference rows trained with ``fast_gradients=False``: the
ReLU network (its ``ReluGrad`` is the slow kernel the project rewrites) and
the token classifier (its ``GatherGrad``).
"""

import numpy as np
import torch
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from benchmarks import example_models
from benchmarks.profiles.ab_timing import FORWARD_BACKWARD, WHOLE, ort_makers
from benchmarks.workloads.frameworks import LOSSES
from benchmarks.workloads.model_inputs import (
    input_spec,
    output_width,
    random_inputs,
    random_targets,
)
from helpers import export_for_training
from helpers.teaching.datasets import one_hot
from helpers.teaching.model_factories import mlp_onnx

#: Model and batch sizes; ``steps`` is the number of profiled training steps.
SIZES = {
    "small": {
        "n_features": 10,
        "hidden": 32,
        "batch": 25,
        "linear_batch": 20,
        "classifier_features": 64,
        "classifier_batch": 32,
        "steps": 200,
        "lr": 1e-3,
        "zoo_steps": 40,
    },
    "large": {
        "n_features": 500,
        "hidden": 500,
        "batch": 1000,
        "linear_batch": 1000,
        "classifier_features": 500,
        "classifier_batch": 1000,
        "steps": 20,
        "lr": 1e-4,
        "zoo_steps": 10,
    },
}
N_CLASSES = 10
#: Batch size of the zoo's models (``bench_your_model``'s default).
ZOO_BATCH = 64
#: Zoo families also surveyed with ``fast_gradients=False``: the gradient kernel a rewrite replaces.
ZOO_REFERENCES = ("token_classifier",)
#: label, model ('linear', an activation or 'classifier'), loss, update rule,
#: fast_gradients. The loss is add_loss_output's score name.
CONFIGURATIONS = [
    ("linear, squared error, SGD", "linear", "squared_error", "sgd", True),
    ("linear, absolute error, SGD", "linear", "absolute_error", "sgd", True),
    ("linear, elastic, SGD", "linear", "elastic", "sgd", True),
    ("MLP relu, SGD", "relu", "squared_error", "sgd", True),
    ("MLP tanh, SGD", "tanh", "squared_error", "sgd", True),
    ("MLP logistic, SGD", "logistic", "squared_error", "sgd", True),
    ("MLP identity, SGD", "identity", "squared_error", "sgd", True),
    ("MLP relu, AdamW", "relu", "squared_error", "adamw", True),
    ("MLP relu, Nesterov", "relu", "squared_error", "nesterov", True),
    ("MLP classifier relu, softmax log loss, SGD", "classifier", "cross_entropy", "sgd", True),
    ("reference: MLP relu, SGD, fast_gradients=False", "relu", "squared_error", "sgd", False),
]


def make_models(size, random_state=0):
    """Build the ONNX models and their training data for one size.

    Parameters
    ----------
    size : dict
        One value of :data:`SIZES`.
    random_state : int
        Seeds the data and the weights.

    Returns
    -------
    dict
        Model kind to ``(onnx model, X, y, batch size)``.
    """
    rng = np.random.default_rng(random_state)
    d, h, steps = size["n_features"], size["hidden"], size["steps"]
    X = rng.standard_normal((steps * size["batch"], d)).astype(np.float32)
    y = (X @ rng.standard_normal((d, 1)) / np.sqrt(d)).astype(np.float32)
    X_lin = X[: steps * size["linear_batch"]]
    y_lin = y[: len(X_lin)]
    linear = to_onnx(
        LinearRegression().fit(X_lin, y_lin.ravel()), X_lin[:1], black_op={"LinearRegressor"}
    )
    dc = size["classifier_features"]
    X_clf = rng.standard_normal((steps * size["classifier_batch"], dc)).astype(np.float32)
    Y_clf = one_hot(X_clf[:, :N_CLASSES].argmax(axis=1), N_CLASSES)
    models = {
        "linear": (linear, X_lin, y_lin, size["linear_batch"]),
        "classifier": (
            mlp_onnx(dc, h, N_CLASSES, random_state=random_state),
            X_clf,
            Y_clf,
            size["classifier_batch"],
        ),
    }
    for activation in ("relu", "tanh", "logistic", "identity"):
        models[activation] = (mlp_onnx(d, h, 1, activation, random_state), X, y, size["batch"])
    return models


def zoo_model(name, n_samples, random_state=0):
    """Export one model of the zoo and draw random data of its input.

    Parameters
    ----------
    name : str
        A builder of :data:`benchmarks.example_models.ZOO`.
    n_samples : int
    random_state : int
        Seeds the weights and the data.

    Returns
    -------
    tuple
        ``(onnx model, X, y, loss)``: class indices and ``'cross_entropy'``
        for a classifier, float targets and ``'squared_error'`` otherwise.

    Examples
    --------
    >>> onx, X, y, loss = zoo_model("token_classifier_small", 8)
    >>> X.shape, X.dtype, y.shape, loss
    ((8, 32), dtype('int64'), (8,), 'cross_entropy')
    """
    _, shape, task = example_models.ZOO[name]
    torch.manual_seed(random_state)
    module = getattr(example_models, name)()
    spec = input_spec(module, shape)
    X = random_inputs(n_samples, spec, random_state)
    y = random_targets(X, task, output_width(module, spec), random_state)
    loss = LOSSES[task][0]
    return export_for_training(module, torch.from_numpy(X[:2])), X, y, loss


def make_optimizer(api, onx, loss, rule, fast_gradients, batch_size, lr, threads):
    """Return the optimizer of one configuration of :data:`CONFIGURATIONS` for one API.

    Returns
    -------
    helpers.OrtGradientOptimizer, helpers.OrtGradientForwardBackwardOptimizer or None
        The optimizer; None when the API has no such update rule (AdamW in
        the forward/backward API).
    """
    if api == FORWARD_BACKWARD and rule == "adamw":
        return None
    makers = ort_makers(
        onx,
        loss,
        optimizer=rule,
        learning_rate=lr,
        batch_size=batch_size,
        n_threads=threads,
        fast_gradients=fast_gradients,
    )
    return makers[api]()


def configurations(size_name, threads, only=()):
    """The configurations of one size: ``(label, API, optimizer, X, y)`` for each API that offers
    it.

    Parameters
    ----------
    size_name : str
        A key of :data:`SIZES`.
    threads : int
    only : sequence of str
        Keep the labels containing one of these words (case ignored); all when empty.

    Examples
    --------
    >>> [(label, api) for label, api, *_ in configurations("small", 1, only=["AdamW"])]
    [('MLP relu, AdamW', 'whole-training')]
    """
    size = SIZES[size_name]
    zoo = [
        (f"zoo, {family}: {name}", name, True)
        for name, (family, *_) in example_models.ZOO.items()
        if name.endswith(f"_{size_name}")
    ]
    zoo += [
        (f"reference: {label}, fast_gradients=False", name, False)
        for label, name, _ in list(zoo)
        if name.startswith(ZOO_REFERENCES)
    ]
    wanted = [word.lower() for word in only]

    def kept(label):
        return not wanted or any(word in label.lower() for word in wanted)

    models = make_models(size)
    for label, kind, loss, rule, fast in CONFIGURATIONS:
        onx, X, y, batch_size = models[kind]
        for api in (WHOLE, FORWARD_BACKWARD):
            optimizer = make_optimizer(api, onx, loss, rule, fast, batch_size, size["lr"], threads)
            if optimizer is not None and kept(label):
                yield label, api, optimizer, X, y
    for label, name, fast in zoo:
        if not kept(label):
            continue
        onx, X, y, loss = zoo_model(name, ZOO_BATCH * size["zoo_steps"])
        for api in (WHOLE, FORWARD_BACKWARD):
            yield (
                label,
                api,
                make_optimizer(api, onx, loss, "sgd", fast, ZOO_BATCH, size["lr"], threads),
                X,
                y,
            )
