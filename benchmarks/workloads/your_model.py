"""What ``bench_your_model.ipynb`` runs: a fit per framework of one torch model, and the rows of its
record.

Every fit starts from the same weights and draws the same batches (one
permutation per epoch from ``numpy.random.RandomState(random_state)``, as the
onnxruntime optimizers do), with the same loss and update rule:

* :func:`torch_fit`: torch eager, or ``torch.compile`` of the same module;
* :func:`ort_fits`: the whole-training API (the loss added to the graph by
  :func:`helpers.add_loss_output`) and the forward/backward API;
* :func:`first_fits`: one epoch of each, keeping the frameworks that ran and
  the reason of those that failed (any exception: an operator without a
  gradient, a compiler that does not work...);
* :func:`record_rows`: one row per framework for the record the aggregator reads.
"""

import math
import time

import numpy as np  # noqa: F401  (the examples use it)
import torch  # noqa: F401  (the examples call it)

from benchmarks.report.caveats import ratio_caveat
from benchmarks.report.ratios import speed_phrase
from benchmarks.workloads import models as bm
from benchmarks.workloads.model_inputs import weighted_layers
from helpers.teaching.torch_reference import torch_fit as reference_fit

#: The loss of each task: its name in both onnxruntime APIs, and in words (plots, tables).
LOSSES = {
    "classification": ("cross_entropy", "cross-entropy"),
    "regression": ("squared_error", "mean squared error"),
}


def torch_fit(
    make_module,
    X,
    y,
    task,
    optimizer="sgd",
    learning_rate=0.05,
    batch_size=64,
    random_state=0,
    compiled=False,
):
    """``fit(epochs)``: train a fresh module in torch; returns the mean loss of the last epoch.

    The loop and its losses are :func:`helpers.teaching.torch_reference.torch_fit`'s,
    the batches and updates the onnxruntime optimizers compare with.

    Parameters
    ----------
    make_module : callable
        Returns a new module with the initial weights.
    X, y : numpy.ndarray
        Samples; class indices (int64) or targets of shape ``(n, outputs)``.
    task : {'classification', 'regression'}
        Softmax cross-entropy, or the squared error averaged over every element (``MSELoss``).
    optimizer : {'sgd', 'adamw'}
    compiled : bool
        Run the module through ``torch.compile`` (compiled at the first fit,
        reused by the next ones).

    Examples
    --------
    >>> X, y = np.ones((8, 2), np.float32), np.zeros((8, 1), np.float32)
    >>> fit = torch_fit(lambda: torch.nn.Linear(2, 1), X, y, "regression", batch_size=4)
    >>> fit(2) >= 0
    True
    """
    loss = LOSSES[task][0]

    def fit(epochs):
        module = make_module()
        epoch_losses, _ = reference_fit(
            module, X, y, loss, batch_size, epochs, learning_rate, optimizer, random_state, compiled
        )
        return epoch_losses[-1]

    return fit


def ort_fit(make, X, y, fresh=False):
    """``fit(epochs)`` of an onnxruntime optimizer made by ``make()``; returns the last epoch's
    loss.

    With ``fresh``, the training caches are emptied first, so that every fit
    pays the set-up a first fit pays (artifacts, gradient graph, sessions):
    for a time to a loss. Without, refits reuse them, and timing a step by the
    difference of two fits is not blurred by the set-up's own noise.

    Examples
    --------
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx = mlp_onnx(2, hidden=(3,))
    >>> X, y = np.ones((8, 2), np.float32), np.zeros((8, 1), np.float32)
    >>> make = lambda: OrtGradientOptimizer(add_loss_output(onx), batch_size=4)
    >>> ort_fit(make, X, y, fresh=True)(2) >= 0
    True
    """
    from helpers.core.machine.training_cache import clear_training_caches  # noqa: PLC0415

    def fit(epochs):
        if fresh:
            clear_training_caches()
        return make().set_params(max_iter=epochs, validation_every=0).fit(X, y).train_losses_[-1]

    return fit


