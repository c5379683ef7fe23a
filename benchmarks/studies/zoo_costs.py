"""Memory and first-fit cost of every model of the zoo: where onnxruntime uses more than torch.

For each model of :data:`benchmarks.example_models.ZOO` and each framework
that trains it (both onnxruntime APIs, torch eager), a fresh process imports
the framework, prepares the model (onnxruntime: exports it), reads its peak
resident memory, fits it and reads it again
(:func:`benchmarks.studies.peak_memory.measure`, on batches of 64 random samples of
the model's input, squared error, plain SGD). The same process times the
set-up of a first fit, with the training caches empty (export, training
graph or artifacts, sessions), and of a refit that finds them in the caches
(:mod:`helpers.core.machine.training_cache`); torch's set-up builds its module and
optimizer (:func:`benchmarks.studies.peak_memory.setup_costs`)::

    python -m benchmarks.studies.zoo_costs --out results [--quick] [--models resnet_small ...]

writes ``zoo_costs.csv`` (one row per model and framework);
:func:`zoo_costs_section` is its part of the summary.
"""

import argparse
import os
import sys
import time

import pandas as pd

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.example_models import ZOO
from benchmarks.report.details import markdown_table
from benchmarks.report.ratios import value_range, verdict
from benchmarks.report.zoo_summary import APIS, model_label
from benchmarks.studies.peak_memory import MEASURES
from benchmarks.sweep.records import results_file
from benchmarks.workloads import models as bm

#: The frameworks that train every model of the zoo, each in a process of its own.
FRAMEWORKS = (bm.ORT_WHOLE, bm.ORT_FORWARD_BACKWARD, bm.TORCH)
#: The columns of ``zoo_costs.csv`` (``step_s``, a step of the training fit: the faster API).
COLUMNS = ["model", *MEASURES]
#: Batch size of the zoo (``ZOO_BATCH`` of the kernel survey and the grid's ``zoo_*`` tables).
BATCH_SIZE = 64
#: What each process trains for the peak memory: epochs of so many batches; refits timed.
FULL = {"steps_per_epoch": 4, "epochs": 2, "repeats": 3}
QUICK = {"steps_per_epoch": 2, "epochs": 1, "repeats": 1}
#: The file, and the name of the command that writes it.
CSV_NAME = "zoo_costs.csv"
COMMAND = "python -m benchmarks.studies.zoo_costs"


def zoo_input(name):
    """What :func:`~benchmarks.studies.peak_memory.measure` needs of a zoo model: samples, outputs.

    Examples
    --------
    >>> zoo_input("token_classifier_small")
    {'input_shape': (32,), 'input_dtype': 'int64', 'vocabulary': 1000, 'n_outputs': 7}
    """
    from benchmarks import example_models
    from benchmarks.workloads.model_inputs import input_spec, output_width

    module = getattr(example_models, name)()
    spec = input_spec(module, ZOO[name][1])
    return {
        "input_shape": spec.shape,
        "input_dtype": spec.dtype,
        "vocabulary": spec.vocabulary,
        "n_outputs": output_width(module, spec),
    }


def measure_zoo(models=None, steps_per_epoch=4, epochs=2, repeats=3, log=None):
    """Peak memory and set-up of each zoo model in each framework, each in a fresh process.

    Parameters
    ----------
    models : list of str, optional
        Builders of :data:`~benchmarks.example_models.ZOO`; all by default.
    steps_per_epoch, epochs : int
        Each process trains ``epochs`` epochs of ``steps_per_epoch`` batches of
        :data:`BATCH_SIZE`.
    repeats : int
        One-step refits timed; the fastest gives the refit's set-up.
    log : callable, optional
        Called with a line per model measured.

    Returns
    -------
    pandas.DataFrame
        ``model`` and the columns of :func:`benchmarks.studies.peak_memory.measure`, the
        training caches' counts included.
    """
    from benchmarks.studies.peak_memory import measure

    frames = []
    for name in models or list(ZOO):
        start = time.perf_counter()
        df = measure(
            model_function=f"benchmarks.example_models:{name}",
            batch_size=BATCH_SIZE,
            n_samples=BATCH_SIZE * steps_per_epoch,
            epochs=epochs,
            frameworks=FRAMEWORKS,
            repeats=repeats,
            **zoo_input(name),
        )
        frames.append(df.assign(model=name))
        if log is not None:
            log(f"{name}: {time.perf_counter() - start:.0f} s")
    df = pd.concat(frames, ignore_index=True)
    return df[["model", *(c for c in df.columns if c != "model")]]


