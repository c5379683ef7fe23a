"""The fuzzer's ``built`` path, run in the maintained environment (no training package): build
the step of an exported model with :func:`helpers.build_training_step` and train it with
:class:`helpers.PortableTrainer`.

``python -m model_fuzz.built_step`` reads one JSON job a line on its standard input
(``model``, ``data``, ``out``, ``loss``, ``learning_rate``, ``epochs``) and answers each with a
line ``done`` once it wrote ``OUT/result.json``: the loss of each step, or the error (its type,
whether it is a refusal: a ``ValueError``, and its message), and ``OUT/model.onnx``, the trained
inference model. One process serves a fuzzer child's models: its imports (scikit-learn, torch)
take seconds.
"""

import json
import os
import sys

import numpy as np
import onnx


def train(model_path, data_path, out, loss, learning_rate, epochs):
    """Build and train one step; write ``OUT/result.json`` (and the trained model)."""
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
        result = {"losses": trainer.losses_}
    except Exception as error:  # reported to the fuzzer, which classifies it
        result = {
            "error": type(error).__name__,
            "refused": isinstance(error, ValueError),
            "message": str(error),
        }
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f)


def main():
    """Serve the jobs of the standard input, one a line, until it closes."""
    for line in sys.stdin:
        if line.strip():
            train(**json.loads(line))
            print("done", flush=True)


if __name__ == "__main__":
    main()
