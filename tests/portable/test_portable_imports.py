"""helpers.portable runs without the training package: importing it loads none of it."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from helpers.portable.batch_order import batch_bounds, batch_count, epoch_order, random_state

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Modules a process that trains a step model must not load.
HEAVY = ["torch", "sklearn", "onnxruntime.training", "scipy", "pandas"]


def test_the_runner_and_the_command_line_load_no_training_package():
    """Nothing heavy beyond what numpy, onnx and onnxruntime load themselves: nothing at all on
    the maintained onnxruntime; the training package's onnxruntime imports its training module
    and torch on its own."""
    code = (
        "import importlib.util, json, sys\n"
        "import numpy, onnx, onnxruntime\n"
        "before = set(sys.modules)\n"
        "import helpers.portable, helpers.portable.trainer, helpers.portable.__main__\n"
        "import helpers\n"
        "helpers.PortableTrainer\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps({'added': [m for m in heavy if m in set(sys.modules) - before],\n"
        "    'loaded': [m for m in heavy if m in sys.modules],\n"
        "    'training': importlib.util.find_spec('onnxruntime.training') is not None}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    found = json.loads(result.stdout)
    assert found["added"] == []
    if not found["training"]:  # the maintained onnxruntime
        assert found["loaded"] == []


@pytest.mark.parametrize("seed", [0, 7])
def test_epoch_orders_are_the_random_states_permutations(seed):
    """The definition the optimizers share: one RandomState per fit, one permutation per epoch."""
    rng, reference = random_state(seed), np.random.RandomState(seed)
    for _ in range(3):
        np.testing.assert_array_equal(epoch_order(rng, 11), reference.permutation(11))


@pytest.mark.parametrize("n_rows, batch_size", [(10, 3), (9, 3), (2, 5), (1, 1)])
def test_batches_cover_each_row_once_the_last_one_smaller(n_rows, batch_size):
    bounds = batch_bounds(n_rows, batch_size)
    assert len(bounds) == batch_count(n_rows, batch_size)
    rows = [r for start, end in bounds for r in range(start, end)]
    assert rows == list(range(n_rows))
    assert all(end - start == batch_size for start, end in bounds[:-1])
    assert 0 < bounds[-1][1] - bounds[-1][0] <= batch_size


def test_a_generator_is_used_as_given_and_other_seeds_are_refused():
    generator = np.random.RandomState(3)
    assert random_state(generator) is generator
    with pytest.raises(ValueError, match="cannot seed the batch order"):
        random_state("seven")
