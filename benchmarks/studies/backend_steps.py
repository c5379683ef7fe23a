"""A training step of each backend, side by side: the training package's and standard ONNX's.

Both optimizers take ``backend=`` (:mod:`helpers.core.machine.backends`). This study trains the
same model, from the same weights, on the same batches, with each of three runs:

* ``onnxruntime-training`` on 1.19.2: the training package's gradients and training objects;
* ``onnx`` on 1.19.2: this project's gradients in standard ONNX, run by 1.19.2's inference session;
* ``onnx`` on the maintained onnxruntime (1.31.1, ``.venv-maintained``).

Each run is a process of its own (:mod:`benchmarks.studies.backend_process`: the first two in the
training package's environment, the third in the maintained one), and the parent times them in
turns, round after round, as the marginal cost of a step
(:func:`helpers.measure.timing.marginal_step_cost`: a fit of ``E2`` epochs minus a fit of ``E1``,
over the extra steps, best of the repeats), in CPU time of the thread that calls onnxruntime (the
process measures it; the wall-clock step is kept beside it). One intra-op thread by default
(``--threads``): the calling thread then does all of a step's work, and its CPU time is the step's
cost whatever else loads a shared machine (with two, it would count the time it spins waiting
for a worker thread another process delays). Both APIs are timed, whole-training and
forward/backward, plain SGD:

* ``mlp``: the MLPs of :data:`MLP_SIZES` (``D-H-1@B``: a ReLU MLP, batches of ``B`` rows), random
  regression data, squared error;
* ``zoo``: every model of :data:`benchmarks.example_models.ZOO`, batches of 64, the task's loss,
  the epochs of :mod:`benchmarks.studies.portable_speed` (few steps for the large models).

Before the timing, each run trains :data:`CHECK_STEPS` steps on the first batch: the losses of
the three runs must agree within float32 rounding (same seed, same batches); each row says how
far they are from the training package's (``loss_gap``) and whether they agree; the loss of the
longest timed fit is compared too (``last_loss_gap``).

::

    python -m benchmarks.studies.backend_steps --out results [--quick] [--only mlp zoo]

writes ``backend_steps.csv`` (rows of the cases not measured again are kept) and
``backend_steps.md`` (:func:`benchmarks.report.backend_section.backend_markdown`);
:func:`benchmarks.report.backend_section.backend_section` is its part of the summary.
"""

import argparse
import os
import sys
import tempfile
import time

from benchmarks.report import backend_section as report
from benchmarks.report.backend_tables import TRAINING, loss_gap
from benchmarks.studies.backend_process import BackendServer
from benchmarks.workloads import frameworks as fw

#: The MLPs: ``D-H-1@B`` and the rows of an epoch; the small MLP of the quick and the full grids,
#: the MLP of the targets and portable_speed, a size of the scaling grid, a wide MLP of the full
#: grid, and the large MLP of the targets.
MLP_SIZES = {
    "10-50-1@100": 16000,
    "100-50-1@100": 16000,
    "128-128-1@256": 16384,
    "10-500-1@1000": 16000,
    "500-500-1@1000": 8000,
}
#: Epochs of the short and the long fit: many for the MLPs whose step is short.
MLP_EPOCHS = {"10-500-1@1000": (1, 6), "500-500-1@1000": (1, 6)}
MLP_DEFAULT_EPOCHS = (1, 11)
MLP_LEARNING_RATE = 1e-4
#: The zoo's batch, learning rate and epochs; the large convolutional models' epochs are fewer
#: (steps of 0.1 to 1 s), and their repeats too.
ZOO_BATCH, ZOO_LEARNING_RATE, ZOO_EPOCHS = 64, 1e-3, (1, 4)
SLOW_MODELS = {"resnet_large": (1, 3), "mobilenet_small": (1, 3), "mobilenet_large": (1, 2)}
SLOW_REPEATS = 2
THREADS, REPEATS = 1, 3
#: Steps of the loss check, on the first batch.
CHECK_STEPS = 3
QUICK = {"sizes": ["10-50-1@100"], "epochs": (1, 2), "repeats": 1, "n_samples": 2000}
#: The APIs, by their framework names.
APIS = (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD)


def parse_size(size):
    """``(D, H, B)`` of ``'D-H-1@B'``.

    Examples
    --------
    >>> parse_size("100-50-1@100")
    (100, 50, 100)
    """
    layers, batch = size.split("@")
    d, h, _ = (int(n) for n in layers.split("-"))
    return d, h, int(batch)


def mlp_case(size, n_samples):
    """The model, data, loss and batch of an MLP size: ``(onnx model, X, y, loss, batch)``.

    Examples
    --------
    >>> onx, X, y, loss, batch = mlp_case("3-4-1@8", 16)
    >>> X.shape, y.shape, loss, batch
    ((16, 3), (16,), 'squared_error', 8)
    """
    from helpers.teaching.datasets import random_regression  # noqa: PLC0415
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    d, h, batch = parse_size(size)
    X, y = random_regression(n_samples, d)
    return mlp_onnx(d, hidden=(h,), random_state=0), X, y, "squared_error", batch