def ort_makers(
    onx, task, optimizer="sgd", learning_rate=0.05, batch_size=64, n_threads=None, random_state=0
):
    """``make()``: a new optimizer of each onnxruntime API for the forward-only model ``onx``, by
    name.

    The whole-training API trains ``add_loss_output(onx, score_name=...)``,
    the forward/backward API ``onx`` with ``learning_loss=...``: the
    task's loss of :data:`LOSSES`. Nothing is built before a fit.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> makers = ort_makers(mlp_onnx(2, hidden=(3,)), "regression", batch_size=4)
    >>> [type(make()).__name__ for name, make in sorted(makers.items())]
    ['OrtGradientForwardBackwardOptimizer', 'OrtGradientOptimizer']
    """
    from helpers import (  # noqa: PLC0415
        OrtGradientForwardBackwardOptimizer,
        OrtGradientOptimizer,
        add_loss_output,
    )

    loss = LOSSES[task][0]
    common = dict(
        learning_rate=learning_rate,
        solver=optimizer,
        batch_size=batch_size,
        n_threads=n_threads,
        random_state=random_state,
    )
    return {
        bm.ORT_WHOLE: lambda: OrtGradientOptimizer(add_loss_output(onx, score_name=loss), **common),
        bm.ORT_FORWARD_BACKWARD: lambda: OrtGradientForwardBackwardOptimizer(
            onx, learning_loss=loss, **common
        ),
    }


def ort_fits(
    onx,
    X,
    y,
    task,
    optimizer="sgd",
    learning_rate=0.05,
    batch_size=64,
    n_threads=None,
    random_state=0,
    fresh=False,
):
    """``fit(epochs)`` of both onnxruntime APIs on the forward-only model ``onx``, by framework
    name.

    The optimizers of :func:`ort_makers`: a model the runtime cannot train
    fails at its first fit, in :func:`first_fits`. ``fresh``: see :func:`ort_fit`.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> sorted(
    ...     ort_fits(
    ...         mlp_onnx(2, hidden=(3,)),
    ...         np.ones((8, 2), np.float32),
    ...         np.zeros(8, np.int64),
    ...         "regression",
    ...     )
    ... )
    ['ort forward-backward', 'ort whole-training']
    """
    makers = ort_makers(onx, task, optimizer, learning_rate, batch_size, n_threads, random_state)
    return {name: ort_fit(make, X, y, fresh) for name, make in makers.items()}


def failure_reason(exc, limit=300):
    """An exception as one line: its type and message, at most ``limit`` characters.

    Examples
    --------
    >>> failure_reason(RuntimeError("no gradient\\nfor Round"))
    'RuntimeError: no gradient for Round'
    """
    text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_fits(fits, clock=time.perf_counter):
    """Fit each framework for one epoch: those that ran, why the others failed, how long each first
    fit took.

    Any exception is a failure of that framework alone: the others still run.

    Returns
    -------
    ran : dict
        Name to ``fit``, the frameworks whose first fit worked.
    failed : dict
        Name to the reason (:func:`failure_reason`).
    first_s : dict
        Name to the seconds of its first fit (``torch.compile`` compiles there).

    Examples
    --------
    >>> def broken(epochs):
    ...     raise ValueError("no")
    >>> ran, failed, _ = first_fits({"a": lambda epochs: 1.0, "b": broken})
    >>> list(ran), failed
    (['a'], {'b': 'ValueError: no'})
    """
    ran, failed, first_s = {}, {}, {}
    for name, fit in fits.items():
        start = clock()
        try:
            fit(1)
        except Exception as exc:  # noqa: BLE001  (a framework that fails is a row, not the end)
            failed[name] = failure_reason(exc)
            continue
        first_s[name] = clock() - start
        ran[name] = fit
    return ran, failed, first_s


