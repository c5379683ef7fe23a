"""The torch training an onnxruntime optimizer is compared with: the same batches, the same update.

Both optimizers draw one permutation of the rows per epoch from
``numpy.random.RandomState(random_state)`` and cut it into batches in order
(:mod:`helpers.portable.batch_order`).
:func:`torch_fit` trains a torch module on exactly those batches with
``torch.optim.SGD`` or ``torch.optim.AdamW`` (the formulas the optimizers'
``solver='sgd'`` and ``'adamw'`` run), so that losses, weights and running
statistics can be compared step by step. It is the one torch training loop:
the benchmarks time it too (:func:`benchmarks.workloads.your_model.torch_fit`).
"""

import numbers

import numpy as np
import torch

from ..portable.batch_order import batch_bounds, epoch_order
from ..portable.batch_order import random_state as make_rng

#: The per-batch losses the optimizers offer, as torch computes them.
TORCH_LOSSES = {
    "squared_error": torch.nn.functional.mse_loss,
    "cross_entropy": torch.nn.functional.cross_entropy,
}


def torch_fit(
    module,
    X,
    y,
    loss="squared_error",
    batch_size=32,
    epochs=1,
    learning_rate=0.01,
    solver="sgd",
    random_state=0,
    compiled=False,
):
    """Train ``module`` in place as the optimizers would train its ONNX export.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place, in training mode.
    X : numpy.ndarray
        Samples (features, images, sequences or integer ids).
    y : numpy.ndarray
        Float targets of the module's output shape, or class indices for
        ``'cross_entropy'``.
    loss : {'squared_error', 'cross_entropy'}
        torch's ``mse_loss`` (the optimizers' squared error: mean over every
        element, the rows and the outputs) or ``cross_entropy`` on raw scores.
    batch_size, epochs : int
    learning_rate : float
        A constant learning rate.
    solver : {'sgd', 'adamw'}
        ``torch.optim.SGD`` or ``torch.optim.AdamW`` (no weight decay).
    random_state : int, None or numpy.random.RandomState
        The seed of the permutations, as the optimizers' ``random_state``; an int also seeds
        torch's generator during the fit (the masks of ``Dropout``, which differ from the
        optimizers' own: see :mod:`helpers.core.model_graphs.random_draws`).
    compiled : bool
        Run the module through ``torch.compile`` (compiled at the first fit,
        reused by the next ones of the same module class).

    Returns
    -------
    epoch_losses : list of float
        The mean loss of each epoch, as ``train_losses_``.
    step_losses : list of float
        The loss of each step.

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> X = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    >>> epoch_losses, step_losses = torch_fit(
    ...     torch.nn.Linear(3, 1), X, X[:, :1], batch_size=4, epochs=2
    ... )
    >>> len(epoch_losses), len(step_losses)
    (2, 6)
    """
    if loss not in TORCH_LOSSES:
        raise ValueError(f"loss must be one of {sorted(TORCH_LOSSES)}, got {loss!r}.")
    optimizers = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
    if solver not in optimizers:
        raise ValueError(f"solver must be one of {sorted(optimizers)}, got {solver!r}.")
    extra = {"weight_decay": 0.0} if solver == "adamw" else {}
    optimizer = optimizers[solver](module.parameters(), lr=learning_rate, **extra)
    Xt, yt = torch.from_numpy(np.asarray(X)), torch.from_numpy(np.asarray(y))
    rng = make_rng(random_state)
    epoch_losses, step_losses = [], []
    module.train()
    forward = torch.compile(module) if compiled else module
    # torch's dropout masks from a generator seeded with random_state, as the optimizers draw
    # theirs; the caller's generator is left as it was
    with torch.random.fork_rng(devices=[], enabled=isinstance(random_state, numbers.Integral)):
        if isinstance(random_state, numbers.Integral):
            torch.manual_seed(int(random_state))
        for _ in range(epochs):
            order = torch.from_numpy(epoch_order(rng, len(Xt)))
            total = 0.0
            for start, end in batch_bounds(len(Xt), batch_size):
                rows = order[start:end]
                optimizer.zero_grad(set_to_none=True)
                value = TORCH_LOSSES[loss](forward(Xt[rows]), yt[rows])
                value.backward()
                optimizer.step()
                step_losses.append(value.item())
                total += step_losses[-1] * len(rows)
            epoch_losses.append(total / len(Xt))
    return epoch_losses, step_losses
