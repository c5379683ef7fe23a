"""Gradients of the reductions, of ``Softmax``/``LogSoftmax`` and of the classification losses
(helpers.portable.gradients.reductions, .softmax).

Every option is checked against float64 central differences run by onnx's reference evaluator
and against 1.19.2's gradient builder where it has the gradient: ``ReduceSum``,
``ReduceMean``, ``ReduceLogSumExp`` and ``ReduceL2`` (but the last two with keepdims=0 unless
their axes come as an input: its builder writes an ``Unsqueeze`` of one input, invalid from
opset 13, or none when the axes are absent), ``Softmax``,
``LogSoftmax`` and ``SoftmaxCrossEntropyLoss`` (with its log-probabilities output, which its
gradient reads, and only when the loss does not use that output: its builder drops that
output's gradient). It has none for ``ReduceMax``, ``ReduceMin``, ``ReduceL1``, ``ReduceProd``,
``ReduceSumSquare`` and ``NegativeLogLikelihoodLoss``.

Where finite differences do not apply, the gradients are compared with torch's float64
autograd: ties of ``ReduceMax``/``ReduceMin`` (split evenly, as ``amax``/``amin``), a zero norm of
``ReduceL2``, and ``noop_with_empty_axes`` (onnx 1.17's reference evaluator reduces every axis
when the axes are an empty constant, and returns ``x`` instead of ``|x|`` for ``ReduceL1`` and
``ReduceL2``). ``torch.nn.functional.cross_entropy`` and ``nll_loss`` are exported by the
project's exporter and their weights' gradients compared with torch's.
"""

import numpy as np
import pytest
import torch
from gradient_check import (
    check_against_training_package,
    check_node,
    gradients_float64,
    loss_without_sum,
    single_node_case,
    to_float64,
    torch_gradients,
)
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers.core.model_graphs.from_torch import export_for_training
from helpers.portable.gradients import NoGradientError, build_gradients

RNG = np.random.default_rng(20261129)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)

#: The reductions with, for each, whether 1.19.2 has its gradient and the torch function.
REDUCTIONS = {
    "ReduceSum": (True, lambda x, d, k: x.sum(d, keepdim=k)),
    "ReduceMean": (True, lambda x, d, k: x.mean(d, keepdim=k)),
    "ReduceSumSquare": (False, lambda x, d, k: (x * x).sum(d, keepdim=k)),
    "ReduceL1": (False, lambda x, d, k: x.abs().sum(d, keepdim=k)),
    "ReduceL2": (True, lambda x, d, k: torch.linalg.vector_norm(x, dim=d, keepdim=k)),
    "ReduceLogSumExp": (True, lambda x, d, k: torch.logsumexp(x, d, keepdim=k)),
    "ReduceProd": (False, lambda x, d, k: _prod(x, d, k)),
    "ReduceMax": (False, lambda x, d, k: torch.amax(x, d, keepdim=k)),
    "ReduceMin": (False, lambda x, d, k: torch.amin(x, d, keepdim=k)),
}


def _prod(x, dims, keepdim):
    for d in sorted(dims, reverse=True):
        x = x.prod(d, keepdim=keepdim)
    return x


def _reduction(op, axes, keepdims, opset, x="x"):
    """The node and its constants: axes as an attribute below opset 18 (13 for ``ReduceSum``),
    as an input from then on."""
    attributes = {} if keepdims is None else {"keepdims": keepdims}
    if opset >= 18 or op == "ReduceSum":
        if axes is None:
            return helper.make_node(op, [x], ["y"], **attributes), {}
        return helper.make_node(op, [x, "axes"], ["y"], **attributes), {
            "axes": np.array(axes, np.int64)
        }
    if axes is not None:
        attributes["axes"] = axes
    return helper.make_node(op, [x], ["y"], **attributes), {}


@pytest.mark.parametrize("keepdims", [None, 0])
@pytest.mark.parametrize("axes", [None, [1], [0, 2], [-1]])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reduction(op, opset, axes, keepdims):
    """Axes absent, one, two, negative; keepdims 1 (the default) and 0; both forms of the
    axes. A graph input of unknown shape for ``ReduceMean`` (the count found at run time)."""
    node, constants = _reduction(op, axes, keepdims, opset)
    x = X + 2 if op == "ReduceProd" else X  # no zeros
    unsqueezed = op in ("ReduceL2", "ReduceLogSumExp") and keepdims == 0
    training = REDUCTIONS[op][0] and not (unsqueezed and (opset < 18 or axes is None))
    check_node(node, {"x": x, **constants}, opset=opset, training=training)
    if op == "ReduceMean":
        check_node(node, constants, {"x": x}, opset=opset, training=False)


