"""Which kernels a training step spends its time in, for every model the project trains.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/kernel_survey.py \\
        [--threads 2] [--size small large] [--only zoo]

For each configuration (model, loss, update rule) and each training API that
offers it, one epoch is fitted ``--repeat`` times with onnxruntime's profiler
on (:func:`helpers.measure.profiling.profile_training`), each kernel keeping its best
time; the script prints the top kernels of the step, then a summary: the top
kernel, the gradient kernels (operator types ending in ``Grad``) with their
shares, the session overhead and the *suspects*, kernels other than matrix
products and convolutions that take more than 10% of the step, with what
is known of their cause. The summary is written to its section of
``results/kernel_survey.md`` (:func:`write_section`).

``small`` uses the sizes of the notebooks (10 features, 32 hidden units,
batches of 20 to 32; 64 features and 10 classes for the classifier, as the
digits) and the small models of the zoo (``benchmarks/example_models.py``);
``large`` a 500-500 network, batches of 1000 and the zoo's large models.
The zoo's models train on batches of 64 with random data of their input
(:mod:`benchmarks.workloads.model_inputs`). Reference rows train with
``fast_gradients=False``: the ReLU network (its ``ReluGrad`` is the slow
kernel the project rewrites) and the token classifier (its ``GatherGrad``).
``--only`` keeps the configurations whose label contains one of its words.
The same steps profiled in torch, family by family beside onnxruntime's:
``benchmarks/profiles/kernels_side_by_side.py``.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
import torch
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from benchmarks import example_models
from benchmarks.profiles.ab_timing import FORWARD_BACKWARD, WHOLE, busy_note, wait_until_quiet
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.suspects import known_causes
from benchmarks.workloads.model_inputs import (
    input_spec,
    output_width,
    random_inputs,
    random_targets,
)
from benchmarks.workloads.your_model import LOSSES
from helpers import (
    LearningRateSGD,
    LearningRateSGDNesterov,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
)
from helpers.core.machine.runtime_output import quiet_runtime_logs
from helpers.core.model_graphs.torch_export import export_for_training
from helpers.measure.profiling import profile_training
from helpers.teaching.datasets import one_hot
from helpers.teaching.model_factories import mlp_onnx

#: Model and batch sizes; ``steps`` is the number of profiled training steps.
SIZES = {
    "small": {
        "n_features": 10,
        "hidden": 32,
        "batch": 25,
        "linear_batch": 20,
        "classifier_features": 64,
        "classifier_batch": 32,
        "steps": 200,
        "lr": 1e-3,
        "zoo_steps": 40,
    },
    "large": {
        "n_features": 500,
        "hidden": 500,
        "batch": 1000,
        "linear_batch": 1000,
        "classifier_features": 500,
        "classifier_batch": 1000,
        "steps": 20,
        "lr": 1e-4,
        "zoo_steps": 10,
    },
}
N_CLASSES = 10
#: Batch size of the zoo's models (``bench_your_model``'s default).
ZOO_BATCH = 64
#: Zoo families also surveyed with ``fast_gradients=False``: the gradient kernel a rewrite replaces.
ZOO_REFERENCES = ("token_classifier",)
#: Operator types that are matrix products or convolutions: never suspects.
MATRIX_PRODUCTS = {"Gemm", "MatMul", "FusedGemm", "FusedMatMul", "Conv", "FusedConv", "ConvGrad"}
#: Share of the step (%) above which another kernel is a suspect.
SUSPECT_SHARE = 10.0
#: Rows and columns of the per-configuration tables.
TOP = 8
KERNEL_COLUMNS = ["session", "op_type", "calls per step", "µs per step", "share of step (%)"]

#: label, model ('linear', an activation or 'classifier'), loss, update rule,
#: fast_gradients. The loss is add_loss_output's score name.
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
    ("MLP classifier relu, softmax log loss, SGD", "classifier", "cross_entropy", "sgd", True),
    ("reference: MLP relu, SGD, fast_gradients=False", "relu", "squared_error", "sgd", False),
]


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
    linear = to_onnx(
        LinearRegression().fit(X_lin, y_lin.ravel()), X_lin[:1], black_op={"LinearRegressor"}
    )
    dc = size["classifier_features"]
    X_clf = rng.standard_normal((steps * size["classifier_batch"], dc)).astype(np.float32)
    Y_clf = one_hot(X_clf[:, :N_CLASSES].argmax(axis=1), N_CLASSES)
    models = {
        "linear": (linear, X_lin, y_lin, size["linear_batch"]),
        "classifier": (
            mlp_onnx(dc, h, N_CLASSES, random_state=random_state),
            X_clf,
            Y_clf,
            size["classifier_batch"],
        ),
    }
    for activation in ("relu", "tanh", "logistic", "identity"):
        models[activation] = (mlp_onnx(d, h, 1, activation, random_state), X, y, size["batch"])
    return models


def zoo_model(name, n_samples, random_state=0):
    """Export one model of the zoo and draw random data of its input.

    Parameters
    ----------
    name : str
        A builder of :data:`benchmarks.example_models.ZOO`.
    n_samples : int
    random_state : int
        Seeds the weights and the data.

    Returns
    -------
    tuple
        ``(onnx model, X, y, loss)``: class indices and ``'cross_entropy'``
        for a classifier, float targets and ``'squared_error'`` otherwise.

    Examples
    --------
    >>> onx, X, y, loss = zoo_model("token_classifier_small", 8)
    >>> X.shape, X.dtype, y.shape, loss
    ((8, 32), dtype('int64'), (8,), 'cross_entropy')
    """
    _, shape, task = example_models.ZOO[name]
    torch.manual_seed(random_state)
    module = getattr(example_models, name)()
    spec = input_spec(module, shape)
    X = random_inputs(n_samples, spec, random_state)
    y = random_targets(X, task, output_width(module, spec), random_state)
    loss = LOSSES[task][0]
    return export_for_training(module, torch.from_numpy(X[:2])), X, y, loss


def make_optimizer(api, onx, loss, rule, fast_gradients, batch_size, lr, threads):
    """Return the optimizer of one configuration of :data:`CONFIGURATIONS` for one API.

    Returns
    -------
    helpers.OrtGradientOptimizer, helpers.OrtGradientForwardBackwardOptimizer or None
        The optimizer; None when the API has no such update rule (AdamW in
        the forward/backward API).
    """
    if api == WHOLE:
        return OrtGradientOptimizer(
            add_loss_output(onx, score_name=loss),
            solver=rule,
            learning_rate=lr,
            batch_size=batch_size,
            n_threads=threads,
            fast_gradients=fast_gradients,
        )
    if rule == "adamw":
        return None
    learning_rate = (
        LearningRateSGDNesterov(eta0=lr, momentum=0.9)
        if rule == "nesterov"
        else LearningRateSGD(eta0=lr, learning_rate="constant")
    )
    return OrtGradientForwardBackwardOptimizer(
        onx,
        learning_rate=learning_rate,
        learning_loss=loss,
        batch_size=batch_size,
        n_threads=threads,
        fast_gradients=fast_gradients,
    )


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
    best = (
        pd.concat(tables)
        .groupby(["session", "op_type"], as_index=False)
        .agg({"calls per step": "max", "µs per step": "min"})
    )
    best["share of step (%)"] = 100 * best["µs per step"] / best["µs per step"].sum()
    best = best.sort_values("µs per step", ascending=False, ignore_index=True)
    best.attrs["n_steps"] = tables[0].attrs["n_steps"]
    return best


def _gradient_kernels(table, top=3):
    """The ``top`` gradient kernels (operator types ending in ``Grad``) of ``table`` with their
    shares."""
    grads = (
        table[table["op_type"].str.endswith("Grad")].groupby("op_type")["share of step (%)"].sum()
    )
    return (
        ", ".join(
            f"{op} {share:.1f}"
            for op, share in grads.sort_values(ascending=False).head(top).items()
        )
        or "-"
    )


def summarize(table):
    """Top kernel, gradient kernels, overhead and suspects of a :func:`profile_training` table.

    Returns
    -------
    dict
        ``profiled µs/step`` (all sessions, their overhead included), ``top
        kernel`` (operator type and session), its ``share (%)``, ``gradient
        kernels (%)`` (the three largest), ``*Grad share (%)`` (all of them),
        ``overhead (%)`` (the run time of the sessions that no kernel
        accounts for) and ``suspect``: each suspect with its share, then
        calls per step × microseconds per call (one to three microseconds a
        call is the fixed cost of calling a kernel, not a slow one).
        ``suspects`` lists them as ``(session, op_type)``.

    Examples
    --------
    >>> table = pd.DataFrame(
    ...     {
    ...         "session": ["model (forward + backward)"] * 3 + ["weight update"],
    ...         "op_type": ["Gemm", "GatherGrad", "(overhead)", "Sub"],
    ...         "calls per step": [2.0, 1.0, 1.0, 2.0],
    ...         "µs per step": [50.0, 30.0, 15.0, 5.0],
    ...         "share of step (%)": [50.0, 30.0, 15.0, 5.0],
    ...     }
    ... )
    >>> row = summarize(table)
    >>> row["top kernel"], row["gradient kernels (%)"], row["overhead (%)"], row["suspect"]
    ('Gemm (model)', 'GatherGrad 30.0', '15.0', 'GatherGrad 30.0% (1 × 30 µs)')
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
        "gradient kernels (%)": _gradient_kernels(table),
        "*Grad share (%)": f"{share[table['op_type'].str.endswith('Grad')].sum():.1f}",
        "overhead (%)": f"{share[table['op_type'] == '(overhead)'].sum():.1f}",
        "suspect": ", ".join(
            f"{r['op_type']} {r['share of step (%)']:.1f}% "
            f"({r['calls per step']:g} × {r['µs per step'] / r['calls per step']:.0f} µs)"
            for _, r in suspects.iterrows()
        )
        or "-",
        "suspects": [(r["session"], r["op_type"]) for _, r in suspects.iterrows()],
    }


