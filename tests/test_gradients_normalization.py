"""Gradients of the normalizations (helpers.portable.gradients.normalization).

Each operator's options are checked against float64 central differences run by onnx's reference
evaluator, and ``LayerNormalization`` against 1.19.2's gradient builder too where it has one.
1.19.2 has no gradient for ``BatchNormalization`` (its builder reads two outputs of opset 9
the node no longer has), ``InstanceNormalization``, ``GroupNormalization``,
``LpNormalization`` and ``MeanVarianceNormalization``; its ``LayerNormalizationGrad`` stops on a
normalized size of 1 (``layer_norm.cc: M != 1``) and ignores the gradients of the ``Mean`` and
``InvStdDev`` outputs: finite differences only there. Where the reference evaluator is wrong
in float64, the gradients are compared with torch's float64 autograd instead:
``BatchNormalization`` of opset 9 (inference normalizes with the running averages it computes),
``GroupNormalization`` of opset 21 (its stage one in float32, ``stash_type``),
``LpNormalization`` with ``p=1`` (no absolute value) and ``MeanVarianceNormalization`` (a
float32 epsilon added to float64 values). Two models exported from torch, made into training
graphs as the project makes them, are compared with torch's gradients.
"""

import numpy as np
import onnx
import pytest
import torch
from gradient_check import (
    check_against_training_package,
    check_finite_differences,
    gradients_float64,
    loss_without_sum,
    run_on_runtime,
    single_node_loss,
    torch_gradients,
)
from onnx import helper, numpy_helper
from onnx.reference.op_run import OpRun

import helpers
from helpers.core.model_graphs.training_graph import training_graph
from helpers.portable.gradients import GRADIENTS, NoGradientError, build_gradients

RNG_SEED = 1234


def _draw(shape, seed, shift=0.0):
    rng = np.random.default_rng([RNG_SEED, seed])
    return (rng.standard_normal(shape) * 1.5 + shift).astype(np.float32)


def _node_model(node, x, weights, outputs, opset, x_is_weight=False):
    """``single_node_loss`` of ``node`` on the input ``x`` (a graph input, or a weight)."""
    inputs = {} if x_is_weight else {"x": x}
    weights = {**({"x": x} if x_is_weight else {}), **weights}
    return single_node_loss(node, inputs, weights, outputs, seed=len(outputs), opset=opset)


def _check_against_torch(model, wrt, feeds, forward, new_ops=()):
    ours = gradients_float64(model, wrt, feeds, new_ops)
    theirs = torch_gradients(model, wrt, feeds, forward)
    for name in wrt:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-9, atol=1e-10, err_msg=name)


# LayerNormalization ---------------------------------------------------------------------------

#: (input shape, axis): negative and positive axes, normalized sizes of 1 and more.
LAYER_NORM_CASES = [
    ((4, 6), -1),
    ((3, 4, 5), -2),
    ((3, 4, 5), 1),
    ((2, 3, 4), 0),
    ((2, 3, 2, 3), 2),
    ((4, 1), -1),
    ((3, 2, 1), 2),
]


def _layer_norm(shape, axis, bias=True, statistics=True, epsilon=1e-5, trained=True, opset=17):
    """A ``LayerNormalization`` model (with or without bias and the two optional outputs),
    its feeds and the values to differentiate (the scale is a constant unless ``trained``)."""
    x = _draw(shape, 1, shift=0.7)
    normalized = shape[axis:] if axis >= 0 else shape[axis:]
    weights = {"scale": _draw(normalized, 2)}
    inputs = ["x", "scale"]
    if bias:
        weights["bias"] = _draw(normalized, 3)
        inputs.append("bias")
    outputs = {"y": shape}
    if statistics:
        kept = shape[: axis % len(shape)] + (1,) * len(normalized)
        outputs.update({"mean": kept, "inv_std": kept})
    node = helper.make_node("LayerNormalization", inputs, list(outputs), axis=axis, epsilon=epsilon)
    wrt = ["x"] + [n for n in inputs[1:] if trained or n == "bias"]
    return node, x, weights, outputs, wrt


@pytest.mark.parametrize("shape, axis", LAYER_NORM_CASES)
@pytest.mark.parametrize("bias, statistics", [(True, True), (False, False), (True, False)])
def test_layer_normalization_finite_differences(shape, axis, bias, statistics):
    node, x, weights, outputs, wrt = _layer_norm(shape, axis, bias, statistics)
    model, feeds = _node_model(node, x, weights, outputs, 17)
    check_finite_differences(model, wrt, feeds)