def zoo_case(name):
    """The model, data, loss and batch of a zoo model, and its steps an epoch."""
    from benchmarks.profiles.survey.profiled_models import zoo_model  # noqa: PLC0415
    from benchmarks.studies.portable_speed import zoo_steps  # noqa: PLC0415

    steps = zoo_steps(name)
    onx, X, y, loss = zoo_model(name, ZOO_BATCH * steps)
    return (onx, X, y, loss, ZOO_BATCH), steps


def runs_of(training=None, maintained=None):
    """``[(backend, interpreter)]``: the three runs, the training package's first."""
    from benchmarks.studies.portable_fits import maintained_python  # noqa: PLC0415

    training = training or sys.executable
    return [
        (TRAINING, training),
        ("onnx", training),
        ("onnx", maintained_python(maintained)),
    ]


class Runs:
    """The servers of the three runs, each fit timed by its own process's clocks.

    ``fits(api)`` are ``fit(epochs)`` functions for :func:`~helpers.measure.timing.
    marginal_step_cost`; :attr:`clock` advances by the CPU seconds each fit reports, and
    :meth:`wall_step` reads the wall-clock times of the same fits.
    """

    def __init__(self, servers):
        self.servers = servers
        self.now, self.walls, self.loaded, self.last = 0.0, {}, {}, {}

    def clock(self):
        """The CPU seconds of every fit so far."""
        return self.now

    def load(self, folder, onx, X, y, loss, batch, learning_rate):
        """Write the model and data, load them in every server; ``{index: (backend, runtime)}``
        of the servers that took them, ``{index: why}`` of the others."""
        import numpy as np  # noqa: PLC0415
        import onnx  # noqa: PLC0415

        model, data = os.path.join(folder, "model.onnx"), os.path.join(folder, "data.npz")
        onnx.save(onx, model)
        np.savez(data, X=X, y=y)
        spec = {"model": model, "data": data, "loss": loss, "batch_size": batch}
        self.loaded, failed = {}, {}
        for index, server in enumerate(self.servers):
            try:
                answer = server.request({"load": {**spec, "learning_rate": learning_rate}})
            except RuntimeError as exc:
                failed[index] = str(exc)
            else:
                self.loaded[index] = (answer["backend"], answer["runtime"])
        return failed

    def fits(self, api, indexes):
        """``fit(epochs)`` of ``api`` in each server of ``indexes``, by ``(api, index)``."""

        def make(index):
            def fit(epochs):
                answer = self.servers[index].request({"fit": api, "epochs": epochs})
                self.now += answer["cpu_s"]
                self.walls.setdefault((api, index), []).append((epochs, answer["wall_s"]))
                self.last[(api, index)] = (epochs, answer["loss"])
                return answer["loss"]

            return fit

        return {(api, index): make(index) for index in indexes}

    def wall_step(self, key, epochs, steps_per_epoch):
        """The marginal step in wall-clock time of the fits of ``key`` (the warm-up left out)."""
        times = self.walls.get(key, [])[1:]
        short = [t for e, t in times if e == epochs[0]]
        long = [t for e, t in times if e == epochs[1]]
        if not short or not long or min(long) <= min(short):
            return float("nan")
        return (min(long) - min(short)) / ((epochs[1] - epochs[0]) * steps_per_epoch)


def measure_case(runs, case, built, steps_per_epoch, epochs, repeats, settings):
    """The rows of one case: each API on each run, its step, its loss check, its caveat.

    ``settings``: ``folder`` (where the model and data are written), ``learning_rate`` and
    ``threads``.
    """
    from helpers.measure.conditions import (  # noqa: PLC0415
        RunClock,
        machine_conditions,
        timing_caveat,
    )
    from helpers.measure.timing import marginal_step_cost  # noqa: PLC0415

    started, threads = RunClock(), settings["threads"]
    batch = built[-1]
    failed = runs.load(settings["folder"], *built, settings["learning_rate"])
    rows, fits, losses = [], {}, {}
    for api in APIS:
        for index in runs.loaded:
            try:
                answer = runs.servers[index].request({"first_losses": api, "steps": CHECK_STEPS})
            except RuntimeError as exc:
                failed[(api, index)] = str(exc)
                continue
            losses[(api, index)] = answer["losses"]
            fits.update(runs.fits(api, [index]))
    timing = {"repeats": repeats, "clock": runs.clock, "pause_s": 0}
    try:
        costs = marginal_step_cost(fits, steps_per_epoch, *epochs, **timing) if fits else {}
    except RuntimeError as exc:  # a fit that failed while timed: the case's rows say so
        costs = {}
        failed.update(dict.fromkeys(fits, str(exc)))
    conditions = machine_conditions(started, threads)
    common = {
        "case": case,
        "batch_size": batch,
        "threads": threads,
        "steps_per_epoch": steps_per_epoch,
        "epochs": f"{epochs[0]},{epochs[1]}",
    }
    for api in APIS:
        reference = losses.get((api, 0))
        for index, server in enumerate(runs.servers):
            backend, runtime = runs.loaded.get(index, (server.backend, None))
            row = {**common, "api": api, "backend": backend, "runtime": runtime}
            why = failed.get(index) or failed.get((api, index))
            if why or (api, index) not in costs:
                rows.append({**row, "note": f"failed: {why or 'not timed'}"[:400]})
                continue
            cost = costs[(api, index)]
            first = losses[(api, index)]
            gap = loss_gap(first, reference) if reference else float("nan")
            last, reference_last = runs.last[(api, index)], runs.last.get((api, 0))
            last_gap = float("nan")
            if reference_last and reference_last[0] == last[0]:
                last_gap = loss_gap([last[1]], [reference_last[1]])
            rows.append(
                {
                    **row,
                    "step_s": cost["step_s"],
                    "wall_step_s": runs.wall_step((api, index), epochs, steps_per_epoch),
                    "spread": cost["spread"],
                    "first_losses": " ".join(f"{v:.9g}" for v in first),
                    "loss_gap": gap,
                    "last_loss": last[1],
                    "last_loss_gap": last_gap,
                    "note": timing_caveat(cost["spread"], conditions, note=cost["note"]),
                }
            )
    return rows


