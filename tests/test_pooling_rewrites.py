"""``MaxPool(Relu(x))`` trained as ``Relu(MaxPool(x))``: the graph, torch's values and gradients.

Small integers as inputs, weights and output gradients make every sum
exact in float32 and leave many ties, zeros and windows of non-positive
values: the runtime's output and gradients must equal torch's (float64)
bit for bit.
"""

import copy

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from torch import nn

from helpers import (
    OrtGradientForwardBackward,
    OrtGradientOptimizer,
    add_loss_output,
    export_for_training,
)
from helpers.core.machine.runtime import max_ir_version
from helpers.core.model_graphs.training_graph import training_graph
from helpers.core.rewrites.gradient_rewrites import rewrite_for_training
from helpers.core.rewrites.pooling_rewrites import max_pools_before_activations

N_SAMPLES = 6

#: name -> (activation, pooling, spatial shape of the input)
LAYERS = {
    "k2_s2": (nn.ReLU, lambda: nn.MaxPool2d(2), (6, 8)),
    "k2_s2_odd_sizes": (nn.ReLU, lambda: nn.MaxPool2d(2), (7, 9)),
    "k3_s2_pad1": (nn.ReLU, lambda: nn.MaxPool2d(3, stride=2, padding=1), (8, 7)),
    "k2_s1_overlap": (nn.ReLU, lambda: nn.MaxPool2d(2, stride=1), (5, 6)),
    "k3x2_s2x1_pad": (nn.ReLU, lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1)), (7, 6)),
    "dilation": (nn.ReLU, lambda: nn.MaxPool2d(2, stride=2, dilation=2), (8, 9)),
    "ceil_mode": (nn.ReLU, lambda: nn.MaxPool2d(2, stride=2, ceil_mode=True), (7, 9)),
    "ceil_padding_dilation": (
        nn.ReLU,
        lambda: nn.MaxPool2d(2, stride=4, padding=1, dilation=2, ceil_mode=True),
        (6, 7),
    ),
    "pool1d": (nn.ReLU, lambda: nn.MaxPool1d(3, stride=2, padding=1), (9,)),
    "leaky_relu": (lambda: nn.LeakyReLU(0.25), lambda: nn.MaxPool2d(2), (6, 8)),
    "leaky_relu_overlap": (lambda: nn.LeakyReLU(0.5), lambda: nn.MaxPool2d(3, stride=1), (5, 6)),
}


class _TwoReaders(nn.Module):
    """A ReLU read by a max pooling and by a linear layer of its own."""

    def __init__(self):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(1, 2, 1), nn.MaxPool2d(2)
        self.pooled, self.direct = nn.Linear(2 * 3 * 4, 1), nn.Linear(2 * 6 * 8, 1)

    def forward(self, x):
        r = torch.relu(self.conv(x))
        return self.pooled(self.pool(r).flatten(1)) + self.direct(r.flatten(1))


def _network(name):
    """A 1 x 1 convolution (trained: its gradient crosses the pooling), the layers, a linear one."""
    activation, pool, spatial = LAYERS[name]
    conv = nn.Conv1d(1, 2, 1) if len(spatial) == 1 else nn.Conv2d(1, 2, 1)
    features = nn.Sequential(conv, activation(), pool())
    with torch.no_grad():
        size = features(torch.zeros(1, 1, *spatial)).numel()
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(size, 1)), (1, *spatial)