def compared(df):
    """One row per model: the faster onnxruntime API (smaller step) beside torch eager.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``api``, and for the API and torch (suffixes ``_ort``, ``_torch``)
        ``import_mb``, ``training_mb``, ``peak_mb``, ``first_fit_setup_s``,
        ``refit_setup_s``; ``ratio``, onnxruntime's peak over torch's.
    """
    ort = df[df.framework.isin(APIS)].sort_values("step_s").drop_duplicates("model")
    torch = df[df.framework == bm.TORCH]
    both = ort.merge(torch, on="model", suffixes=("_ort", "_torch"))
    both = both.rename(columns={"framework_ort": "api"})
    order = {name: i for i, name in enumerate(df.model.drop_duplicates())}
    both = both.sort_values("model", key=lambda m: m.map(order)).reset_index(drop=True)
    return both.assign(ratio=both.peak_mb_ort / both.peak_mb_torch)


def _label(model):
    return model_label(ZOO[model][0], model) if model in ZOO else model


def _names(labels):
    labels = list(labels)
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def costs_sentence(df):
    """Where onnxruntime peaks higher than torch eager, by how much, why; what its first fit costs.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of :func:`measure_zoo` (or ``zoo_costs.csv`` with ``step_s``).

    Examples
    --------
    >>> df = pd.DataFrame({
    ...     "model": ["resnet_small"] * 3 + ["image_cnn_small"] * 3,
    ...     "framework": ["ort whole-training", "ort forward-backward", "torch eager"] * 2,
    ...     "import_mb": [420.0, 420, 220, 420, 420, 220],
    ...     "peak_mb": [800.0, 540, 400, 430, 430, 440],
    ...     "first_fit_setup_s": [0.5, 0.25, 0.8, 0.3, 0.2, 0.7],
    ...     "refit_setup_s": [0.1, 0.002, 0.001, 0.05, 0.001, 0.001],
    ...     "step_s": [0.13, 0.03, 0.02, 0.002, 0.003, 0.004]})
    >>> print(costs_sentence(df))
    onnxruntime (the faster of its two APIs for each model) peaks higher than torch eager for \
ResNet-style CNN (small) (1.4x more: +200 MB in its imports, which load torch as well, -60 MB \
while training).
    <BLANKLINE>
    Its first fit spends 0.25 to 0.30 s setting up (export, training graph, sessions), a refit \
that finds its training graph cached 0.002 to 0.050 s, against 0.70 to 0.80 s for torch's first \
module and optimizer.
    """
    rows = compared(df.assign(training_mb=df.peak_mb - df.import_mb))
    higher = rows[rows.ratio.map(verdict) == "slower"]
    others = rows.drop(higher.index)
    if higher.empty:
        where = "peaks no higher than torch eager for any model"
    else:
        if others.empty:
            models = "every model"
        elif len(higher) > len(others):
            models = f"every model but {_names(others.model.map(_label))}"
        else:
            models = _names(higher.model.map(_label))
        imports = value_range(higher.import_mb_ort - higher.import_mb_torch, "{:+.0f}")
        training = value_range(higher.training_mb_ort - higher.training_mb_torch, "{:+.0f}")
        ratios = value_range(higher.ratio, "{:.1f}")
        where = (
            f"peaks higher than torch eager for {models} ({ratios}x more: {imports} MB in "
            f"its imports, which load torch as well, {training} MB while training)"
        )
    first = value_range(rows.first_fit_setup_s_ort, "{:.2f}")
    refit = value_range(rows.refit_setup_s_ort, "{:.3f}")
    torch_first = value_range(rows.first_fit_setup_s_torch, "{:.2f}")
    return (
        f"onnxruntime (the faster of its two APIs for each model) {where}.\n\n"
        f"Its first fit spends {first} s setting up (export, training graph, sessions), a "
        f"refit that finds its training graph cached {refit} s, against {torch_first} s for "
        "torch's first module and optimizer."
    )


