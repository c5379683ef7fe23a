"""Which kernels a training step spends its time in, for every model the project trains.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/kernel_survey.py [--threads 2] [--size small large]

For each configuration (model, loss, update rule) and each training API that
offers it, one epoch is fitted ``--repeat`` times with onnxruntime's profiler
on (:func:`helpers.measure.profiling.profile_training`), each kernel keeping its best
time; the script prints the top kernels of the step, then a summary: the top
kernel, the share of the gradient kernels (operator types ending in ``Grad``)
and the *suspects*, kernels other than matrix products that take more than
10% of the step. The summary is written to ``results/kernel_survey.md``.

``small`` uses the sizes of the notebooks (10 features, 32 hidden units,
batches of 20 to 32; 64 features and 10 classes for the classifier, as the
digits); ``large`` a 500-500 network and batches of 1000. A reference row
trains the ReLU network with ``fast_gradients=False``: its ``ReluGrad`` is
the slow kernel the project already rewrites, and shows what a suspect
looks like.
"""
import argparse
import os
import sys
import tempfile
import warnings

import numpy as np
import pandas as pd
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from helpers import (
    LearningRateSGD,
    LearningRateSGDNesterov,
    NegLogLearningLoss,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
)
from helpers.teaching.datasets import one_hot
from helpers.teaching.model_factories import mlp_onnx
from helpers.measure.profiling import profile_training
from helpers.core.runtime import quiet_runtime_logs

#: Model and batch sizes; ``steps`` is the number of profiled training steps.
SIZES = {
    "small": {"n_features": 10, "hidden": 32, "batch": 25, "linear_batch": 20,
              "classifier_features": 64, "classifier_batch": 32, "steps": 200, "lr": 1e-3},
    "large": {"n_features": 500, "hidden": 500, "batch": 1000, "linear_batch": 1000,
              "classifier_features": 500, "classifier_batch": 1000, "steps": 20, "lr": 1e-4},
}
N_CLASSES = 10
#: Operator types that are matrix products: never suspects.
MATRIX_PRODUCTS = {"Gemm", "MatMul", "FusedGemm", "FusedMatMul"}
#: Share of the step (%) above which another kernel is a suspect.
SUSPECT_SHARE = 10.0
#: Rows and columns of the per-configuration tables.
TOP = 8
KERNEL_COLUMNS = ["session", "op_type", "calls per step", "µs per step", "share of step (%)"]
WHOLE, FORWARD_BACKWARD = "whole-training", "forward/backward"

#: label, model ('linear', an activation or 'classifier'), loss, update rule,
#: fast_gradients. The loss is add_loss_output's score name (None: it has none).
CONFIGURATIONS = [
    ("linear, squared error, SGD", "linear", "squared_error", "sgd", True),
    ("linear, absolute error, SGD", "linear", "absolute_error", "sgd", True),
    ("linear, elastic, SGD", "linear", "elastic", "sgd", True),
    ("MLP relu, SGD", "relu", "squared_error", "sgd", True),
    ("MLP tanh, SGD", "tanh", "squared_error", "sgd", True),
    ("MLP logistic, SGD", "logistic", "squared_error", "sgd", True),
    ("MLP identity, SGD", "identity", "squared_error", "sgd", True),
    ("MLP relu, AdamW", "relu", "squared_error", "adamw", True),
    ("MLP relu, Nesterov", "relu", "squared_error", "nesterov", True),
    ("MLP classifier relu, softmax log loss, SGD", "classifier", None, "sgd", True),
    ("reference: MLP relu, SGD, fast_gradients=False", "relu", "squared_error", "sgd", False),
]
#: add_loss_output's score names to the forward/backward API's losses.
FB_LOSSES = {"squared_error": "square_error", "absolute_error": "absolute_error", "elastic": "elastic",
             None: NegLogLearningLoss(probability_function="softmax")}


