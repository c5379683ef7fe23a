"""The step model on the maintained onnxruntime: how fast and how light, against the peers.

A step model (``export_training_step`` of the whole-training optimizer) is trained by
:class:`helpers.portable.trainer.PortableTrainer` in a process of the maintained environment
(``.venv-maintained``, onnxruntime 1.31.1, :mod:`benchmarks.studies.portable_process`): one
session call per step (``portable step``) or one call per epoch (``portable epoch loop``). Each
step model is written twice (:mod:`benchmarks.studies.portable_builders`): with the gradients of
onnxruntime-training 1.19.2's builder, lowered (``builder`` ``lowered``), and with those of
:mod:`helpers.portable.gradients` (``built``); both are trained one call per step on the
maintained runtime and on 1.19.2 (a process of this environment), and each row says its
``builder``, ``runtime`` and the step model's ``nodes``. Each case times its frameworks side by
side, in turns, as the marginal cost of a step (:func:`helpers.measure.timing.marginal_step_cost`:
a fit of ``E2`` epochs minus a fit of one, over the extra steps, best of the repeats, 0.2 s idle
before each fit):

* ``linear``: a linear regression, 20 features, 1,000 rows, fitted one row at a time, 1 thread:
  ``SGDRegressor`` (constant learning rate, no penalty), the whole-training API, the portable
  fits;
* ``mlp``: an MLP 100-50-1, batches of 100, 2 threads: the whole-training API, the portable fits;
* ``zoo``: every model of :data:`benchmarks.example_models.ZOO` (``--quick``: the small ones),
  batches of 64, 2 threads: the whole-training API, torch eager, the portable fits; and the
  peak memory of a fresh process that imports, loads and trains (torch and the whole-training
  API: :func:`benchmarks.studies.peak_memory.measure`; the portable runner: a maintained
  process, the lowered step). A step model that is refused, or a fit that fails, is a row with
  the reason, which names the operator.

::

    python -m benchmarks.studies.portable_speed --out results [--quick] [--only linear mlp zoo]

writes ``portable_speed.csv`` (the linear and MLP cases) and ``portable_zoo.csv`` (the zoo),
keeping the rows of the cases and models not measured again, and ``portable_speed.md`` (the
builders first: :func:`benchmarks.report.portable_builders.builder_markdown`);
:func:`benchmarks.report.portable_section.portable_section` is their part of the summary.
"""

import argparse
import os
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import pandas as pd

from benchmarks.report.portable_builders import builder_markdown
from benchmarks.report.portable_section import (
    LOWERED,
    PORTABLE_COMMAND,
    PORTABLE_SPEED_CSV,
    PORTABLE_ZOO_CSV,
    SPEED_COLUMNS,
    ZOO_COLUMNS,
    portable_markdown,
)
from benchmarks.studies import portable_builders as pb
from benchmarks.studies import portable_fits as pf
from benchmarks.workloads import frameworks as fw

#: The linear case: ``SGDRegressor``'s fit, one row per update.
LINEAR = {
    "case": "linear regression (batch 1)",
    "n_samples": 1000,
    "n_features": 20,
    "batch_size": 1,
    "learning_rate": 0.01,
    "threads": 1,
}
#: The MLP case of the project's step targets.
MLP = {
    "case": "MLP 100-50-1 (batch 100)",
    "n_samples": 8000,
    "n_features": 100,
    "hidden": 50,
    "batch_size": 100,
    "learning_rate": 1e-4,
    "threads": 2,
}
#: Epochs of the short and long fits, repeats: an extra epoch of the linear fit is 1,000 steps of
#: a few microseconds in ``SGDRegressor``, so it takes many.
EPOCHS = {"linear": (1, 31), "mlp": (1, 11), "zoo": (1, 4)}
REPEATS = 5
QUICK = {"epochs": {"linear": (1, 3), "mlp": (1, 2), "zoo": (1, 2)}, "repeats": 1}
#: The zoo: batch size, threads, learning rate, and the fits of the peak memory (epochs of 4
#: batches, as :mod:`benchmarks.studies.zoo_costs`).
ZOO_BATCH, ZOO_THREADS, ZOO_LEARNING_RATE = 64, 2, 1e-3
MEMORY_STEPS, MEMORY_EPOCHS = 4, 2
#: Batches of an epoch per small model: the three extra epochs take 0.1 s or more in each
#: framework (steps of 0.3-1.5 ms for the MLPs and the token classifier, 1-9 ms for the CNNs,
#: 20-40 ms for the ResNet, 70-150 ms for the MobileNet: ``zoo_costs.csv``); the large models'
#: are :data:`benchmarks.studies.zoo_targets.STEPS_PER_EPOCH`.
SMALL_STEPS_PER_EPOCH = {
    "image_cnn_small": 16,
    "layernorm_mlp_small": 128,
    "batchnorm_mlp_small": 128,
    "sequence_conv_small": 64,
    "token_classifier_small": 128,
    "resnet_small": 4,
    "mobilenet_small": 2,
}


