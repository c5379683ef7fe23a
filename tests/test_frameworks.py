"""The frameworks' names and the onnxruntime optimizers' factory stay light to import.

``peak_memory``'s child processes import :mod:`benchmarks.workloads.frameworks` before they read
their peak memory: a heavy import there would add its megabytes to every framework measured.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from benchmarks.workloads import frameworks as fw

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "onnx", "onnxruntime", "scipy", "sklearn", "torch", "helpers")

_LOADED = """
import json, sys
before = set(sys.modules)
import benchmarks.workloads.frameworks
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.fixture(scope="module")
def loaded():
    """The modules a fresh process loads when it imports ``frameworks``."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_package(loaded):
    tops = {name.split(".")[0] for name in loaded}
    assert "benchmarks" in tops  # the import did run
    assert not tops & set(HEAVY), sorted(tops & set(HEAVY))


def test_import_loads_the_standard_library_only(loaded):
    others = {
        name
        for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "benchmarks"
    }
    assert not others, sorted(others)


def test_ort_makers_passes_params_to_both_optimizers():
    from helpers.teaching.model_factories import mlp_onnx

    makers = fw.ort_makers(
        mlp_onnx(2, hidden=(3,)), "cross_entropy", learning_rate=0.1, validation_every=0
    )
    assert sorted(makers) == sorted((fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD))
    for make in makers.values():
        params = make().get_params(deep=False)
        assert (params["learning_rate"], params["validation_every"]) == (0.1, 0)
    assert makers[fw.ORT_FORWARD_BACKWARD]().learning_loss == fw.LOSSES["classification"][0]


def test_bounds_are_not_frameworks_of_the_optimizers():
    assert set(fw.BOUNDS) == {fw.NUMPY_MATMUL, fw.ORT_BOUND}
    assert not set(fw.BOUNDS) & {fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD, fw.TORCH, fw.SKLEARN}