def _seconds(value):
    """Seconds with two significant digits (``0.0015``, ``0.25``, ``1.5``)."""
    return float(f"{value:.2g}")


def costs_table(df):
    """One row per model: peaks of the faster onnxruntime API and torch, their ratio, the set-ups.

    Examples
    --------
    >>> df = pd.DataFrame({"model": "resnet_small",
    ...                    "framework": ["ort whole-training", "torch eager"],
    ...                    "import_mb": [420.0, 220], "peak_mb": [540.0, 400],
    ...                    "step_s": [0.03, 0.02], "first_fit_setup_s": [0.25, 0.8],
    ...                    "refit_setup_s": [0.00213, 0.001]})
    >>> print(costs_table(df).iloc[0].to_string())
    model                            ResNet-style CNN (small)
    peak MB, ORT / torch                     540 / 400 (1.4x)
    ORT set-up (s), first / refit               0.25 / 0.0021
    torch set-up (s)                                      0.8
    """
    rows = compared(df.assign(training_mb=df.peak_mb - df.import_mb))
    return pd.DataFrame(
        {
            "model": rows.model.map(_label),
            "peak MB, ORT / torch": [
                f"{ort:.0f} / {torch:.0f} ({ratio:.1f}x)"
                for ort, torch, ratio in zip(rows.peak_mb_ort, rows.peak_mb_torch, rows.ratio)
            ],
            "ORT set-up (s), first / refit": [
                f"{_seconds(first)} / {_seconds(refit)}"
                for first, refit in zip(rows.first_fit_setup_s_ort, rows.refit_setup_s_ort)
            ],
            "torch set-up (s)": rows.first_fit_setup_s_torch.map(_seconds),
        }
    )


def zoo_costs_markdown(df):
    """The answer in a sentence, then the table: markdown (the summary's glossary defines its
    terms).

    Examples
    --------
    >>> df = pd.DataFrame({"model": "resnet_small",
    ...                    "framework": ["ort whole-training", "torch eager"],
    ...                    "import_mb": [420.0, 220], "peak_mb": [540.0, 400],
    ...                    "step_s": [0.03, 0.02], "first_fit_setup_s": [0.25, 0.8],
    ...                    "refit_setup_s": [0.002, 0.001]})
    >>> row = zoo_costs_markdown(df).splitlines()[6]
    >>> row.split(" | ")
    ['| ResNet-style CNN (small)', '540 / 400 (1.4x)', '0.25 / 0.002', '0.8 |']
    """
    return "\n".join([costs_sentence(df), "", *markdown_table(costs_table(df))])


def read_zoo_costs(results):
    """``zoo_costs.csv`` beside ``results`` or in the folder above it, or None.

    Examples
    --------
    >>> read_zoo_costs("no such folder") is None
    True
    """
    path = results_file(results, CSV_NAME)
    return None if path is None else pd.read_csv(path)


def zoo_costs_section(results):
    """The summary's lines on memory and first fits: a heading, :func:`zoo_costs_markdown`; or none.

    Examples
    --------
    >>> zoo_costs_section("no such folder")
    []
    """
    df = read_zoo_costs(results)
    if df is None:
        return []
    return [
        "## Memory and first fit, per model of the zoo",
        "",
        zoo_costs_markdown(df),
        f"Every row: `{CSV_NAME}`, written by `{COMMAND}`.",
        "",
    ]


def main(argv=None):
    """Measure and write ``zoo_costs.csv``; see ``--help``."""
    from benchmarks.sweep.records import atomic_write_text

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the small models (or --models), 2 steps, 1 refit (tests)",
    )
    parser.add_argument("--models", nargs="+", choices=list(ZOO), help="these models only")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    models = args.models or [name for name in ZOO if not args.quick or name.endswith("_small")]
    start = time.perf_counter()
    df = measure_zoo(models, **(QUICK if args.quick else FULL), log=print)
    atomic_write_text(os.path.join(args.out, CSV_NAME), df[COLUMNS].to_csv(index=False))
    print(zoo_costs_markdown(df))
    print(f"{len(df)} processes in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
