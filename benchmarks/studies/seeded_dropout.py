"""What a repeatable dropout costs, and which thread counts give the same weights.

With an int ``random_state``, the optimizers draw the masks of ``Dropout`` with numpy and feed
them to the training graph (:mod:`helpers.core.model_graphs.random_draws`); with
``random_state=None``, onnxruntime's own ``Dropout`` kernel draws them, unseeded. Two parts:

* **cost**: a step of dropout MLPs of growing width, both APIs, with drawn masks and with the
  runtime's, timed side by side in one run (:func:`helpers.measure.timing.marginal_step_cost`,
  rounds interleaved);
* **threads**: the zoo's small models and the dropout MLPs fitted for one epoch with the same
  ``random_state`` at 1, 2 and 4 threads, and twice at 2: the largest difference of a trained
  weight from the fit at 1 thread (0 is bit-identical).

``python -m benchmarks.studies.seeded_dropout [--quick]`` writes ``results/seeded_dropout.csv``
and ``results/seeded_dropout.md``.
"""

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd
import torch

from benchmarks.workloads import frameworks as fw
from benchmarks.workloads.your_model import ort_fit
from helpers import export_for_training
from helpers.measure.conditions import RunClock, machine_conditions, timing_caveat
from helpers.measure.timing import marginal_step_cost

#: Dropout MLPs ``features-hidden-classes@batch``: the issue's, then wider.
CASES = {"20-64-3@32": (20, 64, 3, 32), "256-1024-10@128": (256, 1024, 10, 128)}
#: The zoo's models whose sums the thread check covers (no dropout in them: the sums only).
ZOO_MODELS = ("image_cnn_small", "mobilenet_small", "layernorm_mlp_small", "sequence_conv_small")
#: Rows of the data of a case, and of a zoo model's fit.
N_ROWS, ZOO_ROWS = 2048, 128
THREADS = 2
DROPOUT = 0.3
LEARNING_RATE = 0.01


def dropout_mlp(features, hidden, classes, seed=0):
    """A ReLU MLP with ``Dropout(0.3)`` after its hidden layer, exported for training.

    Examples
    --------
    >>> sorted({n.op_type for n in dropout_mlp(4, 8, 3).graph.node} - {"Constant"})
    ['Dropout', 'Gemm', 'Relu']
    """
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.ReLU(),
        torch.nn.Dropout(DROPOUT),
        torch.nn.Linear(hidden, classes),
    )
    return export_for_training(net, torch.zeros(2, features))


def case_data(features, classes, n_rows, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, features), dtype=np.float32)
    return X, rng.integers(0, classes, n_rows)


def _makers(onx, loss, batch, threads, random_state, **params):
    return fw.ort_makers(onx, loss, "sgd", LEARNING_RATE, batch, threads, random_state, **params)