@pytest.mark.parametrize(
    "epsilon, trained, opset", [(1e-3, False, 18), (0.5, True, 21), (1e-12, True, 17)]
)
def test_layer_normalization_options(epsilon, trained, opset):
    """Epsilon, a constant scale (only the bias trained), the axes as an input (opset 18)."""
    node, x, weights, outputs, wrt = _layer_norm((3, 4, 5), -2, epsilon=epsilon, trained=trained)
    model, feeds = _node_model(node, x, weights, outputs, opset)
    check_finite_differences(model, wrt, feeds)


@pytest.mark.parametrize("shape, axis", [c for c in LAYER_NORM_CASES if np.prod(c[0][c[1] :]) > 1])
def test_layer_normalization_against_training_package(shape, axis):
    """The loss reads ``Y`` only (1.19.2 differentiates no other output); its builder needs
    the two optional outputs, which the training graph adds, and the bias (without one it
    stops on ``gradient_builder_base.h:142 i < node_->InputDefs().size()``)."""
    pytest.importorskip("onnxruntime.training")
    node, x, weights, outputs, _ = _layer_norm(shape, axis)
    model, _ = _node_model(node, x, weights, {"y": shape}, 17, x_is_weight=True)
    check_against_training_package(loss_without_sum(model), ["x", *node.input[1:]], {})


def test_layer_normalization_of_one_value_is_exact():
    """A normalized size of 1: the input's gradient is exactly 0, the scale's too, the bias's
    the output's gradient (torch's values; 1.19.2's kernel stops there)."""
    node, x, weights, outputs, wrt = _layer_norm((5, 3, 1), -1, statistics=False)
    model, feeds = _node_model(node, x, weights, outputs, 17)
    grads = check_finite_differences(model, wrt, feeds)
    assert not grads["x"].any() and not grads["scale"].any()
    r = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "loss_r0"))
    np.testing.assert_array_equal(grads["bias"], r.astype(np.float64).sum(axis=(0, 1)))


# BatchNormalization ---------------------------------------------------------------------------


def _batch_norm(shape, training, opset, running="", momentum=0.9, epsilon=1e-5):
    """A ``BatchNormalization`` model: ``running`` says whether the node returns its running
    statistics (not when empty: inference mode only, ONNX's shape inference refuses a training
    node without them) and whether the loss reads them (``read``) or not (``unused``)."""
    channels = shape[1]
    rng = np.random.default_rng([RNG_SEED, len(shape), training, len(running)])
    weights = {
        "scale": _draw(channels, 4),
        "bias": _draw(channels, 5),
        "mean": _draw(channels, 6),
        "var": (rng.random(channels) + 0.5).astype(np.float32),
    }
    outputs = {"y": shape, "running_mean": (channels,), "running_var": (channels,)}
    attrs = dict(epsilon=epsilon, momentum=momentum)
    if opset >= 14:
        attrs["training_mode"] = int(training)
    written = list(outputs) if running else ["y"]
    node = helper.make_node("BatchNormalization", ["x", *weights], written, **attrs)
    read = {k: v for k, v in outputs.items() if k == "y" or running == "read"}
    return node, _draw(shape, 7, shift=0.5), weights, read


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 2, 3, 2)])
@pytest.mark.parametrize(
    "training, running, opset",
    [
        (False, "", 14),
        (False, "", 18),
        (True, "unused", 15),
        (True, "read", 15),
        (True, "read", 14),
        (True, "unused", 18),
    ],
)
def test_batch_normalization_finite_differences(shape, training, running, opset):
    """Inference mode (the statistics' gradients too) and training mode, with the running
    statistics among the outputs the loss reads or not, opsets 14, 15 and 18 (axes as
    inputs)."""
    node, x, weights, outputs = _batch_norm(shape, training, opset, running, momentum=0.7)
    model, feeds = _node_model(node, x, weights, outputs, opset)
    wrt = ["x", "scale", "bias"] + (["mean", "var"] if running != "unused" else [])
    check_finite_differences(model, wrt, feeds)


@pytest.mark.parametrize("epsilon, momentum", [(1e-3, 0.9), (0.25, 0.0), (1e-5, 1.0)])
def test_batch_normalization_options(epsilon, momentum):
    node, x, weights, outputs = _batch_norm((5, 2, 3), True, 15, "read", momentum, epsilon)
    model, feeds = _node_model(node, x, weights, outputs, 15)
    check_finite_differences(model, ["x", "scale", "bias", "mean", "var"], feeds)