def make_models(size, random_state=0):
    """Build the ONNX models and their training data for one size.

    Parameters
    ----------
    size : dict
        One value of :data:`SIZES`.
    random_state : int
        Seeds the data and the weights.

    Returns
    -------
    dict
        Model kind to ``(onnx model, X, y, batch size)``.
    """
    rng = np.random.default_rng(random_state)
    d, h, steps = size["n_features"], size["hidden"], size["steps"]
    X = rng.standard_normal((steps * size["batch"], d)).astype(np.float32)
    y = (X @ rng.standard_normal((d, 1)) / np.sqrt(d)).astype(np.float32)
    X_lin = X[: steps * size["linear_batch"]]
    y_lin = y[: len(X_lin)]
    linear = to_onnx(LinearRegression().fit(X_lin, y_lin.ravel()), X_lin[:1], black_op={"LinearRegressor"})
    dc = size["classifier_features"]
    X_clf = rng.standard_normal((steps * size["classifier_batch"], dc)).astype(np.float32)
    Y_clf = one_hot(X_clf[:, :N_CLASSES].argmax(axis=1), N_CLASSES)
    models = {"linear": (linear, X_lin, y_lin, size["linear_batch"]),
              "classifier": (mlp_onnx(dc, h, N_CLASSES, random_state=random_state), X_clf, Y_clf,
                             size["classifier_batch"])}
    for activation in ("relu", "tanh", "logistic", "identity"):
        models[activation] = (mlp_onnx(d, h, 1, activation, random_state), X, y, size["batch"])
    return models


def make_optimizer(api, onx, loss, rule, fast_gradients, batch_size, lr, threads):
    """Return the optimizer of one configuration of :data:`CONFIGURATIONS` for one API.

    Returns
    -------
    helpers.OrtGradientOptimizer, helpers.OrtGradientForwardBackwardOptimizer, str or None
        The optimizer; a string saying why the configuration is skipped; None
        when the API has no such update rule (AdamW in the forward/backward API).
    """
    if api == WHOLE:
        if loss is None:
            return "skipped: add_loss_output has no softmax cross-entropy"
        return OrtGradientOptimizer(
            add_loss_output(onx, score_name=loss), solver=rule, learning_rate=lr, batch_size=batch_size,
            n_threads=threads, fast_gradients=fast_gradients)
    if rule == "adamw":
        return None
    learning_rate = (LearningRateSGDNesterov(eta0=lr, momentum=0.9) if rule == "nesterov"
                     else LearningRateSGD(eta0=lr, learning_rate="constant"))
    return OrtGradientForwardBackwardOptimizer(
        onx, learning_rate=learning_rate, learning_loss=FB_LOSSES[loss], batch_size=batch_size,
        n_threads=threads, fast_gradients=fast_gradients)


def profile_best_of(optimizer, X, y, repeat):
    """Profile one epoch ``repeat`` times; keep each kernel's fastest time per step.

    On a shared machine a kernel preempted once takes milliseconds instead of
    microseconds: the minimum over the runs drops such outliers.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`helpers.measure.profiling.profile_training`'s table,
        sorted by time, with ``attrs['n_steps']``.
    """
    tables = [profile_training(optimizer, X, y) for _ in range(repeat)]
    best = pd.concat(tables).groupby(["session", "op_type"], as_index=False).agg(
        {"calls per step": "max", "µs per step": "min"})
    best["share of step (%)"] = 100 * best["µs per step"] / best["µs per step"].sum()
    best = best.sort_values("µs per step", ascending=False, ignore_index=True)
    best.attrs["n_steps"] = tables[0].attrs["n_steps"]
    return best


