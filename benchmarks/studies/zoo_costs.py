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
optimizer (:func:`benchmarks.studies.peak_memory_process.setup_costs`)::

    python -m benchmarks.studies.zoo_costs --out results [--quick] [--models resnet_small ...]

writes ``zoo_costs.csv`` (one row per model and framework);
:func:`benchmarks.report.study_sections.zoo_costs_section` is its part of the summary.
"""

import argparse
import os
import sys
import time

import pandas as pd

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.example_models import ZOO
from benchmarks.report.study_sections import (
    ZOO_COSTS_COMMAND,
    ZOO_COSTS_CSV,
    zoo_costs_markdown,
)
from benchmarks.studies.peak_memory import MEASURES
from benchmarks.workloads import frameworks as fw

#: The frameworks that train every model of the zoo, each in a process of its own.
FRAMEWORKS = (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD, fw.TORCH)
#: The columns of ``zoo_costs.csv`` (``step_s``, a step of the training fit: the faster API).
COLUMNS = ["model", *MEASURES]
#: Batch size of the zoo (``ZOO_BATCH`` of the kernel survey and the grid's ``zoo_*`` tables).
BATCH_SIZE = 64
#: What each process trains for the peak memory: epochs of so many batches; refits timed.
FULL = {"steps_per_epoch": 4, "epochs": 2, "repeats": 3}
QUICK = {"steps_per_epoch": 2, "epochs": 1, "repeats": 1}


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


def main(argv=None):
    """Measure and write ``zoo_costs.csv``; see ``--help``."""
    from benchmarks.sweep.records import atomic_write_text

    parser = argparse.ArgumentParser(prog=ZOO_COSTS_COMMAND, description=__doc__.splitlines()[0])
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
    atomic_write_text(os.path.join(args.out, ZOO_COSTS_CSV), df[COLUMNS].to_csv(index=False))
    print(zoo_costs_markdown(df))
    print(f"{len(df)} processes in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
