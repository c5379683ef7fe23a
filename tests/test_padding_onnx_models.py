"""Padding of models written with onnx, not exported from torch, trains as torch computes it.

``auto_pad`` (with strides and dilations) and ``Pad`` of opset 19 with an ``axes``
input become explicit pads and gathers in the training graph: the gradients of the
forward/backward API are torch's in float64. What cannot be written exactly is
refused by name; a padding of the input itself is left as it is.
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper
from torch.nn import functional

from helpers import OrtGradientForwardBackward, UntrainableModelError
from helpers.core.layers.padding import explicit_pads, non_constant_pads_as_gathers
from helpers.core.layers.pooling import average_pools_as_convolutions, pools_as_torch_computes_them
from helpers.core.model_graphs.training_graph import training_graph


def _onnx_model(nodes, weights, spatial, opset=17):
    """A model of ``nodes`` from ``x`` (batch, 2 channels, ``spatial``; None: free) to ``y``."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, *spatial])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _constant(name, values):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(values))


def _onnx_gradients(model, X):
    """The output and the weight gradients of the forward/backward API for ``sum(y * grad_out)``."""
    function = OrtGradientForwardBackward(model).new_instance()
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    names = function.parent.weights_to_train
    y = function.forward([X, *[weights[n] for n in names]], training=True)[0].numpy().copy()
    grad_out = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    return y, grad_out, dict(zip(names, (g.numpy() for g in function.backward([grad_out]))))


def _torch_pads(pads):
    """ONNX pads (begins, then ends, first axis first) in ``F.pad``'s order (last axis first)."""
    rank = len(pads) // 2
    return [p for axis in reversed(range(rank)) for p in (pads[axis], pads[axis + rank])]


#: auto_pad, kernel, strides, dilations, and the pads ONNX defines for it on a 7 x 8 input
AUTO_PADS = [
    ("SAME_UPPER", [4, 3], [1, 1], [1, 2], [1, 2, 2, 2]),
    ("SAME_UPPER", [3, 2], [2, 3], [1, 1], [1, 0, 1, 1]),
    ("SAME_LOWER", [4, 2], [1, 2], [1, 1], [2, 0, 1, 0]),
    ("SAME_LOWER", [3, 3], [2, 2], [2, 1], [2, 1, 2, 0]),
    ("VALID", [3, 2], [2, 2], [1, 1], [0, 0, 0, 0]),
]


@pytest.mark.parametrize(
    "op_type, auto_pad, kernel, strides, dilations, pads",
    [  # torch's average pooling has no dilation
        (op_type, *case)
        for op_type in ("Conv", "MaxPool", "AveragePool")
        for case in AUTO_PADS
        if op_type != "AveragePool" or case[3] == [1, 1]
    ],
)
def test_auto_pad_of_any_model_trains_as_its_pads(
    op_type, auto_pad, kernel, strides, dilations, pads
):
    """A model from elsewhere with auto_pad: the training graph's explicit pads train as torch."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 2, 7, 8)).astype(np.float32)
    weights = {"w0": rng.standard_normal((2, 2, 1, 1)).astype(np.float32)}
    attributes = dict(auto_pad=auto_pad, kernel_shape=kernel, strides=strides)
    if op_type == "Conv":
        weights["w1"] = rng.standard_normal((3, 2, *kernel)).astype(np.float32)
    if op_type != "AveragePool":  # AveragePool has dilations from opset 19
        attributes["dilations"] = dilations
    inputs = ["h", "w1"] if op_type == "Conv" else ["h"]
    layer = helper.make_node(op_type, inputs, ["y"], **attributes)
    model = _onnx_model([helper.make_node("Conv", ["x", "w0"], ["h"]), layer], weights, [7, 8])
    rewritten = training_graph(model).model.graph.node
    assert "auto_pad" not in {a.name for n in rewritten for a in n.attribute}
    y, grad_out, got = _onnx_gradients(model, X)
    w = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in weights.items()}
    h = functional.conv2d(torch.from_numpy(X).double(), w["w0"])
    if op_type == "Conv":
        padded = functional.pad(h, _torch_pads(pads))
        out = functional.conv2d(padded, w["w1"], stride=strides, dilation=dilations)
    elif op_type == "MaxPool":
        padded = functional.pad(h, _torch_pads(pads), value=-np.inf)
        out = functional.max_pool2d(padded, kernel, strides, dilation=dilations)
    else:  # ONNX's default count_include_pad=0: the window's sum over its number of inputs

        def sums(t):
            return functional.avg_pool2d(
                functional.pad(t, _torch_pads(pads)), kernel, strides, divisor_override=1
            )

        out = sums(h) / sums(torch.ones_like(h))
    np.testing.assert_allclose(y, out.detach().numpy(), rtol=1e-5, atol=1e-5)
    out.backward(torch.from_numpy(grad_out).double())
    for name in got:
        np.testing.assert_allclose(got[name], w[name].grad.numpy(), 1e-4, 1e-5, err_msg=name)


@pytest.mark.parametrize(
    "mode, torch_mode", [("reflect", "reflect"), ("edge", "replicate"), ("wrap", "circular")]
)
def test_pad_modes_with_axes_train_as_torch(mode, torch_mode):
    """``Pad`` of opset 19 with an ``axes`` input (last axis first), in each non-constant mode."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 2, 5, 6)).astype(np.float32)
    w0 = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["h"]),
        _constant("pads", np.array([3, 1, 2, 4])),
        _constant("axes", np.array([-1, 2])),
        helper.make_node("Pad", ["h", "pads", "", "axes"], ["y"], mode=mode),
    ]
    model = _onnx_model(nodes, {"w0": w0}, [5, 6], opset=19)
    assert "Pad" not in {n.op_type for n in training_graph(model).model.graph.node}
    y, grad_out, got = _onnx_gradients(model, X)
    weight = torch.tensor(w0.astype(np.float64), requires_grad=True)
    h = functional.conv2d(torch.from_numpy(X).double(), weight)
    out = functional.pad(h, [3, 2, 1, 4], mode=torch_mode)
    np.testing.assert_allclose(y, out.detach().numpy(), rtol=1e-6, atol=1e-6)
    out.backward(torch.from_numpy(grad_out).double())
    np.testing.assert_allclose(got["w0"], weight.grad.numpy(), rtol=1e-6, atol=1e-6)