def summarize(table):
    """Top kernel, gradient share and suspects of a :func:`profile_training` table.

    Returns
    -------
    dict
        ``profiled µs/step`` (all sessions, their overhead included), ``top
        kernel`` (operator type and session), its ``share (%)``, ``*Grad share
        (%)`` and ``suspect``: each suspect with its share, then calls per
        step × microseconds per call (one to three microseconds a call is
        the fixed cost of calling a kernel, not a slow one).
    """
    kernels = table[table["op_type"] != "(overhead)"]
    top = kernels.iloc[0]
    share = table["share of step (%)"]
    others = kernels[~kernels["op_type"].isin(MATRIX_PRODUCTS)]
    suspects = others[others["share of step (%)"] > SUSPECT_SHARE]
    return {
        "profiled µs/step": f"{table['µs per step'].sum():.0f}",
        "top kernel": f"{top['op_type']} ({top['session'].split(' ')[0]})",
        "share (%)": f"{top['share of step (%)']:.1f}",
        "*Grad share (%)": f"{share[table['op_type'].str.endswith('Grad')].sum():.1f}",
        "suspect": ", ".join(
            f"{r['op_type']} {r['share of step (%)']:.1f}% "
            f"({r['calls per step']:g} × {r['µs per step'] / r['calls per step']:.0f} µs)"
            for _, r in suspects.iterrows()
        ) or "-",
    }


def markdown(rows, columns):
    """A markdown table of ``rows`` (dicts) with the given ``columns``."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def survey(size_name, threads, repeat):
    """Profile every configuration of one size, print its tables, return the summary rows."""
    size = SIZES[size_name]
    models = make_models(size)
    rows = []
    for label, kind, loss, rule, fast in CONFIGURATIONS:
        onx, X, y, batch_size = models[kind]
        for api in (WHOLE, FORWARD_BACKWARD):
            optimizer = make_optimizer(api, onx, loss, rule, fast, batch_size, size["lr"], threads)
            if optimizer is None:
                continue
            row = {"size": size_name, "configuration": label, "API": api}
            if isinstance(optimizer, str):
                print(f"\n### {label}, {api}: {optimizer}")
                rows.append({**row, "top kernel": optimizer})
                continue
            table = profile_best_of(optimizer, X, y, repeat)
            print(f"\n### {label}, {api} ({size_name}, {table.attrs['n_steps']} steps, best of {repeat})")
            print("\n" + markdown(table.head(TOP).round(1).to_dict("records"), KERNEL_COLUMNS))
            rows.append({**row, **summarize(table)})
    return rows


def write_atomically(path, text):
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, suffix=".tmp", delete=False) as out:
        out.write(text)
    os.replace(out.name, path)


def main(argv=None):
    """Run the survey and write ``results/kernel_survey.md``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads of the sessions")
    parser.add_argument("--size", nargs="+", choices=sorted(SIZES), default=["small", "large"],
                        help="small: the notebooks' sizes; large: hidden 500, batch 1000 (default: both)")
    parser.add_argument("--repeat", type=int, default=5, help="profiled epochs; each kernel keeps its best")
    parser.add_argument("--output", default=os.path.join("results", "kernel_survey.md"),
                        help="markdown file of the summary")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    quiet_runtime_logs()
    warnings.simplefilter("ignore")  # one epoch of training: convergence warnings
    rows = [row for size_name in args.size for row in survey(size_name, args.threads, args.repeat)]
    columns = ["size", "configuration", "API", "profiled µs/step", "top kernel", "share (%)",
               "*Grad share (%)", "suspect"]
    summary = markdown(rows, columns)
    print("\n## Summary\n\n" + summary)
    command = " ".join([".venv/bin/python", "benchmarks/profiles/kernel_survey.py", *argv])
    sizes = "; ".join(f"{name}: {SIZES[name]['n_features']}-{SIZES[name]['hidden']}-1, batch "
                      f"{SIZES[name]['batch']}" for name in args.size)
    products = ", ".join(sorted(MATRIX_PRODUCTS))
    intro = (f"Made by `{command}` on a machine with {os.cpu_count()} hardware threads, intra-op threads "
             f"per session: {args.threads} ({sizes}); shares of the profiled step come from onnxruntime's "
             f"profiler (each kernel's best time, profiled epochs: {args.repeat}). A suspect is a kernel "
             f"other than a matrix product ({products}) above {SUSPECT_SHARE:g}% of the step.\n")
    write_atomically(args.output, f"# Kernel survey\n\n{intro}\n{summary}\n")


if __name__ == "__main__":
    main()
