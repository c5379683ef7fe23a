"""How much memory training takes: peak resident memory of a fresh process per framework.

For each framework a new Python process imports that framework (and only
what it needs) and builds the model, reads its peak resident memory so far
(``VmHWM``: the cost of the imports), trains the same MLP for a few epochs,
then reads its peak resident memory again. The difference is what training
itself needs::

    .venv/bin/python -m benchmarks.peak_memory --out results/

writes ``peak_memory.csv`` and ``peak_memory.png``.
"""
import argparse
import json
import os
import subprocess
import sys

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The frameworks measured, each in a process of its own.
FRAMEWORKS = ("ort whole-training", "ort forward-backward", "torch eager", "scikit-learn")


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
    raise RuntimeError("/proc/self/status has no VmHWM line: peak memory is measured on Linux only.")


def _module(model_function, n_features, hidden):
    """The torch module of ``model_function``, or the MLP ``n_features -> hidden -> 1``."""
    import importlib  # noqa: PLC0415

    import torch  # noqa: PLC0415

    if model_function:
        name, function = model_function.split(":")
        return getattr(importlib.import_module(name), function)()
    return torch.nn.Sequential(torch.nn.Linear(n_features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))


def _onnx(model_function, n_features, hidden, example):
    """The ONNX model the onnxruntime APIs train: the module exported (traced on ``example``), or the MLP built directly."""
    import warnings  # noqa: PLC0415

    if not model_function:
        from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

        return mlp_onnx(n_features, hidden=(hidden,))
    import torch  # noqa: PLC0415

    from helpers.core.torch_export import export_for_training  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_for_training(_module(model_function, n_features, hidden), torch.from_numpy(example))


def _child(framework, n_features, hidden, n_samples, batch_size, epochs, model_function=None, n_outputs=1,
           input_shape=None, input_dtype="float32", vocabulary=None):
    """Import, measure, train, measure: what one process prints (JSON).

    With ``model_function`` (``"package.module:function"`` returning a torch
    module whose samples have shape ``input_shape`` and dtype ``input_dtype``,
    token ids below ``vocabulary`` for int64, and ``n_outputs`` outputs) the
    module is trained instead of the MLP ``n_features -> hidden -> 1``, by
    torch and by both onnxruntime APIs (squared error: memory, not accuracy,
    is measured).
    """
    import numpy as np  # noqa: PLC0415

    from benchmarks.model_inputs import InputSpec, random_inputs  # noqa: PLC0415  (numpy only)

    X = random_inputs(n_samples, InputSpec(input_shape or (n_features,), input_dtype, vocabulary))
    y = np.random.default_rng(1).standard_normal((n_samples, n_outputs), dtype=np.float32)
    if framework == "scikit-learn":
        from sklearn.neural_network import MLPRegressor  # noqa: PLC0415

        imported = _peak_mb()
        MLPRegressor(hidden_layer_sizes=(hidden,), solver="sgd", batch_size=batch_size, max_iter=epochs,
                     learning_rate_init=1e-3, momentum=0, tol=0, n_iter_no_change=10**6).fit(X, y.ravel())
    elif framework == "torch eager":
        import torch  # noqa: PLC0415

        model = _module(model_function, n_features, hidden)
        imported = _peak_mb()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(epochs):
            for first in range(0, n_samples, batch_size):
                optimizer.zero_grad()
                ((model(Xt[first:first + batch_size]) - yt[first:first + batch_size]) ** 2).mean().backward()
                optimizer.step()
    else:
        from helpers import (  # noqa: PLC0415
            LearningRateSGD,
            OrtGradientForwardBackwardOptimizer,
            OrtGradientOptimizer,
            add_loss_output,
        )
        onx = _onnx(model_function, n_features, hidden, X[:2])  # preparing the model is not training
        imported = _peak_mb()
        if framework == "ort whole-training":
            optimizer = OrtGradientOptimizer(add_loss_output(onx), learning_rate=1e-3)
        else:
            optimizer = OrtGradientForwardBackwardOptimizer(onx, learning_rate=LearningRateSGD(1e-3, learning_rate="constant"))
        optimizer.set_params(max_iter=epochs, batch_size=batch_size, validation_every=0).fit(X, y)
    peak = _peak_mb()
    print(json.dumps({"framework": framework, "import_mb": imported, "peak_mb": peak}))


def measure(n_features=100, hidden=50, n_samples=8000, batch_size=100, epochs=3, model_function=None,
            n_outputs=1, frameworks=FRAMEWORKS, input_shape=None, input_dtype="float32", vocabulary=None):
    """Peak memory of each framework, each in a fresh process.

    ``model_function`` trains a module of one's own instead of the MLP
    (``n_outputs`` outputs; scikit-learn is then left out). Its samples
    have the shape ``input_shape`` (default ``(n_features,)``) and the dtype
    ``input_dtype``: random floats, or for ``'int64'`` token ids below
    ``vocabulary`` (see :class:`benchmarks.model_inputs.InputSpec`).
    ``frameworks`` names those to measure (those that can train the model).

    Returns
    -------
    pandas.DataFrame
        ``framework``, ``import_mb`` (peak after the imports and the model built), ``peak_mb`` and
        ``training_mb`` (peak minus imports).
    """
    import pandas as pd  # noqa: PLC0415

    rows = []
    for framework in frameworks:
        if model_function and framework == "scikit-learn":
            continue
        kwargs = dict(framework=framework, n_features=n_features, hidden=hidden, n_samples=n_samples,
                      batch_size=batch_size, epochs=epochs, model_function=model_function, n_outputs=n_outputs,
                      input_shape=None if input_shape is None else tuple(input_shape), input_dtype=input_dtype,
                      vocabulary=vocabulary)
        code = f"from benchmarks.peak_memory import _child; _child(**{kwargs!r})"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        if out.returncode:
            raise RuntimeError(f"The process measuring {framework} failed:\n{out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    df = pd.DataFrame(rows, columns=["framework", "import_mb", "peak_mb"])
    df["training_mb"] = df.peak_mb - df.import_mb
    return df


def plot(df, title):
    """Stacked horizontal bars: memory after the imports, then what training adds; PNG bytes."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from benchmarks import style  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 0.6 * len(df) + 1.5))
    colors = [style.color(f) for f in df.framework]
    ax.barh(df.framework, df.import_mb, color=colors, alpha=0.45, label="imports and model")
    ax.barh(df.framework, df.training_mb, left=df.import_mb, color=colors, label="added by training")
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
    from benchmarks.records import atomic_write_bytes, atomic_write_text  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m benchmarks.peak_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny network (tests)")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    size = dict(n_features=8, hidden=16, n_samples=640, batch_size=32, epochs=1) if args.quick else {}
    df = measure(**size)
    params = {"n_features": 100, "hidden": 50, "batch_size": 100, **size}
    title = (f"Peak memory, MLP {params['n_features']}-{params['hidden']}-1, batches of "
             f"{params['batch_size']}: light bars are the imports, dark ones what training adds")
    atomic_write_text(os.path.join(args.out, "peak_memory.csv"), df.to_csv(index=False))
    atomic_write_bytes(os.path.join(args.out, "peak_memory.png"), plot(df, title))
    print(df.round(1).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