def model_family(model_function, module):
    """The family of a zoo model (:data:`benchmarks.example_models.ZOO`), else its kinds of layers.

    Examples
    --------
    >>> model_family("benchmarks.example_models:image_cnn_small", None)
    'CNN on images'
    >>> model_family(
    ...     "mine:net",
    ...     torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1)),
    ... )
    'Linear'
    """
    from benchmarks.example_models import ZOO  # noqa: PLC0415

    module_name, function = model_function.split(":")
    if module_name == "benchmarks.example_models" and function in ZOO:
        return ZOO[function][0]
    return " + ".join(dict.fromkeys(type(m).__name__ for m in weighted_layers(module)))


def compile_seconds(fit, first_s, clock=time.perf_counter):
    """What ``torch.compile`` took: its first fit of one epoch (``first_s``) minus a fit of one
    epoch once compiled.

    NaN when the compiled fit was not faster than the first one (the machine's noise was larger).

    Examples
    --------
    >>> compile_seconds(lambda epochs: 0.0, 12.5, clock=iter([1.0, 1.5]).__next__)
    12.0
    >>> compile_seconds(lambda epochs: 0.0, 0.25, clock=iter([1.0, 1.5]).__next__)
    nan
    """
    start = clock()
    fit(1)
    compiled = first_s - (clock() - start)
    return compiled if compiled > 0 else float("nan")


def compile_note(compile_s):
    """The note of the ``torch.compile`` row: its compilation time, or why there is none.

    Examples
    --------
    >>> compile_note(12.04)
    'compilation 12.0 s (its first fit), outside the step time and the set-up'
    >>> compile_note(float("nan"))[:41]
    'compilation not measurable: its first fit'
    """
    if math.isnan(compile_s):
        return (
            "compilation not measurable: its first fit was not slower than a compiled one "
            "(the machine's noise was larger)"
        )
    return f"compilation {compile_s:.1f} s (its first fit), outside the step time and the set-up"


def step_sentence(name, step_s, caveats=None):
    """How a step of ``name`` compares with torch eager and ``torch.compile``, in words, with the
    caveats of each ratio.

    Parameters
    ----------
    name : str
    step_s : dict
        Framework to seconds per step.
    caveats : dict, optional
        Framework to the caveat of its timing (:func:`helpers.measure.conditions.timing_caveat`);
        a ratio with one is said to be no finding.

    Examples
    --------
    >>> step_sentence(
    ...     "ort whole-training",
    ...     {"ort whole-training": 1.0, "torch eager": 2.0, "torch.compile": 1.01},
    ... )
    'ort whole-training: a step is 2.0x faster than torch eager, as fast as torch.compile.'
    >>> step_sentence(
    ...     "ort whole-training",
    ...     {"ort whole-training": 1.0, "torch eager": 165.6},
    ...     {"torch eager": "noisy: repeats spread 3.1x"},
    ... )  # doctest: +NORMALIZE_WHITESPACE
    'ort whole-training: a step is 165.6x faster than torch eager (no finding: noisy: repeats
    spread 3.1x).'
    >>> step_sentence(
    ...     "ort whole-training", {"ort whole-training": 1.0, "torch eager": float("nan")}
    ... )[:41]
    'ort whole-training: no ratio, a step time'
    """
    caveats = caveats or {}
    parts = []
    for peer in (bm.TORCH, bm.TORCH_COMPILE):
        phrase = speed_phrase(step_s[name] / step_s[peer]) if peer in step_s else "-"
        if phrase != "-":
            part = f"as fast as {peer}" if phrase == "same" else f"{phrase} than {peer}"
            caveat = ratio_caveat(caveats.get(name, ""), caveats.get(peer, ""))
            parts.append(f"{part} (no finding: {caveat})" if caveat else part)
    if not parts:
        return (
            f"{name}: no ratio, a step time was lost in the machine's noise "
            "(more rows or epochs, or a quieter machine)."
        )
    return f"{name}: a step is {', '.join(parts)}."


