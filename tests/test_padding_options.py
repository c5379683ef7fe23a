"""Padding and pooling options of torch's convolutions and poolings train and predict as in torch.

Each layer follows a trained 1 x 1 convolution, so that the gradient goes
through its padding. The runtime's gradients (forward/backward API and
OrtTorchModule) are compared with torch's autograd in float64; training in
the three paths with torch's SGD on the same batches, step by step; the
exported model and ``predict`` with torch's output. Models from elsewhere
(``auto_pad`` with strides, ``Pad`` with ``axes``) are written with onnx.
"""

import copy

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from conftest import make_optimizer
from onnx import TensorProto, helper
from torch import nn
from torch.nn import functional

from helpers import (
    OrtGradientForwardBackward,
    OrtTorchModule,
    UntrainableModelError,
)
from helpers.core.layers.padding import explicit_pads, non_constant_pads_as_gathers
from helpers.core.layers.pooling import average_pools_as_convolutions, pools_as_torch_computes_them
from helpers.core.model_graphs.torch_export import export_for_training
from helpers.core.model_graphs.training_graph import training_graph
from helpers.teaching.torch_reference import torch_fit

pytestmark = pytest.mark.filterwarnings(
    "ignore:Constant folding:UserWarning", "ignore:Using padding='same':UserWarning"
)

N_SAMPLES = 10
LEARNING_RATE = 0.01

#: name -> (layer after a 1 x 1 convolution of 2 channels, spatial shape of the input)
LAYERS = {
    # padding of a convolution: int, tuple, 'same' (odd, even, dilated kernels), 'valid'
    "conv2d_int": (lambda: nn.Conv2d(2, 3, 3, padding=1), (6, 7)),
    "conv2d_tuple_stride": (lambda: nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2)), (7, 6)),
    "conv2d_int_dilation": (lambda: nn.Conv2d(2, 3, 3, padding=2, dilation=2, stride=2), (7, 8)),
    "conv2d_same_odd": (lambda: nn.Conv2d(2, 7, 5, padding="same"), (6, 8)),
    "conv2d_same_even": (lambda: nn.Conv2d(2, 3, (4, 2), padding="same"), (6, 7)),
    "conv2d_same_dilation": (
        lambda: nn.Conv2d(2, 3, (2, 3), padding="same", dilation=(3, 2)),
        (7, 8),
    ),
    "conv2d_valid": (lambda: nn.Conv2d(2, 3, 3, padding="valid", stride=2), (7, 8)),
    "conv1d_same_even": (lambda: nn.Conv1d(2, 3, 4, padding="same"), (9,)),
    "conv1d_same_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="same", dilation=3), (9,)),
    "conv1d_valid_dilation": (lambda: nn.Conv1d(2, 3, 3, padding="valid", dilation=2), (9,)),
    "conv1d_depthwise_same": (lambda: nn.Conv1d(2, 2, 4, padding="same", groups=2), (9,)),
    # padding modes
    "conv2d_reflect": (lambda: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (5, 6)),
    "conv2d_replicate_stride": (
        lambda: nn.Conv2d(2, 3, 3, stride=2, padding=2, padding_mode="replicate"),
        (5, 6),
    ),
    "conv2d_circular": (
        lambda: nn.Conv2d(2, 3, 3, padding=(2, 1), padding_mode="circular"),
        (5, 6),
    ),
    "conv2d_reflect_same": (
        lambda: nn.Conv2d(2, 3, 4, padding="same", padding_mode="reflect"),
        (5, 6),
    ),
    "conv1d_reflect": (lambda: nn.Conv1d(2, 3, 5, padding=3, padding_mode="reflect"), (8,)),
    "conv1d_replicate_same": (
        lambda: nn.Conv1d(2, 3, 4, padding="same", padding_mode="replicate"),
        (8,),
    ),
    "conv1d_circular": (lambda: nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"), (8,)),
    "reflection_pad2d": (lambda: nn.ReflectionPad2d((1, 2, 0, 3)), (5, 6)),
    "replication_pad1d": (lambda: nn.ReplicationPad1d((3, 1)), (6,)),
    # poolings: ceil_mode, count_include_pad, padding, stride, dilation
    "maxpool2d_ceil_short_kernel": (lambda: nn.MaxPool2d(1, stride=2, ceil_mode=True), (6, 8)),
    "maxpool2d_ceil_padding": (
        lambda: nn.MaxPool2d(2, stride=3, padding=1, ceil_mode=True),
        (7, 9),
    ),
    "maxpool2d_ceil_dilation": (
        lambda: nn.MaxPool2d(2, stride=4, padding=1, dilation=2, ceil_mode=True),
        (6, 7),
    ),
    # torch's last window needs an end pad as large as the kernel, which onnxruntime refuses
    "maxpool2d_ceil_end_pad_past_kernel": (
        lambda: nn.MaxPool2d(2, stride=3, padding=1, dilation=2, ceil_mode=True),
        (8, 9),
    ),
    "maxpool2d_ceil_unchanged": (
        lambda: nn.MaxPool2d(2, stride=2, dilation=2, ceil_mode=True),
        (7, 8),
    ),
    "maxpool1d_ceil": (lambda: nn.MaxPool1d(1, stride=3, ceil_mode=True), (8,)),
    # sizes shape inference loses (pads computed by nodes, GroupNorm's reshape): found by a run
    "maxpool2d_ceil_after_reflect": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 4, 3, padding="same", padding_mode="reflect"),
            nn.GroupNorm(2, 4),
            nn.MaxPool2d(2, ceil_mode=True),
        ),
        (7, 9),
    ),
    "avgpool2d_ceil": (lambda: nn.AvgPool2d(2, stride=2, ceil_mode=True), (7, 9)),
    "avgpool2d_ceil_padding": (
        lambda: nn.AvgPool2d(3, stride=3, padding=1, ceil_mode=True),
        (7, 9),
    ),
    "avgpool2d_ceil_padding_excluded": (
        lambda: nn.AvgPool2d((3, 2), (2, 3), 1, ceil_mode=True, count_include_pad=False),
        (7, 9),
    ),
    "avgpool2d_padding_excluded": (
        lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (6, 7),
    ),
    "avgpool2d_short_kernel_ceil": (lambda: nn.AvgPool2d(1, stride=3, ceil_mode=True), (7, 8)),
    "avgpool1d_ceil_padding": (
        lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True),
        (9,),
    ),
    "avgpool1d_ceil_padding_excluded": (
        lambda: nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
        (9,),
    ),
    "avgpool1d_padding_excluded": (
        lambda: nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False),
        (8,),
    ),
}

