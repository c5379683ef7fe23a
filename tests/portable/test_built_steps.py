"""Steps made without the training package (``build_training_step``: the gradients written by
``helpers.portable.gradients``), trained by :class:`helpers.PortableTrainer`, against torch on
the same weights and the same batches.

Runs in both environments: on the maintained onnxruntime (no ``onnxruntime.training`` at all)
and on 1.19.2, where a subprocess checks that nothing imports the training package.
"""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from helpers import PortableTrainer, build_training_step, export_for_training
from helpers.teaching.torch_reference import torch_fit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS, BATCH, RATE = 2, 8, 0.05
#: float32 rounding of a few steps of both frameworks, relative to the loss
RTOL = 2e-5


class LastStepGRU(nn.Module):
    """A GRU over sequences, a linear head on its last output."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 6, batch_first=True)
        self.head = nn.Linear(6, 1)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def _cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
    )


MODELS = {
    "cnn": (_cnn, [1, 8, 8], 3),
    "gru": (LastStepGRU, [5, 3], 1),
}


def _data(shape, outputs, classes=False, rows=36, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal([rows, *shape]).astype(np.float32)
    if classes:
        return X, rng.integers(0, outputs, rows).astype(np.int64)
    return X, rng.standard_normal([rows, outputs]).astype(np.float32)


def _train_both(module, X, y, loss, solver):
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    extra = {"weight_decay": 0.0} if solver == "adamw" else {}
    step = build_training_step(
        onx,
        loss=loss,
        solver=solver,
        learning_rate=RATE,
        batch_size=BATCH,
        max_iter=EPOCHS,
        random_state=0,
        **extra,
    )
    trainer = PortableTrainer(step).fit(X, y)
    reference = copy.deepcopy(module)
    _, torch_losses = torch_fit(
        reference, X, y, loss, BATCH, EPOCHS, RATE, solver=solver, random_state=0
    )
    return trainer, reference, torch_losses


@pytest.mark.parametrize(
    "name, loss, solver",
    [
        ("cnn", "squared_error", "sgd"),
        ("cnn", "cross_entropy", "adamw"),
        ("gru", "squared_error", "sgd"),
    ],
)
def test_a_step_built_here_trains_as_torch(name, loss, solver):
    factory, shape, outputs = MODELS[name]
    torch.manual_seed(0)
    module = factory()
    X, y = _data(shape, outputs, classes=loss == "cross_entropy")
    trainer, reference, torch_losses = _train_both(module, X, y, loss, solver)
    assert len(trainer.losses_) == len(torch_losses) == EPOCHS * 5
    np.testing.assert_allclose(trainer.losses_, torch_losses, rtol=RTOL)
    trained = trainer.get_state()
    for key, value in reference.state_dict().items():
        if key in trained:
            np.testing.assert_allclose(trained[key], value.numpy(), rtol=1e-4, atol=1e-6)


def test_a_converted_mlp_regressor_trains_as_torch():
    from skl2onnx import to_onnx
    from sklearn.neural_network import MLPRegressor

    X, y = _data([4], 1)
    mlp = MLPRegressor(hidden_layer_sizes=(7,), max_iter=5, random_state=0).fit(X, y.ravel())
    onx = to_onnx(mlp, X[:1], target_opset=17)
    module = nn.Sequential(nn.Linear(4, 7), nn.ReLU(), nn.Linear(7, 1))
    with torch.no_grad():
        for layer, coef, intercept in zip(module[::2], mlp.coefs_, mlp.intercepts_):
            layer.weight.copy_(torch.from_numpy(coef.T.astype(np.float32)))
            layer.bias.copy_(torch.from_numpy(intercept.astype(np.float32)))
    step = build_training_step(
        onx, learning_rate=RATE, batch_size=BATCH, max_iter=EPOCHS, random_state=0
    )
    trainer = PortableTrainer(step).fit(X, y)
    _, torch_losses = torch_fit(module, X, y, "squared_error", BATCH, EPOCHS, RATE, random_state=0)
    np.testing.assert_allclose(trainer.losses_, torch_losses, rtol=RTOL)


def test_building_a_step_needs_no_training_package():
    """In the maintained environment, nothing imports a training module; where the training
    package is installed (its onnxruntime loads it on its own), the step builds all the same."""
    code = (
        "import importlib.util, json, sys, torch\n"
        "from helpers import build_training_step, export_for_training, PortableTrainer\n"
        "onx = export_for_training(torch.nn.Linear(3, 1), torch.zeros(2, 3))\n"
        "step = build_training_step(onx)\n"
        "print(json.dumps({'nodes': len(step.graph.node),\n"
        "    'training': importlib.util.find_spec('onnxruntime.training') is not None,\n"
        "    'loaded': sorted(m for m in sys.modules if m.startswith('onnxruntime.training'))}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["nodes"] > 0
    if not found["training"]:
        assert found["loaded"] == []


def test_a_layer_without_gradient_is_refused_by_name():
    from helpers import NoGradientError

    class Sorting(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.topk(self.fc(x), 2).values

    onx = export_for_training(Sorting(), torch.zeros(2, 4))
    with pytest.raises(NoGradientError, match="TopK"):
        build_training_step(onx)


def test_a_built_step_is_written_with_the_mode_of_a_new_file(tmp_path):
    """build_training_step(path=...) writes through helpers.portable.atomic_files."""
    path = tmp_path / "step.onnx"
    previous = os.umask(0o002)
    try:
        onx = export_for_training(nn.Linear(3, 1), torch.zeros(2, 3))
        step = build_training_step(onx, learning_rate=RATE, path=str(path))
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o664 and os.listdir(tmp_path) == ["step.onnx"]
    assert path.read_bytes() == step.SerializeToString()