def _integers(module, shape, seed=0):
    """Integer weights set in ``module``; integer inputs and output gradients."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(
                torch.from_numpy(rng.integers(-2, 3, parameter.shape).astype(np.float32))
            )
    X = rng.integers(-3, 4, (N_SAMPLES, *shape)).astype(np.float32)
    return X, rng.integers(-3, 4, (N_SAMPLES, 1)).astype(np.float32)


def _runtime(module, X, grad_out, fast_gradients=True):
    """The output and the gradients of the weights, by name, of the forward/backward API."""
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    function = OrtGradientForwardBackward(onx, fast_gradients=fast_gradients).new_instance()
    names = function.parent.weights_to_train
    parameters = dict(module.named_parameters())
    output = function.forward([X, *[parameters[n].detach().numpy() for n in names]], training=True)
    output = output[0].numpy().copy()
    return output, {n: g.numpy() for n, g in zip(names, function.backward([grad_out]))}


def _torch(module, X, grad_out):
    reference = copy.deepcopy(module).double()
    output = reference(torch.from_numpy(X).double())
    output.backward(torch.from_numpy(grad_out).double())
    return output.detach().numpy(), {n: p.grad.numpy() for n, p in reference.named_parameters()}


def _assert_torch_equal(module, X, grad_out, fast_gradients=True):
    output, gradients = _runtime(module, X, grad_out, fast_gradients)
    expected_output, expected = _torch(module, X, grad_out)
    np.testing.assert_array_equal(output, expected_output)
    assert sorted(gradients) == sorted(expected)
    for name, gradient in gradients.items():
        np.testing.assert_array_equal(gradient, expected[name], err_msg=name)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_values_and_gradients_equal_torch_with_ties(name):
    module, shape = _network(name)
    X, grad_out = _integers(module, shape)
    convolved = module[0](torch.from_numpy(X))
    assert (convolved <= 0).float().mean() > 0.3  # zeros, and windows of non-positive values
    assert convolved.unique().numel() < convolved.numel() / 10  # ties everywhere
    _assert_torch_equal(module, X, grad_out)


def test_rewrite_puts_the_pooling_first_in_the_training_graph():
    module, shape = _network("k2_s2")
    onx = export_for_training(module, torch.zeros(2, *shape))
    ops = [n.op_type for n in max_pools_before_activations(onx).graph.node]
    assert ops.index("MaxPool") < ops.index("Relu")
    assert [n.op_type for n in onx.graph.node].index("Relu") < [
        n.op_type for n in onx.graph.node
    ].index("MaxPool")
    fast = [n.op_type for n in training_graph(onx).model.graph.node]
    assert fast.index("MaxPool") < fast.index("Where")  # the mask reads the pooled map
    plain = [n.op_type for n in training_graph(onx, fast_gradients=False).model.graph.node]
    assert plain.index("Relu") < plain.index("MaxPool")  # fast_gradients=False: unchanged


def test_relu_with_other_readers_stays_for_them():
    torch.manual_seed(0)
    module = _TwoReaders()
    X, grad_out = _integers(module, (1, 6, 8))
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    ops = [n.op_type for n in max_pools_before_activations(onx).graph.node]
    assert ops.count("Relu") == 2 and ops.count("MaxPool") == 1
    _assert_torch_equal(module, X, grad_out)
    _assert_torch_equal(module, X, grad_out, fast_gradients=False)


def _pool_model(activation="Relu", elem_type=TensorProto.FLOAT, indices=False, **attributes):
    outputs = ["y", "i"] if indices else ["y"]
    nodes = [
        helper.make_node(activation, ["x"], ["r"], **attributes),
        helper.make_node("MaxPool", ["r"], outputs, kernel_shape=[2, 2], strides=[2, 2]),
    ]
    declared = [helper.make_tensor_value_info("y", elem_type, [None, 1, 2, 2])]
    if indices:
        declared.append(helper.make_tensor_value_info("i", TensorProto.INT64, [None, 1, 2, 2]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem_type, [None, 1, 4, 4])], declared
    )
    # the IR version the installed onnxruntime reads (onnx 1.23 writes 14, 1.31.1 reads 13)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=max_ir_version()
    )


@pytest.mark.parametrize(
    ("model", "swapped"),
    [
        (_pool_model(), True),
        (_pool_model(elem_type=TensorProto.DOUBLE), True),
        (
            _pool_model(indices=True),
            False,
        ),  # the indices of a window of zeros point at its first cell
        (_pool_model("LeakyRelu", alpha=0.1), True),
        (_pool_model("LeakyRelu", alpha=-0.5), False),  # not monotone
        (_pool_model("Sigmoid"), False),
        (_pool_model(elem_type=TensorProto.INT32), False),
    ],
    ids=["relu", "double", "indices_used", "leaky_relu", "negative_slope", "sigmoid", "int32"],
)
def test_which_poolings_are_rewritten(model, swapped):
    ops = [n.op_type for n in max_pools_before_activations(model).graph.node]
    assert (ops[0] == "MaxPool") == swapped
    assert len(ops) == 2


def test_indices_of_the_untouched_pooling_equal_the_model():
    import onnxruntime

    model = _pool_model(indices=True)
    x = -np.arange(16, dtype=np.float32).reshape(
        1, 1, 4, 4
    )  # every window non-positive: ReLU ties at 0

    def run(m):
        session = onnxruntime.InferenceSession(
            m.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, {"x": x})

    for got, expected in zip(run(rewrite_for_training(model)), run(model)):
        np.testing.assert_array_equal(got, expected)


def test_whole_training_gives_the_weights_of_the_unrewritten_graph():
    module, shape = _network("k3_s2_pad1")
    rng = np.random.default_rng(3)
    X = rng.standard_normal((24, *shape)).astype(np.float32)
    y = rng.standard_normal((24, 1)).astype(np.float32)
    onx = add_loss_output(
        export_for_training(module, torch.from_numpy(X[:2])), score_name="squared_error"
    )
    weights = []
    for fast in (True, False):
        optimizer = OrtGradientOptimizer(
            onx,
            max_iter=3,
            batch_size=8,
            learning_rate=0.01,
            solver="sgd",
            random_state=0,
            validation_every=0,
            fast_gradients=fast,
        )
        weights.append(optimizer.fit(X, y).get_trained_onnx().graph.initializer)
    for fast, plain in zip(*weights):
        np.testing.assert_allclose(
            np.frombuffer(fast.raw_data, np.float32),
            np.frombuffer(plain.raw_data, np.float32),
            rtol=1e-5,
            atol=1e-6,
            err_msg=fast.name,
        )