#: The layers trained in the three paths (all have their gradients checked).
TRAINED = [
    "conv2d_same_odd",
    "conv1d_same_dilation",
    "conv2d_reflect",
    "conv1d_replicate_same",
    "conv2d_circular",
    "maxpool2d_ceil_short_kernel",
    "avgpool2d_ceil_padding",
    "avgpool1d_ceil_padding_excluded",
    "maxpool2d_ceil_after_reflect",
]


def _network(name, first=False):
    """The layer (after a trained 1 x 1 convolution unless ``first``), then a linear layer."""
    build, spatial = LAYERS[name]
    torch.manual_seed(0)
    conv = nn.Conv1d(1, 2, 1) if len(spatial) == 1 else nn.Conv2d(1, 2, 1)
    features = nn.Sequential(build()) if first else nn.Sequential(conv, build())
    shape = (2 if first else 1, *spatial)
    with torch.no_grad():
        size = features(torch.zeros(1, *shape)).numel()
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(size, 1)), shape


def _data(shape):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_SAMPLES, *shape)).astype(np.float32)
    y = np.tanh(X.reshape(N_SAMPLES, -1)[:, :3].sum(axis=1, keepdims=True)).astype(np.float32)
    return X, y


def _close(got, expected, name, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradients_equal_torch(name):
    """The gradients of the forward/backward API and of OrtTorchModule are torch's (float64)."""
    module, shape = _network(name)
    X, _ = _data(shape)
    grad_out = np.random.default_rng(1).standard_normal((N_SAMPLES, 1)).astype(np.float32)
    reference = copy.deepcopy(module).double()
    reference(torch.from_numpy(X).double()).backward(torch.from_numpy(grad_out).double())
    expected = {weight: p.grad.numpy() for weight, p in reference.named_parameters()}
    function = OrtGradientForwardBackward(export_for_training(module, torch.from_numpy(X[:2])))
    function = function.new_instance()
    names = function.parent.weights_to_train
    parameters = dict(module.named_parameters())
    function.forward([X, *[parameters[n].detach().numpy() for n in names]], training=True)
    for weight, gradient in zip(names, function.backward([grad_out])):
        _close(gradient.numpy(), expected[weight], weight)
    ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
    ort_module(torch.from_numpy(X)).backward(torch.from_numpy(grad_out))
    for weight, parameter in ort_module.module.named_parameters():
        _close(parameter.grad.numpy(), expected[weight], weight)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_exported_model_computes_what_torch_computes(name):
    module, shape = _network(name)
    X, _ = _data(shape)
    layers = module[:2]  # the output of the layer itself, before the linear layer
    onx = export_for_training(layers, torch.from_numpy(X[:2]))
    session = onnxruntime.InferenceSession(
        onx.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    with torch.no_grad():
        expected = layers(torch.from_numpy(X)).numpy()
    _close(session.run(None, {"x": X})[0], expected, name, rtol=1e-5, atol=1e-6)


def _optimizer(api, onx, batch_size, epochs):
    common = dict(
        max_iter=epochs,
        batch_size=batch_size,
        learning_rate=LEARNING_RATE,
        solver="sgd",
        random_state=0,
        validation_every=0,
    )
    return make_optimizer(api, onx, **common)


@pytest.mark.parametrize("api", ["whole", "forward_backward", "torch_module"])
@pytest.mark.parametrize("name", TRAINED)
def test_training_steps_weights_and_predictions_match_torch(name, api):
    """Full batches, three epochs: every step's loss, the trained weights and the predictions."""
    module, shape = _network(name)
    X, y = _data(shape)
    trained = copy.deepcopy(module)
    _, torch_losses = torch_fit(trained, X, y, "squared_error", N_SAMPLES, 3, LEARNING_RATE)
    with torch.no_grad():
        expected = trained(torch.from_numpy(X)).numpy()
    if api == "torch_module":
        ort_module = OrtTorchModule(copy.deepcopy(module), torch.from_numpy(X[:2]))
        _, losses = torch_fit(ort_module, X, y, "squared_error", N_SAMPLES, 3, LEARNING_RATE)
        weights = {k: v.detach().numpy() for k, v in ort_module.module.named_parameters()}
        predicted = ort_module(torch.from_numpy(X)).detach().numpy()
    else:
        onx = export_for_training(module, torch.from_numpy(X[:2]))
        opt = _optimizer(api, onx, N_SAMPLES, 3).fit(X, y)
        losses, weights, predicted = opt.train_losses_, opt.get_state(), opt.predict(X)
    _close(losses, torch_losses, "losses", atol=1e-7)
    assert torch_losses[-1] < torch_losses[0]  # it trained
    for weight, value in trained.named_parameters():
        _close(weights[weight], value.detach().numpy(), weight)
    _close(np.reshape(predicted, expected.shape), expected, "predictions")


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
    _close(y, out.detach().numpy(), "y", rtol=1e-5)
    out.backward(torch.from_numpy(grad_out).double())
    for name in got:
        _close(got[name], w[name].grad.numpy(), name)


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
    _close(y, out.detach().numpy(), "y", rtol=1e-6, atol=1e-6)
    out.backward(torch.from_numpy(grad_out).double())
    _close(got["w0"], weight.grad.numpy(), "w0", rtol=1e-6, atol=1e-6)


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


@pytest.mark.parametrize(
    "name", ["conv2d_reflect", "conv1d_replicate_same", "avgpool2d_ceil_padding_excluded"]
)
def test_input_gradients_of_ort_torch_module_equal_torch(name):
    """The layer first: OrtTorchModule's gradient of an input that requires one is torch's."""
    module, shape = _network(name, first=True)
    X, _ = _data(shape)
    grad_out = np.random.default_rng(1).standard_normal((N_SAMPLES, 1)).astype(np.float32)
    reference = torch.from_numpy(X).double().requires_grad_(True)
    copy.deepcopy(module).double()(reference).backward(torch.from_numpy(grad_out).double())
    x = torch.from_numpy(X).requires_grad_(True)
    OrtTorchModule(module, torch.from_numpy(X[:2]))(x).backward(torch.from_numpy(grad_out))
    _close(x.grad.numpy(), reference.grad.numpy(), "x")