def timed_rows(fits, steps_per_epoch, epochs, repeats, threads, conditions_since, **columns):
    """The marginal step cost of every fit, timed in turns: one row each, with its caveat.

    numpy's BLAS and torch run on ``threads`` threads meanwhile (the onnxruntime fits get theirs
    from their sessions).

    ``columns`` are added to every row (the case, the model...); ``conditions_since``, a
    :class:`helpers.measure.conditions.RunClock`, dates the load the caveats name.
    """
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    from benchmarks.profiles.survey.torch_kernels import torch_threads  # noqa: PLC0415
    from helpers.measure.conditions import machine_conditions, timing_caveat  # noqa: PLC0415
    from helpers.measure.timing import marginal_step_cost  # noqa: PLC0415

    with threadpool_limits(limits=threads, user_api="blas"), torch_threads(threads):
        costs = marginal_step_cost(fits, steps_per_epoch, *epochs, repeats=repeats)
    conditions = machine_conditions(conditions_since, threads)
    step_note = {
        name: c["note"] if c["note"].startswith("not measurable") else ""
        for name, c in costs.items()
    }
    return [
        {
            **columns,
            "framework": name,
            "threads": threads,
            "steps_per_epoch": steps_per_epoch,
            "step_s": cost["step_s"],
            "spread": cost["spread"],
            "note": timing_caveat(cost["spread"], conditions, note=step_note[name]),
        }
        for name, cost in costs.items()
    ]


def measure_case(name, folder, epochs, repeats, runtimes):
    """The rows of the linear or the MLP case (:data:`LINEAR`, :data:`MLP`).

    ``runtimes``: :func:`runtimes_of`'s, the maintained one first.
    """
    from helpers.measure.conditions import RunClock  # noqa: PLC0415
    from helpers.teaching.datasets import random_regression  # noqa: PLC0415

    case = LINEAR if name == "linear" else MLP
    X, y = random_regression(case["n_samples"], case["n_features"])
    common = {"learning_rate": case["learning_rate"], "threads": case["threads"]}
    if name == "linear":
        fits, optimizer = pf.linear_fits(X, y, **common)
    else:
        fits, optimizer = pf.mlp_fits(X, y, case["hidden"], case["batch_size"], **common)
    steps = pb.export_steps(optimizer, folder, name)
    refused = steps[LOWERED]["refused"]
    if refused:
        raise RuntimeError(f"The {case['case']} step model was refused: {refused}")
    data = pf.write_data(os.path.join(folder, f"{name}.npz"), X, y)
    columns = {"case": case["case"], "batch_size": case["batch_size"]}
    batches, threads = case["n_samples"] // case["batch_size"], case["threads"]
    with pb.BuilderFits(steps, runtimes, data, case["batch_size"], threads) as server:
        rows = timed_rows(
            {**fits, **server.fits()}, batches, epochs, repeats, threads, RunClock(), **columns
        )
        return server.labelled(rows) + server.untimed(threads, **columns)


def zoo_steps(name):
    """Batches of an epoch of a zoo model when its step is timed.

    Examples
    --------
    >>> zoo_steps("resnet_small"), zoo_steps("resnet_large")
    (4, 4)
    """
    from benchmarks.studies.zoo_targets import STEPS_PER_EPOCH  # noqa: PLC0415

    return {**SMALL_STEPS_PER_EPOCH, **STEPS_PER_EPOCH}[name]


