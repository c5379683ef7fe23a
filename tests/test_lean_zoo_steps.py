"""The lean step of every zoo model trains bit for bit as its step: specialised to the batch size
of a fit and to its last smaller batch, run by the same onnxruntime with the same options."""

import numpy as np
import onnxruntime
import pytest
import torch

from benchmarks import example_models
from benchmarks.workloads import frameworks
from helpers import build_training_step, export_for_training
from helpers.portable.lean_step import lean_step
from helpers.portable.step_format import initial_state, read_record

NAMES = sorted(example_models.ZOO)
BATCH, LAST = 4, 3  # the rows of a full batch, and of an epoch's last batch
#: Where the lean step's static shapes make onnxruntime choose another convolution kernel: the
#: same numbers up to float32 rounding, not bit for bit (1.31.1 with the large 1-D CNN).
ROUNDED = {("sequence_conv_large", "1.31.1")}


def _batch(name, module, rows, rng):
    _, shape, task = example_models.ZOO[name]
    if "token" in name:
        X = rng.integers(0, module.embedding.num_embeddings, size=[rows, *shape]).astype(np.int64)
    else:
        X = rng.standard_normal((rows, *shape)).astype(np.float32)
    with torch.no_grad():
        width = module(torch.from_numpy(X[:2])).shape[1]
    if task == "classification":  # the step's cross-entropy takes one-hot labels
        return X, np.eye(width, dtype=np.float32)[rng.integers(0, width, rows)], task
    return X, rng.standard_normal((rows, width)).astype(np.float32), task


def _two_steps(model, record, state, batches):
    """The loss and the state of two steps from ``state``, one on each batch."""
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    outputs = []
    for count, batch in enumerate(batches, start=1):
        feeds = dict(zip(record.batch_inputs, batch), step=np.array(count), **state)
        outputs = session.run(None, feeds)
        state = dict(zip(record.state, outputs[1:]))
    return outputs


@pytest.fixture(scope="module", params=NAMES)
def zoo_step(request):
    name = request.param
    torch.manual_seed(0)
    module = getattr(example_models, name)()
    rng = np.random.default_rng(0)
    X, y, task = _batch(name, module, BATCH, rng)
    model = export_for_training(module, torch.from_numpy(X[:2]))
    loss = frameworks.LOSSES[task][0]
    step = build_training_step(model, loss=loss, solver="momentum", learning_rate=0.01)
    return name, module, step, rng


@pytest.mark.parametrize("rows", [BATCH, LAST])
def test_the_lean_step_trains_bit_for_bit(zoo_step, rows):
    name, module, step, rng = zoo_step
    record = read_record(step)
    batches = [_batch(name, module, rows, rng)[:2] for _ in range(2)]
    state = initial_state(step)
    expected = _two_steps(step, record, state, batches)
    for lean in (lean_step(step), lean_step(step, rows)):
        got = _two_steps(lean, record, state, batches)
        for name_, a, b in zip(["loss", *record.state], got, expected):
            if (name, onnxruntime.__version__) in ROUNDED:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7, err_msg=f"{name}: {name_}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{name}: {name_}")


def test_the_lean_step_has_fewer_nodes(zoo_step):
    name, _, step, _ = zoo_step
    before, folded, specialised = (
        len(step.graph.node),
        len(lean_step(step).graph.node),
        len(lean_step(step, BATCH).graph.node),
    )
    assert specialised <= folded <= before and specialised < before, name