def configurations(size_name, threads, only=()):
    """The configurations of one size: ``(label, API, optimizer, X, y)`` for each API that offers
    it.

    Parameters
    ----------
    size_name : str
        A key of :data:`SIZES`.
    threads : int
    only : sequence of str
        Keep the labels containing one of these words (case ignored); all when empty.

    Examples
    --------
    >>> [(label, api) for label, api, *_ in configurations("small", 1, only=["AdamW"])]
    [('MLP relu, AdamW', 'whole-training')]
    """
    size = SIZES[size_name]
    zoo = [
        (f"zoo, {family}: {name}", name, True)
        for name, (family, *_) in example_models.ZOO.items()
        if name.endswith(f"_{size_name}")
    ]
    zoo += [
        (f"reference: {label}, fast_gradients=False", name, False)
        for label, name, _ in list(zoo)
        if name.startswith(ZOO_REFERENCES)
    ]
    wanted = [word.lower() for word in only]

    def kept(label):
        return not wanted or any(word in label.lower() for word in wanted)

    models = make_models(size)
    for label, kind, loss, rule, fast in CONFIGURATIONS:
        onx, X, y, batch_size = models[kind]
        for api in (WHOLE, FORWARD_BACKWARD):
            optimizer = make_optimizer(api, onx, loss, rule, fast, batch_size, size["lr"], threads)
            if optimizer is not None and kept(label):
                yield label, api, optimizer, X, y
    for label, name, fast in zoo:
        if not kept(label):
            continue
        onx, X, y, loss = zoo_model(name, ZOO_BATCH * size["zoo_steps"])
        for api in (WHOLE, FORWARD_BACKWARD):
            yield (
                label,
                api,
                make_optimizer(api, onx, loss, "sgd", fast, ZOO_BATCH, size["lr"], threads),
                X,
                y,
            )


