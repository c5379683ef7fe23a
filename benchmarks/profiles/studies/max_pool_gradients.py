"""Max pooling in CNN training steps: the pooling before the ReLU, the pooling without indices.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/max_pool_gradients.py [--threads 1 2] [--rounds 3]

A training graph asks onnxruntime 1.19.2's ``MaxPool`` for the indices of
its maxima, which ``MaxPoolGrad`` reads: a generic kernel, far slower than
the inference one. The zoo's CNNs write ``MaxPool(Relu(x))``, whose ReLU
mask (``Where``, one thread) runs on the whole feature map. The variants:

* ``relu_first``: the graph as exported (``fast_gradients`` without
  :mod:`helpers.core.rewrites.pooling_rewrites`): the reference.
* ``pool_first``: ``Relu(MaxPool(x))``, the library's rewrite: the mask and
  its product run on the pooled map.
* ``argmax``: ``pool_first``, and each ``MaxPool`` whose kernel is its
  stride (no padding, no dilation, 2-D) written without the indices
  kernel: the windows laid on a last axis (``Slice`` of the rows and
  columns no window covers, ``Reshape``, ``Transpose``, ``Reshape``),
  ``ArgMax`` (the first maximum in scan order, torch's rule) and
  ``GatherElements``, whose gradient scatters into zeros. The ResNet
  stem's pooling (3 x 3, stride 2, padding 1) keeps its ``MaxPool``.

The script checks that every variant gives the reference's loss gradients
exactly (integer weights and inputs: many ties, zeros and negative windows),
profiles the kernels of a step of each, then times training steps of the
zoo's ``image_cnn_small`` and
``image_cnn_large`` and of a ResNet-like stem (3 x 32 x 32, convolution,
batch normalization, ReLU, max pooling 3 x 3 stride 2 padding 1, linear),
all variants interleaved (:mod:`benchmarks.profiles.ab_timing`). It writes
its section of ``results/kernel_survey.md``.
"""

import contextlib
import os
import sys
from unittest import mock

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper
from torch import nn

