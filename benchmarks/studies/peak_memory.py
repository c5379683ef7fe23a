"""How much memory training takes: peak resident memory of a fresh process per framework.

For each framework a new Python process imports that framework (and only
what it needs) and builds the model, reads its peak resident memory so far
(``VmHWM``: the cost of the imports), trains the same MLP for a few epochs,
then reads its peak resident memory again. The difference is what training
itself needs::

    .venv/bin/python -m benchmarks.studies.peak_memory --out results/

writes ``peak_memory.csv`` and ``peak_memory.png``. The same processes time
what torch and onnxruntime set up before their first step, on a first fit
and on a refit (:func:`setup_costs`); every model of the zoo, both
measured: :mod:`benchmarks.studies.zoo_costs`.
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import time

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: The frameworks measured, each in a process of its own.
FRAMEWORKS = ("ort whole-training", "ort forward-backward", "torch eager", "scikit-learn")
#: Learning rate of every framework's plain SGD (memory and set-up are measured, not accuracy).
LEARNING_RATE = 1e-3
#: What :func:`measure` reports of each framework: memory, set-ups and a step.
MEASURES = [
    "framework",
    "import_mb",
    "peak_mb",
    "training_mb",
    "first_fit_setup_s",
    "refit_setup_s",
    "step_s",
]
#: The columns of :func:`measure`: the measures, then the cache's counts; ``peak_memory.csv``
#: keeps the memory ones.
_COLUMNS = [*MEASURES, "first_fit_builds", "refit_builds", "refit_cache_hits"]
MEMORY_COLUMNS = MEASURES[:4]


def _peak_mb():
    """Peak resident memory of this process, in MB (Linux ``VmHWM``).

    Not ``resource.getrusage(...).ru_maxrss``: Linux keeps it across ``exec``,
    so a child started from a large process (a Jupyter kernel) would report
    its parent's peak.
    """
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(
        "/proc/self/status has no VmHWM line: peak memory is measured on Linux only."
    )


def _module(model_function, n_features, hidden):
    """The torch module of ``model_function``, or the MLP ``n_features -> hidden -> 1``."""
    import importlib

    import torch

    if model_function:
        name, function = model_function.split(":")
        return getattr(importlib.import_module(name), function)()
    return torch.nn.Sequential(
        torch.nn.Linear(n_features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )


def _onnx(model_function, n_features, hidden, example):
    """The ONNX model the onnxruntime APIs train: the module exported (traced on ``example``), or
    the MLP built directly."""
    import warnings

    if not model_function:
        from helpers.teaching.model_factories import mlp_onnx

        return mlp_onnx(n_features, hidden=(hidden,))
    import torch

    from helpers.core.model_graphs.torch_export import export_for_training

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_for_training(
            _module(model_function, n_features, hidden), torch.from_numpy(example)
        )


def _torch_fit(model_function, n_features, hidden, batch_size):
    """``fit(X, y, epochs)``: a new module and SGD optimizer trained in torch; returns ``more``.

    ``more(X, y, epochs)`` trains the same module and optimizer further.
    """
    import torch

    # its first optimizer imports torch._dynamo (about 1 s): an import, not the set-up of a fit
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LEARNING_RATE)

    def train(model, optimizer, X, y, epochs):
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(epochs):
            for first in range(0, len(X), batch_size):
                rows = slice(first, first + batch_size)
                optimizer.zero_grad()
                ((model(Xt[rows]) - yt[rows]) ** 2).mean().backward()
                optimizer.step()

    def fit(X, y, epochs):
        model = _module(model_function, n_features, hidden)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
        train(model, optimizer, X, y, epochs)
        return lambda X, y, epochs: train(model, optimizer, X, y, epochs)

    return fit


def _cache_counts():
    """Hits and builds (misses) of both training caches so far."""
    from helpers.core.machine.training_cache import ARTIFACTS, GRADIENT_GRAPHS

    caches = (ARTIFACTS, GRADIENT_GRAPHS)
    return {"hits": sum(c.hits for c in caches), "builds": sum(c.misses for c in caches)}


def _ort_fits(framework, onx, batch_size, counts):
    """``first_fit`` and ``refit``, ``(X, y, epochs)``, of an onnxruntime optimizer of ``onx``.

    A first fit empties the training caches (:mod:`helpers.core.machine.training_cache`)
    and builds what it trains with; a refit fits a clone of the same
    optimizer, which finds them there. Both return ``more(X, y, epochs)``,
    which trains their estimator further (``warm_start``: no set-up).
    ``counts`` adds up the caches' builds of the first fits
    (``first_fit_builds``), the builds and hits of the refits
    (``refit_builds``, ``refit_cache_hits``).
    """
    from sklearn.base import clone

    from helpers import (
        LearningRateSGD,
        OrtGradientForwardBackwardOptimizer,
        OrtGradientOptimizer,
        add_loss_output,
    )
    from helpers.core.machine.training_cache import clear_training_caches

    common = {"batch_size": batch_size, "validation_every": 0}
    if framework == "ort whole-training":
        optimizer = OrtGradientOptimizer(
            add_loss_output(onx), learning_rate=LEARNING_RATE, **common
        )
    else:
        rate = LearningRateSGD(LEARNING_RATE, learning_rate="constant")
        optimizer = OrtGradientForwardBackwardOptimizer(onx, learning_rate=rate, **common)

    def fit(X, y, epochs, first):
        if first:
            clear_training_caches()
        before = _cache_counts()
        fitted = clone(optimizer).set_params(max_iter=epochs).fit(X, y)
        after = _cache_counts()
        added = {k: after[k] - before[k] for k in after}
        if first:
            counts["first_fit_builds"] += added["builds"]
        else:
            counts["refit_builds"] += added["builds"]
            counts["refit_cache_hits"] += added["hits"]
        return lambda X, y, epochs: fitted.set_params(warm_start=True, max_iter=epochs).fit(X, y)

    return functools.partial(fit, first=True), functools.partial(fit, first=False)


def setup_costs(
    first_fit, refit, X, y, batch_size, epochs, repeats=3, rows=2, clock=time.perf_counter
):
    """Set-up of a first fit and of a refit: what each spends beside its steps, in seconds.

    ``first_fit`` and ``refit`` are ``fit(X, y, epochs)`` returning
    ``more(X, y, epochs)``, which trains the fitted model further without
    any set-up. On the first ``rows`` samples of ``X`` (one small step, so
    that the step subtracted stays small beside the set-up): a first fit,
    ``repeats`` refits, ``repeats`` more steps of the last refit's model; a
    set-up is such a fit minus the fastest such step (refits: the fastest
    one; 0 when it is lost in the noise of a step). Then a refit trains
    ``epochs`` epochs of ``X`` in batches of ``batch_size`` (what the peak
    memory measures), which gives a step's time: that fit's time less the
    refit's set-up, over its steps.

    Returns
    -------
    dict
        ``first_fit_setup_s``, ``refit_setup_s``, ``step_s``.

    Examples
    --------
    >>> import numpy as np
    >>> def fit(X, y, epochs):
    ...     return lambda X, y, epochs: None
    >>> # first fit, 2 refits, 2 small steps, then 15 steps of 8 rows
    >>> ticks = iter([0, 0.5, 1, 1.04, 2, 2.03, 3, 3.01, 4, 4.02, 5, 5.17])
    >>> costs = setup_costs(fit, fit, np.zeros(40), np.zeros(40), 8, 3, repeats=2,
    ...                     clock=lambda: next(ticks))
    >>> {k: round(v, 2) for k, v in costs.items()}
    {'first_fit_setup_s': 0.49, 'refit_setup_s': 0.02, 'step_s': 0.01}
    """

    def timed(call, *args):
        start = clock()
        more = call(*args)
        return clock() - start, more

    small = (X[:rows], y[:rows], 1)
    first_s, _ = timed(first_fit, *small)
    refits = [timed(refit, *small) for _ in range(repeats)]
    step = min(timed(refits[-1][1], *small)[0] for _ in range(repeats))
    refit_setup = max(min(seconds for seconds, _ in refits) - step, 0.0)
    trained, _ = timed(refit, X, y, epochs)
    steps = epochs * -(-len(X) // batch_size)
    return {
        "first_fit_setup_s": max(first_s - step, 0.0),
        "refit_setup_s": refit_setup,
        "step_s": (trained - refit_setup) / steps,
    }


def _child(
    framework,
    n_features,
    hidden,
    n_samples,
    batch_size,
    epochs,
    model_function=None,
    n_outputs=1,
    input_shape=None,
    input_dtype="float32",
    vocabulary=None,
    repeats=3,
):
    """Import, measure, fit, measure: what one process prints (JSON).

    With ``model_function`` (``"package.module:function"`` returning a torch
    module whose samples have shape ``input_shape`` and dtype ``input_dtype``,
    token ids below ``vocabulary`` for int64, and ``n_outputs`` outputs) the
    module is trained instead of the MLP ``n_features -> hidden -> 1``, by
    torch and by both onnxruntime APIs (squared error: memory, not accuracy,
    is measured). Torch and onnxruntime also time their set-up
    (:func:`setup_costs`): torch builds a module and its optimizer at each
    fit; onnxruntime's first fit adds the export of the module (done before
    the imports' peak is read, as preparing the model is not training).
    """
    import numpy as np

    from benchmarks.workloads.model_inputs import InputSpec, random_inputs  # numpy only

    X = random_inputs(n_samples, InputSpec(input_shape or (n_features,), input_dtype, vocabulary))
    y = np.random.default_rng(1).standard_normal((n_samples, n_outputs), dtype=np.float32)
    result = {"framework": framework}
    if framework == "scikit-learn":
        from sklearn.neural_network import MLPRegressor

        imported = _peak_mb()
        MLPRegressor(
            hidden_layer_sizes=(hidden,),
            solver="sgd",
            batch_size=batch_size,
            max_iter=epochs,
            learning_rate_init=LEARNING_RATE,
            momentum=0,
            tol=0,
            n_iter_no_change=10**6,
        ).fit(X, y.ravel())
    else:
        if framework == "torch eager":
            first_fit = refit = _torch_fit(model_function, n_features, hidden, batch_size)
            prepared_s, counts = 0.0, {}
        else:
            import helpers  # noqa: F401  (imported before the clock starts: imports are no set-up)

            counts = dict.fromkeys(("first_fit_builds", "refit_builds", "refit_cache_hits"), 0)
            start = time.perf_counter()
            onx = _onnx(model_function, n_features, hidden, X[:2])
            first_fit, refit = _ort_fits(framework, onx, batch_size, counts)
            prepared_s = time.perf_counter() - start
        imported = _peak_mb()
        result.update(setup_costs(first_fit, refit, X, y, batch_size, epochs, repeats), **counts)
        result["first_fit_setup_s"] += prepared_s
    print(json.dumps({**result, "import_mb": imported, "peak_mb": _peak_mb()}))


def measure(
    n_features=100,
    hidden=50,
    n_samples=8000,
    batch_size=100,
    epochs=3,
    model_function=None,
    n_outputs=1,
    frameworks=FRAMEWORKS,
    input_shape=None,
    input_dtype="float32",
    vocabulary=None,
    repeats=3,
):
    """Peak memory and set-up of each framework, each in a fresh process.

    ``model_function`` trains a module of one's own instead of the MLP
    (``n_outputs`` outputs; scikit-learn is then left out). Its samples
    have the shape ``input_shape`` (default ``(n_features,)``) and the dtype
    ``input_dtype``: random floats, or for ``'int64'`` token ids below
    ``vocabulary`` (see :class:`benchmarks.workloads.model_inputs.InputSpec`).
    ``frameworks`` names those to measure (those that can train the model).
    ``repeats``: one-step refits, the fastest of which gives the refit's set-up.

    Returns
    -------
    pandas.DataFrame
        ``framework``, ``import_mb`` (peak after the imports and the model prepared: exported
        for onnxruntime), ``peak_mb``, ``training_mb`` (peak minus imports), and for torch and
        onnxruntime the set-up of their first fit and of a refit and a step's time
        (``first_fit_setup_s``, ``refit_setup_s``, ``step_s``: :func:`setup_costs`); for
        onnxruntime what its training caches did (``first_fit_builds``, ``refit_builds``,
        ``refit_cache_hits``).
    """
    import pandas as pd

    rows = []
    for framework in frameworks:
        if model_function and framework == "scikit-learn":
            continue
        kwargs = {
            "framework": framework,
            "n_features": n_features,
            "hidden": hidden,
            "n_samples": n_samples,
            "batch_size": batch_size,
            "epochs": epochs,
            "model_function": model_function,
            "n_outputs": n_outputs,
            "input_shape": None if input_shape is None else tuple(input_shape),
            "input_dtype": input_dtype,
            "vocabulary": vocabulary,
            "repeats": repeats,
        }
        code = f"from benchmarks.studies.peak_memory import _child; _child(**{kwargs!r})"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        if out.returncode:
            raise RuntimeError(f"The process measuring {framework} failed:\n{out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    df = pd.DataFrame(rows).reindex(columns=_COLUMNS)
    df["training_mb"] = df.peak_mb - df.import_mb
    return df


def plot(df, title):
    """Stacked horizontal bars: memory after the imports, then what training adds; PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.report import style

    fig, ax = plt.subplots(figsize=(7, 0.6 * len(df) + 1.5))
    colors = [style.color(f) for f in df.framework]
    ax.barh(df.framework, df.import_mb, color=colors, alpha=0.45, label="imports and model")
    ax.barh(
        df.framework, df.training_mb, left=df.import_mb, color=colors, label="added by training"
    )
    for y, (_, row) in enumerate(df.iterrows()):
        ax.text(row.peak_mb, y, f" {row.peak_mb:.0f} MB", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("peak resident memory of a fresh process (MB)")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(0, df.peak_mb.max() * 1.2)
    ax.grid(True, axis="x", alpha=0.3)
    style.legend_outside(ax)
    return style.png_bytes(fig)


def main(argv=None):
    """Measure and write; see ``--help``."""
    from benchmarks.sweep.records import atomic_write_bytes, atomic_write_text

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.peak_memory", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a tiny network (tests)")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    quick = {"n_features": 8, "hidden": 16, "n_samples": 640, "batch_size": 32, "epochs": 1}
    size = quick if args.quick else {}
    df = measure(**size)
    params = {"n_features": 100, "hidden": 50, "batch_size": 100, **size}
    title = (
        f"Peak memory, MLP {params['n_features']}-{params['hidden']}-1, batches of "
        f"{params['batch_size']}: light bars are the imports, dark ones what training adds"
    )
    atomic_write_text(
        os.path.join(args.out, "peak_memory.csv"), df[MEMORY_COLUMNS].to_csv(index=False)
    )
    atomic_write_bytes(os.path.join(args.out, "peak_memory.png"), plot(df, title))
    print(df[MEMORY_COLUMNS].round(1).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
