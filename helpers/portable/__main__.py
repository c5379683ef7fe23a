"""Make and train a step model from the command line, with any onnxruntime.

``python -m helpers.portable export MODEL.onnx --loss L --solver S --learning-rate R --out
STEP.onnx`` writes the step model of ``MODEL.onnx`` (:func:`helpers.build_training_step`: its
gradients in standard ONNX, no training package; this command needs the project's other
dependencies, scikit-learn among them, where ``fit`` needs numpy, onnx and onnxruntime only).
``python -m helpers.portable fit STEP.onnx --data DATA.npz --out DIR`` trains the step model on
the arrays ``X`` and ``y`` (and ``sample_weight`` when present) of ``DATA.npz`` and writes
``DIR/losses.json`` (the loss of each step) and ``DIR/model.onnx`` (the trained inference
model), each atomically. The epochs, batch size and seed default to the exporting optimizer's.
An error is one line on stderr and exit code 2.
"""

import argparse
import json
import os
import sys

import numpy as np

from .atomic_files import write_atomic
from .step_format import read_model

#: The files ``fit`` writes in its output folder.
LOSSES_FILE, MODEL_FILE = "losses.json", "model.onnx"


def build_parser():
    """The command line's parser.

    Examples
    --------
    >>> args = build_parser().parse_args(["fit", "step.onnx", "--data", "d.npz", "--out", "o"])
    >>> args.epochs, args.epoch_loop, args.providers
    (None, False, None)
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
        description=f"Train STEP on DATA; write OUT/{LOSSES_FILE} (one loss per step) and "
        f"OUT/{MODEL_FILE} (the trained inference model).",
    )
    fit.add_argument("step", metavar="STEP.onnx", help="the step model")
    fit.add_argument(
        "--data",
        required=True,
        metavar="DATA.npz",
        help="arrays X and y, and sample_weight when the step takes weights (numpy.savez)",
    )
    fit.add_argument("--out", required=True, metavar="DIR", help="the output folder (created)")
    fit.add_argument("--epochs", type=int, help="epochs (default: the exporting optimizer's)")
    fit.add_argument("--batch-size", type=int, help="rows of a batch (default: the exporter's)")
    fit.add_argument(
        "--random-state", type=int, help="seed of the row orders (default: the exporter's)"
    )
    fit.add_argument(
        "--epoch-loop", action="store_true", help="run each epoch as one call (an ONNX Loop)"
    )
    fit.add_argument(
        "--providers",
        nargs="+",
        metavar="PROVIDER",
        help="onnxruntime execution providers, first preferred (default: CPUExecutionProvider)",
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
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No data file at {path!r}: give an .npz file with X and y.")
    with np.load(path) as data:
        missing = [name for name in ("X", "y") if name not in data.files]
        if missing:
            raise ValueError(
                f"{path!r} has no array {' or '.join(missing)} (it holds {sorted(data.files)}): "
                "save it with numpy.savez(path, X=..., y=...)."
            )
        weights = data["sample_weight"] if "sample_weight" in data.files else None
        return data["X"], data["y"], weights


def _fit(args):
    """Train as ``args`` say, write the losses and the model; return the trainer.

    The inputs are checked before onnxruntime is imported: onnxruntime-training's import loads
    torch, whose own warnings would otherwise come before a one-line error.
    """
    X, y, weights = _load_data(args.data)
    step = read_model(args.step)
    from .trainer import PortableTrainer  # noqa: PLC0415 (after the checks, see above)

    trainer = PortableTrainer(
        step,
        max_iter=args.epochs,
        batch_size=args.batch_size,
        random_state=args.random_state,
        epoch_loop=args.epoch_loop,
        providers=args.providers,
    ).fit(X, y, weights)
    os.makedirs(args.out, exist_ok=True)
    write_atomic(os.path.join(args.out, LOSSES_FILE), json.dumps(trainer.losses_))
    trainer.save_inference_model(os.path.join(args.out, MODEL_FILE))
    return trainer


def main(argv=None):
    """Run the command line; return the exit code (2 on an error, said in one line).

    Examples
    --------
    >>> main(["fit", "missing.onnx", "--data", "missing.npz", "--out", "out"])
    2
    """
    args = build_parser().parse_args(argv)
    try:
        if args.command == "export":
            print(_export(args))
            return 0
        trainer = _fit(args)
    except Exception as error:  # onnxruntime's own errors derive from Exception only
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(
        f"trained {trainer.t_} steps ({trainer.n_iter_} epochs), last loss "
        f"{trainer.losses_[-1] if trainer.losses_ else float('nan'):.6g}; wrote "
        f"{os.path.join(args.out, LOSSES_FILE)} and {os.path.join(args.out, MODEL_FILE)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
