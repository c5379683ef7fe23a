"""The training-speed targets, measured side by side in one run.

Each target compares a step of the helpers with a peer measured in the same
process, alternating, as :mod:`benchmarks.studies.thread_scaling` does (marginal cost
of a step: the fit of 4 epochs minus the fit of 1, over the extra steps, best
of the repeats):

* small MLP 100-50-1, batches of 100: both APIs against torch eager, the
  whole-training API against scikit-learn's ``MLPRegressor`` (plain SGD);
* MLP 500-500-1, batches of 1000: both APIs against the runtime's bound, the
  step's matrix products run by onnxruntime's kernels in one call;
* each large model of the zoo, batches of 64: the faster of the two APIs
  against torch eager (:mod:`benchmarks.studies.zoo_targets`);
* the set-up of a refit of a model already built in this process (the
  training caches), for both APIs.

Each repeat times every framework of a size in turn, so the ratio of each
repeat is taken under one load: the table gives the ratio of the best steps
and the range of the repeats' ratios. It writes ``step_targets.md`` and
``step_targets.csv`` into ``--out``; ``--only`` keeps the targets whose name
contains one of its words::

    .venv/bin/python -m benchmarks.studies.step_targets --out results/
    .venv/bin/python -m benchmarks.studies.step_targets --only zoo --out results/local/targets
"""

import argparse
import math
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: python benchmarks/studies/step_targets.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import pandas as pd

from benchmarks.report.details import markdown_table
from benchmarks.studies.thread_scaling_fits import FRAMEWORKS, LEARNING_RATE, make_fits, parse_size
from benchmarks.studies.zoo_targets import (
    FASTER_ORT,
    STEPS_PER_EPOCH,
    with_faster_ort,
    zoo_fits,
    zoo_model_of,
    zoo_size,
)
from benchmarks.sweep.records import (
    atomic_write_text,
    machine_info,
    machine_lines,
    package_versions,
)
from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import models as bm

SKLEARN = "scikit-learn MLPRegressor"

#: (name, size, framework, reference, goal): the step of ``framework`` over
#: the step of ``reference`` must be at most ``goal``.
TARGETS = (
    ("small MLP, whole-training vs torch", "100-50-1@100", fw.ORT_WHOLE, fw.TORCH, 0.3),
    (
        "small MLP, forward/backward vs torch",
        "100-50-1@100",
        fw.ORT_FORWARD_BACKWARD,
        fw.TORCH,
        0.4,
    ),
    ("small MLP, whole-training vs scikit-learn", "100-50-1@100", fw.ORT_WHOLE, SKLEARN, 0.4),
    (
        "large MLP, whole-training vs runtime bound",
        "500-500-1@1000",
        fw.ORT_WHOLE,
        fw.ORT_BOUND,
        1.15,
    ),
    (
        "large MLP, forward/backward vs runtime bound",
        "500-500-1@1000",
        fw.ORT_FORWARD_BACKWARD,
        fw.ORT_BOUND,
        1.3,
    ),
    *(
        (f"zoo {name}, faster API vs torch", zoo_size(name), FASTER_ORT, fw.TORCH, 1.0)
        for name in STEPS_PER_EPOCH
    ),
)
#: The name of the refit targets, as ``--only`` matches it.
REFIT = "refit set-up"
#: A refit of a cached model must set up in less than this many milliseconds.
REFIT_GOAL_MS = 5.0


def _sklearn_fit(config, random_state=0):
    """``fit(epochs)`` of ``MLPRegressor`` with the step of the ONNX runs (plain SGD, no
    penalty)."""
    from sklearn.neural_network import MLPRegressor  # noqa: PLC0415

    X, y = bm.random_regression(
        config["n_samples"], config["n_features"], random_state=random_state
    )

    def fit(epochs):
        MLPRegressor(
            hidden_layer_sizes=(config["hidden"],),
            solver="sgd",
            learning_rate_init=LEARNING_RATE,
            momentum=0.0,
            batch_size=config["batch_size"],
            max_iter=epochs,
            alpha=0.0,
            tol=0.0,
            n_iter_no_change=10**6,
            shuffle=True,
            random_state=random_state,
        ).fit(X, y)

    return fit


