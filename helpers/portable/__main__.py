"""Make and train a step model from the command line, with any onnxruntime.

``python -m helpers.portable export MODEL.onnx --loss L --solver S --learning-rate R --out
STEP.onnx`` writes the step model of ``MODEL.onnx`` (:func:`helpers.build_training_step`: its
gradients in standard ONNX, no training package; this command needs the project's other
dependencies, scikit-learn among them, where ``fit`` needs numpy, onnx and onnxruntime only).
``python -m helpers.portable fit STEP.onnx --data DATA.npz --out DIR`` trains the step model on
the arrays ``X`` and ``y`` (and ``sample_weight`` when present; no ``X`` for a step without
features) of ``DATA.npz`` and writes, once the training succeeded, ``DIR/losses.json`` (the
loss of each step), ``DIR/model.onnx`` (the trained inference model) and ``DIR/step.onnx`` (the
step model that resumes the training: ``fit DIR/step.onnx`` trains the next epochs, as
``partial_fit`` would have). The three are written all or none: a failure leaves ``DIR`` as it
was. The epochs, batch size and seed default to the exporting optimizer's (the saved step's:
the run's own).

An error is one line on stderr, and the exit code says which kind (:data:`EXIT_CODES`):

* 0: success;
* 2: usage, an argument missing or malformed (argparse's);
* 3: bad input: a file missing, unreadable or not what it should be, an output folder that
  cannot be written, data that does not fit the step, a step or a provider the installed
  onnxruntime does not run;
* 4: the training diverged (a NaN or infinite loss, :class:`~helpers.portable.divergence.
  TrainingDivergedError`);
* 5: the runtime failed (any other error);
* 130: interrupted (Ctrl-C).
"""

import argparse
import json
import logging
import os
import sys

import numpy as np

from .atomic_files import write_files_atomic
from .step_format import read_model, read_record

#: The files ``fit`` writes in its output folder.
LOSSES_FILE, MODEL_FILE, STEP_FILE = "losses.json", "model.onnx", "step.onnx"
#: The exit code of each outcome (the module's docstring says what each covers).
EXIT_CODES = {"success": 0, "usage": 2, "input": 3, "diverged": 4, "runtime": 5, "interrupted": 130}


def _positive(text):
    """argparse's type of a count of at least one."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def _count(text):
    """argparse's type of a count of at least zero."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


