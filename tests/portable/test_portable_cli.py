"""``python -m helpers.portable fit``: the files it writes, its help, its one-line errors."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from step_models import linear_step, regression_data

from helpers.portable.trainer import PortableTrainer

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "helpers.portable", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    X, y = regression_data()
    onnx.save(linear_step(momentum=0.9), folder / "step.onnx")
    np.savez(folder / "data.npz", X=X, y=y)
    return folder, X, y


@pytest.mark.parametrize("epoch_loop", [False, True])
def test_fit_writes_the_losses_and_the_trained_model(files, epoch_loop):
    folder, X, y = files
    out = folder / f"out-{epoch_loop}"
    options = ["--epochs", 2, "--batch-size", 5, "--random-state", 3]
    result = run_cli(
        "fit", folder / "step.onnx", "--data", folder / "data.npz", "--out", out, *options,
        *(["--epoch-loop"] if epoch_loop else []),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out)) == ["losses.json", "model.onnx"]
    trainer = PortableTrainer(linear_step(momentum=0.9), max_iter=2, batch_size=5, random_state=3)
    trainer.fit(X, y)
    assert json.loads((out / "losses.json").read_text()) == trainer.losses_
    saved = onnx.load(out / "model.onnx")
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in saved.graph.initializer}
    np.testing.assert_array_equal(weights["coef"], trainer.get_state()["coef"])
    assert "16 steps (2 epochs)" in result.stdout


def test_help_names_the_command_and_its_options():
    result = run_cli("fit", "--help")
    assert result.returncode == 0
    for option in ("--data", "--epochs", "--batch-size", "--random-state", "--out", "--epoch-loop"):
        assert option in result.stdout


@pytest.mark.parametrize(
    "data, match",
    [("missing.npz", "No data file at"), ("only_x.npz", "has no array y")],
)
def test_errors_are_one_line_and_exit_code_2(files, data, match):
    folder, X, _ = files
    np.savez(folder / "only_x.npz", X=X)
    out = folder / "failed"
    result = run_cli("fit", folder / "step.onnx", "--data", folder / data, "--out", out)
    assert result.returncode == 2
    assert match in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_invalid_step_file_is_one_line_too(files):
    folder, *_ = files
    (folder / "bad.onnx").write_bytes(b"\x00garbage")
    result = run_cli("fit", folder / "bad.onnx", "--data", folder / "data.npz", "--out", folder)
    assert result.returncode == 2 and "is not an ONNX model" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