def test_batch_normalization_opset_9_inference_against_torch():
    """Opset 13 (``BatchNormalization`` 9): the reference evaluator normalizes with running
    averages it computes itself (its ``momentum`` default): torch is the oracle."""
    node, x, weights, outputs = _batch_norm((4, 3, 2), False, 13)
    model, feeds = _node_model(node, x, weights, outputs, 13)

    def forward(v):
        column = [-1, 1]
        std = (v["var"].reshape(column) + np.float32(1e-5).item()).sqrt()
        centred = v["x"] - v["mean"].reshape(column)
        return [centred / std * v["scale"].reshape(column) + v["bias"].reshape(column)]

    _check_against_torch(model, ["x", "scale", "bias", "mean", "var"], feeds, forward)


def test_batch_normalization_opset_9_training_is_refused():
    node = helper.make_node("BatchNormalization", list("xsbmv"), ["y", "m2", "v2", "sm", "sv"])
    model, feeds = _node_model(node, _draw((4, 2), 8), {}, {"y": (4, 2)}, 13)
    with pytest.raises(NoGradientError, match="opset 14"):
        build_gradients(model, ["x"])


# InstanceNormalization, GroupNormalization ----------------------------------------------------


@pytest.mark.parametrize("shape, epsilon", [((3, 2, 5), 1e-5), ((2, 3, 2, 3), 0.1), ((2, 2, 1), 1)])
def test_instance_normalization_finite_differences(shape, epsilon):
    channels = shape[1]
    weights = {"scale": _draw(channels, 9), "bias": _draw(channels, 10)}
    node = helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"], epsilon=epsilon)
    model, feeds = _node_model(node, _draw(shape, 11, shift=-0.4), weights, {"y": shape}, 17)
    check_finite_differences(model, ["x", "scale", "bias"], feeds)


def _group_norm(shape, groups, opset, epsilon=1e-5):
    per = groups if opset < 21 else shape[1]
    weights = {"scale": _draw(per, 12), "bias": _draw(per, 13)}
    node = helper.make_node(
        "GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups, epsilon=epsilon
    )
    model, feeds = _node_model(node, _draw(shape, 14, shift=0.3), weights, {"y": shape}, opset)
    # onnx's shape inference leaves the output of this function untyped, and the builder
    # differentiates float values only: the type is given
    model.graph.value_info.append(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None))
    return model, feeds


@pytest.mark.parametrize("shape, groups", [((3, 4, 5), 2), ((2, 6, 2, 2), 3), ((2, 4), 4)])
def test_group_normalization_opset_18_finite_differences(shape, groups):
    """Opset 18: a scale and a bias per group."""
    model, feeds = _group_norm(shape, groups, 18, epsilon=1e-2)
    check_finite_differences(model, ["x", "scale", "bias"], feeds)


@pytest.mark.parametrize("shape, groups", [((3, 4, 5), 2), ((2, 6, 2, 2), 3), ((2, 6, 3), 1)])
def test_group_normalization_opset_21_against_torch(shape, groups):
    """Opset 21: a scale and a bias per channel (torch's ``group_norm``)."""
    model, feeds = _group_norm(shape, groups, 21, epsilon=1e-2)

    def forward(v):
        return [torch.nn.functional.group_norm(v["x"], groups, v["scale"], v["bias"], eps=1e-2)]

    _check_against_torch(model, ["x", "scale", "bias"], feeds, forward)


# LpNormalization, MeanVarianceNormalization --------------------------------------------------


class LpNormalization(OpRun):
    """``LpNormalization`` as ONNX defines it (the reference's L1 norm has no absolute value;
    the gradient reads the node's output)."""

    op_domain = ""

    def _run(self, x, axis=None, p=None):
        norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
        return (x / norm,)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(axis, p):
    """p=2 by finite differences; p=1 against torch (the reference evaluator leaves out the
    absolute value of its norm)."""
    shape = (3, 4, 2)
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p)
    model, feeds = _node_model(node, _draw(shape, 15, shift=0.2), {}, {"y": shape}, 17)
    if p == 2:
        check_finite_differences(model, ["x"], feeds)
        return

    def forward(v):
        return [torch.nn.functional.normalize(v["x"], p=1, dim=axis, eps=0)]

    _check_against_torch(model, ["x"], feeds, forward, [LpNormalization])


def test_lp_normalization_other_norms_are_refused():
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    model, _ = _node_model(node, _draw((2, 3), 16), {}, {"y": (2, 3)}, 17)
    with pytest.raises(NoGradientError, match="p=3"):
        build_gradients(model, ["x"])


class MeanVarianceNormalization(OpRun):
    """``MeanVarianceNormalization`` in the input's type (the reference's function adds a
    float32 epsilon, refused by its ``Add`` in float64)."""

    op_domain = ""

    def _run(self, x, axes=None):
        axes = tuple(axes if axes is not None else (0, 2, 3))
        centred = x - x.mean(axis=axes, keepdims=True)
        return (centred / (np.sqrt((centred**2).mean(axis=axes, keepdims=True)) + 1e-9),)