class _Providers(argparse.Action):
    """``--providers A,B --providers C``: one value per flag, each a comma-separated list."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = [name.strip() for name in values.split(",") if name.strip()]
        if not names:
            parser.error(f"{option_string} takes the name of an execution provider")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), *names])


def build_parser():
    """The command line's parser.

    Examples
    --------
    >>> args = build_parser().parse_args(["fit", "step.onnx", "--data", "d.npz", "--out", "o"])
    >>> args.epochs, args.epoch_loop, args.providers, args.threads
    (None, False, None, None)
    >>> build_parser().parse_args(["fit", "--providers", "CUDAExecutionProvider,CPU",
    ...     "--providers", "Other", "step.onnx", "--data", "d.npz", "--out", "o"]).providers
    ['CUDAExecutionProvider', 'CPU', 'Other']
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.portable",
        description="Train a step model (export_training_step) with the installed onnxruntime: "
        "no training package, no torch.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fit = commands.add_parser(
        "fit",
        help="train a step model on the arrays of an .npz file",
        description=f"Train STEP on DATA; write OUT/{LOSSES_FILE} (one loss per step), "
        f"OUT/{MODEL_FILE} (the trained inference model) and OUT/{STEP_FILE} (the step that "
        "resumes the training), all three once the training succeeded.",
        epilog=f"Resume a training: fit OUT/{STEP_FILE} (its epochs, batch size and seed are the "
        "run's). Exit codes: 0 success, 2 usage, 3 bad input (a file, the data, the output "
        "folder), 4 the training diverged, 5 the runtime failed, 130 interrupted.",
    )
    fit.add_argument("step", metavar="STEP.onnx", help="the step model")
    fit.add_argument(
        "--data",
        required=True,
        metavar="DATA.npz",
        help="arrays X and y, and sample_weight when the step takes weights (numpy.savez); no X "
        "for a step without features",
    )
    fit.add_argument("--out", required=True, metavar="DIR", help="the output folder (created)")
    fit.add_argument("--epochs", type=_count, help="epochs (default: the exporting optimizer's)")
    fit.add_argument(
        "--batch-size", type=_positive, help="rows of a batch (default: the exporter's)"
    )
    fit.add_argument(
        "--random-state", type=int, help="seed of the row orders (default: the exporter's)"
    )
    fit.add_argument(
        "--epoch-loop", action="store_true", help="run each epoch as one call (an ONNX Scan)"
    )
    fit.add_argument(
        "--no-lean",
        dest="lean",
        action="store_false",
        help="run the step as it is, not specialised to the batch size (same results, slower)",
    )
    fit.add_argument(
        "--providers",
        action=_Providers,
        metavar="PROVIDER[,PROVIDER...]",
        help="onnxruntime execution providers, first preferred: comma-separated, or the flag "
        "repeated (default: CPUExecutionProvider)",
    )
    fit.add_argument(
        "--threads", type=_positive, metavar="N", help="threads of an operator (intra-op)"
    )
    export = commands.add_parser(
        "export",
        help="write the step model of an ONNX model (its gradients in standard ONNX)",
        description="Write the training step of MODEL (helpers.build_training_step) to OUT.",
    )
    export.add_argument("model", metavar="MODEL.onnx", help="the model to train")
    export.add_argument("--out", required=True, metavar="STEP.onnx", help="the step model")
    export.add_argument(
        "--loss",
        default="squared_error",
        help="squared_error (default), absolute_error, elastic, log or cross_entropy",
    )
    export.add_argument("--solver", default="sgd", help="sgd (default), momentum, nesterov, adamw")
    export.add_argument("--learning-rate", type=float, default=0.01, help="default: 0.01")
    export.add_argument(
        "--weights", nargs="+", metavar="NAME", help="initializers to train (default: all floats)"
    )
    export.add_argument("--batch-size", type=int, default=32, help="rows of a batch (32)")
    export.add_argument("--epochs", type=int, default=10, help="the epochs fit runs (10)")
    export.add_argument("--random-state", type=int, help="seed of the batches and draws")
    export.add_argument("--momentum", type=float, default=0.9, help="momentum, nesterov (0.9)")
    export.add_argument("--weight-decay", type=float, default=0.01, help="adamw (0.01)")
    return parser


def _export(args):
    """Write the step model ``args`` describe; return a line that says what was written."""
    model = read_model(args.model, what="model")
    from helpers.whole_training.training_step import build_training_step  # noqa: PLC0415

    step = build_training_step(
        model,
        loss=args.loss,
        solver=args.solver,
        learning_rate=args.learning_rate,
        weights=args.weights,
        path=args.out,
        batch_size=args.batch_size,
        max_iter=args.epochs,
        random_state=args.random_state,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
    )
    return f"wrote {args.out}: a step of {len(step.graph.node)} nodes ({args.loss}, {args.solver})"


def _load_data(path):
    """``X`` (None when absent), ``y`` and ``sample_weight`` (None when absent) of ``path``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No data file at {path!r}: give an .npz file with X and y.")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as error:  # numpy's own: not a zip, pickled data, a truncated file
        raise ValueError(f"{path!r} is not an .npz file of arrays ({error}).") from error
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path!r} is one array, not an .npz file: save it with numpy.savez.")
    with data:
        if "y" not in data.files:
            raise ValueError(
                f"{path!r} has no array y (it holds {sorted(data.files)}): save it with "
                "numpy.savez(path, X=..., y=...)."
            )
        names = ("X", "y", "sample_weight")
        return tuple(data[name] if name in data.files else None for name in names)


def _check_out(out):
    """Refuse, before the training, an output folder that cannot be written."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise NotADirectoryError(f"--out {out!r} is a file: give a folder.")
    parent = os.path.abspath(out)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"Cannot write in {parent!r}: give another --out folder.")