def _torch_check(node, x, constants, opset, forward):
    """Our gradient (float64, reference evaluator) against torch's of ``forward``."""
    model, feeds = single_node_case(node, {"x": x, **constants}, opset=opset)
    ours = gradients_float64(model, ["x"], feeds)["x"]
    theirs = torch_gradients(model, ["x"], feeds, lambda v: forward(v["x"]))["x"]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes", [None, [1], [0, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_extremum_ties_are_split_evenly(op, axes, keepdims):
    x = np.round(X).astype(np.float32)  # many ties
    node, constants = _reduction(op, axes, keepdims, 18)
    dims = list(range(3)) if axes is None else axes
    _torch_check(node, x, constants, 18, lambda t: REDUCTIONS[op][1](t, dims, bool(keepdims)))


def test_l2_norm_of_zeros_has_a_zero_gradient():
    x = X.copy()
    x[0] = 0
    node, constants = _reduction("ReduceL2", [1, 2], 0, 18)
    _torch_check(node, x, constants, 18, lambda t: REDUCTIONS["ReduceL2"][1](t, [1, 2], False))


#: The value of each reduction under ``noop_with_empty_axes`` with no axes (ONNX's
#: specification: the reduced function of each value alone).
NOOP = {"ReduceSumSquare": lambda t: t * t, "ReduceL1": torch.abs, "ReduceL2": torch.abs}


#: The elementwise node equal to each reduction under ``noop_with_empty_axes``.
ELEMENTWISE = {"ReduceSumSquare": ("Mul", ["x", "x"]), "ReduceL1": ("Abs", ["x"]),
               "ReduceL2": ("Abs", ["x"])}  # fmt: skip


