"""Masks for Relu's gradient: which are exact, which kernels they run on one thread, what a step
costs with each.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/relu_masks.py [--threads 1 2] [--rounds 3]

``fast_gradients`` trains ``Relu(x)`` as ``x * mask(x)``, the mask made
through a bool or an integer so that the gradient builder does not
differentiate it: the gradient is then one product by the mask, where
onnxruntime 1.19.2's ``ReluGrad`` is slow and single-threaded. Its mask,
``Where(x > 0, 1, 0)``, runs ``Where`` on one thread. The candidates (their nodes:
:mod:`benchmarks.profiles.studies.relu_mask_graphs`):

* ``where``: the library's rewrite, ``Where(Greater(x, 0), 1, 0)``.
* ``cast``: ``Cast(Greater(x, 0), float)``.
* ``quantize``: ``DequantizeLinear(Clip(QuantizeLinear(x * 2**100, 2**-49), 0, 1))``:
  uint8 instead of bool. The factor sends the smallest denormal to
  ``2**-49``, one step of the quantization, so that every positive float
  gives at least 1; the clip makes it exactly 1. The gradient builder
  refuses it: its ``QDQFusion`` wants each ``QuantizeLinear`` followed by
  a ``DequantizeLinear``, and fuses such a pair into ``FakeQuant``, which
  has a gradient (the mask would be differentiated).
* ``pow``: ``0 ** (0 ** x)``, float all along: the exponent of ``Pow`` is
  the one float input the gradient builder never follows.
* ``relugrad``: ``fast_gradients=False``, the reference.

The script checks each mask against ``Relu`` and ``ReluGrad`` on edge
values (zeros of both signs, denormals, infinities, NaN), times its
kernels alone at 1 and 2 threads (onnxruntime's profiler, 1000 x 500
floats: a kernel on the thread pool gets faster with 2 threads, on a quiet
machine), then times training steps of 500-500-1 (batch 1000) and
100-50-1 (batch 100) MLPs and of the zoo's CNNs (``image_cnn_*``, whose
activations are large) with every mask, interleaved
(:mod:`benchmarks.profiles.ab_timing`). It writes its section of
``results/kernel_survey.md``.
"""

import os
import sys
import tempfile

import numpy as np
import onnxruntime
from onnx import helper, numpy_helper

