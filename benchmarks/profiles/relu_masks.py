"""Masks for Relu's gradient: which are exact, which kernels they run on one thread, what a step
costs with each.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/relu_masks.py [--threads 1 2] [--rounds 3]

``fast_gradients`` trains ``Relu(x)`` as ``x * mask(x)``, the mask made
through a bool or an integer so that the gradient builder does not
differentiate it: the gradient is then one product by the mask, where
onnxruntime 1.19.2's ``ReluGrad`` is slow and single-threaded. Its mask,
``Where(x > 0, 1, 0)``, runs ``Where`` on one thread. The candidates:

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
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

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
from benchmarks.profiles.kernel_survey import ZOO_BATCH, zoo_model
from benchmarks.profiles.report import markdown, write_section
from helpers import OrtGradientForwardBackward
from helpers.core.rewrites.gradient_rewrites import rewrite_for_training
from helpers.measure.profiling import read_profile
from helpers.teaching.model_factories import mlp_onnx

FLOAT = TensorProto.FLOAT
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


def _const(name, value, dtype=np.float32):
    tensor = numpy_helper.from_array(np.array(value, dtype), name)
    return helper.make_node("Constant", [], [name], name=name, value=tensor)


def cast_mask(x, tag):
    """Nodes of ``Cast(x > 0, float)``; the mask is ``tag + '_mask'``.

    Examples
    --------
    >>> [n.op_type for n in cast_mask("x", "t")], cast_mask("x", "t")[-1].output[0]
    (['Constant', 'Greater', 'Cast'], 't_mask')
    """
    return [
        _const(f"{tag}_zero", 0.0),
        helper.make_node("Greater", [x, f"{tag}_zero"], [f"{tag}_positive"]),
        helper.make_node("Cast", [f"{tag}_positive"], [f"{tag}_mask"], to=FLOAT),
    ]


def quantize_mask(x, tag):
    """Nodes of ``DequantizeLinear(Clip(QuantizeLinear(x * 2**100, 2**-49), 0, 1))`` in uint8.

    Examples
    --------
    >>> [n.op_type for n in quantize_mask("x", "t") if n.op_type != "Constant"]
    ['Mul', 'QuantizeLinear', 'Clip', 'DequantizeLinear']
    """
    return [
        _const(f"{tag}_scale_up", 2.0**100),
        _const(f"{tag}_step", 2.0**-49),
        _const(f"{tag}_one", 1.0),
        _const(f"{tag}_zero8", 0, np.uint8),
        _const(f"{tag}_one8", 1, np.uint8),
        helper.make_node("Mul", [x, f"{tag}_scale_up"], [f"{tag}_scaled"]),
        helper.make_node(
            "QuantizeLinear", [f"{tag}_scaled", f"{tag}_step", f"{tag}_zero8"], [f"{tag}_levels"]
        ),
        helper.make_node("Clip", [f"{tag}_levels", f"{tag}_zero8", f"{tag}_one8"], [f"{tag}_bits"]),
        helper.make_node(
            "DequantizeLinear", [f"{tag}_bits", f"{tag}_one", f"{tag}_zero8"], [f"{tag}_mask"]
        ),
    ]


def pow_mask(x, tag):
    """Nodes of ``0 ** (0 ** x)``: 1 where ``x > 0``, else 0, through exponents only.

    Examples
    --------
    >>> [n.op_type for n in pow_mask("x", "t")]
    ['Constant', 'Pow', 'Pow']
    """
    return [
        _const(f"{tag}_zero", 0.0),
        helper.make_node("Pow", [f"{tag}_zero", x], [f"{tag}_step"]),
        helper.make_node("Pow", [f"{tag}_zero", f"{tag}_step"], [f"{tag}_mask"]),
    ]


#: Candidate to the function making its mask nodes (None: made by the library, or no mask).
MASKS = {
    "where": None,
    "cast": cast_mask,
    "quantize": quantize_mask,
    "pow": pow_mask,
    "relugrad": None,
}


def with_mask(model, name):
    """``model`` with each ``Relu(x)`` written as ``x * mask(x)`` by the candidate ``name``.

    ``where`` and ``relugrad`` return ``model``: the optimizers rewrite it
    (``fast_gradients=True``) or not (``False``).

    Examples
    --------
    >>> [n.op_type for n in with_mask(mlp_onnx(3, hidden=(4,)), "cast").graph.node]
    ['MatMul', 'Add', 'Constant', 'Greater', 'Cast', 'Mul', 'MatMul', 'Add']
    """
    if MASKS[name] is None:
        return model
    nodes = []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "Relu":
            nodes.append(node)
            continue
        tag = f"{name}_mask{index}"
        product = helper.make_node("Mul", [node.input[0], f"{tag}_mask"], node.output)
        nodes += [*MASKS[name](node.input[0], tag), product]
    masked = onnx.ModelProto()
    masked.CopyFrom(model)
    del masked.graph.node[:]
    masked.graph.node.extend(nodes)
    return masked


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


def relu_layer(shape, opset=15):
    """``Y = Relu(X)``, the input of a fixed ``shape`` (None: rows of any number).

    Examples
    --------
    >>> [n.op_type for n in relu_layer([None, 3]).graph.node]
    ['Relu']
    """
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])],
        "relu",
        [helper.make_tensor_value_info("X", FLOAT, list(shape))],
        [helper.make_tensor_value_info("Y", FLOAT, list(shape))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


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
    made = conditions("benchmarks/profiles/relu_masks.py", argv, load)
    write_section(args.output, "relu-masks", _report(exact, kernels, steps, made))


if __name__ == "__main__":
    main()
