"""The ReLU rewrite: exact (values, gradients, trained weights), undone on export."""
import os

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from helpers import (
    LearningRateSGD,
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
    get_train_initializer,
)
from helpers.core.gradient_rewrites import count_rewrites, rewrite_for_training
from helpers.teaching.model_factories import mlp_onnx


def _ops(model):
    return [node.op_type for node in model.graph.node]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((48, 6)).astype(np.float32)
    y = (X[:, :1] - X[:, 1:2] ** 2).astype(np.float32)
    return X, y


def test_rewrite_replaces_every_relu_by_a_product_with_the_same_output():
    model = mlp_onnx(6, hidden=(5, 4))
    rewritten = rewrite_for_training(model)
    assert "Relu" not in _ops(rewritten)
    assert count_rewrites(rewritten) == 2
    assert _ops(model).count("Relu") == 2  # the input model is left alone
    onnx.checker.check_model(rewritten)
    relu_outputs = [n.output[0] for n in model.graph.node if n.op_type == "Relu"]
    products = [n.output[0] for n in rewritten.graph.node if n.op_type == "Mul"]
    assert products == relu_outputs


def test_rewrite_is_exact_on_values_including_zero():
    model = mlp_onnx(3, hidden=(4,))
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 3.0], [-1e-30, 1e-30, 0.0]], dtype=np.float32)
    import onnxruntime

    def run(m):
        sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {"X": x})[0]

    np.testing.assert_array_equal(run(rewrite_for_training(model)), run(model))


def test_relu_of_unknown_type_is_left_alone():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    assert _ops(rewrite_for_training(model)) == ["Relu"]


def test_gradient_at_zero_equals_relu_gradient():
    """A unit whose pre-activation is exactly 0 gets a zero gradient, as ReluGrad gives."""
    model = mlp_onnx(3, hidden=(4,))
    weights = {k: v.copy() for k, v in get_train_initializer(model).items()}
    weights["coefficient0"][:, 0] = 0.0  # first hidden unit: 0 for every input
    weights["intercept0"][0] = 0.0
    X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    grad_out = np.ones((5, 1), dtype=np.float32)
    grads = {}
    for fast in (False, True):
        fb = OrtGradientForwardBackward(model, fast_gradients=fast)
        fn = fb.new_instance()
        fn.forward([X, *[weights[n] for n in fb.weights_to_train]], training=True)
        grads[fast] = [g.numpy() for g in fn.backward([grad_out])]
    for plain, fast in zip(grads[False], grads[True]):
        np.testing.assert_array_equal(fast, plain)
    assert grads[True][0][:, 0].tolist() == [0.0, 0.0, 0.0]  # no gradient into the dead unit


def test_rewritten_gradients_match_torch(data):
    X, _ = data
    model = mlp_onnx(6, hidden=(5,))
    weights = get_train_initializer(model)
    fb = OrtGradientForwardBackward(model, fast_gradients=True)
    fn = fb.new_instance()
    names = fb.weights_to_train
    fn.forward([X, *[weights[n] for n in names]], training=True)
    grad_out = np.random.default_rng(2).standard_normal((len(X), 1)).astype(np.float32)
    got = dict(zip(names, (g.numpy() for g in fn.backward([grad_out]))))
    params = {n: torch.tensor(weights[n].astype(np.float64), requires_grad=True) for n in names}
    hidden = torch.relu(torch.tensor(X, dtype=torch.float64) @ params["coefficient0"] + params["intercept0"])
    out = hidden @ params["coefficient1"] + params["intercept1"]
    out.backward(torch.tensor(grad_out, dtype=torch.float64))
    for name in names:
        np.testing.assert_allclose(got[name], params[name].grad.numpy(), rtol=1e-4, atol=1e-6)


def _fit_both(make, X, y):
    return {fast: make(fast).fit(X, y) for fast in (False, True)}


def test_whole_training_weights_equal_with_and_without_rewrite(data, tmp_path):
    X, y = data
    model = add_loss_output(mlp_onnx(6, hidden=(8, 5)))
    fits = _fit_both(
        lambda fast: OrtGradientOptimizer(
            model, learning_rate=0.05, max_iter=20, batch_size=len(X), fast_gradients=fast,
            artifact_dir=str(tmp_path / f"fast_{fast}"),
        ),
        X,
        y,
    )
    plain, fast = fits[False].get_state(), fits[True].get_state()
    for name in plain:  # the rewritten graph fuses some nodes: float32 rounding may differ
        np.testing.assert_allclose(fast[name], plain[name], rtol=1e-6, atol=1e-7)
    assert fits[True].train_losses_[-1] < fits[True].train_losses_[0] / 2  # it did train
    exported = fits[True].get_trained_onnx()
    assert _ops(exported).count("Relu") == 2 and "Where" not in _ops(exported)
    # the artifacts the user keeps: training graph rewritten, evaluation graph plain
    training = onnx.load(os.path.join(tmp_path, "fast_True", "training_model.onnx"))
    evaluation = onnx.load(os.path.join(tmp_path, "fast_True", "eval_model.onnx"))
    assert count_rewrites(training) == 2
    assert count_rewrites(evaluation) == 0 and _ops(evaluation).count("Relu") == 2


def test_forward_backward_weights_equal_with_and_without_rewrite(data):
    X, y = data
    model = mlp_onnx(6, hidden=(8, 5))
    fits = _fit_both(
        lambda fast: OrtGradientForwardBackwardOptimizer(
            model, learning_rate=LearningRateSGD(0.05, learning_rate="constant"), max_iter=20,
            batch_size=len(X), fast_gradients=fast,
        ),
        X,
        y,
    )
    plain, fast = fits[False].get_state(), fits[True].get_state()
    for name in plain:
        np.testing.assert_allclose(fast[name], plain[name], rtol=1e-6, atol=1e-7)
    assert fits[True].train_losses_[-1] < fits[True].train_losses_[0] / 2
    assert "Relu" not in _ops(fits[True]._runtime.fb.gradient_model_)
    assert _ops(fits[True].get_trained_onnx()).count("Relu") == 2


def test_named_batch_dimension_removes_runtime_shape_nodes():
    """One named batch symbol: no BroadcastGradientArgs nor shape arithmetic in the gradient graph."""
    model = mlp_onnx(6, hidden=(5,))
    plain = _ops(OrtGradientForwardBackward(model, fast_gradients=False).gradient_model_)
    fast = _ops(OrtGradientForwardBackward(model, fast_gradients=True).gradient_model_)
    assert "BroadcastGradientArgs" in plain
    assert "BroadcastGradientArgs" not in fast and "Shape" not in fast
    assert len(fast) < len(plain)


def test_batch_dimension_takes_an_existing_name_and_leaves_fixed_sizes():
    model = add_loss_output(mlp_onnx(3, hidden=(4,)))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "rows"
    rewritten = rewrite_for_training(model, ["X", "label"])
    dims = {i.name: i.type.tensor_type.shape.dim[0] for i in rewritten.graph.input}
    assert dims["X"].dim_param == dims["label"].dim_param == "rows"
    fixed = mlp_onnx(3, hidden=(4,))
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 8
    dim = rewrite_for_training(fixed, ["X"]).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_value == 8 and not dim.dim_param
    # no input named: the model's dimensions are left as they are
    assert not rewrite_for_training(mlp_onnx(3, hidden=(4,))).graph.input[0].type.tensor_type.shape.dim[0].dim_param
