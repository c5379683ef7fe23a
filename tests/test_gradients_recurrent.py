"""Recurrent layers (GRU, LSTM, RNN) unrolled over time by helpers.portable.gradients.recurrent.

* forward: the unrolled graph equals onnxruntime 1.19.2's GRU/LSTM/RNN kernels (float32), for
  every direction, ``linear_before_reset``, ``layout``, bias and initial states given or absent,
  activations, outputs used or not, and any batch size;
* gradients, single nodes: float64 finite differences (the oracle) on tiny cases, run by onnx's
  reference evaluator on the unrolled model (its own GRU/LSTM/RNN ignore ``direction`` and
  support one direction only, so they cannot be the forward of the check); 1.19.2's builder has
  no gradient for these operators, so there is no comparison with it;
* gradients, torch modules (``nn.GRU``, ``nn.LSTM``, ``nn.RNN``, batch first or not,
  bidirectional or not, one or two layers, a ``Linear`` head on the last output) exported with
  ``helpers.export_for_training``: every weight's and the input's gradient equal torch autograd
  in float64;
* refusals: what cannot be unrolled is named with its layer, and only when it is on the path.
"""

import numpy as np
import onnx
import pytest
import torch
from gradient_check import check_finite_differences, run_on_runtime, single_node_loss, to_float64
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from helpers import export_for_training
from helpers.portable.gradients import NoGradientError, build_gradients
from helpers.portable.gradients.recurrent import unrolled_recurrences

#: torch's note on exporting initial states made from the batch size: checked below (batch 5)
pytestmark = pytest.mark.filterwarnings("ignore:Exporting a model to ONNX with a batch_size")

#: sequence length, batch, input features, hidden units
T, N, F, H = 3, 2, 2, 3
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}


def _node_case(
    kind,
    direction="forward",
    layout=0,
    bias=True,
    h0=True,
    c0=True,
    outputs=None,
    seed=0,
    batch=N,
    opset=17,
    **attributes,
):
    """A single recurrent node with a weighted-sum loss: ``(model, feeds, weights)``;
    ``h0="zeros"``: an initial state of zeros that is a trained weight all the same."""
    rng = np.random.default_rng(seed)
    d, g = (2 if direction == "bidirectional" else 1), GATES[kind]
    weights = {
        "W": rng.uniform(-1, 1, (d, g * H, F)).astype(np.float32),
        "R": rng.uniform(-1, 1, (d, g * H, H)).astype(np.float32),
    }
    if bias:
        weights["B"] = rng.uniform(-1, 1, (d, 2 * g * H)).astype(np.float32)
    state = [batch, d, H] if layout else [d, batch, H]
    if h0:
        weights["h0"] = rng.uniform(-1, 1, state).astype(np.float32) * (h0 != "zeros")
    if c0 and kind == "LSTM":
        weights["c0"] = rng.uniform(-1, 1, state).astype(np.float32)
    names = ["X", "W", "R", "B" if bias else "", "", "h0" if h0 else ""]
    if kind == "LSTM":
        names.append("c0" if "c0" in weights else "")
    outputs = outputs or (["Y", "Y_h", "Y_c"] if kind == "LSTM" else ["Y", "Y_h"])
    y_shape = [batch, T, d, H] if layout else [T, d, batch, H]
    shapes = {o: (y_shape if o == "Y" else state) for o in outputs if o}
    node = helper.make_node(
        kind,
        names,
        [o or "" for o in outputs],
        name=f"/{kind}",
        hidden_size=H,
        direction=direction,
        **({"layout": layout} if layout else {}),
        **attributes,
    )
    x = rng.uniform(-1, 1, [batch, T, F] if layout else [T, batch, F]).astype(np.float32)
    model, feeds = single_node_loss(node, {"X": x}, weights, shapes, seed=seed, opset=opset)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for k, size in enumerate([None, T, F] if layout else [T, None, F]):
        if size is None:
            dims[k].dim_param = "N"
        else:
            dims[k].dim_value = size
    return model, feeds, weights