def record_rows(common, costs, final, failed, curves, memory=None, compile_s=None, tolerance=1e-3):
    """One row per framework: step time and ratio to torch eager, loss, time to loss, memory; or the
    failure.

    Parameters
    ----------
    common : dict
        Keys of every row (``benchmark``, ``model``, ``batch_size``...).
    costs : dict
        Name to ``{'step_s', 'fixed_s'}``, and the rounds' estimates ``steps_s`` and a ``note`` when
        :func:`helpers.measure.timing.marginal_step_cost` gave them.
    final : dict
        Name to the loss after the timed epochs.
    failed : dict
        Name to the reason it did not run.
    curves : pandas.DataFrame
        ``framework``, ``seconds``, ``loss``: the time-to-loss points.
    memory : pandas.DataFrame, optional
        ``framework``, ``import_mb``, ``peak_mb`` (:func:`benchmarks.studies.peak_memory.measure`).
    compile_s : float, optional
        Compilation time of the ``torch.compile`` row.
    tolerance : float
        Relative gap of the final loss to torch eager's under which a row is ``comparable``.

    Returns
    -------
    list of dict
        Rows with every key of :data:`benchmarks.workloads.models.ROW_KEYS`.

    Examples
    --------
    >>> import pandas as pd
    >>> costs = {
    ...     bm.TORCH: {"step_s": 0.002, "fixed_s": 0.01},
    ...     bm.ORT_WHOLE: {"step_s": 0.001, "fixed_s": 0.02},
    ... }
    >>> curves = pd.DataFrame(
    ...     {"framework": [bm.TORCH, bm.ORT_WHOLE], "seconds": [0.1, 0.2], "loss": [1.0, 1.0]}
    ... )
    >>> rows = record_rows(
    ...     {"benchmark": "your_model", "batch_size": 32},
    ...     costs,
    ...     {bm.TORCH: 1.0, bm.ORT_WHOLE: 1.0},
    ...     {bm.ORT_FORWARD_BACKWARD: "UntrainableModelError: Round"},
    ...     curves,
    ... )
    >>> [(r["framework"], r.get("ratio_to_torch_eager"), r["comparable"], r["error"]) for r in rows]
    [('torch eager', 1.0, True, None), ('ort whole-training', 0.5, True, None), \
('ort forward-backward', None, None, 'UntrainableModelError: Round')]
    """
    reference = costs.get(bm.TORCH, {}).get("step_s")
    memory = memory.set_index("framework") if memory is not None else None
    rows = []
    for name, cost in costs.items():
        step = cost["step_s"]
        rounds = cost.get("steps_s") or [step]
        row = bm.make_row(
            **common,
            framework=name,
            time_per_update_s=step,
            time_per_sample_s=step / common["batch_size"],
            samples_per_s=common["batch_size"] / step,
            setup_time_s=cost["fixed_s"],
            train_loss=final[name],
            ratio_to_torch_eager=step / reference if reference else None,
            comparable=bm.is_comparable(final[name], final.get(bm.TORCH), tolerance),
            time_to_loss=curves.loc[curves.framework == name, ["seconds", "loss"]]
            .to_numpy()
            .tolist(),
            time_min_s=min(rounds),
            time_max_s=max(rounds),
            timing_note=cost.get("note") or None,
        )
        if memory is not None and name in memory.index:
            row.update(memory.loc[name, ["import_mb", "peak_mb"]].astype(float).to_dict())
        if name == bm.TORCH_COMPILE and compile_s is not None:
            row.update(compile_time_s=compile_s, note=compile_note(compile_s))
        rows.append(row)
    rows += [
        bm.make_row(**common, framework=name, error=reason, note="not run: see error")
        for name, reason in failed.items()
    ]
    return rows
