"""Which framework reaches a stated held-out accuracy first, set-up included?

A faster step is not the whole answer: a fit also pays its set-up (graphs,
sessions, artifacts), and what counts is the accuracy on data the model did
not train on. Each task (:data:`TASKS`) trains a torch module on
scikit-learn's digits (a fixed, stratified train/test split) in each
framework from the same initial weights, on the same batches (one
permutation per epoch from the same seed), with the same loss and plain SGD.
The point after ``k`` epochs is a fit of ``k`` epochs from scratch, set-up
included (onnxruntime's training caches emptied first), timed as a whole,
the best of a few repeats; the held-out accuracy is computed after the
timing. ``python -m benchmarks.studies.time_to_accuracy --out results/`` writes
``time_to_accuracy.csv`` (a row per task, framework and epoch) and
``time_to_accuracy.png``; :func:`benchmarks.report.study_sections.time_to_accuracy_lines`
answers from the CSV (the summary's section).
"""

import argparse
import copy
import os
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np
import pandas as pd
import torch
from torch import nn

from benchmarks.example_models import digits_mlp
from benchmarks.report import style
from benchmarks.report.study_sections import time_to_accuracy_lines
from benchmarks.sweep.records import atomic_write_bytes, atomic_write_text
from benchmarks.workloads import frameworks as fw
from benchmarks.workloads import your_model as ym
from helpers import export_for_training
from helpers.teaching.datasets import load_classification_standardized

#: The columns of ``time_to_accuracy.csv``, one row per task, framework and epoch.
COLUMNS = (
    "task",
    "framework",
    "epoch",
    "seconds",
    "seconds_slowest",
    "heldout_metric",
    "heldout_value",
    "train_loss",
    "target",
    "threads",
)
#: Plain SGD's learning rate and the batch size, in every framework and task: a batch of 50 leaves
#: 47 rows to the last one of an epoch (a last batch of 3 rows makes held-out accuracy jump).
LEARNING_RATE, BATCH_SIZE = 0.1, 50


