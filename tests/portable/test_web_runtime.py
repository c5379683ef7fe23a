"""A step model trained by onnxruntime-web, the runtime a browser runs (its WebAssembly build,
under Node), equals the same training by helpers.portable.

``make setup-web`` installs onnxruntime-web into ``helpers/portable/web`` (CI does); where Node or
the package is missing the test says so and is skipped.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from step_models import linear_step, regression_data

from helpers.portable.batch_order import batch_bounds, epoch_order, random_state
from helpers.portable.step_format import initial_state
from helpers.portable.trainer import PortableTrainer

WEB = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "helpers", "portable", "web"
)
NODE = shutil.which("node")
INSTALLED = os.path.isdir(os.path.join(WEB, "node_modules", "onnxruntime-web"))


def _tensor(array):
    array = np.asarray(array)
    return {"dtype": str(array.dtype), "shape": list(array.shape), "data": array.ravel().tolist()}


@pytest.mark.skipif(NODE is None or not INSTALLED, reason="needs node and `make setup-web`")
def test_onnxruntime_web_trains_a_step_model_as_onnxruntime_does(tmp_path):
    X, y = regression_data()
    step = linear_step(momentum=0.9)  # the rate depends on the step count
    settings = dict(max_iter=2, batch_size=5, random_state=3)
    trainer = PortableTrainer(step, **settings).fit(X, y)
    rng = random_state(settings["random_state"])
    batches = []
    for _ in range(settings["max_iter"]):
        order = epoch_order(rng, len(X))
        batches += [order[a:b].tolist() for a, b in batch_bounds(len(X), settings["batch_size"])]
    job = {
        "inputs": {"X": _tensor(X), "label": _tensor(y[:, None])},
        "batches": batches,
        "state": {name: _tensor(value) for name, value in initial_state(step).items()},
        "first_step": 1,
    }
    (tmp_path / "step.onnx").write_bytes(step.SerializeToString())
    (tmp_path / "job.json").write_text(json.dumps(job))
    done = subprocess.run(
        [NODE, os.path.join(WEB, "train_step.mjs"), "step.onnx", "job.json", "out.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert len(result["losses"]) == len(trainer.losses_) == len(batches)
    np.testing.assert_allclose(result["losses"], trainer.losses_, rtol=1e-5)
    for name, value in trainer.get_state().items():
        web = np.array(result["state"][name]["data"], np.float32).reshape(value.shape)
        np.testing.assert_allclose(web, value, rtol=1e-5, atol=1e-6)
