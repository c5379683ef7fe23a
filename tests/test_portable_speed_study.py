"""The portable_speed study's machinery: the fit server of the maintained process, its peak memory,
its light imports, the refused export, both builders' steps and their rows, the rows kept between
runs (no timing asserted).

The maintained process runs here with this environment's interpreter: ``helpers.portable`` runs on
onnxruntime 1.19.2 as on 1.31.1.
"""

import io
import json
import subprocess
import sys

import numpy as np
import onnxruntime
import pandas as pd
import pytest

from benchmarks.report import portable_section as ps
from benchmarks.studies import portable_builders as pb
from benchmarks.studies import portable_fits as pf
from benchmarks.studies import portable_process, portable_speed
from benchmarks.workloads import frameworks as fw

#: The study exports steps with both gradient builders, one of them the training package's:
#: it runs where that package is installed (``python -m benchmarks.studies.portable_speed``).
pytestmark = pytest.mark.training_package


@pytest.fixture(scope="module")
def step_and_data(tmp_path_factory):
    """The step model of an MLP 3-4-1 (whole-training API, batches of 4) and 16 rows to fit."""
    from helpers.teaching.model_factories import mlp_onnx

    folder = tmp_path_factory.mktemp("portable")
    optimizer = fw.ort_makers(mlp_onnx(3, hidden=(4,)), "squared_error", batch_size=4)[
        fw.ORT_WHOLE
    ]()
    step = str(folder / "step.onnx")
    assert pf.export_step(optimizer, step) == ""
    X = np.random.default_rng(0).standard_normal((16, 3), dtype=np.float32)
    data = pf.write_data(str(folder / "data.npz"), X, X.sum(axis=1))
    return step, data


def test_the_server_trains_each_fit_it_is_asked_for(step_and_data):
    step, data = step_and_data
    spec = {
        portable_process.FITS: {
            name: {portable_process.STEP: step, portable_process.EPOCH_LOOP: loop}
            for name, loop in pf.PORTABLE_MODES.items()
        },
        "data": data,
        "batch_size": 4,
        "random_state": 0,
        "threads": None,
    }
    requests = [
        {"fit": fw.PORTABLE_STEP, "epochs": 2},
        {"fit": fw.PORTABLE_EPOCH_LOOP, "epochs": 2},
    ]
    requests.append({"fit": "no such fit", "epochs": 1})
    answers = io.StringIO()
    portable_process.serve(
        spec, io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), answers
    )
    ready, by_step, by_loop, error = [json.loads(line) for line in answers.getvalue().splitlines()]
    assert ready == {"ready": sorted(pf.PORTABLE_MODES)}
    assert by_step["seconds"] > 0 and np.isfinite(by_step["loss"])
    assert by_loop["loss"] == pytest.approx(by_step["loss"], rel=1e-5)  # same batches, same steps
    assert error == {"error": "KeyError: 'no such fit'"}


def test_maintained_fits_run_in_a_process_of_their_own(step_and_data):
    step, data = step_and_data
    with pf.MaintainedFits(step, data, 4, 0, 1, python=sys.executable) as server:
        fits = server.fits()
        assert sorted(fits) == sorted(pf.PORTABLE_MODES)
        losses = [fits[name](1) for name in pf.PORTABLE_MODES]
        assert server.process.poll() is None
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert server.process.returncode == 0


def test_a_failing_fit_is_raised_with_its_reason(step_and_data):
    step, data = step_and_data
    with pf.MaintainedFits(step, data, 4, 0, 1, python=sys.executable) as server:
        with pytest.raises(RuntimeError, match="KeyError"):
            server.fit("no such fit", 1)


def test_the_memory_process_reads_its_peak_before_and_after_training(step_and_data):
    step, data = step_and_data
    memory = pf.portable_memory(step, data, 4, 1, True, 1, python=sys.executable)
    assert 10 < memory["import_mb"] <= memory["peak_mb"]


