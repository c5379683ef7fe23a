"""Every model of the zoo (its small size) trains in the maintained environment with the
whole-training API's losses: its step model exported on 1.19.2, trained by onnxruntime 1.31.1
through ``python -m helpers.portable fit``, the same batches from the same seed.

Needs ``make setup-maintained`` (``make test`` builds it first).
"""

import json
import os
import subprocess

import numpy as np
import onnx
import pytest
import torch

from benchmarks import example_models
from benchmarks.studies.portable_fits import maintained_python
from benchmarks.workloads import frameworks
from helpers import OrtGradientOptimizer, add_loss_output, export_for_training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = sorted(name for name in example_models.ZOO if name.endswith("_small"))
ROWS, BATCH, EPOCHS = 48, 16, 2


def _data(name, module):
    _, shape, task = example_models.ZOO[name]
    rng = np.random.RandomState(0)
    if "token" in name:
        X = rng.randint(0, module.embedding.num_embeddings, size=[ROWS, *shape]).astype(np.int64)
    else:
        X = rng.randn(ROWS, *shape).astype(np.float32)
    with torch.no_grad():
        width = module(torch.from_numpy(X[:2])).shape[1]
    if task == "classification":
        return X, rng.randint(0, width, ROWS).astype(np.int64), task
    return X, rng.randn(ROWS, width).astype(np.float32), task


@pytest.mark.parametrize("name", SMALL)
def test_the_zoo_trains_on_the_maintained_runtime_as_on_the_training_package(name, tmp_path):
    torch.manual_seed(0)
    module = getattr(example_models, name)()
    X, y, task = _data(name, module)
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    loss = frameworks.LOSSES[task][0]
    settings = dict(batch_size=BATCH, max_iter=EPOCHS, learning_rate=0.01, random_state=0)
    opt = OrtGradientOptimizer(
        add_loss_output(onx, score_name=loss), validation_every=0, **settings
    )
    opt.export_training_step(str(tmp_path / "step.onnx"))
    opt.fit(X, y)
    np.savez(tmp_path / "data.npz", X=X, y=y)
    command = [
        maintained_python(),
        "-m",
        "helpers.portable",
        "fit",
        "step.onnx",
        "--data",
        "data.npz",
        "--epochs",
        str(EPOCHS),
        "--out",
        "out",
    ]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    steps = np.array(json.loads((tmp_path / "out" / "losses.json").read_text()))
    sizes = np.array([min(BATCH, ROWS - s) for s in range(0, ROWS, BATCH)] * EPOCHS)
    epochs = (steps * sizes).reshape(EPOCHS, -1).sum(axis=1) / ROWS
    np.testing.assert_allclose(epochs, opt.train_losses_, rtol=2e-5)
    trained = {t.name for t in onnx.load(tmp_path / "out" / "model.onnx").graph.initializer}
    assert set(opt.get_state()) <= trained