def measure_cost(name, epochs, repeats):
    """The step of case ``name`` in both APIs, masks drawn (``random_state=0``) and the
    runtime's (``None``): one row per API."""
    features, hidden, classes, batch = CASES[name]
    onx = dropout_mlp(features, hidden, classes)
    X, y = case_data(features, classes, N_ROWS)
    fits = {}
    for label, seed in (("drawn", 0), ("runtime", None)):
        for api, make in _makers(onx, "cross_entropy", batch, THREADS, seed).items():
            fits[(api, label)] = ort_fit(make, X, y)
    started = time.time()
    costs = marginal_step_cost(
        {f"{api} {label}": fit for (api, label), fit in fits.items()},
        -(-N_ROWS // batch),
        e1=1,
        e2=epochs,
        repeats=repeats,
    )
    conditions = machine_conditions(RunClock(started, 0.0), THREADS)
    rows = []
    for api in dict.fromkeys(api for api, _ in fits):
        drawn, runtime = costs[f"{api} drawn"], costs[f"{api} runtime"]
        spread = max(drawn["spread"], runtime["spread"])
        rows.append(
            {
                "part": "cost",
                "model": name,
                "api": api,
                "threads": THREADS,
                "drawn_step_us": drawn["step_s"] * 1e6,
                "runtime_step_us": runtime["step_s"] * 1e6,
                "ratio": drawn["step_s"] / runtime["step_s"],
                "spread": spread,
                "caveat": timing_caveat(spread, conditions, note=drawn["note"] or runtime["note"]),
            }
        )
    return rows


def _trained_weights(onx, X, y, loss, batch, threads):
    makers = _makers(onx, loss, batch, threads, 0, max_iter=1)
    return {api: make().fit(X, y).get_state() for api, make in makers.items()}


def measure_threads(name):
    """The largest weight difference from the fit at 1 thread, at 2 and 4 threads and again at
    2: one row per API and thread count."""
    from benchmarks.profiles.survey.profiled_models import zoo_model  # noqa: PLC0415

    if name in CASES:
        features, hidden, classes, batch = CASES[name]
        onx, loss = dropout_mlp(features, hidden, classes), "cross_entropy"
        X, y = case_data(features, classes, ZOO_ROWS * 4)
    else:
        (onx, X, y, loss), batch = zoo_model(name, ZOO_ROWS), 32
    runs = {n: _trained_weights(onx, X, y, loss, batch, n) for n in (1, 2, 4)}
    again = _trained_weights(onx, X, y, loss, batch, 2)
    pairs = {"2": (runs[1], runs[2]), "4": (runs[1], runs[4]), "2 again": (runs[2], again)}
    rows = []
    for api in runs[1]:
        for label, (first, second) in pairs.items():
            difference = max(
                float(np.max(np.abs(first[api][k] - second[api][k]))) for k in first[api]
            )
            rows.append(
                {
                    "part": "threads",
                    "model": name,
                    "api": api,
                    "threads": label,
                    "max_weight_difference": difference,
                }
            )
    return rows


def markdown(table):
    """The study's answer, then its two tables.

    Examples
    --------
    >>> rows = [
    ...     {"part": "cost", "model": "m", "api": "a", "threads": 2, "drawn_step_us": 110.0,
    ...      "runtime_step_us": 100.0, "ratio": 1.1, "spread": 1.05, "caveat": ""},
    ...     {"part": "threads", "model": "m", "api": "a", "threads": "2",
    ...      "max_weight_difference": 0.0},
    ... ]
    >>> text = markdown(pd.DataFrame(rows))
    >>> text.splitlines()[2][:64]
    'A step with masks drawn from `random_state` took 1.1x to 1.1x th'
    >>> "1 of 1 fits at another thread count than 1 gave the same weights" in text
    True
    """
    cost = table[table.part == "cost"]
    noisy = cost.caveat.fillna("").astype(str) != ""
    clean = cost[~noisy]
    count = int(noisy.sum())
    left = f" ({count} noisy case{'s' if count > 1 else ''} left out)" if count else ""
    threads = table[table.part == "threads"]
    again = threads.threads.astype(str) == "2 again"
    other, repeated = threads[~again], threads[again]
    lines = [
        "# What a repeatable dropout costs",
        "",
        f"A step with masks drawn from `random_state` took {clean.ratio.min():.2g}x to "
        f"{clean.ratio.max():.2g}x the time of one with onnxruntime's own `Dropout`{left}; "
        f"{int((other.max_weight_difference == 0).sum())} of {len(other)} fits at another "
        "thread count than 1 gave the same weights to the last bit (the others differ by at "
        f"most {other.max_weight_difference.max():.2g}), and "
        f"{int((repeated.max_weight_difference == 0).sum())} of {len(repeated)} fits repeated "
        "at the same thread count did.",
        "",
        "| model | API | drawn (µs) | runtime's (µs) | ratio | spread | caveat |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.model} | {r.api} | {r.drawn_step_us:.0f} | {r.runtime_step_us:.0f} | "
        f"{r.ratio:.2f} | {r.spread:.2f} | {r.caveat if isinstance(r.caveat, str) else ''} |"
        for r in cost.itertuples()
    ]
    lines += [
        "",
        "Largest difference of a trained weight from the fit at 1 thread (`2 again`: two fits "
        "at 2 threads), one epoch, the same `random_state`:",
        "",
        "| model | API | threads | max difference |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r.model} | {r.api} | {r.threads} | {r.max_weight_difference:.3g} |"
        for r in threads.itertuples()
    ]
    return "\n".join(lines)


def main(argv=None):
    """Measure and write; see ``--help``."""
    from benchmarks.sweep.records import atomic_write_text, machine_info  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.seeded_dropout", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="the first case, few rounds")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    cases = list(CASES)[:1] if args.quick else list(CASES)
    rows = []
    for name in cases:
        rows += measure_cost(name, epochs=2 if args.quick else 4, repeats=2 if args.quick else 5)
    for name in cases + ([] if args.quick else list(ZOO_MODELS)):
        rows += measure_threads(name)
    table = pd.DataFrame(rows).assign(machine=machine_info()["cpu"])
    os.makedirs(args.out, exist_ok=True)
    atomic_write_text(os.path.join(args.out, "seeded_dropout.csv"), table.to_csv(index=False))
    text = markdown(table)
    atomic_write_text(os.path.join(args.out, "seeded_dropout.md"), text + "\n")
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
