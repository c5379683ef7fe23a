"""What ``bench_your_model.ipynb`` says and records: the model's family, its sentences, its rows.

Once the fits of :mod:`benchmarks.workloads.your_model` have run:

* :func:`model_family`: the family of a zoo model, else the kinds of its layers;
* :func:`step_sentence`: how a step compares with torch eager and ``torch.compile``, in words;
* :func:`compile_note`: what ``torch.compile`` took, or why it is not known;
* :func:`record_rows`: one row per framework for the record the aggregator reads
  (:mod:`benchmarks.report.aggregate`), a failure or a divergence included, with the tolerance
  of ``comparable`` and torch's own spread it comes from
  (:mod:`benchmarks.workloads.your_model_spread`).
"""

import math

from benchmarks.report.caveats import ratio_caveat
from benchmarks.report.ratios import speed_phrase
from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import models as bm
from benchmarks.workloads.model_inputs import weighted_layers
from benchmarks.workloads.your_model import is_divergence
from benchmarks.workloads.your_model_spread import relative_gap


def model_family(model_function, module):
    """The family of a zoo model (:data:`benchmarks.example_models.ZOO`), else its kinds of layers.

    Examples
    --------
    >>> import torch
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
    for peer in (fw.TORCH, fw.TORCH_COMPILE):
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


def record_rows(
    common, costs, final, failed, curves, memory=None, compile_s=None, tolerance=1e-3, spread=None
):
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
        Name to the reason it did not run, or stopped: a training that diverged
        (:func:`benchmarks.workloads.your_model.is_divergence`) is noted ``'diverged'``.
    curves : pandas.DataFrame
        ``framework``, ``seconds``, ``loss``: the time-to-loss points.
    memory : pandas.DataFrame, optional
        ``framework``, ``import_mb``, ``peak_mb`` (:func:`benchmarks.studies.peak_memory.measure`),
        and ``error`` when a process failed (the row's ``memory_error``).
    compile_s : float, optional
        Compilation time of the ``torch.compile`` row.
    tolerance : float
        Relative gap of the final loss to torch eager's under which a row is ``comparable``
        (:func:`benchmarks.workloads.your_model_spread.loss_tolerance`).
    spread : float, optional
        Torch eager's own spread the tolerance comes from
        (:func:`benchmarks.workloads.your_model_spread.torch_spread`).

    Returns
    -------
    list of dict
        Rows with every key of :data:`benchmarks.workloads.models.ROW_KEYS`, and ``loss_gap`` (the
        relative gap to torch eager's loss), ``tolerance`` and ``torch_spread``.

    Examples
    --------
    >>> import pandas as pd
    >>> costs = {
    ...     fw.TORCH: {"step_s": 0.002, "fixed_s": 0.01},
    ...     fw.ORT_WHOLE: {"step_s": 0.001, "fixed_s": 0.02},
    ... }
    >>> curves = pd.DataFrame(
    ...     {"framework": [fw.TORCH, fw.ORT_WHOLE], "seconds": [0.1, 0.2], "loss": [1.0, 1.0]}
    ... )
    >>> rows = record_rows(
    ...     {"benchmark": "your_model", "batch_size": 32},
    ...     costs,
    ...     {fw.TORCH: 1.0, fw.ORT_WHOLE: 1.0},
    ...     {fw.ORT_FORWARD_BACKWARD: "UntrainableModelError: Round"},
    ...     curves,
    ... )
    >>> [(r["framework"], r.get("ratio_to_torch_eager"), r["comparable"], r["error"]) for r in rows]
    [('torch eager', 1.0, True, None), ('ort whole-training', 0.5, True, None), \
('ort forward-backward', None, None, 'UntrainableModelError: Round')]
    >>> rows = record_rows(
    ...     {"benchmark": "your_model", "batch_size": 32},
    ...     costs,
    ...     {fw.TORCH: 1.0, fw.ORT_WHOLE: 1.004},
    ...     {fw.ORT_FORWARD_BACKWARD: "TrainingDivergedError: epoch 2"},
    ...     curves,
    ...     tolerance=0.006,
    ...     spread=0.003,
    ... )
    >>> [(r["framework"], r["comparable"], r["note"]) for r in rows]
    [('torch eager', True, None), ('ort whole-training', True, None), \
('ort forward-backward', None, 'diverged: see error')]
    """
    reference = costs.get(fw.TORCH, {}).get("step_s")
    calibration = dict(tolerance=tolerance, torch_spread=spread)
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
            comparable=bm.is_comparable(final[name], final.get(fw.TORCH), tolerance),
            loss_gap=relative_gap(final[name], final.get(fw.TORCH)),
            **calibration,
            time_to_loss=curves.loc[curves.framework == name, ["seconds", "loss"]]
            .to_numpy()
            .tolist(),
            time_min_s=min(rounds),
            time_max_s=max(rounds),
            timing_note=cost.get("note") or None,
        )
        if memory is not None and name in memory.index:
            error = memory.loc[name].get("error")
            if isinstance(error, str):  # its process failed: no figures
                row["memory_error"] = error
            else:
                row.update(memory.loc[name, ["import_mb", "peak_mb"]].astype(float).to_dict())
        if name == fw.TORCH_COMPILE and compile_s is not None:
            row.update(compile_time_s=compile_s, note=compile_note(compile_s))
        rows.append(row)
    rows += [
        bm.make_row(
            **common,
            framework=name,
            error=reason,
            note="diverged: see error" if is_divergence(reason) else "not run: see error",
            **calibration,
        )
        for name, reason in failed.items()
    ]
    return rows
