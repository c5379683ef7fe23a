"""Whole training models lowered: the same loss and gradients as the original on 1.19.2.

Each model's training model (whole-training artifacts, after the project's rewrites) runs on
onnxruntime-training 1.19.2's ``InferenceSession`` as written and lowered to standard ONNX, with
the same weights and batch: the loss and every accumulated gradient agree to float32 rounding
(rtol 1e-5: the lowered sums and transcendental functions round differently, a few units per
operator, through the whole backward pass).
"""

import os

import numpy as np
import onnx
import pytest
import torch
from lowering_cases import lowered_and_checked, run
from torch import nn

from benchmarks.workloads import frameworks as fw
from helpers import export_for_training
from helpers.portable.lowering import UnsupportedOperatorError, lower_model
from helpers.portable.lowering.single_node import single_node_model
from helpers.teaching.model_factories import mlp_onnx


class SliceConcat(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.outer = nn.Linear(6, 6), nn.Linear(8, 1)

    def forward(self, x):
        both = torch.cat([x, torch.tanh(self.inner(x))], dim=1)
        return self.outer(both[:, 1:9])


class Batched(nn.Module):
    """A constant matrix times a batch of matrices (as the linear ``Resize`` rewrite writes):
    the gradient is a ``FusedMatMul`` of a matrix by a batch."""

    def __init__(self):
        super().__init__()
        self.inner, self.outer = nn.Linear(6, 6), nn.Linear(8, 1)
        self.register_buffer("mix", torch.randn(4, 3))

    def forward(self, x):
        mixed = torch.matmul(self.mix, torch.tanh(self.inner(x)).reshape(-1, 3, 2))
        return self.outer(mixed.flatten(1))


def _embedding_classifier():
    return nn.Sequential(nn.Embedding(20, 4), nn.Flatten(), nn.Linear(20, 5))


#: name -> (torch module or ONNX model, features (None: token ids, a classifier), fast_gradients)
MODELS = {
    "mlp_relu": (lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1)), 6, False),
    "onnx_mlp_broadcast": (lambda: mlp_onnx(6, hidden=(8, 8)), 6, False),  # MatMul, Add
    "activations_softmax": (
        lambda: nn.Sequential(
            nn.Linear(6, 6), nn.GELU(), nn.SiLU(), nn.LeakyReLU(0.1), nn.Tanh(), nn.Sigmoid(),
            nn.Softmax(dim=1), nn.Linear(6, 6), nn.LogSoftmax(dim=1), nn.Linear(6, 1),
        ),
        6,
        True,
    ),  # fmt: skip
    "slice_concat": (SliceConcat, 6, True),
    "batched_matmul": (Batched, 6, True),
    "batch_norm": (
        lambda: nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)), 6, True
    ),
    "embedding_gather_nd": (lambda: _embedding_classifier(), None, True),
    "embedding_gather": (lambda: _embedding_classifier(), None, False),
}  # fmt: skip


def _training_model(name, folder):
    build, features, fast = MODELS[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if features is None:
        X, y = rng.integers(0, 20, (12, 5)), rng.integers(0, 5, 12)
    else:
        X = rng.standard_normal((12, features)).astype(np.float32)
        y = np.tanh(X[:, :1] + X[:, 1:2]).astype(np.float32)
    built = build()
    if isinstance(built, onnx.ModelProto):
        onx = built
    else:
        onx = export_for_training(built, torch.from_numpy(X[:2]))
    task = "regression" if features else "classification"
    makers = fw.ort_makers(onx, fw.LOSSES[task][0], "sgd", 0.01, 12, 1, 0, validation_every=0,
                           max_iter=1, artifact_dir=folder, fast_gradients=fast)  # fmt: skip
    makers[fw.ORT_WHOLE]().fit(X, y)
    model = onnx.load(os.path.join(folder, "training_model.onnx"))
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in onx.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in weights:
            feeds[value.name] = weights[value.name]
        elif value.name.endswith(".accumulation.buffer"):
            feeds[value.name] = np.zeros_like(
                weights[value.name[: -len("_grad.accumulation.buffer")]]
            )
        elif value.name == "lazy_reset_grad":
            feeds[value.name] = np.array([True])
    buffers = {value.name: value for value in model.graph.input}
    for node in model.graph.node:  # the gradients as outputs, besides the loss
        if node.op_type == "InPlaceAccumulatorV2":  # (buffer, gradient): of the same type
            gradient = onnx.ValueInfoProto()
            gradient.CopyFrom(buffers[node.input[0]])
            gradient.name = node.input[1]
            model.graph.output.append(gradient)
    first, second = (i.name for i in model.graph.input[:2])
    labels = np.eye(5, dtype=np.float32)[y] if features is None else y  # one-hot rows
    feeds[first], feeds[second] = X, labels
    return model, feeds


@pytest.mark.training_package
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_lowered_training_model_computes_the_same_loss_and_gradients(name, tmp_path):
    model, feeds = _training_model(name, str(tmp_path))
    contrib = {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    assert contrib - {"InPlaceAccumulatorV2", "Scale"}, contrib  # the model tests another lowering
    expected = run(model, feeds)
    got = run(lowered_and_checked(model), feeds)
    assert got.keys() == expected.keys()
    gradients = [n for n in got if n.endswith("_grad")]
    assert len(gradients) == len([n for n in feeds if n.endswith(".accumulation.buffer")])
    for output, value in expected.items():
        np.testing.assert_allclose(got[output], value, rtol=1e-5, atol=1e-6, err_msg=output)
    assert all(np.abs(expected[n]).max() > 0 for n in gradients)  # every weight gets a gradient


def test_an_operator_without_lowering_is_refused_with_its_layer():
    feeds = {"x": np.ones((2, 3), np.float32)}
    model = single_node_model("NoSuchGrad", feeds, {"y": np.float32})
    model.graph.node[0].name = "/fc1/NoSuchGrad_Grad"
    with pytest.raises(
        UnsupportedOperatorError, match="com.microsoft:NoSuchGrad.*/fc1/NoSuchGrad_Grad"
    ) as info:
        lower_model(model)
    assert (info.value.op_type, info.value.layer) == ("NoSuchGrad", "/fc1/NoSuchGrad_Grad")


def test_an_attribute_without_lowering_is_refused_by_name():
    feeds = {"shape": np.array([3, 4], np.int64), "indices": np.zeros((3, 1), np.int64),
             "dy": np.ones((3,), np.float32)}  # fmt: skip
    model = single_node_model("GatherNDGrad", feeds, {"dx": np.float32}, batch_dims=1)
    model.graph.node[0].name = "/emb/GatherND_Grad"
    with pytest.raises(UnsupportedOperatorError, match="GatherNDGrad.*/emb/GatherND_Grad"):
        lower_model(model)
