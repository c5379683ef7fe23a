"""``python -m helpers.portable fit``: the files it writes, resuming, its options, its one-line
errors and their exit codes, and nothing written in its output folder unless all succeeded."""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from step_models import linear_step, regression_data

from helpers.portable import __main__ as cli
from helpers.portable import atomic_files, runtime_support
from helpers.portable.trainer import PortableTrainer

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPTIONS = ["--epochs", 2, "--batch-size", 5, "--random-state", 3]


def run_cli(*args):
    """The command line in a child process, as on a machine with a CUDA toolkit and no GPU.

    CUDA_HOME makes torch's CUDA build (Python 3.12 and 3.13's wheel) warn as it loads, a line
    the command's one-line errors must not carry.
    """
    return subprocess.run(
        [sys.executable, "-m", "helpers.portable", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "CUDA_HOME": str(ROOT / "no-cuda-toolkit")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def main(*args):
    """The command line in this process: its exit code."""
    return cli.main([str(arg) for arg in args])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    X, y = regression_data()
    onnx.save(linear_step(momentum=0.9), folder / "step.onnx")
    np.savez(folder / "data.npz", X=X, y=y)
    return folder, X, y


def reference(epochs):
    trainer = PortableTrainer(linear_step(momentum=0.9), batch_size=5, random_state=3)
    trainer.max_iter = epochs
    return trainer.fit(*regression_data())


def snapshot(folder):
    """Each file of ``folder`` and its bytes (None: nothing there; bytes: a file)."""
    if not folder.exists():
        return None
    if folder.is_file():
        return folder.read_bytes()
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "flags", [[], ["--epoch-loop"], ["--no-lean"], ["--epoch-loop", "--no-lean"]]
)
def test_fit_writes_the_losses_the_trained_model_and_the_step(files, flags):
    """Each way of running the step trains the same numbers as the trainer's default."""
    folder, X, y = files
    out = folder / ("out" + "".join(flags))
    result = run_cli(
        "fit", folder / "step.onnx", "--data", folder / "data.npz", "--out", out, *OPTIONS, *flags
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(out)) == ["losses.json", "model.onnx", "step.onnx"]
    trainer = reference(2)
    assert json.loads((out / "losses.json").read_text()) == trainer.losses_
    saved = onnx.load(out / "model.onnx")
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in saved.graph.initializer}
    np.testing.assert_array_equal(weights["coef"], trainer.get_state()["coef"])
    assert "16 steps (2 epochs)" in result.stdout


def test_fitting_the_saved_step_resumes_the_training(files, tmp_path):
    """fit 2 epochs, then fit OUT/step.onnx (2 more, in place): the 4 epochs of one fit."""
    folder, *_ = files
    out = tmp_path / "out"
    assert (
        main("fit", folder / "step.onnx", "--data", folder / "data.npz", "--out", out, *OPTIONS)
        == 0
    )
    assert main("fit", out / "step.onnx", "--data", folder / "data.npz", "--out", out) == 0
    whole = reference(4)
    assert json.loads((out / "losses.json").read_text()) == whole.losses_[16:]
    resumed = onnx.load(out / "model.onnx")
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in resumed.graph.initializer}
    for name in ("coef", "intercept"):
        np.testing.assert_array_equal(weights[name], whole.get_state()[name])
    assert sorted(os.listdir(out)) == ["losses.json", "model.onnx", "step.onnx"]


def test_help_names_the_command_its_options_and_the_exit_codes():
    result = run_cli("fit", "--help")
    assert result.returncode == 0
    for option in (
        "--data", "--epochs", "--batch-size", "--random-state", "--out", "--epoch-loop",
        "--providers", "--threads", "step.onnx", "Resume",
    ):  # fmt: skip
        assert option in result.stdout
    assert all(f"{code} " in " ".join(result.stdout.split()) for code in (2, 3, 4, 5, 130))


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["--providers", "CPUExecutionProvider", "s.onnx"], ["CPUExecutionProvider"]),
        (["--providers", "CUDAExecutionProvider,CPUExecutionProvider", "s.onnx"],
         ["CUDAExecutionProvider", "CPUExecutionProvider"]),
        (["s.onnx", "--providers", "A", "--providers", "B,C"], ["A", "B", "C"]),
    ],
    ids=["before-the-step", "comma-separated", "repeated"],
)  # fmt: skip
def test_providers_take_one_value_per_flag(arguments, expected):
    args = cli.build_parser().parse_args(["fit", *arguments, "--data", "d.npz", "--out", "o"])
    assert (args.step, args.providers) == ("s.onnx", expected)


