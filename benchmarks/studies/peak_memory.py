"""How much memory training takes: peak resident memory of a fresh process per framework.

For each framework a new Python process imports that framework (and only
what it needs) and builds the model, reads its peak resident memory so far
(``VmHWM``: the cost of the imports), trains the same MLP for a few epochs,
then reads its peak resident memory again. The difference is what training
itself needs::

    .venv/bin/python -m benchmarks.studies.peak_memory --out results/

writes ``peak_memory.csv`` and ``peak_memory.png``. The same processes time
what torch and onnxruntime set up before their first step, on a first fit
and on a refit; what one process measures:
:mod:`benchmarks.studies.peak_memory_process`; every model of the zoo, both
measured: :mod:`benchmarks.studies.zoo_costs`.
"""

import argparse
import json
import os
import subprocess
import sys

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.workloads import frameworks as fw

#: The frameworks measured, each in a process of its own.
FRAMEWORKS = (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD, fw.TORCH, fw.SKLEARN)
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
    record_failures=False,
    backend="auto",
):
    """Peak memory and set-up of each framework, each in a fresh process.

    ``model_function`` trains a module of one's own instead of the MLP
    (``n_outputs`` outputs; scikit-learn is then left out). Its samples
    have the shape ``input_shape`` (default ``(n_features,)``) and the dtype
    ``input_dtype``: random floats, or for ``'int64'`` token ids below
    ``vocabulary`` (see :class:`benchmarks.workloads.model_inputs.InputSpec`).
    ``frameworks`` names those to measure (those that can train the model).
    ``repeats``: one-step refits, the fastest of which gives the refit's set-up.
    ``record_failures``: a process that fails (a training that diverges...) is a row whose
    ``error`` says why in one line, and the next frameworks are still measured; without it,
    the first failure raises ``RuntimeError``.
    ``backend``: the onnxruntime optimizers' (:mod:`helpers.core.machine.backends`).

    Returns
    -------
    pandas.DataFrame
        ``framework``, ``import_mb`` (peak after the imports and the model prepared: exported
        for onnxruntime), ``peak_mb``, ``training_mb`` (peak minus imports), and for torch and
        onnxruntime the set-up of their first fit and of a refit and a step's time
        (``first_fit_setup_s``, ``refit_setup_s``, ``step_s``:
        :func:`~benchmarks.studies.peak_memory_process.setup_costs`); for
        onnxruntime what its training caches did (``first_fit_builds``, ``refit_builds``,
        ``refit_cache_hits``); with ``record_failures``, ``error`` (None, or why the process
        failed: its figures are then NaN).

    Examples
    --------
    >>> df = measure(n_features=4, hidden=8, n_samples=32, batch_size=16, epochs=1,
    ...              frameworks=["scikit-learn"], record_failures=True)
    >>> list(df.framework), df.error.tolist(), bool(df.peak_mb[0] >= df.import_mb[0] > 0)
    (['scikit-learn'], [None], True)
    """
    import pandas as pd

    rows = []
    for framework in frameworks:
        if model_function and framework == fw.SKLEARN:
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
            "backend": backend,
        }
        code = (
            "from benchmarks.studies.peak_memory_process import measure_in_this_process; "
            f"measure_in_this_process(**{kwargs!r})"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        if not out.returncode:
            rows.append({**json.loads(out.stdout.strip().splitlines()[-1]), "error": None})
        elif record_failures:
            rows.append({"framework": framework, "error": process_error(out.stderr)})
        else:
            raise RuntimeError(f"The process measuring {framework} failed:\n{out.stderr[-2000:]}")
    df = pd.DataFrame(rows).reindex(columns=_COLUMNS + (["error"] if record_failures else []))
    if record_failures:  # None, not NaN, beside the errors
        df["error"] = df.error.astype(object).where(df.error.notna(), None)
    df["training_mb"] = df.peak_mb - df.import_mb
    return df


def process_error(stderr, limit=300):
    r"""What a failed process raised, in one line: the last line of its traceback.

    Examples
    --------
    >>> process_error("Traceback (most recent call last):\n  ...\nValueError: no\n")
    'ValueError: no'
    >>> process_error("helpers.core.errors.TrainingDivergedError: epoch 2\n")
    'TrainingDivergedError: epoch 2'
    >>> process_error("")
    'the process failed without a message'
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    text = lines[-1] if lines else "the process failed without a message"
    kind, colon, message = text.partition(": ")
    if colon and all(part.isidentifier() for part in kind.split(".")):
        text = f"{kind.rsplit('.', 1)[-1]}: {message}"  # the exception's name, not its module
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plot(df, title):
    """Stacked horizontal bars: memory after the imports, then what training adds; PNG bytes.

    Rows without figures (a process that failed, see :func:`measure`) have no bar.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.report import style

    df = df[df.peak_mb.notna()]
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