def survey(size_name, threads, repeat, only=()):
    """Profile the configurations of one size, print their tables, return the summary rows.

    Each configuration first waits (30 s at most) for the other jobs to
    leave the processors idle; the rows keep how busy they were (``busy``).
    """
    rows = []
    for label, api, optimizer, X, y in configurations(size_name, threads, only):
        busy = wait_until_quiet(timeout_s=30)
        table = profile_best_of(optimizer, X, y, repeat)
        print(
            f"\n### {label}, {api} ({size_name}, {table.attrs['n_steps']} steps, best of {repeat})"
        )
        print("\n" + markdown(table.head(TOP).round(1).to_dict("records"), KERNEL_COLUMNS))
        rows.append(
            {
                "size": size_name,
                "configuration": label,
                "API": api,
                **summarize(table),
                "busy": busy,
            }
        )
    return rows


def main(argv=None):
    """Run the survey and write its section of ``results/kernel_survey.md``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads of the sessions")
    parser.add_argument(
        "--size",
        nargs="+",
        choices=sorted(SIZES),
        default=["small", "large"],
        help="small: the notebooks' sizes; large: hidden 500, batch 1000 (default: both)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="keep the configurations whose label contains one of these words (e.g. zoo, MLP)",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="profiled epochs; each kernel keeps its best"
    )
    parser.add_argument(
        "--output",
        default=os.path.join("results", "kernel_survey.md"),
        help="markdown file of the summary",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    quiet_runtime_logs()
    warnings.simplefilter("ignore")  # one epoch of training: convergence warnings
    started = time.perf_counter()
    load = os.getloadavg()[0]
    rows = [
        row
        for size_name in args.size
        for row in survey(size_name, args.threads, args.repeat, args.only)
    ]
    columns = [
        "size",
        "configuration",
        "API",
        "profiled µs/step",
        "top kernel",
        "share (%)",
        "gradient kernels (%)",
        "*Grad share (%)",
        "overhead (%)",
        "suspect",
    ]
    summary = markdown(rows, columns)
    causes = known_causes(rows)
    busy = [row["busy"] for row in rows if row["busy"] is not None] or [None]
    print("\n## Summary\n\n" + summary + "\n\n" + causes)
    command = " ".join([".venv/bin/python", "benchmarks/profiles/kernel_survey.py", *argv])
    sizes = "; ".join(
        f"{name}: {SIZES[name]['n_features']}-{SIZES[name]['hidden']}-1, batch "
        f"{SIZES[name]['batch']}, zoo batch {ZOO_BATCH}"
        for name in args.size
    )
    products = ", ".join(sorted(MATRIX_PRODUCTS))
    intro = (
        f"Made by `{command}` ({time.perf_counter() - started:.0f} s) on a machine with "
        f"{os.cpu_count()} hardware threads, load average {load:.1f} -> {os.getloadavg()[0]:.1f} "
        "during the run (other jobs kept the processors "
        f"{busy_note([min(busy), max(busy)]).replace(', ', ' to ')} busy before the "
        "configurations, each waiting up to 30 s for under 10%), intra-op threads per session: "
        f"{args.threads} ({sizes}); shares of the profiled step come from onnxruntime's profiler "
        f"(each kernel's best time, profiled epochs: {args.repeat}). A suspect is a kernel other "
        f"than a matrix product or a convolution ({products}) above {SUSPECT_SHARE:g}% of the "
        "step. The profiler adds about a microsecond to each kernel call: shares of small "
        "networks overstate their many tiny kernels."
    )
    write_section(
        args.output,
        "survey",
        f"## Where the steps spend their time\n\n{intro}\n\n{summary}\n\n"
        f"### The suspects\n\n{causes or 'None.'}",
    )


if __name__ == "__main__":
    main()