def _memory_rows(name, step, folder, X, y, python):
    """Peak memory of torch eager, the whole-training API and both portable runners for a model."""
    from benchmarks.studies.peak_memory import measure  # noqa: PLC0415
    from benchmarks.studies.zoo_costs import zoo_input  # noqa: PLC0415

    n_samples = ZOO_BATCH * MEMORY_STEPS
    peers = measure(
        model_function=f"benchmarks.example_models:{name}",
        batch_size=ZOO_BATCH,
        n_samples=n_samples,
        epochs=MEMORY_EPOCHS,
        frameworks=(fw.ORT_WHOLE, fw.TORCH),
        repeats=1,
        **zoo_input(name),
    )
    memory = {
        row.framework: {"import_mb": row.import_mb, "peak_mb": row.peak_mb}
        for row in peers.itertuples()
    }
    if step is None:
        return memory
    rows = [i % len(X) for i in range(n_samples)]
    data = pf.write_data(os.path.join(folder, f"{name}-memory.npz"), X[rows], y[rows])
    for framework, loop in pf.PORTABLE_MODES.items():
        memory[framework] = pf.portable_memory(
            step, data, ZOO_BATCH, MEMORY_EPOCHS, loop, ZOO_THREADS, python
        )
    return memory


def step_labels(name, y):
    """The labels a zoo model's step model takes: class indices one-hot (float32), else ``y``.

    The whole-training API takes class indices and one-hot encodes them itself; its step model
    takes the encoded labels (the trainer does not encode them).

    Examples
    --------
    >>> import numpy as np
    >>> step_labels("token_classifier_small", np.array([0, 6])).shape
    (2, 7)
    """
    import numpy as np  # noqa: PLC0415

    from benchmarks.example_models import ZOO  # noqa: PLC0415
    from benchmarks.studies.zoo_costs import zoo_input  # noqa: PLC0415

    if ZOO[name][2] != "classification":
        return y
    return np.eye(zoo_input(name)["n_outputs"], dtype=np.float32)[y]


def measure_zoo_model(name, folder, epochs, repeats, runtimes):
    """The rows of one zoo model: a step of each framework and fit, and the peak memory of each
    framework (the portable runner's with the lowered step on the maintained runtime)."""
    from helpers.measure.conditions import RunClock  # noqa: PLC0415

    steps = zoo_steps(name)
    fits, optimizer, X, y = pf.zoo_fits(
        name, ZOO_BATCH * steps, ZOO_BATCH, ZOO_LEARNING_RATE, ZOO_THREADS
    )
    y = step_labels(name, y)
    columns = {"model": name, "batch_size": ZOO_BATCH}
    models = pb.export_steps(optimizer, folder, name)
    data = pf.write_data(os.path.join(folder, f"{name}.npz"), X, y)
    with pb.BuilderFits(models, runtimes, data, ZOO_BATCH, ZOO_THREADS) as server:
        timing = (steps, epochs, repeats, ZOO_THREADS, RunClock())
        try:
            rows = timed_rows({**fits, **server.fits()}, *timing, **columns)
        except RuntimeError as exc:  # a failure of the portable fits is their row, not the end
            server.fail_all(exc)
            rows = timed_rows(fits, *timing, **columns)
        rows = server.labelled(rows) + server.untimed(ZOO_THREADS, **columns)
    maintained = runtimes[0][0]
    lowered = pb.fit_name(fw.PORTABLE_STEP, LOWERED, maintained)
    step = None if lowered in server.why_not else models[LOWERED]["path"]
    memory = _memory_rows(name, step, folder, X, y, runtimes[0][1])

    def memory_of(row):
        if row.get("builder", LOWERED) != LOWERED or row.get("runtime", maintained) != maintained:
            return {}
        return memory.get(row["framework"], {})

    return [{**row, **memory_of(row)} for row in rows]