def selected(words):
    """The targets whose name contains one of ``words`` (any case); all of them without words.

    Examples
    --------
    >>> [t[0] for t in selected(["resnet", "MOBILENET"])]
    ['zoo resnet_large, faster API vs torch', 'zoo mobilenet_large, faster API vs torch']
    >>> len(selected(None)) == len(TARGETS)
    True
    """
    words = [w.lower() for w in words or [""]]
    return tuple(t for t in TARGETS if any(w in t[0].lower() for w in words))


def _size_fits(size, threads):
    """``fit(epochs)`` of every framework a size's targets name, and the steps of an epoch."""
    name = zoo_model_of(size)
    if name is not None:
        return zoo_fits(name, threads)
    config = parse_size(size)
    fits = make_fits(config, threads)
    fits[SKLEARN] = _sklearn_fit(config)
    return fits, config["n_samples"] // config["batch_size"]


def measure_steps(threads, repeats, targets=TARGETS):
    """Milliseconds per step of every framework ``targets`` name, one size at a time.

    Returns
    -------
    pandas.DataFrame
        ``size``, ``framework``, ``ms_per_step`` (from the fastest fits) and
        ``rounds_ms`` (the estimate of each repeat, frameworks interleaved).
    """
    import torch  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    rows = []
    for size in dict.fromkeys(t[1] for t in targets):
        names = {t[i] for t in targets if t[1] == size for i in (2, 3)}
        if FASTER_ORT in names:
            names |= {fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD}
        fits, steps = _size_fits(size, threads)
        fits = {k: v for k, v in fits.items() if k in names}
        with threadpool_limits(limits=threads, user_api="blas"):
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                costs = bm.marginal_step_cost(fits, steps, 1, 4, repeats)
            finally:
                torch.set_num_threads(previous)
        if FASTER_ORT in names:
            costs = with_faster_ort(costs)
        rows += [
            {
                "size": size,
                "framework": k,
                "ms_per_step": v["step_s"] * 1e3,
                "rounds_ms": [r * 1e3 for r in v["steps_s"]],
            }
            for k, v in costs.items()
        ]
    return pd.DataFrame(rows)


def measure_refit_setup(threads, repeats=20):
    """Milliseconds a refit of a cached model spends before its steps, for both APIs.

    A copy of an optimizer fitted once is fitted on a single batch (one step),
    ``repeats`` times; the fastest such fit minus one step's time. The
    optimizers are every study's (:func:`benchmarks.workloads.frameworks.ort_makers`).
    """
    from sklearn.base import clone  # noqa: PLC0415

    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    config = parse_size(TARGETS[0][1])
    X, y = bm.random_regression(config["batch_size"], config["n_features"])
    onx = mlp_onnx(config["n_features"], hidden=(config["hidden"],))
    makers = fw.ort_makers(
        onx,
        "squared_error",
        learning_rate=LEARNING_RATE,
        batch_size=config["batch_size"],
        n_threads=threads,
        max_iter=1,
        validation_every=0,
    )
    optimizers = {name: make() for name, make in makers.items()}
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
        rows.append(
            {
                "framework": name,
                "refit_ms": min(times),
                "step_ms": step,
                "setup_ms": min(times) - step,
            }
        )
    return pd.DataFrame(rows)


def _one_step_ms(fitted, X, y, repeats):
    fitted.set_params(warm_start=True, max_iter=10)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fitted.fit(X, y)
        times.append((time.perf_counter() - start) * 1e3 / 10)
    return min(times)


def _ratios(steps, size, framework, reference):
    """The ratio of the best steps, and the range of the repeats' ratios (``'0.91-1.04x'``)."""
    rows = steps.set_index(["size", "framework"])
    best = rows.ms_per_step[size, framework] / rows.ms_per_step[size, reference]
    pairs = zip(rows.rounds_ms[size, framework], rows.rounds_ms[size, reference])
    rounds = [a / b for a, b in pairs if a > 0 and b > 0]  # NaN: a repeat lost in the noise
    spread = f"{min(rounds):.2f}-{max(rounds):.2f}x" if rounds else "-"
    return best, spread


