"""OrtGradientForwardBackward: gradients of MLPs against torch autograd."""

import warnings

import numpy as np
import onnx
import pytest
import torch
from skl2onnx import to_onnx
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

from helpers import OrtGradientForwardBackward, get_train_initializer

ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "logistic": torch.sigmoid,
    "identity": lambda x: x,
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 5)).astype(np.float32)
    return X, (X[:, 0] - 2 * X[:, 1] ** 2).astype(np.float32)


def _mlp_onnx(data, activation, hidden=(7, 4)):
    X, y = data
    mlp = MLPRegressor(hidden_layer_sizes=hidden, activation=activation, max_iter=3, random_state=0)
    with warnings.catch_warnings():  # not converged: it does not matter here
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(X, y)
    return to_onnx(mlp, X[:1])


def _torch_gradients(onx, names, X, grad_output, activation):
    weights = get_train_initializer(onx)
    params = [torch.tensor(weights[n].astype(np.float64), requires_grad=True) for n in names]
    h = torch.tensor(X.astype(np.float64))
    n_layers = len(params) // 2
    for i in range(n_layers):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n_layers - 1:
            h = ACTIVATIONS[activation](h)
    h.backward(torch.tensor(grad_output.astype(np.float64)))
    return h.detach().numpy(), [p.grad.numpy() for p in params]


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_mlp_gradients_match_torch(data, activation):
    X, _ = data
    onx = _mlp_onnx(data, activation)
    fb = OrtGradientForwardBackward(onx)
    names = fb.weights_to_train
    assert names == [
        "coefficient",
        "intercepts",
        "coefficient1",
        "intercepts1",
        "coefficient2",
        "intercepts2",
    ]
    weights = get_train_initializer(onx)
    fn = fb.new_instance()
    out = fn.forward([X] + [weights[n] for n in names], training=True)[0].numpy()
    grad_output = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    grads = fn.backward([grad_output])
    expected_out, expected = _torch_gradients(onx, names, X, grad_output, activation)
    np.testing.assert_allclose(out, expected_out, rtol=1e-4, atol=1e-5)
    for name, got, ref in zip(names, grads, expected):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5, err_msg=name)


def _rename(onx, mapping):
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    for init in model.graph.initializer:
        init.name = mapping.get(init.name, init.name)
    for node in model.graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
    return model


def test_any_weight_names_work(data):
    """Alphabetical order opposite to graph order: the seeds' trap."""
    X, _ = data
    onx = _mlp_onnx(data, "tanh", hidden=(3,))
    mapping = {
        "coefficient": "z_first",
        "intercepts": "y_second",
        "coefficient1": "b_third",
        "intercepts1": "a_fourth",
    }
    renamed = _rename(onx, mapping)
    names = ["z_first", "y_second", "b_third", "a_fourth"]
    fb = OrtGradientForwardBackward(renamed, names)
    weights = get_train_initializer(renamed)
    fn = fb.new_instance()
    out = fn.forward([X] + [weights[n] for n in names], training=True)[0].numpy()
    grads = fn.backward([np.ones_like(out)])
    _, expected = _torch_gradients(renamed, names, X, np.ones_like(out), "tanh")
    for got, ref in zip(grads, expected):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5)
    # the weights can be given in any order chosen by the user
    order = ["a_fourth", "z_first", "b_third", "y_second"]
    fn = OrtGradientForwardBackward(renamed, order).new_instance()
    fn.forward([X] + [weights[n] for n in order], training=True)
    grads = fn.backward([np.ones_like(out)])
    for name, got in zip(order, grads):
        np.testing.assert_allclose(got.numpy(), expected[names.index(name)], rtol=1e-4, atol=1e-5)


def test_inference_forward_and_several_forwards_in_flight(data):
    X, _ = data
    onx = _mlp_onnx(data, "relu")
    fb = OrtGradientForwardBackward(onx)
    weights = [get_train_initializer(onx)[n] for n in fb.weights_to_train]
    fn = fb.new_instance()
    first = fn.forward([X[:10]] + weights, training=True)[0].numpy()
    second = fn.forward([X[10:30]] + weights, training=True)[0].numpy()
    np.testing.assert_allclose(fn.forward([X[:10]] + weights)[0].numpy(), first, rtol=1e-6)
    assert len(fn.states_) == 2
    # last in, first out: the second forward is consumed first
    g2 = fn.backward([np.ones_like(second)])
    g1 = fn.backward([np.ones_like(first)])
    _, ref1 = _torch_gradients(onx, fb.weights_to_train, X[:10], np.ones_like(first), "relu")
    _, ref2 = _torch_gradients(onx, fb.weights_to_train, X[10:30], np.ones_like(second), "relu")
    np.testing.assert_allclose(g1[0].numpy(), ref1[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g2[0].numpy(), ref2[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="training forward first"):
        fn.backward([np.ones_like(first)])


def test_bad_output_gradients(data):
    X, _ = data
    onx = _mlp_onnx(data, "relu")
    fb = OrtGradientForwardBackward(onx)
    weights = [get_train_initializer(onx)[n] for n in fb.weights_to_train]
    fn = fb.new_instance()
    out = fn.forward([X[:8]] + weights, training=True)[0].numpy()
    with pytest.raises(ValueError, match=r"shape \[7, 1\], but the output has shape \[8, 1\]"):
        fn.backward([np.ones((7, 1), dtype=np.float32)])
    with pytest.raises(TypeError, match="tensor\\(double\\).*float32"):
        fn.backward([np.ones_like(out, dtype=np.float64)])
    with pytest.raises(ValueError, match="expects 1 output gradients"):
        fn.backward([])
    assert len(fn.states_) == 1  # a rejected call keeps the state
    with pytest.raises(ValueError, match="forward expects 7 values"):
        fn.forward([X], training=True)


def test_errors(data, linear_onnx):
    with pytest.raises(ValueError, match="Unknown input names"):
        OrtGradientForwardBackward(linear_onnx, input_names=["Z"])
    with pytest.raises(ValueError, match="'shape_tensor' has type INT64"):
        OrtGradientForwardBackward(linear_onnx, ["coef", "shape_tensor"])
    with pytest.raises(ValueError, match="Unknown device"):
        OrtGradientForwardBackward(linear_onnx, device="tpu")
