"""A whole training model of a small CNN, its convolution, pooling and normalization gradients
lowered to standard operators, gives the loss and gradients of the model as written.

The model (convolutions plain and grouped, batch normalization, ReLU, max pooling, layer
normalization, a linear layer; cross-entropy) is trained one epoch by
:class:`helpers.OrtGradientOptimizer`, which leaves its training artifacts in a folder. Its
training model (``ConvGrad``, ``MaxPoolGrad``, ``LayerNormalizationGrad``, the loss's
gradients, ``Scale``, ``InPlaceAccumulatorV2``...) is run on 1.19.2's InferenceSession, the
accumulation buffers at zero, as written and lowered whole to standard operators.
"""

import numpy as np
import onnx
import pytest
import torch
from lowering_check import run_outputs
from torch import nn

from helpers import OrtGradientOptimizer, add_loss_output, export_for_training
from helpers.portable.lowering import lower_model
from helpers.portable.lowering.registry import is_standard

#: Tolerance relative to each output's largest magnitude: the lowered gradients differ from the
#: kernels' by float32 rounding, which the backward pass carries through a few layers.
RTOL = 1e-5


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 4, 3, stride=2, groups=2),
        )
        self.norm, self.head = nn.LayerNorm(4), nn.Linear(4, 3)

    def forward(self, x):
        x = self.features(x).mean(dim=(2, 3))
        return self.head(self.norm(x))


@pytest.fixture(scope="module", params=[True, False], ids=["fast_gradients", "plain"])
def training_model(request, tmp_path_factory):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 1, 9, 9)).astype(np.float32)
    y = rng.integers(0, 3, 24)
    onx = export_for_training(SmallCnn(), torch.from_numpy(X[:2]))
    folder = tmp_path_factory.mktemp("artifacts")
    OrtGradientOptimizer(
        add_loss_output(onx, score_name="cross_entropy"),
        max_iter=1,
        batch_size=8,
        solver="sgd",
        random_state=0,
        validation_every=0,
        fast_gradients=request.param,
        artifact_dir=str(folder),
    ).fit(X, y)
    model = onnx.load(str(folder / "training_model.onnx"))
    # the gradients go into the accumulation buffers in place: read them as outputs too
    for node in model.graph.node:
        if node.op_type == "InPlaceAccumulatorV2":
            model.graph.output.append(onnx.ValueInfoProto(name=node.input[1]))
    feeds = {}
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for value in model.graph.input:
        dims = [d.dim_value or 5 for d in value.type.tensor_type.shape.dim]
        if value.name == "x":
            feeds["x"] = X[: dims[0]]
        elif value.name == "label":
            feeds["label"] = np.eye(3, dtype=np.float32)[y[:5]]
        elif value.name == "lazy_reset_grad":
            feeds[value.name] = np.array([True])
        elif value.name in initial:
            continue
        else:  # weights (random, as trained ones would be) and zero accumulation buffers
            zero = "accumulation" in value.name
            feeds[value.name] = (
                np.zeros(dims, np.float32)
                if zero
                else rng.standard_normal(dims).astype(np.float32) * 0.5 + ("var" in value.name)
            )
    return model, feeds


@pytest.mark.training_package
def test_lowered_training_model_gives_the_same_loss_and_gradients(training_model):
    model, feeds = training_model
    present = {n.op_type for n in model.graph.node if not is_standard(n)}
    assert {"ConvGrad", "MaxPoolGrad", "LayerNormalizationGrad"} <= present
    lowered = lower_model(model)
    assert all(is_standard(n) for n in lowered.graph.node)
    expected, actual = run_outputs(model, feeds), run_outputs(lowered, feeds)
    gradients = [o.name for o in model.graph.output if o.name.endswith("_grad")]
    assert len(gradients) == 10  # 2 convolutions, batch and layer norms, linear: 2 each
    # a convolution's bias before a batch normalization has a gradient of zero, computed as
    # rounding noise: the floor of the scale is the largest gradient's
    floor = max(float(np.abs(e).max()) for e in expected if e.dtype != bool)
    for output, e, a in zip(model.graph.output, expected, actual):
        if e.dtype == bool:  # the accumulators' flags
            assert np.array_equal(a, e)
            continue
        scale = max(float(np.abs(e).max()), floor)
        assert float(np.abs(a - e).max()) <= RTOL * scale, output.name
        assert np.all(np.isfinite(a)), output.name
