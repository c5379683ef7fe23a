"""The training-speed targets, measured side by side in one run.

Each target compares a step of the helpers with a peer measured in the same
process, alternating, as :mod:`benchmarks.thread_scaling` does (marginal cost
of a step: the fit of 4 epochs minus the fit of 1, over the extra steps, best
of the repeats):

* small MLP 100-50-1, batches of 100: both APIs against torch eager, the
  whole-training API against scikit-learn's ``MLPRegressor`` (plain SGD);
* MLP 500-500-1, batches of 1000: both APIs against the runtime's bound, the
  step's matrix products run by onnxruntime's kernels in one call;
* the set-up of a refit of a model already built in this process (the
  training caches), for both APIs.

It writes ``step_targets.md`` and ``step_targets.csv`` into ``--out``::

    .venv/bin/python -m benchmarks.step_targets --out results/
"""
import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: python benchmarks/step_targets.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas as pd

from benchmarks.details import markdown_table
from benchmarks.thread_scaling import LEARNING_RATE, make_fits, parse_size
from benchmarks import models as bm
from benchmarks.records import atomic_write_text, machine_info, package_versions

SKLEARN = "scikit-learn MLPRegressor"

#: (name, size, framework, reference, goal): the step of ``framework`` over
#: the step of ``reference`` must be at most ``goal``.
TARGETS = (
    ("small MLP, whole-training vs torch", "100-50-1@100", bm.ORT_WHOLE, bm.TORCH, 0.3),
    ("small MLP, forward/backward vs torch", "100-50-1@100", bm.ORT_FORWARD_BACKWARD, bm.TORCH, 0.4),
    ("small MLP, whole-training vs scikit-learn", "100-50-1@100", bm.ORT_WHOLE, SKLEARN, 0.4),
    ("large MLP, whole-training vs runtime bound", "500-500-1@1000", bm.ORT_WHOLE, bm.ORT_BOUND, 1.15),
    ("large MLP, forward/backward vs runtime bound", "500-500-1@1000", bm.ORT_FORWARD_BACKWARD, bm.ORT_BOUND, 1.3),
)
#: A refit of a cached model must set up in less than this many milliseconds.
REFIT_GOAL_MS = 5.0


def _sklearn_fit(config, random_state=0):
    """``fit(epochs)`` of ``MLPRegressor`` with the step of the ONNX runs (plain SGD, no penalty)."""
    from sklearn.neural_network import MLPRegressor  # noqa: PLC0415

    X, y = bm.random_regression(config["n_samples"], config["n_features"], random_state=random_state)

    def fit(epochs):
        MLPRegressor(
            hidden_layer_sizes=(config["hidden"],), solver="sgd", learning_rate_init=LEARNING_RATE,
            momentum=0.0, batch_size=config["batch_size"], max_iter=epochs, alpha=0.0, tol=0.0,
            n_iter_no_change=10**6, shuffle=True, random_state=random_state,
        ).fit(X, y)

    return fit


