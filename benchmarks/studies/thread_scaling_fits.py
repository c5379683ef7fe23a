"""What ``thread_scaling`` times: each framework's fits of one MLP size at one thread count.

A size ``D-H-1@B`` (:func:`parse_size`) is a ReLU MLP ``D -> H -> 1`` trained with plain SGD on
batches of ``B`` rows; :func:`make_fits` gives the ``fit(epochs)`` of both onnxruntime APIs
(:func:`benchmarks.workloads.your_model.ort_fits`), torch eager, onnxruntime's bound and numpy's
products, and :func:`measure` their marginal step cost at a thread count. ``step_targets`` times
its MLP targets with the same fits.
"""

import math
import re

import numpy as np

from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import matmul_references as mr
from benchmarks.workloads import models as bm
from benchmarks.workloads import your_model as ym

#: The sizes measured by default: the small MLP of the targets and the large one.
PRESETS = ("100-50-1@100", "500-500-1@1000")
#: The frameworks, in the order of the tables.
FRAMEWORKS = (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD, fw.TORCH, fw.ORT_BOUND, fw.NUMPY_MATMUL)
#: Learning rate of every framework: small, so that no run diverges.
LEARNING_RATE = 1e-4
#: Rows per epoch at least, so that an epoch has enough steps to time.
MIN_ROWS = 8000
MIN_STEPS = 8

_SIZE = re.compile(r"^(\d+)-(\d+)-1@(\d+)$")


def parse_size(text):
    """``'D-H-1@B'`` -> ``dict(size, n_features, hidden, batch_size, n_samples)``.

    ``n_samples`` is a multiple of the batch size (every batch is full), at
    least :data:`MIN_ROWS` rows and :data:`MIN_STEPS` batches.
    """
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"A size is 'D-H-1@B' (for example {PRESETS[0]!r}), got {text!r}.")
    d, h, b = (int(v) for v in match.groups())
    if min(d, h, b) < 1:
        raise ValueError(f"Sizes must be positive, got {text!r}.")
    steps = max(MIN_STEPS, math.ceil(MIN_ROWS / b))
    return {
        "size": text.strip(),
        "n_features": d,
        "hidden": h,
        "batch_size": b,
        "n_samples": steps * b,
    }


def _shuffled_epochs(step, X, batch_size, epochs, seed):
    """Run ``step(batch)`` over ``epochs`` shuffled epochs, as the training loops do."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    for _ in range(epochs):
        shuffled = X[rng.permutation(n)]
        for start in range(0, n, batch_size):
            step(shuffled[start : start + batch_size])


def make_fits(config, threads, random_state=0):
    """The ``fit(epochs)`` of every framework for one size and one thread count.

    Both onnxruntime APIs are the benchmarks' optimizers
    (:func:`benchmarks.workloads.your_model.ort_fits`, plain SGD, squared error), whose refits
    find their training graphs in the caches; threads are ``n_threads``. Torch eager is the
    benchmarks' torch loop (:func:`benchmarks.workloads.your_model.torch_fit`: the same
    batches, learning rate and loss), starting from the same weights; its threads are
    ``torch.set_num_threads``, set by the caller. That loop reads the loss of every step
    (``.item()``), as the onnxruntime optimizers do (their ``train_losses_``).

    Returns
    -------
    dict
        Framework name to a callable ``fit(epochs)``, in :data:`FRAMEWORKS` order.
    """
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    d, h, b, n = config["n_features"], config["hidden"], config["batch_size"], config["n_samples"]
    X, y = bm.random_regression(n, d, random_state=random_state)
    onx = mlp_onnx(d, hidden=(h,), random_state=random_state)
    layers = bm.mlp_layers(onx)
    ort = ym.ort_fits(
        onx,
        X,
        y,
        "regression",
        learning_rate=LEARNING_RATE,
        batch_size=b,
        n_threads=threads,
        random_state=random_state,
    )

    torch_eager = ym.torch_fit(
        lambda: bm.torch_mlp(onx),
        X,
        y.reshape(-1, 1),
        "regression",
        learning_rate=LEARNING_RATE,
        batch_size=b,
        random_state=random_state,
    )

    bound = mr.OrtStepProducts(layers, n_threads=threads)

    def ort_bound(epochs):
        _shuffled_epochs(bound.step, X, b, epochs, random_state)

    products = mr.NumpyMatmul(layers)
    _, g, hidden = products.prepare(X[:b], y[:b])

    def numpy_products(epochs):  # threads: threadpoolctl, set by the caller
        _shuffled_epochs(lambda batch: products.step(batch, g, hidden), X, b, epochs, random_state)

    return {
        **ort,
        fw.TORCH: torch_eager,
        fw.ORT_BOUND: ort_bound,
        fw.NUMPY_MATMUL: numpy_products,
    }


def measure(config, threads, epochs=(1, 4), repeats=3, random_state=0):
    """Marginal step cost of every framework for one size and thread count.

    Returns
    -------
    list of dict
        One row per framework: the configuration, ``threads``, ``framework``,
        ``ms_per_step``, ``fixed_ms`` (what a fit costs once) and ``note``: ``''``,
        or why a figure is NaN (the machine's noise was larger than the extra epochs).
    """
    import torch  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    fits = make_fits(config, threads, random_state)
    steps_per_epoch = config["n_samples"] // config["batch_size"]
    previous = torch.get_num_threads()
    with threadpool_limits(limits=threads, user_api="blas"):
        torch.set_num_threads(threads)
        try:
            costs = bm.marginal_step_cost(fits, steps_per_epoch, epochs[0], epochs[1], repeats)
        finally:
            torch.set_num_threads(previous)
    return [
        {
            **config,
            "threads": threads,
            "framework": name,
            "ms_per_step": cost["step_s"] * 1e3,
            "fixed_ms": cost["fixed_s"] * 1e3,
            "note": cost["note"],
        }
        for name, cost in costs.items()
    ]
