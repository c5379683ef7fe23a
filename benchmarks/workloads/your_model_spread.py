"""How far torch eager's loss moves against itself: the tolerance of ``comparable``.

Two trainings that compute the same thing mathematically do not end with
the same loss: the order of the sums in a matrix product or a convolution
changes with the number of threads and with the kernels chosen, and each
step carries those rounding differences on. A deep network with batch
normalization amplifies them within a few epochs; a small MLP barely does.
A fixed tolerance is then too strict for one and too loose for the other.

``bench_your_model.ipynb`` therefore measures torch's own spread in the same
run: :func:`torch_variant_losses` trains torch eager again from the same
weights on the same batches, each time with one setting that changes
rounding only (:data:`VARIANTS`: another number of threads, oneDNN off,
float64), :func:`torch_spread` takes the largest relative gap between all
those torch losses, and :func:`loss_tolerance` makes it the tolerance of
every framework: :data:`SAFETY_FACTOR` times the spread, never below
:data:`FLOOR`. :func:`tolerance_sentence` says it in words.
"""

import contextlib
import math

import numpy as np
import torch

from benchmarks.workloads.your_model import attempt_fit, torch_fit

#: A loss within this many times torch's own spread of torch eager's is ``comparable``. A few
#: torch runs show only part of the rounding's spread, and another framework's kernels (fused
#: operators, other summation orders) round differently again: twice the spread measured.
SAFETY_FACTOR = 2.0
#: The smallest tolerance (relative): what float32 rounding moves a loss by over a few epochs
#: even when torch's runs happen to agree to the last bit (a small MLP on one thread).
FLOOR = 1e-3
#: A tolerance above this (relative) is said to make a blunt check: the model amplifies rounding
#: so much within the epochs trained that a loss hardly tells two trainings apart.
BLUNT = 0.05
#: The settings torch eager is trained again with; none changes what is computed mathematically.
VARIANTS = ("threads", "oneDNN off", "float64")


def _variant_label(variant, n_threads):
    """The words of a variant: ``'1 thread'``, ``'oneDNN off'``, ``'float64'``."""
    if variant != "threads":
        return variant
    other = 1 if n_threads > 1 else 2
    return f"{other} thread{'s' if other > 1 else ''}"


@contextlib.contextmanager
def _setting(variant, n_threads):
    """Torch's settings for ``variant`` while the block runs, as they were after."""
    threads, onednn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    if variant == "threads":
        torch.set_num_threads(1 if n_threads > 1 else 2)
    torch.backends.mkldnn.enabled = onednn and variant != "oneDNN off"
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.backends.mkldnn.enabled = onednn


def _in_float64(make_module, X, y):
    """The module, samples and targets in float64 (token ids and class indices stay integers)."""

    def wider(a):
        return a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a

    return (lambda: make_module().double()), wider(X), wider(y)


def torch_variant_losses(make_module, X, y, task, epochs, n_threads, variants=VARIANTS, **common):
    """Torch eager trained again with each of ``variants``: its loss after ``epochs``, or why not.

    Parameters
    ----------
    make_module : callable
        Returns a new module with the initial weights, as for
        :func:`benchmarks.workloads.your_model.torch_fit`.
    X, y : numpy.ndarray
        The samples and targets of the reference fit.
    task : {'classification', 'regression'}
    epochs : int
        The epochs of the reference fit.
    n_threads : int
        The threads of the reference fit; ``'threads'`` trains with 1 (with 2 when it is 1).
    variants : sequence of str
        Among :data:`VARIANTS`.
    **common
        ``optimizer``, ``learning_rate``, ``batch_size``, ``random_state`` of the reference fit.

    Returns
    -------
    dict
        The variant's words (``'1 thread'``, ``'oneDNN off'``, ``'float64'``) to its loss, or
        to the reason it failed (a string: the training diverged...).

    Examples
    --------
    >>> def make_module():  # the same initial weights at each call
    ...     torch.manual_seed(0)
    ...     return torch.nn.Linear(3, 1)
    >>> X = np.random.default_rng(0).standard_normal((16, 3)).astype(np.float32)
    >>> losses = torch_variant_losses(
    ...     make_module, X, X[:, :1], "regression", 2, n_threads=2, batch_size=4, random_state=0
    ... )
    >>> {name: round(loss, 4) for name, loss in losses.items()}
    {'1 thread': 0.4481, 'oneDNN off': 0.4481, 'float64': 0.4481}
    """
    losses = {}
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"variants must be among {VARIANTS}, got {variant!r}.")
        make, X_, y_ = (make_module, X, y)
        if variant == "float64":
            make, X_, y_ = _in_float64(make_module, X, y)
        with _setting(variant, n_threads):
            loss, reason = attempt_fit(torch_fit(make, X_, y_, task, **common), epochs)
        losses[_variant_label(variant, n_threads)] = float(loss) if reason is None else reason
    return losses


def relative_gap(value, reference):
    """``|value - reference| / |reference|``; NaN when either is missing or not finite.

    Examples
    --------
    >>> relative_gap(1.01, 1.0)
    0.010000000000000009
    >>> relative_gap(None, 1.0)
    nan
    """
    if value is None or reference is None or not np.isfinite([value, reference]).all():
        return float("nan")
    return abs(value - reference) / abs(reference) if reference else float("inf")