def test_the_maintained_process_imports_nothing_the_maintained_environment_lacks():
    """No scikit-learn, pandas or the helpers' training layers (torch and ``onnxruntime.training``
    are the training package's own imports here: ``import onnxruntime`` loads them)."""
    code = (
        "import sys, benchmarks.studies.portable_process, benchmarks.studies.peak_memory_process; "
        "import helpers.portable.trainer, helpers.measure.timing; "
        "print(sorted(m for m in ('sklearn', 'pandas', 'scipy', 'benchmarks.report', "
        "'helpers.core.training', 'helpers.core.model_graphs', 'helpers.whole_training', "
        "'helpers.teaching') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_limit_threads_sets_the_sessions_threads_and_can_be_undone():
    limited = portable_process.limit_threads(1)
    try:
        assert onnxruntime.InferenceSession is limited
        assert portable_process.limit_threads(2).unlimited is limited.unlimited  # no stacking
    finally:
        onnxruntime.InferenceSession = limited.unlimited


def test_a_refused_step_model_gives_the_refusal():
    from helpers.portable.gradients.registry import NoGradientError
    from helpers.portable.lowering.registry import UnsupportedOperatorError

    class Refusing:
        def __init__(self, error):
            self.error = error

        def export_training_step(self, path, gradient_builder):
            raise self.error

    lowering = Refusing(UnsupportedOperatorError("Round", "com.microsoft", "/layer/Round"))
    reason = pf.export_step(lowering, "unused.onnx")
    assert reason == "refused: com.microsoft:Round (from the layer /layer/Round)"
    no_gradient = Refusing(NoGradientError("TopK", "", "/head/TopK"))
    assert pf.export_step(no_gradient, "unused.onnx", "onnx") == (
        "refused: ai.onnx:TopK (from the layer /head/TopK)"
    )


@pytest.fixture(scope="module")
def both_steps(tmp_path_factory):
    """An MLP 3-4-1's step model from each builder, and 16 rows to fit."""
    from helpers.teaching.model_factories import mlp_onnx

    folder = tmp_path_factory.mktemp("builders")
    optimizer = fw.ort_makers(mlp_onnx(3, hidden=(4,)), "squared_error", batch_size=4)[
        fw.ORT_WHOLE
    ]()
    X = np.random.default_rng(0).standard_normal((16, 3), dtype=np.float32)
    data = pf.write_data(str(folder / "data.npz"), X, X.sum(axis=1))
    return pb.export_steps(optimizer, str(folder), "mlp"), data


def test_both_builders_write_a_step_model_and_count_its_nodes(both_steps):
    import onnx

    steps, _ = both_steps
    assert set(steps) == {ps.LOWERED, ps.BUILT} == set(pb.BUILDERS)
    for step in steps.values():
        assert step["refused"] == ""
        assert step["nodes"] == len(onnx.load(step["path"]).graph.node) > 10


def test_builder_fits_train_both_steps_and_label_their_rows(both_steps):
    """The same losses from both steps, on one runtime; a refused step is a row with its reason."""
    steps, data = both_steps
    runtime = f"onnxruntime {onnxruntime.__version__}"
    refused = "refused: ai.onnx:TopK (from the layer /head/TopK)"
    steps = {**steps, "other": {"path": "none.onnx", "nodes": None, "refused": refused}}
    with pb.BuilderFits(steps, [(runtime, sys.executable)], data, 4, 1) as server:
        fits = server.fits()
        losses = {name: fit(2) for name, fit in fits.items()}
    lowered = pb.fit_name(fw.PORTABLE_STEP, ps.LOWERED, runtime)
    built = pb.fit_name(fw.PORTABLE_STEP, ps.BUILT, runtime)
    assert set(fits) == {lowered, built, pb.fit_name(fw.PORTABLE_EPOCH_LOOP, ps.LOWERED, runtime)}
    assert losses[built] == pytest.approx(losses[lowered], rel=1e-5)
    row = server.labelled([{"framework": built, "step_s": 1.0}, {"framework": fw.TORCH}])
    assert row == [
        {
            "framework": fw.PORTABLE_STEP,
            "builder": ps.BUILT,
            "runtime": runtime,
            "nodes": steps[ps.BUILT]["nodes"],
            "step_s": 1.0,
        },
        {"framework": fw.TORCH},
    ]
    (untimed,) = server.untimed(1, model="m")
    assert untimed["builder"] == "other" and untimed["note"] == refused


def test_the_runtimes_are_listed_once_each():
    runtime = f"onnxruntime {onnxruntime.__version__}"
    assert portable_speed.runtimes_of(sys.executable) == [(runtime, sys.executable)]


def test_a_missing_maintained_environment_says_how_to_build_it():
    with pytest.raises(FileNotFoundError, match="make setup-maintained"):
        pf.maintained_python("no/such/python")


def test_a_run_of_some_cases_keeps_the_rows_of_the_others(tmp_path):
    path = tmp_path / "portable_speed.csv"
    pd.DataFrame({"case": ["a", "b"], "step_s": [1.0, 2.0]}).to_csv(path, index=False)
    kept = portable_speed.kept_rows(
        str(path), pd.DataFrame({"case": ["b"], "step_s": [3.0]}), "case"
    )
    assert kept.to_dict("list") == {"case": ["a", "b"], "step_s": [1.0, 3.0]}


def test_every_zoo_model_has_its_steps_per_epoch():
    from benchmarks.example_models import ZOO

    assert all(portable_speed.zoo_steps(name) >= 1 for name in ZOO)


@pytest.mark.slow
def test_the_study_writes_its_rows_and_its_text(tmp_path):
    """A quick run of the MLP case (the maintained process on this interpreter): every framework a
    row with the columns the summary reads, both builders' steps with their node counts, and the
    text that answers."""
    argv = ["--quick", "--only", "mlp", "--maintained-python", sys.executable]
    assert portable_speed.main([*argv, "--out", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / ps.PORTABLE_SPEED_CSV)
    assert list(rows.columns) == ps.SPEED_COLUMNS
    assert set(rows.framework) == {fw.ORT_WHOLE, *pf.PORTABLE_MODES}
    assert (rows.threads == 2).all() and (rows.batch_size == 100).all()
    steps = rows[rows.framework == fw.PORTABLE_STEP].set_index("builder")
    assert sorted(steps.index) == sorted([ps.LOWERED, ps.BUILT])
    assert (steps.runtime == f"onnxruntime {onnxruntime.__version__}").all()
    assert (steps.nodes > 10).all()
    assert rows[rows.framework == fw.ORT_WHOLE].builder.isna().all()
    text = (tmp_path / "portable_speed.md").read_text(encoding="utf-8")
    assert text.startswith('Per model, the step model built with gradient_builder="onnx"')
    assert "| MLP 100-50-1 (batch 100) | " in text and "nodes: lowered / built" in text
    assert "\n\nWith the epoch loop, " in text