@pytest.mark.parametrize("empty", ["absent", "empty_constant"])
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_noop_with_empty_axes(op, empty):
    """The gradient of a reduction that reduces nothing. No runtime of ``.venv`` computes the
    forward pass as the specification says: the built model runs with the reduction replaced
    by the elementwise node it equals, and is compared with torch's."""
    inputs = ["x"] if empty == "absent" else ["x", "axes"]
    node = helper.make_node(op, inputs, ["y"], noop_with_empty_axes=1)
    constants = {} if empty == "absent" else {"axes": np.zeros(0, np.int64)}
    weight = RNG.standard_normal(X.shape).astype(np.float32)
    model = _loss_of(node, {"x": X, **constants}, weight)
    built = build_gradients(model, ["x"])
    forward = next(n for n in built.model.graph.node if n.op_type == op)
    op_type, operands = ELEMENTWISE.get(op, ("Identity", ["x"]))
    forward.CopyFrom(helper.make_node(op_type, operands, ["y"]))
    (ours,) = ReferenceEvaluator(to_float64(built.model)).run([built.gradients["x"]], {})
    xt = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    (NOOP.get(op, lambda t: t)(xt) * torch.tensor(weight, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(ours, xt.grad.numpy(), rtol=1e-12)


def _loss_of(node, weights, weight):
    """A model ``loss = sum(y * weight)`` where ``y`` has ``weight``'s shape (no reference run,
    which gets the no-op reductions wrong)."""
    nodes = [
        node,
        helper.make_node("Mul", ["y", "loss_r0"], ["p"]),
        helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0),
    ]
    values = {**weights, "loss_r0": weight}
    graph = helper.make_graph(
        nodes,
        "noop",
        [],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(v, k) for k, v in values.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def test_axes_computed_at_run_time_are_refused():
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"])
    model, _ = single_node_case(node, {"x": X}, {"axes": np.array([1], np.int64)}, opset=18)
    with pytest.raises(NoGradientError, match="axes are computed at run time"):
        build_gradients(model, ["x"])


# --- Softmax, LogSoftmax --------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -2])
@pytest.mark.parametrize("opset", [13, 18])
def test_softmax(op, axis, opset):
    attributes = {} if axis is None else {"axis": axis}
    node = helper.make_node(op, ["x"], ["y"], **attributes)
    check_node(node, {"x": X}, opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_below_opset_13_is_refused(op):
    """Below opset 13 the operator flattens to 2-D from its axis: refused, with the reason."""
    node = helper.make_node(op, ["x"], ["y"], axis=1)
    model, _ = single_node_case(node, {"x": X}, opset=12)
    with pytest.raises(NoGradientError, match="opset 13 or later"):
        build_gradients(model, ["x"])


# --- SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss -------------------------------------
SCORES = {2: RNG.standard_normal((6, 4)).astype(np.float32), 3: X.transpose(0, 2, 1).copy()}
LABELS = {2: np.array([0, 3, 1, 3, 2, 1], np.int64), 3: np.array([[0, 2, 1], [2, 2, 0]], np.int64)}
CLASS_WEIGHTS = {2: np.float32([0.5, 2.0, 1.0, 1.5]), 3: np.float32([2.0, 0.25, 1.0])}


def _loss_node(op, rank, reduction, ignore, weighted, outputs=("y",)):
    attributes = {"reduction": reduction}
    if ignore is not None:
        attributes["ignore_index"] = ignore
    inputs = ["x", "t"] + (["w"] if weighted else [])
    constants = {"t": LABELS[rank]}
    if weighted:
        constants["w"] = CLASS_WEIGHTS[rank]
    return helper.make_node(op, inputs, list(outputs), **attributes), constants


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("ignore", [None, 1, -100])
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_cross_entropy(rank, reduction, ignore, weighted):
    """Each reduction, an ignored class present in the labels (and one absent), class weights;
    scores ``[N, C]`` and ``[N, C, d]``. Without the log-probabilities output, and with it read
    by the loss (finite differences), and unread (1.19.2, whose gradient needs it)."""
    op = "SoftmaxCrossEntropyLoss"
    node, constants = _loss_node(op, rank, reduction, ignore, weighted)
    check_node(node, {"x": SCORES[rank], **constants}, training=False, wrt=["x"])
    node, constants = _loss_node(op, rank, reduction, ignore, weighted, ("y", "log_prob"))
    check_node(node, {"x": SCORES[rank], **constants}, training=False, wrt=["x"])
    model, feeds = single_node_case(node, {"x": SCORES[rank], **constants}, outputs=["y"])
    check_against_training_package(loss_without_sum(model), ["x"], feeds)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("ignore", [None, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_negative_log_likelihood(rank, reduction, ignore, weighted):
    node, constants = _loss_node("NegativeLogLikelihoodLoss", rank, reduction, ignore, weighted)
    check_node(node, {"x": SCORES[rank], **constants}, training=False, wrt=["x"])


def test_int32_labels_and_scores_of_unknown_shape():
    node, constants = _loss_node("SoftmaxCrossEntropyLoss", 3, "mean", 0, True)
    constants["t"] = constants["t"].astype(np.int32)
    check_node(node, constants, {"x": SCORES[3]}, training=False, wrt=["x"])


def test_trained_class_weights_are_refused():
    node, constants = _loss_node("NegativeLogLikelihoodLoss", 2, "mean", None, True)
    model, _ = single_node_case(node, {"x": SCORES[2], **constants})
    with pytest.raises(NoGradientError, match="class weights"):
        build_gradients(model, ["x", "w"])


class _Classifier(torch.nn.Module):
    """A linear layer and torch's loss: ``cross_entropy`` of scores or ``nll_loss`` of their
    ``log_softmax``; the loss summed with fixed weights when it is not reduced."""

    def __init__(self, loss, reduction, ignore_index, weight, terms):
        super().__init__()
        generator = torch.Generator().manual_seed(7)
        self.linear = torch.nn.Linear(5, 4)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(4, 5, generator=generator))
        self.loss, self.reduction, self.ignore_index = loss, reduction, ignore_index
        self.register_buffer("class_weight", weight)
        self.register_buffer("terms", terms)

    def forward(self, x, target):
        scores = self.linear(x)
        options = dict(
            weight=self.class_weight, ignore_index=self.ignore_index, reduction=self.reduction
        )
        if self.loss == "cross_entropy":
            value = torch.nn.functional.cross_entropy(scores, target, **options)
        else:
            log_prob = torch.nn.functional.log_softmax(scores, dim=1)
            value = torch.nn.functional.nll_loss(log_prob, target, **options)
        return (value * self.terms).sum() if self.reduction == "none" else value


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_torch_losses_as_exported(loss, reduction, weighted):
    """``cross_entropy``/``nll_loss`` exported by the project's exporter (``ignore_index``
    -100 present in the targets, as torch pads a batch): the linear layer's gradients equal
    torch's float64 autograd."""
    x = torch.tensor(RNG.standard_normal((6, 5)), dtype=torch.float32)
    target = torch.tensor([0, 3, -100, 1, 3, 2])
    weight = torch.tensor([0.5, 2.0, 1.0, 1.5]) if weighted else None
    terms = torch.tensor(RNG.standard_normal(6), dtype=torch.float32)
    module = _Classifier(loss, reduction, -100, weight, terms)
    model = export_for_training(
        module, (x, target), input_names=("x", "t"), output_names=("loss",), dynamic_batch=False
    )
    wrt = ["linear.weight", "linear.bias"]
    built = build_gradients(model, wrt)
    run = ReferenceEvaluator(to_float64(built.model))
    ours = run.run(
        [built.gradients[n] for n in wrt], {"x": x.double().numpy(), "t": target.numpy()}
    )
    module.double().zero_grad()
    module(x.double(), target).backward()
    for name, grad in zip(wrt, ours):
        np.testing.assert_allclose(grad, module.get_parameter(name).grad.numpy(), rtol=1e-10)