def _trainer_class():
    """:class:`~helpers.portable.trainer.PortableTrainer`, imported without torch's warnings.

    onnxruntime-training's import loads torch; torch's CUDA build, on a machine with a CUDA
    toolkit and no GPU, logs "No CUDA runtime is found" as it loads: a line on stderr that has
    nothing to do with a step trained on the CPU, and would break the one-line errors.
    """
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from .trainer import PortableTrainer  # noqa: PLC0415 (after the checks, see _fit)

    return PortableTrainer


def _fit(args):
    """Train as ``args`` say, then write the three files; return the trainer and the epochs the
    step had trained before.

    The inputs are checked before onnxruntime is imported: onnxruntime-training's import loads
    torch, whose own warnings would otherwise come before a one-line error.
    """
    X, y, weights = _load_data(args.data)
    step = read_model(args.step)
    _check_out(args.out)
    PortableTrainer = _trainer_class()

    trainer = PortableTrainer(
        step,
        max_iter=args.epochs,
        batch_size=args.batch_size,
        random_state=args.random_state,
        epoch_loop=args.epoch_loop,
        lean=args.lean,
        providers=args.providers,
        n_threads=args.threads,
    )
    epochs_before = read_record(step).parameters.get("epochs_done") or 0
    trainer.fit(X, y, weights)
    files = {
        LOSSES_FILE: json.dumps(trainer.losses_),
        MODEL_FILE: trainer.inference_model().SerializeToString(),
        STEP_FILE: trainer.trained_step().SerializeToString(),
    }
    write_files_atomic(args.out, files)
    return trainer, epochs_before


def exit_code(error):
    """The exit code of the command line for ``error`` (:data:`EXIT_CODES`).

    A class of :mod:`helpers.portable` that is not imported yet cannot have been raised: the
    test leaves onnxruntime unimported when the error came before it.

    Examples
    --------
    >>> exit_code(FileNotFoundError("No data file")), exit_code(KeyboardInterrupt())
    (3, 130)
    >>> from helpers.portable.divergence import TrainingDivergedError
    >>> exit_code(TrainingDivergedError("diverged")), exit_code(RuntimeError("a kernel failed"))
    (4, 5)
    """
    if isinstance(error, KeyboardInterrupt):
        return EXIT_CODES["interrupted"]
    divergence = sys.modules.get(f"{__package__}.divergence")
    if divergence is not None and isinstance(error, divergence.TrainingDivergedError):
        return EXIT_CODES["diverged"]
    support = sys.modules.get(f"{__package__}.runtime_support")
    if isinstance(error, (OSError, ValueError)) or (
        support is not None and isinstance(error, support.RuntimeSupportError)
    ):
        return EXIT_CODES["input"]
    return EXIT_CODES["runtime"]


def main(argv=None):
    """Run the command line; return the exit code (:data:`EXIT_CODES`; an error said in one
    line on stderr).

    Examples
    --------
    >>> main(["fit", "missing.onnx", "--data", "missing.npz", "--out", "out"])
    3
    """
    args = build_parser().parse_args(argv)
    try:
        if args.command == "export":
            print(_export(args))
            return 0
        trainer, epochs_before = _fit(args)
    except KeyboardInterrupt as error:
        print("interrupted: nothing was written", file=sys.stderr)
        return exit_code(error)
    except Exception as error:  # onnxruntime's own errors derive from Exception only
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return exit_code(error)
    steps = len(trainer.losses_)
    resumed = f", from step {trainer.t_ - steps + 1}" if trainer.t_ > steps else ""
    written = ", ".join(os.path.join(args.out, name) for name in (LOSSES_FILE, MODEL_FILE))
    print(
        f"trained {steps} steps ({trainer.n_iter_ - epochs_before} epochs{resumed}), last loss "
        f"{trainer.losses_[-1] if steps else float('nan'):.6g}; wrote {written} and "
        f"{os.path.join(args.out, STEP_FILE)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
