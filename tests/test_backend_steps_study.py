"""The backend_steps study's machinery: the server of one backend, the fits timed by the servers'
clocks, the rows of a case with their loss check, the cases a run measures (no timing asserted)."""

import io
import json

import numpy as np
import pytest

from benchmarks.studies import backend_process, backend_steps
from benchmarks.workloads import frameworks as fw
from helpers.core.machine.runtime import has_training_package
from helpers.teaching.model_factories import mlp_onnx


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory):
    """An MLP 3-4-1 and 16 rows, as the study writes them."""
    import onnx

    folder = tmp_path_factory.mktemp("backend")
    model, data = str(folder / "model.onnx"), str(folder / "data.npz")
    onnx.save(mlp_onnx(3, hidden=(4,)), model)
    X = np.random.default_rng(0).standard_normal((16, 3), dtype=np.float32)
    np.savez(data, X=X, y=X.sum(axis=1))
    return {"model": model, "data": data, "loss": "squared_error", "batch_size": 4}


def test_the_server_loads_fits_and_checks_and_answers_an_error(model_and_data):
    requests = [
        {"load": {**model_and_data, "learning_rate": 0.01}},
        {"fit": fw.ORT_WHOLE, "epochs": 2},
        {"first_losses": fw.ORT_FORWARD_BACKWARD, "steps": 3},
        {"fit": "no such API", "epochs": 1},
    ]
    answers = io.StringIO()
    lines = io.StringIO("".join(json.dumps(r) + "\n" for r in requests))
    backend_process.serve("onnx", 1, lines, answers)
    ready, loaded, fitted, checked, failed = map(json.loads, answers.getvalue().splitlines())
    assert ready == {"ready": "onnx"}
    assert loaded["backend"] == "onnx" and loaded["runtime"].startswith("onnxruntime ")
    assert set(fitted) == {"cpu_s", "wall_s", "loss"} and fitted["cpu_s"] >= 0
    assert len(checked["losses"]) == 3
    assert failed["error"].startswith("KeyError")


@pytest.mark.skipif(not has_training_package(), reason="compares with the training package")
@pytest.mark.parametrize("api", [fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD])
def test_both_backends_give_the_same_first_losses(model_and_data, api):
    losses = []
    for backend in ("onnxruntime-training", "onnx"):
        fits = backend_process.Fits(backend, 1)
        fits.load(**model_and_data, learning_rate=0.01)
        losses.append(fits.first_losses(api, 3)["losses"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


class FakeServer:
    """A server whose fits cost 0.1 s plus 1 ms a step of CPU time, and whose loss check the test
    sets."""

    def __init__(self, backend, losses=(2.0, 1.5, 1.0), fails=False):
        self.backend, self.losses, self.fails = backend, list(losses), fails
        self.steps = None

    def request(self, request):
        if "load" in request:
            if self.fails:
                raise RuntimeError(f"The {self.backend} process failed: NoGradientError: Foo")
            self.steps = 16 // request["load"]["batch_size"]
            return {"backend": self.backend, "runtime": "onnxruntime 9.9.9"}
        if "first_losses" in request:
            return {"losses": self.losses}
        cost = 0.1 + request["epochs"] * self.steps * 1e-3
        return {"cpu_s": cost, "wall_s": 2 * cost, "loss": 0.5}


def test_a_case_gives_a_row_per_api_and_run_with_its_step_and_loss_check(tmp_path):
    X = np.ones((16, 3), np.float32)
    built = (mlp_onnx(3, hidden=(4,)), X, X.sum(axis=1), "squared_error", 4)
    servers = [
        FakeServer("onnxruntime-training"),
        FakeServer("onnx", losses=(2.0, 1.5, 1.01)),
        FakeServer("onnx", fails=True),
    ]
    runs = backend_steps.Runs(servers)
    settings = {"folder": str(tmp_path), "learning_rate": 0.01, "threads": 1}
    rows = backend_steps.measure_case(runs, "MLP 3-4-1@4", built, 4, (1, 3), 2, settings)
    assert [(r["api"], r["backend"]) for r in rows] == [
        (api, backend)
        for api in (fw.ORT_WHOLE, fw.ORT_FORWARD_BACKWARD)
        for backend in ("onnxruntime-training", "onnx", "onnx")
    ]
    timed = [r for r in rows if "step_s" in r]
    assert len(timed) == 4
    assert all(r["step_s"] == pytest.approx(1e-3) for r in timed)
    assert all(r["wall_step_s"] == pytest.approx(2e-3) for r in timed)
    assert [r["loss_gap"] for r in timed] == [0.0, pytest.approx(0.01), 0.0, pytest.approx(0.01)]
    assert all(r["last_loss_gap"] == 0.0 for r in timed)
    failed = [r for r in rows if "step_s" not in r]
    assert len(failed) == 2 and all(r["note"].startswith("failed: ") for r in failed)
    assert "NoGradientError: Foo" in failed[0]["note"]


def test_the_wall_step_leaves_the_warm_up_out_and_says_nan_when_noise_won():
    runs = backend_steps.Runs([])
    runs.walls[("a", 0)] = [(1, 9.0), (1, 1.0), (3, 1.4), (1, 1.1), (3, 1.5)]
    assert runs.wall_step(("a", 0), (1, 3), 10) == pytest.approx(0.02)
    runs.walls[("b", 0)] = [(1, 1.0), (1, 1.0), (3, 0.9)]
    assert np.isnan(runs.wall_step(("b", 0), (1, 3), 10))


def test_the_cases_of_a_run():
    quick = backend_steps.cases(["mlp", "zoo"], quick=True)
    assert [c[1] for c in quick][:2] == ["MLP 10-50-1@100", "image_cnn_small"]
    assert all(c[1].endswith("_small") for c in quick[1:])
    full = backend_steps.cases(["mlp", "zoo"], quick=False)
    assert len(full) == len(backend_steps.MLP_SIZES) + 14
    by_case = {c[1]: c for c in full}
    assert by_case["mobilenet_large"][3:5] == (backend_steps.SLOW_MODELS["mobilenet_large"], 2)
    assert backend_steps.cases(["mlp"], False, sizes=["3-4-1@8"])[0][1] == "MLP 3-4-1@8"