def kept_rows(path, new, key):
    """``new``, after the rows of the file ``path`` whose ``key`` it does not measure again.

    A run of some cases or models (``--only``, ``--models``) keeps the others' rows, each
    measured side by side in its own run.

    Examples
    --------
    >>> kept_rows("no such file", pd.DataFrame({"case": ["a"], "step_s": [1.0]}), "case")
      case  step_s
    0    a     1.0
    """
    if not os.path.exists(path):
        return new
    old = pd.read_csv(path)
    old = old[~old[key].isin(set(new[key]))]
    return pd.concat([old, new], ignore_index=True) if len(old) else new


def runtimes_of(maintained=None, training=None):
    """``[(runtime, interpreter)]``: the maintained environment's, then the training package's
    (``training``, by default this interpreter) unless its onnxruntime is the same version."""
    found = {}
    for python in (pf.maintained_python(maintained), training or sys.executable):
        found.setdefault(f"onnxruntime {pf.onnxruntime_version(python)[0]}", python)
    return list(found.items())


def machine_columns(python=None):
    """``machine`` (the processor, as ``lscpu`` names it) and ``maintained`` (the runtime and
    Python of the maintained environment)."""
    from benchmarks.sweep.records import machine_info  # noqa: PLC0415

    version = pf.onnxruntime_version(pf.maintained_python(python))
    return {
        "machine": machine_info()["cpu"],
        "maintained": f"onnxruntime {version[0]}, Python {version[1]}",
    }


def main(argv=None):
    """Measure and write; see ``--help``."""
    from benchmarks.example_models import ZOO  # noqa: PLC0415
    from benchmarks.sweep.records import atomic_write_text  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=PORTABLE_COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short fits, the small models")
    parser.add_argument("--only", nargs="+", choices=["linear", "mlp", "zoo"])
    parser.add_argument("--models", nargs="+", choices=list(ZOO), help="these zoo models only")
    parser.add_argument("--maintained-python", help="default: .venv-maintained/bin/python")
    parser.add_argument("--training-python", help="the 1.19.2 runs' interpreter; default: this one")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    parts = args.only or ["linear", "mlp", "zoo"]
    epochs = QUICK["epochs"] if args.quick else EPOCHS
    repeats = QUICK["repeats"] if args.quick else REPEATS
    python = args.maintained_python
    machine = machine_columns(python)
    runtimes = runtimes_of(python, args.training_python)
    start = time.perf_counter()
    speed, zoo = [], []
    with tempfile.TemporaryDirectory() as folder:
        for case in ("linear", "mlp"):
            if case in parts:
                speed += measure_case(case, folder, epochs[case], repeats, runtimes)
                print(f"{case}: {time.perf_counter() - start:.0f} s", flush=True)
        if "zoo" in parts:
            models = args.models or [n for n in ZOO if not args.quick or n.endswith("_small")]
            for name in models:
                zoo += measure_zoo_model(name, folder, epochs["zoo"], repeats, runtimes)
                print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    for rows, file, key, columns in (
        (speed, PORTABLE_SPEED_CSV, "case", SPEED_COLUMNS),
        (zoo, PORTABLE_ZOO_CSV, "model", ZOO_COLUMNS),
    ):
        if rows:
            path = os.path.join(args.out, file)
            new = pd.DataFrame(rows).assign(**machine).reindex(columns=columns)
            new = new.astype({"nodes": "Int64"})
            atomic_write_text(path, kept_rows(path, new, key).to_csv(index=False))
    print(write_markdown(args.out))  # this run's rows and the rows kept
    print(f"{time.perf_counter() - start:.0f} s")
    return 0


def write_markdown(out):
    """Write ``portable_speed.md`` from the two files in ``out``: the builders' answer and table,
    then the section's text; return it."""
    from benchmarks.sweep.records import atomic_write_text  # noqa: PLC0415

    paths = [os.path.join(out, file) for file in (PORTABLE_SPEED_CSV, PORTABLE_ZOO_CSV)]
    frames = [pd.read_csv(p) if os.path.exists(p) else None for p in paths]
    builders = builder_markdown(*frames)
    text = "\n".join([*builders, *([""] if builders else []), portable_markdown(*frames)])
    atomic_write_text(os.path.join(out, "portable_speed.md"), text + "\n")
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