def measure_steps(threads, repeats):
    """Milliseconds per step of every framework the targets name, one size at a time."""
    import torch  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    rows = []
    for size in dict.fromkeys(t[1] for t in TARGETS):
        config = parse_size(size)
        names = {t[2] for t in TARGETS if t[1] == size} | {t[3] for t in TARGETS if t[1] == size}
        fits = {k: v for k, v in make_fits(config, threads).items() if k in names}
        if SKLEARN in names:
            fits[SKLEARN] = _sklearn_fit(config)
        with threadpool_limits(limits=threads, user_api="blas"):
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                costs = bm.marginal_step_cost(fits, config["n_samples"] // config["batch_size"], 1, 4, repeats)
            finally:
                torch.set_num_threads(previous)
        rows += [{"size": size, "framework": k, "ms_per_step": v["step_s"] * 1e3} for k, v in costs.items()]
    return pd.DataFrame(rows)


def measure_refit_setup(threads, repeats=20):
    """Milliseconds a refit of a cached model spends before its steps, for both APIs.

    A copy of an optimizer fitted once is fitted on a single batch (one step),
    ``repeats`` times; the fastest such fit minus one step's time.
    """
    from sklearn.base import clone  # noqa: PLC0415

    from helpers import (  # noqa: PLC0415
        LearningRateSGD,
        OrtGradientForwardBackwardOptimizer,
        OrtGradientOptimizer,
        add_loss_output,
    )
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    config = parse_size(TARGETS[0][1])
    X, y = bm.random_regression(config["batch_size"], config["n_features"])
    onx = mlp_onnx(config["n_features"], hidden=(config["hidden"],))
    common = dict(max_iter=1, batch_size=config["batch_size"], n_threads=threads, validation_every=0)
    optimizers = {
        bm.ORT_WHOLE: OrtGradientOptimizer(add_loss_output(onx), learning_rate=LEARNING_RATE, **common),
        bm.ORT_FORWARD_BACKWARD: OrtGradientForwardBackwardOptimizer(
            onx, learning_rate=LearningRateSGD(LEARNING_RATE, learning_rate="constant"), **common
        ),
    }
    rows = []
    for name, optimizer in optimizers.items():
        clone(optimizer).fit(X, y)  # builds and caches
        fitted = clone(optimizer).fit(X, y)
        step = _one_step_ms(fitted, X, y, repeats)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            clone(optimizer).fit(X, y)
            times.append((time.perf_counter() - start) * 1e3)
        rows.append({"framework": name, "refit_ms": min(times), "step_ms": step, "setup_ms": min(times) - step})
    return pd.DataFrame(rows)


def _one_step_ms(fitted, X, y, repeats):
    fitted.set_params(warm_start=True, max_iter=10)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fitted.fit(X, y)
        times.append((time.perf_counter() - start) * 1e3 / 10)
    return min(times)


def target_table(steps, setup):
    """One row per target: configuration, measured ratio, goal, verdict."""
    ms = steps.set_index(["size", "framework"])["ms_per_step"]
    rows = []
    for name, size, framework, reference, goal in TARGETS:
        ratio = ms[size, framework] / ms[size, reference]
        rows.append({"target": name, "configuration": f"{size}, plain SGD", "measured": f"{ratio:.2f}x",
                     "goal": f"<= {goal}x", "verdict": "met" if ratio <= goal else f"missed by {ratio / goal:.2f}x"})
    for row in setup.itertuples():
        rows.append({"target": f"refit set-up, {row.framework}", "configuration": f"{TARGETS[0][1]}, cached model",
                     "measured": f"{row.setup_ms:.1f} ms", "goal": f"< {REFIT_GOAL_MS:g} ms",
                     "verdict": "met" if row.setup_ms < REFIT_GOAL_MS else "missed"})
    return pd.DataFrame(rows)


def markdown(table, steps, threads):
    """The report: the targets first, then the step times and the conditions."""
    versions = package_versions()
    lines = [
        "# Training-speed targets",
        "",
        f"Measured side by side in one run with {threads} threads for every framework "
        "(`python -m benchmarks.step_targets`): marginal cost of a step, best of alternating repeats.",
        "",
        *markdown_table(table),
        "",
        "Milliseconds per step:",
        "",
        *markdown_table(
            steps.pivot(index="framework", columns="size", values="ms_per_step").round(3).reset_index()
        ),
        "",
        f"Machine: {machine_info().get('cpu', '?')}, {os.cpu_count()} cores; "
        + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Measure the targets; see ``--help``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_targets", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads of every framework (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="alternating repeats (default 5)")
    parser.add_argument("--out", default="results", help="output folder (default results)")
    args = parser.parse_args(argv)
    steps = measure_steps(args.threads, args.repeats)
    setup = measure_refit_setup(args.threads)
    table = target_table(steps, setup)
    atomic_write_text(os.path.join(args.out, "step_targets.md"), markdown(table, steps, args.threads))
    atomic_write_text(os.path.join(args.out, "step_targets.csv"), table.to_csv(index=False))
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
