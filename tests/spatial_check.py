"""What the tests of the convolution and pooling gradients share (test_gradients_convolution.py,
test_gradients_pooling.py): a node and its random values, its loss model, and the checks.

Each case is checked up to three ways:

* ``fd``: float64 central differences, the model run by onnx's reference evaluator;
* ``ort``: 1.19.2's gradient builder on the project's training graph, which writes ``auto_pad``
  as explicit pads (1.19.2's own ``ConvGrad`` is wrong with ``SAME_UPPER``), a ``ConvTranspose``
  as a ``Conv``, an ``AveragePool`` as a depthwise ``Conv`` and ``ceil_mode`` windows as torch
  has them; the input is then a weight too, so that its gradient is compared;
* ``torch``: the gradients run on onnxruntime 1.19.2 (float32) against torch's float64 autograd.

Without the training package (the maintained environment) the ``ort`` checks are skipped, and
torch is imported only by the ``torch`` checks.
"""

import importlib.util

import numpy as np
import onnx
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    loss_without_sum,
    run_on_runtime,
    single_node_loss,
    torch_gradients,
)
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.portable.gradients import build_gradients

#: Whether onnx's reference ``AveragePool`` computes ``ceil_mode`` windows right (onnx 1.18).
REFERENCE_CEIL_POOLS = tuple(int(v) for v in onnx.__version__.split(".")[:2]) >= (1, 18)
#: Whether 1.19.2's training package is here (the maintained environment runs the rest).
TRAINING_PACKAGE = importlib.util.find_spec("onnxruntime.training") is not None


def _forward_shape(node, values, opset, runtime):
    """The shape of ``node``'s first output on ``values`` (``"fd"``: the reference evaluator,
    else onnxruntime)."""
    inputs = [
        helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in values.items()
    ]
    output = [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "forward", inputs, output)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    if runtime == "fd":
        return ReferenceEvaluator(model).run(None, values)[0].shape
    return run_on_runtime(model, values, [node.output[0]])[node.output[0]].shape


def node_case(op, x_shape, w_shape=None, bias=False, opset=17, seed=0, outputs=1, **attrs):
    """A node and its random values: ``X`` and, for a convolution, ``W`` and ``B``."""
    rng = np.random.default_rng(seed)
    values = {"X": rng.standard_normal(x_shape).astype(np.float32)}
    if w_shape:
        values["W"] = rng.standard_normal(w_shape).astype(np.float32)
    if bias:
        group = attrs.get("group", 1)
        channels = w_shape[1] * group if op == "ConvTranspose" else w_shape[0]
        values["B"] = rng.standard_normal(channels).astype(np.float32)
    names = ["Y", "Indices"][:outputs]
    return helper.make_node(op, list(values), names, name=f"/{op}", **attrs), values


def loss_model(node, values, check, opset=17, static=True):
    """The loss model of ``node`` for ``check``, its feeds and the values to differentiate.

    ``X`` is a graph input (of fixed spatial size if ``static``, the batch free), the rest are
    weights. For ``"ort"``, ``X`` is the input times a weight ``S`` shaped like one image, so
    that 1.19.2's gradient for ``X`` is compared (through ``S``'s): with ``X`` a weight of its
    own, 1.19.2's ``MaxPoolGrad`` finds no declared shape for it and the process dies.
    """
    shape = _forward_shape(node, values, opset, "fd" if check == "fd" else "ort")
    weights = {k: v for k, v in values.items() if k != "X"}
    extra, x = [], values["X"]
    if check == "ort":
        scale = np.random.default_rng(7).uniform(0.5, 1.5, (1, *x.shape[1:]))
        weights = {"S": scale.astype(np.float32), **weights}
        extra = [helper.make_node("Mul", ["X0", "S"], ["X"])]
    inputs = {"X0" if extra else "X": x}
    model, feeds = single_node_loss(
        node, inputs, weights, {"Y": shape}, opset=opset, extra_nodes=extra
    )
    if static:
        dims = model.graph.input[0].type.tensor_type.shape.dim
        for dim, size in zip(dims[1:], x.shape[1:]):
            dim.dim_value = size
        dims[0].dim_param = "N"
    return model, feeds, list(weights) if extra else list(values)


def run_checks(node, values, checks, forward=None, opset=17, static=True, samples=8):
    """Run ``checks`` on ``node``; finite differences at ``samples`` elements of each value
    (all of them for a pooling: a maximum's gradient is mostly zeros, an average's differs at
    the edges)."""
    for check in checks:
        if check == "ort" and not TRAINING_PACKAGE:
            continue
        model, feeds, wrt = loss_model(node, values, check, opset, static)
        if check == "fd":
            check_finite_differences(model, wrt, feeds, samples=samples)
        elif check == "ort":
            check_against_training_package(loss_without_sum(model), wrt, feeds)
        else:
            assert_matches_torch(model, wrt, feeds, forward)


def assert_matches_torch(model, wrt, feeds, forward, rtol=2e-5):
    """The gradients built for ``model`` (run on onnxruntime) equal torch's float64 autograd of
    ``sum(forward(values) * loss_r0)``, ``forward`` taking the values by name as tensors."""
    built = build_gradients(model, list(wrt))
    ours = run_on_runtime(built.model, feeds, [built.gradients[n] for n in wrt])
    theirs = torch_gradients(model, wrt, feeds, forward)
    for name in wrt:
        scale = max(float(np.abs(theirs[name]).max()), 1e-12)
        error = float(np.abs(ours[built.gradients[name]] - theirs[name]).max())
        assert error <= rtol * scale, (name, error, scale)


def torch_pad(pads, value=0.0):
    """torch's ``F.pad`` of ``x`` by ONNX's ``pads`` (begins, then ends)."""
    import torch.nn.functional as F

    rank = len(pads) // 2
    order = [p for axis in reversed(range(rank)) for p in (pads[axis], pads[axis + rank])]
    return lambda x: F.pad(x, order, value=value)


def check_at_opset(case, opset):
    """Finite differences at every element of ``X``, on inputs of free size, at ``opset``;
    ``case`` is ``(op_type, x shape, w shape, attributes, bias)``."""
    op, x_shape, w_shape, attrs, bias = case
    node, values = node_case(op, x_shape, w_shape, bias, **attrs)
    run_checks(node, values, ["fd"], opset=opset, static=False, samples=values["X"].size)


def check_batch_size_stays_free(case):
    """One gradient model, run on a batch of 3 and on its first image: the same input gradient
    for that image (the loss weights each output the same way in every image); ``case`` is
    ``(op_type, x shape, w shape, attributes)``."""
    op, x_shape, w_shape, attrs = case
    node, values = node_case(op, x_shape, w_shape, **attrs)
    model, feeds, _ = loss_model(node, values, "fd")
    weights = model.graph.initializer
    first = next(t for t in weights if t.name == "loss_r0")
    first.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first)[:1], "loss_r0"))
    built = build_gradients(model, ["X"])
    name = built.gradients["X"]
    whole = run_on_runtime(built.model, feeds, [name])[name]
    alone = run_on_runtime(built.model, {"X": feeds["X"][:1]}, [name])[name]
    np.testing.assert_allclose(alone, whole[:1], rtol=1e-5, atol=1e-6)
