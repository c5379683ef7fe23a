"""The ReLU rewrite: exact (values, gradients, trained weights), undone on export."""

import os

import numpy as np
import onnx
import pytest
import torch
from conftest import APIS, make_optimizer
from onnx import TensorProto, helper

from helpers import (
    LearningRateSGD,
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
    get_train_initializer,
)
from helpers.core.machine.runtime import max_ir_version
from helpers.core.rewrites.gradient_rewrites import count_rewrites, rewrite_for_training
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
        sess = onnxruntime.InferenceSession(
            m.SerializeToString(), providers=["CPUExecutionProvider"]
        )
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
    hidden = torch.relu(
        torch.tensor(X, dtype=torch.float64) @ params["coefficient0"] + params["intercept0"]
    )
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
            model,
            learning_rate=0.05,
            max_iter=20,
            batch_size=len(X),
            fast_gradients=fast,
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
            model,
            learning_rate=LearningRateSGD(0.05, learning_rate="constant"),
            max_iter=20,
            batch_size=len(X),
            fast_gradients=fast,
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


@pytest.mark.training_package
def test_named_batch_dimension_removes_runtime_shape_nodes():
    """One named batch symbol: no BroadcastGradientArgs nor shape arithmetic in the gradient
    graph."""
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
    assert (
        not rewrite_for_training(mlp_onnx(3, hidden=(4,)))
        .graph.input[0]
        .type.tensor_type.shape.dim[0]
        .dim_param
    )


# --- Gather (embeddings) as GatherND -------------------------------------------------------------


