"""The fuzzer's process in the maintained environment (onnxruntime 1.31.1, no training package).

It serves two kinds of job, so that one process (its imports, torch and scikit-learn, take
seconds) serves a fuzzer child's models:

- ``built``: build the step of an exported model with :func:`helpers.build_training_step` and
  train it with :class:`helpers.PortableTrainer` (the ``built`` path). The answer holds the loss
  of each step, or the error (its type, whether it is a refusal: a ``ValueError``, and its
  message); ``OUT/model.onnx`` holds the trained inference model.
- ``check``: run a whole path of :mod:`model_fuzz.paths` here, the torch reference included (the
  ``*_onnx`` paths: the optimizers and :class:`helpers.OrtTorchModule` with ``backend="onnx"``).
  The answer is the path's :class:`~model_fuzz.paths.Outcome`.

``python -m model_fuzz.maintained`` reads one JSON job a line on its standard input (``kind``,
then the job's fields) and answers each with one JSON line on its standard output; what the
exporter or onnxruntime print goes to its standard error.
"""

import dataclasses
import json
import os
import sys

import numpy as np
import onnx


def train_built(model_path, data_path, out, loss, learning_rate, epochs):
    """Build and train one step, write ``OUT/model.onnx``; the losses, or the error."""
    from helpers import PortableTrainer, build_training_step

    with np.load(data_path) as data:
        X, y = data["X"], data["y"]
    os.makedirs(out, exist_ok=True)
    try:
        step = build_training_step(
            onnx.load(model_path),
            loss=loss,
            learning_rate=float(learning_rate),
            batch_size=len(X),
            max_iter=int(epochs),
            random_state=0,
            n_threads=1,
        )
        trainer = PortableTrainer(step).fit(X, y)
        trainer.save_inference_model(os.path.join(out, "model.onnx"))
        return {"losses": trainer.losses_}
    except Exception as error:  # reported to the fuzzer, which classifies it
        return {
            "error": type(error).__name__,
            "refused": isinstance(error, ValueError),
            "message": str(error),
        }


def check(model, path):
    """The outcome of ``path`` (one of :data:`~model_fuzz.paths.ONNX_PATHS`) for ``model``, the
    fields of a :class:`~model_fuzz.grammar.GeneratedModel`, as a dict."""
    from .grammar import GeneratedModel
    from .paths import run_here

    generated = GeneratedModel(**{**model, "names": tuple(model["names"])})
    return dataclasses.asdict(run_here(generated, path))


def main():
    """Serve the jobs of the standard input, one a line, until it closes."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the exporter or onnxruntime print goes to stderr, not among the answers
    jobs = {"built": train_built, "check": check}
    for line in sys.stdin:
        if line.strip():
            job = json.loads(line)
            answer = jobs[job.pop("kind")](**job)
            print(json.dumps(answer), file=answers, flush=True)


if __name__ == "__main__":
    main()