def torch_spread(reference, variant_losses):
    """The largest relative gap between torch eager's runs: ``(max - min) / |reference|``.

    Over the reference loss and the finite losses of :func:`torch_variant_losses` (a variant that
    failed is left out). NaN without a finite reference.

    Examples
    --------
    >>> round(torch_spread(1.0, {"1 thread": 1.002, "float64": 0.995, "oneDNN off": "diverged"}), 6)
    0.007
    >>> torch_spread(None, {"float64": 1.0})
    nan
    """
    losses = [v for v in variant_losses.values() if not isinstance(v, str) and math.isfinite(v)]
    if reference is None or not math.isfinite(reference) or not reference:
        return float("nan")
    losses.append(reference)
    return (max(losses) - min(losses)) / abs(reference)


def loss_tolerance(spread, factor=SAFETY_FACTOR, floor=FLOOR):
    """The relative tolerance of ``comparable``: ``max(floor, factor * spread)``.

    NaN when the spread is (no torch eager reference: nothing is comparable).

    Examples
    --------
    >>> loss_tolerance(0.004)
    0.008
    >>> loss_tolerance(0.0)
    0.001
    """
    return float("nan") if math.isnan(spread) else max(floor, factor * spread)


def _percent(fraction):
    """``0.006`` as ``'0.6%'``, two significant digits."""
    return f"{100 * fraction:.2g}%"


def tolerance_sentence(tolerance, spread, variant_losses, factor=SAFETY_FACTOR, floor=FLOOR):
    """Where the tolerance of ``comparable`` comes from, in words.

    Examples
    --------
    >>> print(tolerance_sentence(0.006, 0.003, {"1 thread": 1.0, "float64": 1.003}))
    comparable: a loss within 0.6% of torch eager's, 2 x the largest gap between torch eager's \
own runs (0.3%: the reference, 1 thread, float64).
    >>> print(tolerance_sentence(0.14, 0.07, {"1 thread": 0.93}))  # doctest: +ELLIPSIS
    comparable: a loss within 14% of torch eager's, ... (7%: the reference, 1 thread). A blunt \
check: ...
    >>> print(tolerance_sentence(0.001, 0.0, {"1 thread": 1.0, "float64": "TrainingDivergedError"}))
    comparable: a loss within 0.1% of torch eager's, the floor: torch eager's own runs differ by \
0% (the reference, 1 thread), 2 x that is below it. Not counted: float64 (TrainingDivergedError).
    """
    if math.isnan(tolerance):
        return "comparable: not judged, torch eager did not train (its loss is the reference)."
    ran = [name for name, v in variant_losses.items() if not isinstance(v, str)]
    failed = [f"{name} ({v})" for name, v in variant_losses.items() if isinstance(v, str)]
    runs = ", ".join(["the reference", *ran])
    text = f"comparable: a loss within {_percent(tolerance)} of torch eager's, "
    if factor * spread >= floor:
        text += (
            f"{factor:g} x the largest gap between torch eager's own runs "
            f"({_percent(spread)}: {runs})."
        )
    else:
        text += (
            f"the floor: torch eager's own runs differ by {_percent(spread)} ({runs}), "
            f"{factor:g} x that is below it."
        )
    if tolerance > BLUNT:
        text += (
            " A blunt check: rounding alone moves this model's loss that much, so a loss so close"
            " says little; fewer epochs or a smaller learning_rate sharpen it."
        )
    return text + (f" Not counted: {'; '.join(failed)}." if failed else "")


def comparison_table(final, failed, variant_losses, tolerance, reference_name="torch eager"):
    """Each loss beside torch eager's: torch's own runs first, then every framework.

    Parameters
    ----------
    final : dict
        Framework to its loss after the timed epochs (``reference_name`` among them).
    failed : dict
        Framework to why it has no loss (:func:`benchmarks.workloads.your_model.final_losses`).
    variant_losses : dict
        :func:`torch_variant_losses`.
    tolerance : float
        :func:`loss_tolerance`.

    Returns
    -------
    pandas.DataFrame
        Indexed by run: ``loss``, ``gap to torch eager`` (relative), ``comparable`` (None for
        torch's own runs, which set the tolerance) and ``error``.

    Examples
    --------
    >>> table = comparison_table(
    ...     {"torch eager": 1.0, "ort": 1.01}, {"other": "TrainingDivergedError: epoch 2"},
    ...     {"float64": 1.002}, 0.004,
    ... )
    >>> table["comparable"].tolist()
    [None, None, False, None]
    >>> table.index.tolist()
    ['torch eager', 'torch eager, float64', 'ort', 'other']
    """
    import pandas as pd  # noqa: PLC0415

    from benchmarks.workloads.models import is_comparable  # noqa: PLC0415

    reference = final.get(reference_name)
    rows = {reference_name: {"loss": reference}}
    for name, loss in variant_losses.items():
        rows[f"{reference_name}, {name}"] = (
            {"error": loss} if isinstance(loss, str) else {"loss": loss}
        )
    for name, loss in final.items():
        if name != reference_name:
            rows[name] = {"loss": loss, "comparable": is_comparable(loss, reference, tolerance)}
    rows.update({name: {"error": reason} for name, reason in failed.items()})
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(
        columns=["loss", "gap to torch eager", "comparable", "error"]
    )
    table["gap to torch eager"] = [relative_gap(loss, reference) for loss in table["loss"]]
    for column in ("comparable", "error"):  # None where it does not apply, not NaN
        table[column] = table[column].astype(object).where(table[column].notna(), None)
    return table