class _Embedder(torch.nn.Module):
    """Token ids -> embeddings -> flattened -> 7 class scores: the layer of a text classifier."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 4)
        self.head = torch.nn.Linear(5 * 4, 7)

    def forward(self, ids):
        return self.head(self.embedding(ids).flatten(1))


@pytest.fixture(scope="module")
def embedder():
    from helpers import export_for_training

    torch.manual_seed(0)
    module = _Embedder()
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 20, (40, 5)).astype(np.int64)
    ids[:, :2] = 7  # the same row picked many times: its gradient is a sum
    labels = rng.integers(0, 7, 40)
    return module, export_for_training(module, torch.from_numpy(ids[:2])), ids, labels


def test_gather_of_an_embedding_becomes_gather_nd_with_the_same_output(embedder):
    import onnxruntime

    _, model, ids, _ = embedder
    rewritten = rewrite_for_training(model)
    assert "Gather" not in _ops(rewritten) and _ops(rewritten).count("GatherND") == 1
    assert "GatherND" not in _ops(model)  # the input model is left alone
    onnx.checker.check_model(rewritten)
    negative = np.where(ids % 3 == 0, ids - 20, ids)  # ONNX takes negative ids too

    def run(m, x):
        sess = onnxruntime.InferenceSession(
            m.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return sess.run(None, {"x": x})[0]

    for x in (ids, negative):
        np.testing.assert_array_equal(run(rewritten, x), run(model, x))


def _gather_model(data_type, indices_type, axis=0, opset=15):
    data = helper.make_tensor_value_info("data", data_type, [6, 3])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "ids"], ["y"], axis=axis)],
        "g",
        [data, helper.make_tensor_value_info("ids", indices_type, [None, 2])],
        [helper.make_tensor_value_info("y", data_type, None)],
    )
    # the IR version the installed onnxruntime reads (onnx 1.23 writes 14, 1.31.1 reads 13)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=max_ir_version()
    )


@pytest.mark.parametrize(
    "ids", [np.array(4), np.array([[5, -1], [0, 5]])], ids=["scalar", "matrix"]
)
def test_gather_of_any_rank_of_ids_gives_the_same_rows(ids):
    import onnxruntime

    model = _gather_model(TensorProto.FLOAT, TensorProto.INT64)
    model.graph.input[1].type.tensor_type.ClearField("shape")  # ids of any rank
    rewritten = rewrite_for_training(model)
    assert _ops(rewritten) == ["Constant", "Unsqueeze", "GatherND"]
    data = np.arange(18, dtype=np.float32).reshape(6, 3)
    feeds = {"data": data, "ids": ids.astype(np.int64)}
    outputs = [
        onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, feeds
        )[0]
        for m in (model, rewritten)
    ]
    np.testing.assert_array_equal(outputs[1], outputs[0])
    assert outputs[1].shape == data[ids].shape


@pytest.mark.parametrize(
    "data_type, indices_type, axis, opset",
    [
        (TensorProto.INT64, TensorProto.INT64, 0, 15),  # shapes and counts: nothing to train
        (TensorProto.FLOAT, TensorProto.INT32, 0, 15),  # GatherND takes int64 ids only
        (TensorProto.FLOAT, TensorProto.INT64, 1, 15),  # columns, not rows
        (TensorProto.FLOAT, TensorProto.INT64, 0, 12),  # Unsqueeze took its axes as an attribute
    ],
)
def test_other_gathers_are_left_alone(data_type, indices_type, axis, opset):
    model = _gather_model(data_type, indices_type, axis, opset)
    assert _ops(rewrite_for_training(model)) == ["Gather"]


@pytest.mark.training_package
def test_embedding_gradients_equal_the_plain_graph_bit_for_bit_and_torch(embedder):
    """GatherNDGrad adds the rows in the order of the ids, as GatherGrad does on one thread."""
    module, model, ids, _ = embedder
    grad_out = np.random.default_rng(4).standard_normal((len(ids), 7)).astype(np.float32)
    grads, kernels = {}, {}
    for fast in (False, True):
        fb = OrtGradientForwardBackward(model, fast_gradients=fast, n_threads=1)
        kernels[fast] = _ops(fb.gradient_model_)
        weights = get_train_initializer(model)
        fn = fb.new_instance()
        fn.forward([ids, *[weights[n] for n in fb.weights_to_train]], training=True)
        grads[fast] = dict(
            zip(fb.weights_to_train, (g.numpy().copy() for g in fn.backward([grad_out])))
        )
    assert (
        "GatherGrad" in kernels[False]
        and "GatherGrad" not in kernels[True]
        and "GatherNDGrad" in kernels[True]
    )
    for name, plain in grads[False].items():
        np.testing.assert_array_equal(grads[True][name], plain)
    module.zero_grad()
    module(torch.from_numpy(ids)).backward(torch.from_numpy(grad_out))
    expected = module.embedding.weight.grad.numpy()
    table = next(name for name, g in grads[True].items() if g.shape == expected.shape)
    np.testing.assert_allclose(grads[True][table], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", APIS)
def test_embedding_training_weights_equal_with_and_without_rewrite(embedder, api, tmp_path):
    _, model, ids, labels = embedder
    common = dict(
        learning_rate=0.5, max_iter=30, batch_size=len(ids), random_state=0, validation_every=0
    )

    def make(fast):
        # the whole-training API keeps its training and evaluation graphs in a folder
        folder = {"artifact_dir": str(tmp_path / f"fast_{fast}")} if api == "whole" else {}
        return make_optimizer(api, model, "cross_entropy", fast_gradients=fast, **folder, **common)

    fits = _fit_both(make, ids, labels)
    plain, fast = fits[False].get_state(), fits[True].get_state()
    for name in plain:
        np.testing.assert_allclose(fast[name], plain[name], rtol=1e-6, atol=1e-7)
    assert fits[True].train_losses_[-1] < fits[True].train_losses_[0] / 2  # it did train
    exported = _ops(fits[True].get_trained_onnx())
    assert "Gather" in exported and "GatherND" not in exported
    if api == "whole":
        evaluation = onnx.load(os.path.join(tmp_path, "fast_True", "eval_model.onnx"))
        assert "GatherND" not in _ops(evaluation)
