"""Which framework reaches a given loss first: loss against wall-clock time, set-up included.

A faster step is not the whole answer: a fit also pays its set-up (graphs,
sessions, artifacts). Each framework trains the same MLP from the same
initial weights on the same batches (plain SGD, one permutation per epoch
from the same seed). The point after ``k`` epochs is a fit of ``k`` epochs
from scratch, its set-up included (onnxruntime's training caches emptied
first), timed as a whole; what a process pays once (imports, the first
call into a library) is paid by a warm-up fit before::

    .venv/bin/python -m benchmarks.time_to_loss --out results/

writes ``time_to_loss.csv`` and ``time_to_loss.png``.
"""
import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas as pd

from benchmarks import models as bm
from benchmarks import style
from benchmarks.records import atomic_write_bytes, atomic_write_text
from helpers.teaching.datasets import random_regression


def curve(fit, epochs, repeats=3):
    """``(seconds, loss)`` of fresh fits of 1, 2, ... ``epochs`` epochs, the fastest of ``repeats``.

    ``fit(k)`` trains from scratch and returns the last epoch's loss.
    """
    fit(1)  # warm-up: what a process pays once
    points = []
    for k in range(1, epochs + 1):
        times = []
        for _ in range(repeats):
            time.sleep(0.1)  # the thread pools of the previous fit stop spinning
            start = time.perf_counter()
            loss = fit(k)
            times.append(time.perf_counter() - start)
        points.append((min(times), loss))
    return points


def loss_curves(n_features=100, hidden=50, n_samples=8000, batch_size=100, lr=0.01, epochs=10,
                n_threads=2, random_state=0):
    """Loss after each epoch against seconds since the start, for each framework.

    Returns
    -------
    pandas.DataFrame
        Columns ``framework``, ``epoch``, ``seconds``, ``loss``.
    """
    import torch  # noqa: PLC0415

    from helpers import (  # noqa: PLC0415
        LearningRateSGD,
        OrtGradientForwardBackwardOptimizer,
        OrtGradientOptimizer,
        add_loss_output,
    )
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415
    from benchmarks.your_model import ort_fit, torch_fit  # noqa: PLC0415

    X, y = random_regression(n_samples, n_features, random_state=random_state)
    onx = mlp_onnx(n_features, hidden=(hidden,), random_state=random_state)
    common = dict(batch_size=batch_size, n_threads=n_threads, random_state=random_state)
    makers = {
        bm.ORT_WHOLE: lambda: OrtGradientOptimizer(add_loss_output(onx), learning_rate=lr, **common),
        bm.ORT_FORWARD_BACKWARD: lambda: OrtGradientForwardBackwardOptimizer(
            onx, learning_rate=LearningRateSGD(lr, learning_rate="constant"), **common),
    }
    torch.set_num_threads(n_threads)
    fits = {name: ort_fit(make, X, y, fresh=True) for name, make in makers.items()}
    fits[bm.TORCH] = torch_fit(lambda: bm.torch_mlp(onx), X, y.reshape(-1, 1), "regression", learning_rate=lr,
                               batch_size=batch_size, random_state=random_state)
    rows = []
    for framework, fit in fits.items():
        points = curve(fit, epochs)
        rows += [(framework, i + 1, t, loss) for i, (t, loss) in enumerate(points)]
    return pd.DataFrame(rows, columns=["framework", "epoch", "seconds", "loss"])


def plot(curves, title, loss_name="mean squared error"):
    """Loss against wall-clock time, one line per framework; ``loss_name`` labels the y axis; returns PNG bytes."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4))
    for framework, group in curves.groupby("framework", sort=False):
        ax.plot(group.seconds * 1e3, group.loss, "o-", color=style.color(framework), label=framework)
    if style.spans_decades(curves.loss):
        ax.set_yscale("log")
    if style.spans_decades(curves.seconds):  # a compilation of seconds beside fits of milliseconds
        ax.set_xscale("log")
    ax.set_xlabel(f"wall-clock time since the start, set-up included (ms{', log scale' if ax.get_xscale() == 'log' else ''})")
    ax.set_ylabel(f"training loss ({loss_name})")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    style.legend_outside(ax)
    return style.png_bytes(fig)


def main(argv=None):
    """Measure the curves and write them; see ``--help``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.time_to_loss", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a tiny network (tests)")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    size = dict(n_features=8, hidden=16, n_samples=640, batch_size=32) if args.quick else {}
    curves = loss_curves(epochs=args.epochs, n_threads=args.threads, **size)
    params = {"n_features": 100, "hidden": 50, "batch_size": 100, **size}
    title = (f"Loss against time, MLP {params['n_features']}-{params['hidden']}-1, batches of "
             f"{params['batch_size']}, plain SGD, {args.threads} threads: the lower-left line wins")
    atomic_write_text(os.path.join(args.out, "time_to_loss.csv"), curves.to_csv(index=False))
    atomic_write_bytes(os.path.join(args.out, "time_to_loss.png"), plot(curves, title))
    print(curves.groupby("framework", sort=False).last().to_string())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