def _after_a_conv(node, spatial, extra=()):
    """``node`` reading ``h``, a trained 1 x 1 convolution of ``x`` (spatial sizes ``spatial``)."""
    conv = helper.make_node("Conv", ["x", "w0"], ["h"])
    return _onnx_model([*extra, conv, node], {"w0": np.ones((2, 2, 1, 1), np.float32)}, spatial)


def test_what_cannot_be_written_exactly_is_refused_by_name():
    free = [None, None]
    conv = helper.make_node(
        "Conv",
        ["h", "w0"],
        ["y"],
        name="strided_same",
        auto_pad="SAME_UPPER",
        strides=[2, 2],
        kernel_shape=[1, 1],
    )
    with pytest.raises(UntrainableModelError, match="Conv 'strided_same' with auto_pad=SAME_UPPER"):
        explicit_pads(_after_a_conv(conv, free))
    pad = helper.make_node("Pad", ["h", "pads"], ["y"], name="mirror", mode="reflect")
    pads = _constant("pads", np.array([0, 0, 1, 1] * 2))
    with pytest.raises(UntrainableModelError, match="Pad 'mirror' in mode 'reflect' .*='reflect'"):
        non_constant_pads_as_gathers(_after_a_conv(pad, free, extra=[pads]))
    excluded = helper.make_node(
        "AveragePool", ["h"], ["y"], name="avg", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
    )
    with pytest.raises(UntrainableModelError, match="AveragePool 'avg' with padding left out"):
        average_pools_as_convolutions(_after_a_conv(excluded, free))
    ceil = helper.make_node(
        "AveragePool", ["h"], ["y"], name="ceil", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1
    )
    with pytest.raises(UntrainableModelError, match="AveragePool 'ceil' with ceil_mode=1"):
        average_pools_as_convolutions(_after_a_conv(ceil, [5, 5]))  # ONNX's ceil_mode, not torch's
    with pytest.raises(UntrainableModelError, match="AveragePool 'ceil'"):  # before any training
        OrtGradientForwardBackward(_after_a_conv(ceil, [5, 5])).new_instance()
    max_ceil = helper.make_node(
        "MaxPool", ["h"], ["y"], name="ceil", kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1
    )
    with pytest.raises(UntrainableModelError, match="MaxPool 'ceil' has ceil_mode=1 on an input"):
        pools_as_torch_computes_them(_after_a_conv(max_ceil, free))


def test_a_padding_of_the_input_of_unknown_size_is_left_as_it_is():
    """Only an input's gradient would need it: the training graph keeps what it cannot rewrite."""
    pads = _constant("pads", np.array([0, 0, 1, 1] * 2))
    pad = helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect")
    conv = helper.make_node("Conv", ["p", "w0"], ["y"])
    model = _onnx_model([pads, pad, conv], {"w0": np.ones((2, 2, 1, 1), np.float32)}, [None, None])
    rewritten = non_constant_pads_as_gathers(model)
    assert [n.op_type for n in rewritten.graph.node] == ["Constant", "Pad", "Conv"]