@pytest.mark.parametrize(
    "shape, axes, opset", [((2, 3, 2, 2), None, 13), ((3, 4, 5), [0, 2], 18), ((3, 4), [-1], 13)]
)
def test_mean_variance_normalization_against_torch(shape, axes, opset):
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)
    model, feeds = _node_model(node, _draw(shape, 17, shift=0.6), {}, {"y": shape}, opset)
    dims = tuple(axes or (0, 2, 3))

    def forward(v):
        centred = v["x"] - v["x"].mean(dim=dims, keepdim=True)
        std = (centred**2).mean(dim=dims, keepdim=True).sqrt()
        return [centred / (std + 1e-9)]

    _check_against_torch(model, ["x"], feeds, forward, [MeanVarianceNormalization])


# The weights alone ---------------------------------------------------------------------------


@pytest.mark.parametrize("wrt", [["scale", "bias"], ["bias"], ["scale"]])
@pytest.mark.parametrize("case", ["layer", "batch1", "batch0", "group18"])
def test_weights_without_the_input(case, wrt):
    """Only the weights differentiated: their gradients still equal finite differences, and the
    statistics of the input are written for the scale's only (no ``ReduceMean`` otherwise)."""
    if case == "group18":
        model, feeds = _group_norm((3, 4, 5), 2, 18)
    elif case == "layer":
        node, x, weights, outputs, _ = _layer_norm((3, 4, 5), -2, statistics=False)
        model, feeds = _node_model(node, x, weights, outputs, 17)
    else:
        training = case == "batch1"
        opset = 15 if training else 14
        node, x, weights, outputs = _batch_norm(
            (4, 3, 2), training, opset, "unused" if training else ""
        )
        model, feeds = _node_model(node, x, weights, outputs, opset)
    check_finite_differences(model, wrt, feeds)
    added = [
        n.op_type for n in build_gradients(model, wrt).model.graph.node[len(model.graph.node) :]
    ]
    assert ("ReduceMean" in added) == ("scale" in wrt and case != "batch0"), added


# Models exported from torch, as the project trains them ---------------------------------------


def _torch_model(norm, seed):
    torch.manual_seed(seed)
    activation = torch.nn.ReLU() if isinstance(norm, torch.nn.BatchNorm1d) else torch.nn.GELU()
    return torch.nn.Sequential(torch.nn.Linear(5, 6), norm, activation, torch.nn.Linear(6, 3))


@pytest.mark.parametrize("norm", ["batch", "layer"])
def test_torch_models_through_the_training_graph(norm):
    """Linear -> BatchNorm1d -> ReLU -> Linear and Linear -> LayerNorm -> GELU -> Linear: the
    training graph of the export with its loss (``BatchNormalization`` decomposed, the
    ``LayerNormalization`` node with its statistics) gives torch's gradients of every weight."""
    if ("", "Reshape") not in GRADIENTS:
        pytest.skip("Reshape's gradient (the shapes family) is not registered yet.")
    layer = torch.nn.BatchNorm1d(6) if norm == "batch" else torch.nn.LayerNorm(6)
    module = _torch_model(layer, 3)
    with torch.no_grad():  # weights away from their defaults: scale 1, bias 0
        layer.weight.uniform_(0.5, 1.5)
        layer.bias.uniform_(-0.5, 0.5)
    x, label = _draw((8, 5), 18), _draw((8, 3), 19)
    onx = helpers.export_for_training(module, torch.from_numpy(x))
    graph = training_graph(helpers.add_loss_output(onx))
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)
    wrt = [t.name for t in graph.model.graph.initializer if t.data_type in floats]
    built = build_gradients(graph.model, wrt)
    names = ["loss"] + [built.gradients[n] for n in wrt]
    values = run_on_runtime(built.model, {"x": x, "label": label}, names)
    module.train()
    loss = ((module(torch.from_numpy(x)) - torch.from_numpy(label)) ** 2).mean()
    loss.backward()
    torch_grads = {name: p.grad.numpy() for name, p in module.named_parameters()}
    np.testing.assert_allclose(values["loss"], loss.item(), rtol=1e-5)
    # the bias before a BatchNorm has a gradient of 0, in rounding errors: the tolerance is
    # relative to the largest gradient
    largest = max(float(np.abs(g).max()) for g in torch_grads.values())
    for name in wrt:
        ours = values[built.gradients[name]]
        expected = torch_grads.get(name, np.zeros_like(ours))  # running statistics: unread
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-6 * largest, err_msg=name)
    assert {"1.weight", "1.bias"} <= set(wrt)
