"""What ``portable_speed`` runs in the maintained environment: fits on request, or one peak memory.

This module runs under the maintained ``onnxruntime`` (``.venv-maintained``, Python 3.13, no
training package, no torch, no scikit-learn): it imports the standard library, numpy,
onnxruntime and :mod:`helpers.portable` alone (and the reading of ``VmHWM`` of
:mod:`benchmarks.studies.peak_memory_process`, whose imports are the standard library's). Two
commands, each a process of its own started by :mod:`benchmarks.studies.portable_speed`:

* ``serve SPEC``: a fit server. ``SPEC`` (JSON) names the fits (``{name: {"step": path,
  "epoch_loop": bool}}``), the data (an ``.npz`` of ``X`` and ``y``), ``batch_size``,
  ``random_state`` and ``threads``. Each line read on the standard input, ``{"fit": name,
  "epochs": E}``, trains a new :class:`~helpers.portable.trainer.PortableTrainer` of that step
  model for ``E`` epochs and answers a line ``{"seconds": ..., "loss": ...}``: the parent
  times those calls beside its own frameworks', in turns
  (:func:`helpers.measure.timing.marginal_step_cost`), so that one load falls on all of them;
* ``memory SPEC``: imports :mod:`helpers.portable`, loads the step model, reads the process's
  peak resident memory, trains ``epochs`` epochs, reads it again and prints both (JSON).

The trainer has no thread count of its own: :func:`limit_threads` gives every onnxruntime
session this process creates ``threads`` intra-op threads (one inter-op thread), by wrapping
``onnxruntime.InferenceSession`` before :mod:`helpers.portable` is imported.
"""

import json
import sys
import time

#: Key of the fits of a serve SPEC, and of the step model and mode of one fit.
FITS, STEP, EPOCH_LOOP = "fits", "step", "epoch_loop"


def limit_threads(threads):
    """Give every ``onnxruntime.InferenceSession`` made from now on ``threads`` intra-op threads.

    ``threads=None`` leaves the runtime's default. The sessions a trainer creates then run with the
    thread count the other frameworks of the comparison get.

    Examples
    --------
    >>> import onnxruntime
    >>> limit_threads(None) is onnxruntime.InferenceSession
    True
    """
    import onnxruntime  # noqa: PLC0415

    if threads is None:
        return onnxruntime.InferenceSession
    base = getattr(onnxruntime.InferenceSession, "unlimited", onnxruntime.InferenceSession)

    class LimitedSession(base):
        unlimited = base

        def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
            options = sess_options if sess_options is not None else onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            super().__init__(path_or_bytes, options, *args, **kwargs)

    onnxruntime.InferenceSession = LimitedSession
    return LimitedSession


def load_data(path):
    """``X, y`` of an ``.npz`` file (:func:`benchmarks.studies.portable_fits.write_data`).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     np.savez(os.path.join(folder, "d.npz"), X=np.ones((2, 3)), y=np.zeros(2))
    ...     [a.shape for a in load_data(os.path.join(folder, "d.npz"))]
    [(2, 3), (2,)]
    """
    import numpy as np  # noqa: PLC0415

    with np.load(path) as data:
        return data["X"], data["y"]


def trainer_fits(spec):
    """``fit(epochs)`` of each fit a serve spec names: a new trainer of its step model, trained.

    Each returns the last step's loss. The step model is read once; each fit builds its sessions
    (a set-up that the marginal cost of a step leaves out).
    """
    import onnx  # noqa: PLC0415

    from helpers.portable.trainer import PortableTrainer  # noqa: PLC0415

    X, y = load_data(spec["data"])

    def make(step, epoch_loop):
        model = onnx.load(step)

        def fit(epochs):
            trainer = PortableTrainer(
                model,
                max_iter=epochs,
                batch_size=spec["batch_size"],
                random_state=spec["random_state"],
                epoch_loop=epoch_loop,
            )
            return float(trainer.fit(X, y).losses_[-1])

        return fit

    return {name: make(fit[STEP], fit[EPOCH_LOOP]) for name, fit in spec[FITS].items()}


def serve(spec, requests=sys.stdin, answers=sys.stdout, clock=time.perf_counter):
    """Answer each request line (``{"fit": name, "epochs": E}``) by that fit, until the input ends.

    An error is answered as ``{"error": "Type: message"}`` and ends nothing: the parent raises it.
    """
    limit_threads(spec.get("threads"))
    fits = trainer_fits(spec)
    print(json.dumps({"ready": sorted(fits)}), file=answers, flush=True)
    for line in requests:
        request = json.loads(line)
        try:
            start = clock()
            loss = fits[request["fit"]](request["epochs"])
            answer = {"seconds": clock() - start, "loss": loss}
        except Exception as exc:  # noqa: BLE001  (the parent reports it, with its type)
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), file=answers, flush=True)


def peak_memory(spec):
    """Import, load, read the peak; train, read it again: ``{"import_mb", "peak_mb"}``.

    ``spec``: ``step``, ``epoch_loop``, ``data``, ``batch_size``, ``random_state``, ``epochs``
    and ``threads``.
    """
    from benchmarks.studies.peak_memory_process import _peak_mb  # noqa: PLC0415

    limit_threads(spec.get("threads"))
    import onnx  # noqa: PLC0415

    from helpers.portable.trainer import PortableTrainer  # noqa: PLC0415

    X, y = load_data(spec["data"])
    trainer = PortableTrainer(
        onnx.load(spec[STEP]),
        max_iter=spec["epochs"],
        batch_size=spec["batch_size"],
        random_state=spec["random_state"],
        epoch_loop=spec[EPOCH_LOOP],
    )
    imported = _peak_mb()
    trainer.fit(X, y)
    return {"import_mb": imported, "peak_mb": _peak_mb()}


def main(argv=None):
    """``serve SPEC`` or ``memory SPEC`` (SPEC: JSON); see the module's text."""
    command, spec = (sys.argv[1:] if argv is None else argv)[:2]
    spec = json.loads(spec)
    if command == "serve":
        serve(spec)
    elif command == "memory":
        print(json.dumps(peak_memory(spec)))
    else:
        raise SystemExit(f"Unknown command {command!r}: 'serve' or 'memory'.")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