def _verdict(value, goal):
    if math.isnan(value):
        return "not measurable"
    return "met" if value <= goal else f"missed by {value / goal:.2f}x"


def target_table(steps, setup, targets=TARGETS):
    """One row per target: configuration, measured ratio, the repeats' range, goal, verdict.

    Parameters
    ----------
    steps : pandas.DataFrame
        :func:`measure_steps`' table: ``size``, ``framework``, ``ms_per_step``, ``rounds_ms``.
    setup : pandas.DataFrame or None
        :func:`measure_refit_setup`'s table (``framework``, ``setup_ms``), or None: no refit rows.
    targets : tuple
        The targets to report, a part of :data:`TARGETS`.
    """
    rows = []
    for name, size, framework, reference, goal in targets:
        ratio, spread = _ratios(steps, size, framework, reference)
        update = "plain SGD" if zoo_model_of(size) is None else "plain SGD, random data"
        measured = "-" if math.isnan(ratio) else f"{ratio:.2f}x"
        rows.append(
            {
                "target": name,
                "configuration": f"{size}, {update}",
                "measured": measured,
                "spread": spread,
                "goal": f"<= {goal}x",
                "verdict": _verdict(ratio, goal),
            }
        )
    for row in () if setup is None else setup.itertuples():
        rows.append(
            {
                "target": f"{REFIT}, {row.framework}",
                "configuration": f"{TARGETS[0][1]}, cached model",
                "measured": f"{row.setup_ms:.1f} ms",
                "spread": "-",
                "goal": f"< {REFIT_GOAL_MS:g} ms",
                "verdict": "met" if row.setup_ms < REFIT_GOAL_MS else "missed",
            }
        )
    return pd.DataFrame(rows)


def markdown(table, steps, threads, load=None):
    """The report: the targets first, then the step times and the conditions.

    ``load``: the load averages before and after the run (other jobs on the machine), if known.
    """
    lines = [
        "# Training-speed targets",
        "",
        "Measured on:",
        "",
        *machine_lines(machine_info(), package_versions(), [threads]),
        "",
        (
            f"Measured side by side in one run with {threads} threads for every framework "
            "(`python -m benchmarks.studies.step_targets`): marginal cost of a step from the "
            "fastest of alternating repeats; `spread` is the range of the ratios of the single "
            "repeats. The faster onnxruntime API is the faster of the two, repeat by repeat."
        ),
        "",
        *markdown_table(table),
        "",
    ]
    if steps is not None:
        ms = steps.pivot(index="size", columns="framework", values="ms_per_step")
        order = [c for c in (*FRAMEWORKS, SKLEARN, FASTER_ORT) if c in ms]
        table_ms = markdown_table(ms[order].round(3).reset_index())
        lines += ["Milliseconds per step:", "", *table_ms, ""]
    if load is not None:
        lines += [f"Load average {load[0]:.1f} -> {load[1]:.1f} during the run."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Measure the targets; see ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.step_targets", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="threads of every framework (default 2)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="alternating repeats (default 5)")
    parser.add_argument("--out", default="results", help="output folder (default results)")
    parser.add_argument(
        "--only",
        "--targets",
        nargs="+",
        metavar="WORD",
        help="keep the targets whose name contains one of these words (any case): "
        f"'zoo', 'MLP', 'resnet', '{REFIT}'...",
    )
    args = parser.parse_args(argv)
    targets = selected(args.only)
    refits = [f"{REFIT}, {api}" for api in (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD)]
    wants_refit = any(w.lower() in name for w in args.only or [""] for name in refits)
    if not targets and not wants_refit:
        parser.error(f"no target's name contains {' or '.join(map(repr, args.only))}")
    load = os.getloadavg()[0]
    steps = measure_steps(args.threads, args.repeats, targets) if targets else None
    setup = measure_refit_setup(args.threads) if wants_refit else None
    table = target_table(steps, setup, targets)
    text = markdown(table, steps, args.threads, (load, os.getloadavg()[0]))
    atomic_write_text(os.path.join(args.out, "step_targets.md"), text)
    atomic_write_text(os.path.join(args.out, "step_targets.csv"), table.to_csv(index=False))
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