from benchmarks.profiles.ab_timing import (
    BUSY_NOTE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
    wait_until_quiet,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.studies.relu_mask_graphs import MASKS, relu_layer, with_mask
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, zoo_model
from helpers import OrtGradientForwardBackward
from helpers.core.rewrites.gradient_rewrites import rewrite_for_training
from helpers.measure.profiling import read_profile
from helpers.teaching.model_factories import mlp_onnx

#: Edge values of the exactness check.
EDGES = np.array(
    [
        0.0,
        -0.0,
        2.0**-149,
        -(2.0**-149),
        1e-40,
        -1e-40,
        2.0**-126,
        1.0,
        -1.0,
        3e38,
        -3e38,
        np.inf,
        -np.inf,
        np.nan,
    ],
    dtype=np.float32,
)
#: The timed models: name to (MLP ``(features, hidden, batch, samples)`` or zoo ``(builder, steps
#: per epoch)``, epochs of the long fit). ``pow`` is not timed on the CNNs: it doubles the steps of
#: the MLPs already.
PROBLEMS = {
    "MLP 500-500-1, batch 1000": ((500, 500, 1000, 8000), 6),
    "MLP 100-50-1, batch 100": ((100, 50, 100, 10000), 11),
    "zoo image_cnn_small, batch 64": (("image_cnn_small", 20), 4),
    "zoo image_cnn_large, batch 64": (("image_cnn_large", 10), 3),
}


def _describe(values, reference, x):
    differ = [
        f"{a:g}: {b:g} vs {c:g}"
        for a, b, c in zip(x, reference, values)
        if not (b == c or (np.isnan(b) and np.isnan(c)))
    ]
    return "; ".join(differ) or "none"


def exactness(name):
    """Where the candidate's values and gradients differ from ``Relu`` and ``ReluGrad`` on
    :data:`EDGES`.

    The layer is ``Relu(X * w)`` with ``w = 1``; the gradients are those of
    ``X`` and ``w`` for an output gradient of 3.

    Examples
    --------
    >>> exactness("cast")["gradients differ at"]
    'none'
    """
    layer = relu_layer([None, len(EDGES)])
    layer.graph.node.insert(0, helper.make_node("Mul", ["X", "w"], ["a"]))
    layer.graph.node[1].input[0] = "a"
    layer.graph.initializer.append(numpy_helper.from_array(np.ones(len(EDGES), np.float32), "w"))

    def run(model, fast):
        fb = OrtGradientForwardBackward(
            model, fast_gradients=fast, input_names_require_grad=["X"], n_threads=1
        )
        fn = fb.new_instance()
        value = (
            fn.forward([EDGES[None, :], np.ones(len(EDGES), np.float32)], training=True)[0]
            .numpy()
            .ravel()
            .copy()
        )
        grads = [
            g.numpy().ravel() for g in fn.backward([np.full((1, len(EDGES)), 3.0, np.float32)])
        ]
        return value, np.concatenate(grads)

    try:
        value, grads = run(with_mask(layer, name), name != "relugrad")
    except RuntimeError as exc:  # the gradient builder's transformers refuse the graph
        reason = str(exc).split(" was false. ")[-1].split("\n")[0]
        return {
            "mask": name,
            "values differ at (x: Relu vs mask)": "-",
            "gradients differ at": f"fails: {reason}",
        }
    ref_value, ref_grads = run(layer, False)
    return {
        "mask": name,
        "values differ at (x: Relu vs mask)": _describe(value, ref_value, EDGES),
        "gradients differ at": _describe(grads, ref_grads, np.concatenate([EDGES, EDGES])),
    }


def kernel_times(name, shape=(1000, 500), runs=40):
    """Median microseconds of each kernel of ``Relu`` written with the mask ``name``, at 1 and 2
    threads.

    The forward graph alone (the gradient is one more product by the
    mask), on a fixed ``shape`` of standard normal floats, both thread
    counts run in turn.

    Returns
    -------
    dict
        Operator type to ``{threads: microseconds per run}``; empty for ``relugrad``.

    Examples
    --------
    >>> sorted(kernel_times("cast", shape=(4, 5), runs=2))
    ['Cast', 'Greater', 'Mul']
    """
    if name == "relugrad":
        return {}
    model = (
        rewrite_for_training(relu_layer(shape))
        if name == "where"
        else with_mask(relu_layer(shape), name)
    )
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    times = {}
    with tempfile.TemporaryDirectory() as folder:
        sessions = {}
        for threads in (1, 2):
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            options.enable_profiling, options.profile_file_prefix = (
                True,
                os.path.join(folder, f"t{threads}"),
            )
            sessions[threads] = onnxruntime.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        for _ in range(runs):  # in turn: a burst of load falls on both
            for session in sessions.values():
                session.run(None, {"X": x})
        for threads, session in sessions.items():
            kernels, _ = read_profile(session.end_profiling())
            for op_type, group in kernels.groupby("op_type"):
                times.setdefault(op_type, {})[threads] = (
                    float(group["duration_us"].median()) * len(group) / runs
                )
    return times


def problem(spec):
    """``(model, X, y, loss, batch size)`` of one value of :data:`PROBLEMS`.

    Examples
    --------
    >>> model, X, y, loss, batch = problem((10, 4, 5, 20))
    >>> X.shape, y.shape, loss, batch
    ((20, 10), (20, 1), 'squared_error', 5)
    """
    if isinstance(spec[0], str):
        name, steps = spec
        return (*zoo_model(name, ZOO_BATCH * steps), ZOO_BATCH)
    features, hidden, batch, samples = spec
    X = np.random.default_rng(0).standard_normal((samples, features)).astype(np.float32)
    y = np.tanh(X[:, :5].sum(axis=1, keepdims=True)).astype(np.float32)
    return mlp_onnx(features, hidden=(hidden,)), X, y, "squared_error", batch


def _time_steps(threads, rounds, repeats, masks):
    """Rows of :func:`ab_rows`: a training step with each of ``masks``, both APIs, every problem, at
    ``threads``."""
    rows = []
    for name, (spec, e2) in PROBLEMS.items():
        model, X, y, loss, batch = problem(spec)
        fits = {}
        for mask in masks if name.startswith("MLP") else [m for m in masks if m != "pow"]:
            variant = step_fits(
                with_mask(model, mask),
                X,
                y,
                batch,
                threads,
                loss=loss,
                fast_gradients=mask != "relugrad",
            )
            fits.update({(api, mask): fit for api, fit in variant.items()})
        estimates, busy = ab_rounds(fits, len(X) // batch, rounds=rounds, repeats=repeats, e2=e2)
        for api in dict.fromkeys(api for api, _ in fits):
            per_mask = {mask: values for (a, mask), values in estimates.items() if a == api}
            rows += ab_rows(
                per_mask, "where", model=name, threads=threads, API=api, busy=busy_note(busy)
            )
            print(markdown(rows[-len(per_mask) :], list(rows[-1])), flush=True)
    return rows


def _report(exact, kernels, steps, made):
    """The markdown section of the results; ``made`` says how (:func:`conditions`)."""
    kernel_rows = [
        {
            "mask": name,
            "kernel": op,
            "µs, 1 thread": f"{t.get(1, 0):.0f}",
            "µs, 2 threads": f"{t.get(2, 0):.0f}",
        }
        for name, ops in kernels.items()
        for op, t in ops.items()
    ]
    return "\n\n".join(
        [
            "## Masks for Relu's gradient",
            made,
            "Exactness against `Relu` and `ReluGrad` on edge values (gradients of the input and "
            "of a weight):",
            markdown(exact, list(exact[0])),
            "Kernels of `Relu` written with each mask, forward alone, 1000 x 500 floats, median "
            "of the runs (a kernel on the thread pool takes about half the time with 2 threads on "
            "a quiet machine; `Mul` is the product by the mask, and for `quantize` the scaling "
            "before the quantization too):",
            markdown(kernel_rows, list(kernel_rows[0])),
            "Training steps (plain SGD, squared error or softmax cross-entropy), marginal cost of "
            "a step, median over the rounds of the best of the repeats, with the range over the "
            f"rounds; the ratio to `where` is taken within each round; {BUSY_NOTE}:",
            markdown(steps, list(steps[0])),
        ]
    )


def main(argv=None):
    """Check and time the masks; write their section of ``results/kernel_survey.md``."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    exact = [exactness(name) for name in MASKS]
    print(markdown(exact, list(exact[0])), flush=True)
    wait_until_quiet()
    kernels = {name: kernel_times(name) for name in MASKS}
    trainable = [row["mask"] for row in exact if not row["gradients differ at"].startswith("fails")]
    steps = [
        row
        for threads in args.threads
        for row in _time_steps(threads, args.rounds, args.repeats, trainable)
    ]
    made = conditions("benchmarks/profiles/studies/relu_masks.py", argv, load)
    write_section(args.output, "relu-masks", _report(exact, kernels, steps, made))


if __name__ == "__main__":
    main()