from benchmarks.profiles.ab_timing import (
    BUSY_NOTE,
    WHOLE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
    wait_until_quiet,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.kernel_survey import profile_best_of
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, make_optimizer, zoo_model
from helpers import OrtGradientForwardBackward, export_for_training
from helpers.core.graphs.graph_nodes import (
    constant_node,
    copy_with_nodes,
    is_onnx_op,
)
from helpers.core.graphs.graph_shapes import value_shapes
from helpers.core.rewrites import gradient_rewrites
from helpers.core.rewrites.pooling_rewrites import max_pools_before_activations
from helpers.portable.node_attributes import node_attribute

#: The timed models: name to (zoo name, None for the stem; steps per epoch; epochs of the long fit).
PROBLEMS = {
    "zoo image_cnn_small, batch 64": ("image_cnn_small", 20, 4),
    "zoo image_cnn_large, batch 64": ("image_cnn_large", 10, 3),
    "ResNet-like stem 3x32x32, batch 64": (None, 10, 3),
}


def resnet_stem():
    """Convolution 3 -> 16 (3 x 3, padding 1), BatchNorm2d, ReLU, MaxPool2d(3, 2, 1), Linear to 10.

    Examples
    --------
    >>> resnet_stem()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.Flatten(),
        nn.Linear(16 * 16 * 16, 10),
    )


def stem_problem(n_samples, random_state=0):
    """``(onnx model, X, y, loss)`` of :func:`resnet_stem` on random images and classes.

    Examples
    --------
    >>> onx, X, y, loss = stem_problem(4)
    >>> X.shape, y.shape, loss
    ((4, 3, 32, 32), (4,), 'cross_entropy')
    """
    torch.manual_seed(random_state)
    rng = np.random.default_rng(random_state)
    X = rng.standard_normal((n_samples, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, n_samples).astype(np.int64)
    return export_for_training(resnet_stem(), torch.from_numpy(X[:2])), X, y, "cross_entropy"


def _windows_on_last_axis(node, sizes, tag):
    """Nodes laying the ``k x k`` windows of the input on a last axis: ``(N, C, H/k, W/k, k*k)``."""
    k = node_attribute(node, "kernel_shape")[0]
    rows, columns = sizes[0] // k, sizes[1] // k
    data = node.input[0]
    nodes = []
    if (rows * k, columns * k) != tuple(sizes):
        nodes += [
            constant_node(f"{tag}_starts", [0, 0], TensorProto.INT64),
            constant_node(f"{tag}_ends", [rows * k, columns * k], TensorProto.INT64),
            constant_node(f"{tag}_axes", [2, 3], TensorProto.INT64),
            helper.make_node(
                "Slice", [data, f"{tag}_starts", f"{tag}_ends", f"{tag}_axes"], [f"{tag}_kept"]
            ),
        ]
        data = f"{tag}_kept"
    return nodes + [
        constant_node(f"{tag}_split", [0, 0, rows, k, columns, k], TensorProto.INT64),
        constant_node(f"{tag}_window", [0, 0, rows, columns, k * k], TensorProto.INT64),
        helper.make_node("Reshape", [data, f"{tag}_split"], [f"{tag}_six"]),
        helper.make_node("Transpose", [f"{tag}_six"], [f"{tag}_moved"], perm=[0, 1, 2, 4, 3, 5]),
        helper.make_node("Reshape", [f"{tag}_moved", f"{tag}_window"], [f"{tag}_windows"]),
    ]


def _pool_without_indices(node, sizes, tag):
    """``node`` as ``GatherElements`` of each window's first maximum (None if it does not apply)."""
    kernel = node_attribute(node, "kernel_shape")
    square = (
        len(kernel) == 2
        and kernel[0] == kernel[1]
        and node_attribute(node, "strides", None) == kernel
    )
    plain = not any(node_attribute(node, "pads", [0])) and set(
        node_attribute(node, "dilations", [1])
    ) == {1}
    if not (
        square and plain and len(node.output) == 1 and not node_attribute(node, "ceil_mode", 0)
    ):
        return None
    if sizes is None or None in sizes:
        return None
    return _windows_on_last_axis(node, sizes, tag) + [
        helper.make_node("ArgMax", [f"{tag}_windows"], [f"{tag}_first"], axis=-1, keepdims=1),
        helper.make_node(
            "GatherElements", [f"{tag}_windows", f"{tag}_first"], [f"{tag}_max"], axis=-1
        ),
        constant_node(f"{tag}_last", [-1], TensorProto.INT64),
        helper.make_node("Squeeze", [f"{tag}_max", f"{tag}_last"], node.output),
    ]


def pools_without_indices(model):
    """``model`` with ``Relu(MaxPool(x))`` for ``MaxPool(Relu(x))``, and the ``argmax`` poolings.

    Examples
    --------
    >>> onx = zoo_model("image_cnn_small", 2)[0]
    >>> ops = [n.op_type for n in pools_without_indices(onx).graph.node]
    >>> "MaxPool" in ops, ops.count("ArgMax")
    (False, 2)
    """
    model = max_pools_before_activations(model)
    shapes = value_shapes(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        dims = shapes.get(node.input[0]) if is_onnx_op(node, "MaxPool") else None
        replacement = dims and _pool_without_indices(node, dims[2:], f"argmax_pool{index}")
        nodes.extend(replacement or [node])
    return copy_with_nodes(model, nodes)


def relu_first():
    """A context in which ``fast_gradients`` leaves ``MaxPool(Relu(x))`` as it is.

    Examples
    --------
    >>> onx = zoo_model("image_cnn_small", 2)[0]
    >>> with relu_first():
    ...     ops = [n.op_type for n in gradient_rewrites.rewrite_for_training(onx).graph.node]
    >>> ops.index("MaxPool") > 3
    True
    """
    return mock.patch.object(gradient_rewrites, "max_pools_before_activations", lambda model: model)


def variants(model):
    """Variant name to ``(model, context of its fits)``; the models differ (the caches key on them).

    Examples
    --------
    >>> sorted(variants(zoo_model("image_cnn_small", 2)[0]))
    ['argmax', 'pool_first', 'relu_first']
    """
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    plain.doc_string = "MaxPool(Relu(x)) kept"
    return {
        "relu_first": (plain, relu_first),
        "pool_first": (model, contextlib.nullcontext),
        "argmax": (pools_without_indices(model), contextlib.nullcontext),
    }


def problem(name, n_samples):
    """``(onnx model, X, y, loss)`` of a zoo model's ``name``, or of the stem for None."""
    return stem_problem(n_samples) if name is None else zoo_model(name, n_samples)


def _integer_gradients(model, context, X, grad_out, weights):
    with context():
        function = OrtGradientForwardBackward(model, input_names_require_grad=["x"]).new_instance()
        values = [weights[name] for name in function.parent.weights_to_train]
        output = function.forward([X, *values], training=True)[0].numpy().copy()
        return [output, *[g.numpy().copy() for g in function.backward([grad_out])]]


def exactness(name, n_samples=8):
    """Whether each variant's output and gradients (input, weights) are the reference's bit for bit.

    Small integers as weights and inputs make every sum exact and leave
    many ties, zeros and windows of negative values.

    Examples
    --------
    >>> exactness("image_cnn_small", 2)["argmax"]
    'equal'
    """
    model, X, _, _ = problem(name, n_samples)
    rng = np.random.default_rng(1)
    X = rng.integers(-2, 3, X.shape).astype(np.float32)
    weights = {
        init.name: rng.integers(-1, 2, init.dims).astype(np.float32)
        for init in model.graph.initializer
        if init.data_type == TensorProto.FLOAT
    }
    results = {}
    for variant, (onx, context) in variants(model).items():
        width = onx.graph.output[0].type.tensor_type.shape.dim[1].dim_value
        grad_out = np.random.default_rng(2).integers(-3, 4, (n_samples, width)).astype(np.float32)
        results[variant] = _integer_gradients(onx, context, X, grad_out, weights)
    reference = results["relu_first"]
    return {
        variant: "equal"
        if all(np.array_equal(a, b) for a, b in zip(values, reference))
        else "DIFFER"
        for variant, values in results.items()
    }


#: Operators whose kernels the profiles compare.
PROFILED = ("MaxPool", "MaxPoolGrad", "Where", "Mul", "Greater")


def kernel_times(label, threads, repeat=3):
    """Rows of kernel microseconds per step of each variant, whole-training API, ``label``'s model.

    Each kernel keeps its best of ``repeat`` profiled epochs
    (:func:`benchmarks.profiles.survey.kernel_survey.profile_best_of`): a kernel
    preempted by another job drops out.
    """
    name, steps, _ = PROBLEMS[label]
    model, X, y, loss = problem(name, ZOO_BATCH * steps)
    rows = []
    for variant, (onx, context) in variants(model).items():
        optimizer = make_optimizer(WHOLE, onx, loss, "sgd", True, ZOO_BATCH, 1e-3, threads)
        with context():
            table = profile_best_of(optimizer, X, y, repeat)
        per_op = table.groupby("op_type")["µs per step"].sum()
        rows.append(
            {
                "model": label,
                "threads": threads,
                "variant": variant,
                **{op: f"{per_op.get(op, 0):.0f}" for op in PROFILED},
                "all kernels": f"{per_op.sum():.0f}",
            }
        )
    return rows


def _time_steps(threads, rounds, repeats):
    """Rows of :func:`ab_rows` for every problem, both APIs, at ``threads``."""
    rows = []
    for label, (name, steps, e2) in PROBLEMS.items():
        model, X, y, loss = problem(name, ZOO_BATCH * steps)
        fits = {}
        for variant, (onx, context) in variants(model).items():
            fitted = step_fits(onx, X, y, ZOO_BATCH, threads, loss=loss, lr=1e-3, context=context)
            fits.update({(api, variant): fit for api, fit in fitted.items()})
        estimates, busy = ab_rounds(fits, steps, rounds=rounds, repeats=repeats, e2=e2)
        for api in dict.fromkeys(api for api, _ in fits):
            per_variant = {variant: v for (a, variant), v in estimates.items() if a == api}
            rows += ab_rows(
                per_variant,
                "relu_first",
                model=label,
                threads=threads,
                API=api,
                busy=busy_note(busy),
            )
            print(markdown(rows[-len(per_variant) :], list(rows[-1])), flush=True)
    return rows


def main(argv=None):
    """Check and time the variants; write their section of ``results/kernel_survey.md``."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    exact = [{"model": label, **exactness(name)} for label, (name, _, _) in PROBLEMS.items()]
    print(markdown(exact, list(exact[0])), flush=True)
    wait_until_quiet()
    kernels = [
        row
        for threads in args.threads
        for label in PROBLEMS
        for row in kernel_times(label, threads)
    ]
    print(markdown(kernels, list(kernels[0])), flush=True)
    steps = [
        row for threads in args.threads for row in _time_steps(threads, args.rounds, args.repeats)
    ]
    text = "\n\n".join(
        [
            "## Max pooling in CNN training steps",
            conditions("benchmarks/profiles/studies/max_pool_gradients.py", argv, load),
            (
                "Output and gradients (input and weights) against `relu_first`, bit for bit, "
                "integer weights and inputs (ties, zeros, negative windows):"
            ),
            markdown(exact, list(exact[0])),
            (
                "Training steps (plain SGD, softmax cross-entropy), marginal cost of a step, "
                "median over the rounds of the best of the repeats, with the range over the rounds;"
                f" the ratio to `relu_first` is taken in each round; {BUSY_NOTE}:"
            ),
            markdown(steps, list(steps[0])),
            (
                "Kernels of the whole-training step (sessions of the step, onnxruntime's profiler, "
                "µs per step, each kernel's best of three profiled epochs):"
            ),
            markdown(kernels, list(kernels[0])),
        ]
    )
    write_section(args.output, "max-pool-gradients", text)


if __name__ == "__main__":
    main()