def _without_loss(model):
    """``model`` without the nodes of its loss (their weights have the batch of the case)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(n for n in model.graph.node if not n.output[0].startswith("loss"))
    return copy


def _outputs(model):
    return [o for n in model.graph.node if n.op_type in GATES for o in n.output if o]


FORWARD_CASES = [
    (kind, direction, attrs)
    for direction in ["forward", "reverse", "bidirectional"]
    for kind, attrs in [
        ("GRU", {"linear_before_reset": 0}),
        ("GRU", {"linear_before_reset": 1}),
        ("LSTM", {}),
        ("RNN", {}),
        ("RNN", {"activations": ["Relu"] * (2 if direction == "bidirectional" else 1)}),
    ]
]


@pytest.mark.parametrize("kind, direction, attrs", FORWARD_CASES)
@pytest.mark.parametrize("bias, states", [(True, True), (False, False), (True, False)])
def test_unrolled_forward_equals_the_kernel(kind, direction, attrs, bias, states):
    model, feeds, _ = _node_case(kind, direction, bias=bias, h0=states, c0=states, **attrs)
    unrolled = unrolled_recurrences(model)
    assert not {n.op_type for n in unrolled.graph.node} & set(GATES)
    names = _outputs(model)
    kernel = run_on_runtime(model, feeds, names)
    ours = run_on_runtime(unrolled, feeds, names)
    for name in names:
        np.testing.assert_allclose(ours[name], kernel[name], rtol=1e-5, atol=1e-6)
    if not states:  # the batch stays free: the same unrolled graph on 5 rows
        model5, feeds5, _ = _node_case(
            kind, direction, bias=bias, h0=False, c0=False, batch=5, **attrs
        )
        kernel5 = run_on_runtime(model5, feeds5, names)
        ours5 = run_on_runtime(_without_loss(unrolled), feeds5, names)
        for name in names:
            np.testing.assert_allclose(ours5[name], kernel5[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_layout_1_equals_the_kernel_on_transposed_values(kind, direction):
    """onnxruntime 1.19.2 refuses layout=1 ("Batchwise recurrent operations"): its layout-0
    kernel on the transposed input and states, outputs transposed back, is the reference."""
    model1, feeds1, _ = _node_case(kind, direction, layout=1)
    model0, _, _ = _node_case(kind, direction, layout=0)
    x0 = feeds1["X"].transpose(1, 0, 2)
    weights1 = {t.name: numpy_helper.to_array(t) for t in model1.graph.initializer}
    for tensor in model0.graph.initializer:
        if tensor.name in ("h0", "c0"):
            tensor.CopyFrom(
                numpy_helper.from_array(weights1[tensor.name].transpose(1, 0, 2), tensor.name)
            )
        elif tensor.name in ("W", "R", "B"):
            tensor.CopyFrom(numpy_helper.from_array(weights1[tensor.name], tensor.name))
    names = _outputs(model1)
    kernel = run_on_runtime(model0, {"X": x0}, names)
    ours = run_on_runtime(unrolled_recurrences(model1), feeds1, names)
    np.testing.assert_allclose(ours["Y"], kernel["Y"].transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-6)
    for name in names[1:]:
        np.testing.assert_allclose(
            ours[name], kernel[name].transpose(1, 0, 2), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("opset", [13, 14, 18, 21])
def test_unrolled_forward_in_every_opset(opset):
    """Split, Squeeze, Unsqueeze take their sizes and axes as inputs from opset 13 on."""
    model, feeds, _ = _node_case("LSTM", "bidirectional", opset=opset)
    names = _outputs(model)
    kernel = run_on_runtime(model, feeds, names)
    ours = run_on_runtime(unrolled_recurrences(model), feeds, names)
    for name in names:
        np.testing.assert_allclose(ours[name], kernel[name], rtol=1e-5, atol=1e-6)


GRADIENT_CASES = [
    ("GRU", {"direction": "bidirectional", "h0": "zeros"}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 0}),
    ("GRU", {"direction": "reverse", "linear_before_reset": 1, "bias": False, "h0": False}),
    ("GRU", {"layout": 1, "linear_before_reset": 1}),
    ("LSTM", {"direction": "bidirectional"}),
    ("LSTM", {"direction": "reverse", "bias": False, "h0": False}),
    ("LSTM", {"layout": 1, "outputs": ["", "Y_h"]}),
    ("LSTM", {"outputs": ["", "", "Y_c"], "c0": False}),
    ("RNN", {"direction": "reverse", "activations": ["Relu"]}),
    ("RNN", {"direction": "bidirectional", "layout": 1, "outputs": ["", "Y_h"]}),
]


@pytest.mark.parametrize("kind, options", GRADIENT_CASES)
def test_gradients_equal_finite_differences(kind, options):
    model, feeds, weights = _node_case(kind, **options)
    check_finite_differences(unrolled_recurrences(model), [*weights, "X"], feeds, samples=4)


class _Net(torch.nn.Module):
    """A recurrent layer and a ``Linear`` head on its last output."""

    def __init__(self, layer, batch_first, bidirectional, layers, **options):
        super().__init__()
        self.rnn = layer(
            F, H, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional, **options
        )
        self.head = torch.nn.Linear(H * (2 if bidirectional else 1), 2)

    def forward(self, x):
        y = self.rnn(x)[0]
        return self.head(y[:, -1] if self.rnn.batch_first else y[-1])


def _exported(net, x):
    """``net`` exported with a loss ``sum(y * R)``; the batch is the free axis."""
    axes = {"x": {0 if net.rnn.batch_first else 1: "N"}, "y": {0: "N"}}
    model = export_for_training(net, torch.from_numpy(x), dynamic_axes=axes)
    rows = x.shape[0 if net.rnn.batch_first else 1]
    r = np.random.default_rng(1).standard_normal((rows, 2)).astype(np.float32)
    model.graph.initializer.append(numpy_helper.from_array(r, "loss_r"))
    model.graph.node.extend(
        [
            helper.make_node("Mul", ["y", "loss_r"], ["loss_p"]),
            helper.make_node("ReduceSum", ["loss_p"], ["loss"], keepdims=0),
        ]
    )
    model.graph.output.insert(0, helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    return model, r


TORCH_CASES = [
    (layer, batch_first, bidirectional, layers, {})
    for layer in [torch.nn.GRU, torch.nn.LSTM, torch.nn.RNN]
    for batch_first, bidirectional, layers in [(True, False, 1), (False, True, 2), (True, True, 2)]
] + [(torch.nn.RNN, False, False, 2, {"nonlinearity": "relu"})]


@pytest.mark.parametrize("layer, batch_first, bidirectional, layers, options", TORCH_CASES)
def test_torch_modules_gradients_equal_autograd(layer, batch_first, bidirectional, layers, options):
    torch.manual_seed(0)
    net = _Net(layer, batch_first, bidirectional, layers, **options)
    x = np.random.default_rng(0).standard_normal([N, T, F] if batch_first else [T, N, F])
    model, r = _exported(net, x.astype(np.float32))
    assert {n.op_type for n in model.graph.node} & set(GATES)
    weights = [name for name, _ in net.named_parameters()]
    built = build_gradients(model, [*weights, "x"])
    # float32 on onnxruntime: the unrolled forward is the kernels' forward
    prediction = run_on_runtime(built.model, {"x": x.astype(np.float32)}, ["y"])["y"]
    kernel = run_on_runtime(model, {"x": x.astype(np.float32)}, ["y"])["y"]
    np.testing.assert_allclose(prediction, kernel, rtol=1e-5, atol=1e-6)
    x5 = np.random.default_rng(2).standard_normal([5, T, F] if batch_first else [T, 5, F])
    feeds5 = {"x": x5.astype(np.float32)}  # another batch size (the loss's weights have 2 rows)
    kernel = run_on_runtime(_without_loss(model), feeds5, ["y"])["y"]
    prediction = run_on_runtime(_without_loss(unrolled_recurrences(model)), feeds5, ["y"])["y"]
    np.testing.assert_allclose(prediction, kernel, rtol=1e-5, atol=1e-6)
    # float64: the reference evaluator against torch autograd
    names = [built.gradients[n] for n in [*weights, "x"]]
    ours = ReferenceEvaluator(to_float64(built.model)).run(names, {"x": x})
    net.double()
    x_torch = torch.from_numpy(x).requires_grad_()
    (net(x_torch) * torch.from_numpy(r).double()).sum().backward()
    expected = [p.grad for _, p in net.named_parameters()] + [x_torch.grad]
    for name, grad, reference in zip([*weights, "x"], ours, expected):
        np.testing.assert_allclose(grad, reference.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    "attributes, extra, reason",
    [
        ({"clip": 2.0}, {}, "clip"),
        ({"activations": ["HardSigmoid", "Tanh"]}, {}, "activations"),
        ({}, {"sequence_lens": True}, "sequence_lens"),
        ({"linear_before_reset": 1}, {"free_length": True}, "sequence length"),
    ],
)
def test_refusals_name_the_layer_and_the_reason(attributes, extra, reason):
    model, _, weights = _node_case("GRU", **attributes)
    node = next(n for n in model.graph.node if n.op_type == "GRU")
    if extra.get("sequence_lens"):
        model.graph.initializer.append(numpy_helper.from_array(np.full([N], T, np.int32), "lens"))
        node.input[4] = "lens"
    if extra.get("free_length"):
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    assert unrolled_recurrences(model).graph.node[0].op_type == "GRU"  # left as it is
    with pytest.raises(NoGradientError, match=rf"GRU \(from the layer /GRU\).*{reason}"):
        build_gradients(model, list(weights))
    # a frozen layer before a trained value is no obstacle
    model.graph.node[1].input[1] = "trained"
    model.graph.initializer.append(numpy_helper.from_array(np.float32(1.0), "trained"))
    assert build_gradients(model, ["trained"]).gradients == {"trained": "trained_grad"}


def test_a_sequence_first_export_with_the_default_free_axis_is_refused():
    """``export_for_training`` frees axis 0 by default: the time axis of a sequence-first
    layer, whose length then is not fixed (export with ``dynamic_axes`` on the batch)."""
    torch.manual_seed(0)
    net = _Net(torch.nn.LSTM, False, False, 1)
    model = export_for_training(net, torch.zeros(T, N, F))
    model.graph.node.append(helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0))
    model.graph.output.insert(0, helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    weights = [name for name, _ in net.named_parameters()]
    with pytest.raises(NoGradientError, match=r"LSTM \(from the layer /rnn/LSTM\).*length"):
        build_gradients(model, weights)


def test_lstm_peepholes_and_coupled_gates_are_refused():
    model, _, weights = _node_case("LSTM", input_forget=1)
    with pytest.raises(NoGradientError, match="input_forget"):
        build_gradients(model, list(weights))
    model, _, weights = _node_case("LSTM")
    node = model.graph.node[0]
    node.input.append("P")
    model.graph.initializer.append(numpy_helper.from_array(np.ones((1, 3 * H), np.float32), "P"))
    with pytest.raises(NoGradientError, match="peepholes"):
        build_gradients(model, list(weights))
