"""Peak memory (a process per framework), an untrainable model, and bench_your_model's record.

The time to a held-out accuracy: tests/test_time_to_accuracy.py."""

import numpy as np
import pytest
from conftest import APIS, make_optimizer

from benchmarks.studies import peak_memory


@pytest.mark.slow
def test_peak_memory_measures_each_framework_in_its_own_process(tmp_path):
    assert peak_memory.main(["--quick", "--out", str(tmp_path)]) == 0
    import pandas as pd

    df = pd.read_csv(tmp_path / "peak_memory.csv")
    assert list(df.framework) == list(peak_memory.FRAMEWORKS)
    assert (df.import_mb > 50).all() and (df.peak_mb >= df.import_mb).all()
    # the training helpers import torch (onnxruntime.training does): more than scikit-learn alone
    assert (
        df.set_index("framework").import_mb["ort whole-training"]
        > df.set_index("framework").import_mb["scikit-learn"]
    )
    assert (tmp_path / "peak_memory.png").read_bytes().startswith(b"\x89PNG")


def test_an_operator_without_gradient_is_named_by_both_apis():
    import pytest
    import torch

    from benchmarks.example_models import upsampling_model
    from helpers import UntrainableModelError, export_for_training

    onx = export_for_training(upsampling_model(), torch.zeros(2, 8))
    X, y = np.zeros((4, 8), np.float32), np.zeros((4, 1), np.float32)
    for api in APIS:
        optimizer = make_optimizer(api, onx, max_iter=1)
        with pytest.raises(UntrainableModelError, match="no gradient for Resize"):
            optimizer.fit(X, y)


@pytest.mark.slow
@pytest.mark.parametrize(
    "parameters, expected",
    [
        # torch.compile and the memory chart: tests/test_bench_your_model.py
        (
            dict(epochs=3, try_compile=False, measure_memory=False),
            {"torch eager", "ort forward-backward", "ort whole-training"},
        ),
        (
            dict(
                model_function="benchmarks.example_models:tanh_regressor",
                input_shape=[16],
                task="regression",
                # 1024 rows, 3 epochs: 32 extra steps, so that the timed difference stands above the
                # noise
                n_samples=1024,
                epochs=3,
                try_compile=False,
                measure_memory=False,
            ),
            {"torch eager", "ort forward-backward", "ort whole-training"},
        ),
    ],
    ids=["digits", "regression"],
)
def test_bench_your_model_writes_a_record(tmp_path, parameters, expected, check_step_time):
    import json
    import os

    import papermill

    record = tmp_path / "record.json"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    papermill.execute_notebook(
        os.path.join(root, "benchmarks", "bench_your_model.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={**parameters, "record_path": str(record)},
        kernel_name="ort-training",
        cwd=os.path.join(root, "benchmarks"),
        progress_bar=False,
    )
    rows = {row["framework"]: row for row in json.loads(record.read_text())["rows"]}
    assert set(rows) == expected
    # the digits classifier too: the whole-training API adds the softmax cross-entropy to the graph
    assert (
        rows["ort forward-backward"]["comparable"] is True
        and rows["ort whole-training"]["comparable"] is True
    )
    assert rows["ort forward-backward"]["time_to_loss"]
    for row in rows.values():  # a step time, or NaN and why (a busy machine)
        check_step_time(row)
        ratio = row["time_per_update_s"] / rows["torch eager"]["time_per_update_s"]
        np.testing.assert_allclose(row["ratio_to_torch_eager"], ratio)