def test_providers_before_the_step_and_threads_reach_the_sessions(files, tmp_path, monkeypatch):
    folder, *_ = files
    made = []

    class Recording(onnxruntime.InferenceSession):
        def __init__(self, model, options=None, providers=None, **kwargs):
            name = onnx.load_from_string(model).graph.name
            made.append((name, options.intra_op_num_threads, providers))
            super().__init__(model, options, providers=providers, **kwargs)

    monkeypatch.setattr(runtime_support.onnxruntime, "InferenceSession", Recording)
    code = main(
        "fit", "--providers", "CPUExecutionProvider", folder / "step.onnx", "--threads", 2,
        "--data", folder / "data.npz", "--out", tmp_path / "out", *OPTIONS,
    )  # fmt: skip
    assert code == 0
    assert ("linear_regression_step", 2, ["CPUExecutionProvider"]) in made


# -- errors: one line, their exit code, and the output folder as it was ---------------------------


def failing_step():
    """A step the runtime fails to run at the last batch of an epoch (2 rows, not 5)."""
    step = linear_step()
    step.graph.initializer.append(numpy_helper.from_array(np.array([5, 3]), "five_rows"))
    for node in step.graph.node:
        node.input[:] = ["X_five" if name == "X" else name for name in node.input]
    step.graph.node.insert(0, helper.make_node("Reshape", ["X", "five_rows"], ["X_five"]))
    return step


@pytest.fixture(scope="module")
def bad_inputs(files):
    folder, X, y = files
    np.savez(folder / "only_x.npz", X=X)
    np.savez(folder / "columns.npz", X=X[:, :2], y=y)
    np.save(folder / "one_array.npy", X)
    (folder / "bad.onnx").write_bytes(b"\x00garbage")
    (folder / "a_file").write_text("not a folder")
    onnx.save(linear_step(learning_rate=40.0), folder / "diverging.onnx")
    onnx.save(failing_step(), folder / "failing.onnx")
    return folder


@pytest.mark.parametrize(
    "step, data, out, code, match",
    [
        ("step.onnx", "missing.npz", None, 3, "No data file at"),
        ("step.onnx", "only_x.npz", None, 3, "has no array y"),
        ("step.onnx", "one_array.npy", None, 3, "not an .npz file"),
        ("step.onnx", "columns.npz", None, 3, r"X has shape \(37, 2\)"),
        ("bad.onnx", "data.npz", None, 3, "is not an ONNX model"),
        ("step.onnx", "data.npz", "a_file", 3, "is a file: give a folder"),
        ("diverging.onnx", "data.npz", None, 4, "the training diverged"),
        ("failing.onnx", "data.npz", None, 5, "reshape"),
    ],
    ids=["no-data", "no-y", "not-npz", "columns", "not-onnx", "out-a-file", "diverged", "runtime"],
)
def test_errors_are_one_line_with_their_exit_code(bad_inputs, step, data, out, code, match):
    folder = bad_inputs
    out = folder / (out or f"out-{code}-{data}")
    before = snapshot(out)
    result = run_cli("fit", folder / step, "--data", folder / data, "--out", out, *OPTIONS)
    assert result.returncode == code, result.stderr
    assert re.search(match, result.stderr) and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and snapshot(out) == before


@pytest.mark.parametrize(
    "arguments", [[], ["--out", "o", "--threads", "0"], ["--out", "o", "--epochs", "-1"]]
)
def test_usage_errors_exit_with_2(files, arguments):
    folder, *_ = files
    arguments = ["fit", folder / "step.onnx", "--data", folder / "data.npz", *arguments]
    with pytest.raises(SystemExit) as exit_:
        main(*arguments)
    assert exit_.value.code == 2
    result = run_cli(*arguments)
    assert result.returncode == 2 and "usage:" in result.stderr


@pytest.mark.parametrize("when", ["training", "writing"])
@pytest.mark.parametrize("existing", [False, True])
def test_an_interruption_exits_with_130_and_leaves_the_folder_as_it_was(
    files, tmp_path, monkeypatch, capsys, when, existing
):
    folder, *_ = files
    out = tmp_path / "out"
    arguments = ["fit", folder / "step.onnx", "--data", folder / "data.npz", "--out", out, *OPTIONS]
    if existing:  # a previous run's files, which the interrupted one must leave whole
        assert main(*arguments) == 0
    before, calls, fsync = snapshot(out), [], os.fsync

    def interrupted(*args, **kwargs):
        calls.append(args)
        if when == "training" or len(calls) == 2:  # writing: after the first file's bytes
            raise KeyboardInterrupt
        return fsync(*args)

    if when == "training":
        monkeypatch.setattr(PortableTrainer, "fit", interrupted)
    else:
        monkeypatch.setattr(atomic_files.os, "fsync", interrupted)
    capsys.readouterr()
    assert main(*arguments, "--epochs", 1) == 130
    assert capsys.readouterr().err.strip() == "interrupted: nothing was written"
    assert snapshot(out) == before