def cases(parts, quick, models=None, sizes=None):
    """``[(kind, case, build, epochs, repeats, learning_rate)]``: what a run measures, in order;
    ``build()`` returns ``(model, X, y, loss, batch)`` and the steps of an epoch."""
    from benchmarks.example_models import ZOO  # noqa: PLC0415

    found = []
    if "mlp" in parts:
        for size in sizes or (QUICK["sizes"] if quick else MLP_SIZES):
            n = QUICK["n_samples"] if quick else MLP_SIZES.get(size, 16000)
            epochs = QUICK["epochs"] if quick else MLP_EPOCHS.get(size, MLP_DEFAULT_EPOCHS)
            repeats = QUICK["repeats"] if quick else REPEATS

            def build(size=size, n=n):
                built = mlp_case(size, n)
                return built, n // built[-1]

            found.append(("mlp", f"MLP {size}", build, epochs, repeats, MLP_LEARNING_RATE))
    if "zoo" in parts:
        for name in models or [n for n in ZOO if not quick or n.endswith("_small")]:
            epochs = QUICK["epochs"] if quick else SLOW_MODELS.get(name, ZOO_EPOCHS)
            repeats = (
                QUICK["repeats"] if quick else (SLOW_REPEATS if name in SLOW_MODELS else REPEATS)
            )
            found.append(
                ("zoo", name, lambda n=name: zoo_case(n), epochs, repeats, ZOO_LEARNING_RATE)
            )
    return found


def machine_columns():
    """``machine`` (the processor as ``lscpu`` names it, and its cores)."""
    from benchmarks.sweep.records import machine_info  # noqa: PLC0415

    info = machine_info()
    return {"machine": f"{info['cpu']}, {info['usable_cores'] or info['logical_cores']} cores"}


def main(argv=None):
    """Measure and write; see ``--help``."""
    import pandas as pd  # noqa: PLC0415

    from benchmarks.example_models import ZOO  # noqa: PLC0415
    from benchmarks.studies.portable_speed import kept_rows  # noqa: PLC0415
    from benchmarks.sweep.records import atomic_write_text  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog=report.BACKEND_COMMAND, description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a small MLP, the small models")
    parser.add_argument("--only", nargs="+", choices=["mlp", "zoo"])
    parser.add_argument("--sizes", nargs="+", help="these MLPs (D-H-1@B) only")
    parser.add_argument("--models", nargs="+", choices=list(ZOO), help="these zoo models only")
    parser.add_argument("--maintained-python", help="default: .venv-maintained/bin/python")
    parser.add_argument("--training-python", help="the 1.19.2 runs' interpreter; default: this one")
    parser.add_argument("--threads", type=int, default=THREADS, help=f"default {THREADS}")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    todo = cases(args.only or ["mlp", "zoo"], args.quick, args.models, args.sizes)
    start, rows = time.perf_counter(), []
    servers = [
        BackendServer(backend, args.threads, python)
        for backend, python in runs_of(args.training_python, args.maintained_python)
    ]
    with tempfile.TemporaryDirectory() as folder:
        with servers[0], servers[1], servers[2]:
            runs = Runs(servers)
            for kind, case, build, epochs, repeats, learning_rate in todo:
                built, steps = build()
                settings = {
                    "folder": folder,
                    "learning_rate": learning_rate,
                    "threads": args.threads,
                }
                new = measure_case(runs, case, built, steps, epochs, repeats, settings)
                rows += [{"kind": kind, **row} for row in new]
                print(f"{case}: {time.perf_counter() - start:.0f} s", flush=True)
    path = os.path.join(args.out, report.BACKEND_STEPS_CSV)
    new = pd.DataFrame(rows).assign(**machine_columns()).reindex(columns=report.COLUMNS)
    atomic_write_text(path, kept_rows(path, new, "case").to_csv(index=False))
    print(report.write_markdown(args.out))  # this run's rows and the rows kept
    print(f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