def digits_cnn():
    """A CNN for scikit-learn's 8x8 digits: two 3x3 convolutions, batch normalization, max pooling.

    Examples
    --------
    >>> digits_cnn()(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 2 * 2, 10),
    )


class Task(NamedTuple):
    """A classifier of the digits: name, builder, shape of a sample, held-out accuracy to reach."""

    name: str
    build: Callable[[], nn.Module]
    sample_shape: tuple
    target: float


#: The tasks, each with the held-out accuracy it must reach.
TASKS = (
    Task("digits CNN", digits_cnn, (1, 8, 8), 0.95),
    Task("digits MLP", digits_mlp, (64,), 0.95),
)


def timed_curves(fits, epochs, repeats=5, evaluate=None, pause_s=0.1):
    """``(fastest, slowest, value)`` per epoch count of each fit: fresh fits of 1, 2, ... epochs.

    ``fits`` maps a name to ``fit(k)``, which trains from scratch. Each fit
    first trains one epoch untimed (what a process pays once); then each of
    ``repeats`` rounds times every fit of each ``k`` in turn, after a pause of
    ``pause_s`` (the thread pools of the previous fit stop spinning): a burst
    of load from other processes falls on all of them, and on one round of a
    point only. ``fastest`` and ``slowest``: seconds of the rounds; ``value``: ``evaluate(r)`` of
    what the last round's fit returned (``r`` by default), after its timing.

    Examples
    --------
    >>> fits = {"a": lambda k: 10 * k, "b": lambda k: -k}
    >>> points = timed_curves(fits, 3, repeats=2, evaluate=lambda r: r + 1, pause_s=0)
    >>> {name: [value for _, _, value in p] for name, p in points.items()}
    {'a': [11, 21, 31], 'b': [0, -1, -2]}
    >>> all(0 < fastest <= slowest for p in points.values() for fastest, slowest, _ in p)
    True
    """
    for fit in fits.values():
        fit(1)  # warm-up: what a process pays once
    times = {name: [[] for _ in range(epochs)] for name in fits}
    values = {name: [None] * epochs for name in fits}
    for last in [False] * (repeats - 1) + [True]:
        for k in range(1, epochs + 1):
            for name, fit in fits.items():
                time.sleep(pause_s)
                start = time.perf_counter()
                result = fit(k)
                times[name][k - 1].append(time.perf_counter() - start)
                if last:
                    values[name][k - 1] = evaluate(result) if evaluate else result
    return {name: [(min(t), max(t), v) for t, v in zip(times[name], values[name])] for name in fits}


def _returning_model(fit_of, make):
    """``fit(k) -> (loss, trained model)``: ``fit_of(make)`` trains the model ``make()`` returns."""
    made = []

    def make_and_keep():
        made[:] = [make()]
        return made[0]

    fit = fit_of(make_and_keep)

    def fit_and_model(epochs):
        loss = fit(epochs)
        return loss, made.pop()

    return fit_and_model


def class_scores(model, X):
    """Class scores of a trained torch module or onnxruntime optimizer, in inference mode.

    Examples
    --------
    >>> class_scores(digits_mlp(), np.zeros((3, 64), np.float32)).shape
    (3, 10)
    """
    if isinstance(model, nn.Module):
        model.eval()  # batch normalization with its running statistics, as onnxruntime predicts
        with torch.no_grad():
            return model(torch.from_numpy(X)).numpy()
    return model.predict(X)


def framework_fits(
    module, X, y, learning_rate=LEARNING_RATE, batch_size=BATCH_SIZE, n_threads=2, random_state=0
):
    """``fit(k) -> (last epoch's loss, trained model)``, per framework: fresh fits from ``module``.

    torch eager trains a copy of ``module``, both onnxruntime APIs its
    export (:func:`benchmarks.workloads.frameworks.ort_makers`); their training caches
    are emptied before each fit, which then pays a first fit's set-up.

    Examples
    --------
    >>> X, y = np.random.default_rng(0).standard_normal((20, 64), np.float32), np.arange(20) % 10
    >>> fits = framework_fits(digits_mlp(), X, y, batch_size=10, n_threads=1)
    >>> loss, model = fits["ort whole-training"](1)
    >>> sorted(fits), class_scores(model, X).shape
    (['ort forward-backward', 'ort whole-training', 'torch eager'], (20, 10))
    """
    onx = export_for_training(module, torch.from_numpy(X[:2]), output_names=("scores",))
    common = {
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "random_state": random_state,
    }
    makers = fw.ort_makers(onx, "cross_entropy", n_threads=n_threads, **common)
    fits = {
        name: _returning_model(lambda m: ym.ort_fit(m, X, y, fresh=True), make)
        for name, make in makers.items()
    }
    fits[fw.TORCH] = _returning_model(
        lambda m: ym.torch_fit(m, X, y, "classification", **common), lambda: copy.deepcopy(module)
    )
    return fits


def _accuracy_on(X, y):
    """For :func:`timed_curves`: ``evaluate((loss, model)) -> (loss, accuracy on X, y)``."""

    def evaluate(result):
        loss, model = result
        return loss, float(np.mean(class_scores(model, X).argmax(axis=1) == y))

    return evaluate


def accuracy_curves(
    tasks=TASKS,
    epochs=10,
    n_threads=2,
    repeats=5,
    learning_rate=LEARNING_RATE,
    batch_size=BATCH_SIZE,
    n_train=None,
    random_state=0,
):
    """The :data:`COLUMNS` after each epoch, per task and framework, as a DataFrame.

    ``n_train`` keeps the first rows of the training part only (quick runs).
    """
    torch.set_num_threads(n_threads)
    digits = load_classification_standardized("digits", random_state=random_state)
    rows = []
    for task in tasks:
        X = digits.X_train[:n_train].reshape(-1, *task.sample_shape)
        X_test = digits.X_test.reshape(-1, *task.sample_shape)
        torch.manual_seed(random_state)
        fits = framework_fits(
            task.build(),
            X,
            digits.y_train[:n_train],
            learning_rate,
            batch_size,
            n_threads,
            random_state,
        )
        evaluate = _accuracy_on(X_test, digits.y_test)
        for framework, points in timed_curves(fits, epochs, repeats, evaluate).items():
            rows += [
                (
                    task.name,
                    framework,
                    k,
                    fastest,
                    slowest,
                    "accuracy",
                    accuracy,
                    loss,
                    task.target,
                    n_threads,
                )
                for k, (fastest, slowest, (loss, accuracy)) in enumerate(points, start=1)
            ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def plot(curves, title, value="heldout_value", ylabel=None, logy=False):
    """``value`` against wall-clock seconds, a line per framework, a panel per task; PNG bytes.

    ``ylabel`` defaults to "held-out" and the ``heldout_metric``; a
    ``target`` column draws each task's target as a horizontal line.
    Without a ``task`` column, one panel; ``logy``: a log scale for ``value``.

    Examples
    --------
    >>> curves = pd.DataFrame({"framework": "torch eager", "seconds": [0.1, 0.2],
    ...                        "loss": [2.0, 0.1]})
    >>> plot(curves, "a training loss", value="loss", ylabel="loss", logy=True)[:4]
    b'\\x89PNG'
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    panels = list(curves.groupby("task", sort=False)) if "task" in curves else [("", curves)]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(max(6.5, 4.5 * len(panels)), 4),
        squeeze=False,
        layout="constrained",
    )
    for ax, (task, group) in zip(axes[0], panels):
        for framework, points in group.groupby("framework", sort=False):
            ax.plot(
                points.seconds, points[value], "o-", color=style.color(framework), label=framework
            )
        if "target" in group:
            ax.axhline(
                group.target.iloc[0],
                color="gray",
                linestyle="--",
                linewidth=1,
                label=f"target {group.target.iloc[0]:.0%}",
            )
        if style.spans_decades(group.seconds):  # a set-up of seconds beside fits of milliseconds
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # labels of 2, 3, ... x 10^k overlap
        scale = ", log scale" if ax.get_xscale() == "log" else ""
        ax.set_xlabel(f"wall-clock seconds, set-up included{scale}")
        ax.set_ylabel(ylabel or f"held-out {group.heldout_metric.iloc[0]}")
        ax.set_title(task, fontsize=10)
        ax.set_yscale("log" if logy else "linear")
        ax.grid(True, alpha=0.3)
    fig.legend(
        *axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=8
    )
    fig.suptitle(title, fontsize=10)
    return style.png_bytes(fig)


def main(argv=None):
    """Measure the curves, write the CSV and the figure, print the summary; see ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.time_to_accuracy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="300 training images, 2 epochs, one repeat (tests)"
    )
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    size = {"n_train": 300, "repeats": 1} if args.quick else {}
    epochs = 2 if args.quick else args.epochs
    curves = accuracy_curves(epochs=epochs, n_threads=args.threads, **size)
    title = (
        "Held-out accuracy against time, set-up included: the upper-left line wins\n"
        f"the same weights, batches and plain SGD (at {LEARNING_RATE}, batches of "
        f"{BATCH_SIZE}) in each framework, {args.threads} threads"
    )
    atomic_write_text(os.path.join(args.out, "time_to_accuracy.csv"), curves.to_csv(index=False))
    atomic_write_bytes(os.path.join(args.out, "time_to_accuracy.png"), plot(curves, title))
    print("\n".join(time_to_accuracy_lines(curves)))
    print(f"\nmeasured in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
