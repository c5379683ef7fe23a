"""What ``backend_steps`` runs in each interpreter: both optimizers of one backend, on request.

``python -m benchmarks.studies.backend_process BACKEND THREADS`` serves the fits of
:mod:`benchmarks.studies.backend_steps` in the interpreter that runs it: onnxruntime-training
1.19.2's environment (``BACKEND`` ``onnxruntime-training`` or ``onnx``) or the maintained one
(``onnx`` on onnxruntime 1.31.1). Every line it reads is a request, every line it writes the
answer (JSON):

* ``{"load": {"model", "data", "loss", "batch_size", "learning_rate"}}``: the forward-only model
  (an ONNX file) and the data (an ``.npz`` of ``X`` and ``y``) the next fits train, with plain SGD,
  the loss named (:data:`benchmarks.workloads.frameworks.LOSSES`), ``THREADS`` intra-op threads
  and ``random_state=0`` (:func:`benchmarks.workloads.frameworks.ort_makers`); answered by
  ``{"backend", "runtime"}``, the backend and the onnxruntime that train;
* ``{"fit": API, "epochs": E}``: a new optimizer of the API (``'ort whole-training'`` or
  ``'ort forward-backward'``) trained ``E`` epochs on the data; answered by ``cpu_s`` (the CPU
  time of the thread that called onnxruntime), ``wall_s`` and ``loss`` (the last epoch's);
* ``{"first_losses": API, "steps": K}``: the losses of the first ``K`` steps of a new optimizer,
  on the data's first batch (one step an epoch, :func:`first_losses`).

A request that fails is answered ``{"error": "Type: message"}``; the parent raises it.
:class:`BackendServer` is the parent's end (a
:class:`benchmarks.studies.portable_fits.ProcessServer`).
"""

import json
import sys
import time

from benchmarks.studies.portable_fits import ProcessServer


def first_losses(make, X, y, batch_size, steps):
    """The losses of the first ``steps`` steps of ``make()``, each on the first batch of ``X``.

    One epoch of a batch is one step, so the epochs' losses are the steps' (the optimizer draws
    the order of the batch's rows from its seed, which a mean does not see).

    Examples
    --------
    >>> import numpy as np
    >>> from benchmarks.workloads import frameworks as fw
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> make = fw.ort_makers(mlp_onnx(3, hidden=(4,)), "squared_error", batch_size=4,
    ...                      validation_every=0)[fw.ORT_WHOLE]
    >>> X, y = np.ones((8, 3), np.float32), np.ones(8, np.float32)
    >>> len(first_losses(make, X, y, 4, steps=3))
    3
    """
    fitted = make().set_params(max_iter=steps).fit(X[:batch_size], y[:batch_size])
    return [float(loss) for loss in fitted.train_losses_]


class Fits:
    """The optimizers of one backend for the model and data of the last ``load``."""

    def __init__(self, backend, threads):
        self.backend, self.threads = backend, threads
        self.makers, self.data, self.batch_size = {}, None, None

    def load(self, model, data, loss, batch_size, learning_rate):
        """Read the model and the data; the next fits train them."""
        import numpy as np  # noqa: PLC0415
        import onnx  # noqa: PLC0415
        import onnxruntime  # noqa: PLC0415

        from benchmarks.workloads import frameworks as fw  # noqa: PLC0415
        from helpers.core.machine.backends import resolve_backend  # noqa: PLC0415
        from helpers.core.machine.training_cache import clear_training_caches  # noqa: PLC0415

        clear_training_caches()  # the previous model's graphs and sessions
        with np.load(data) as arrays:
            self.data = arrays["X"], arrays["y"]
        self.batch_size = batch_size
        self.makers = fw.ort_makers(
            onnx.load(model),
            loss,
            "sgd",
            learning_rate,
            batch_size,
            self.threads,
            0,
            backend=self.backend,
            validation_every=0,
        )
        return {
            "backend": resolve_backend(self.backend),
            "runtime": f"onnxruntime {onnxruntime.__version__}",
        }

    def fit(self, api, epochs):
        """Train a new optimizer of ``api`` for ``epochs`` epochs; its times and last loss."""
        X, y = self.data
        make = self.makers[api]
        cpu, wall = time.thread_time(), time.perf_counter()
        fitted = make().set_params(max_iter=epochs).fit(X, y)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        return {"cpu_s": cpu, "wall_s": wall, "loss": float(fitted.train_losses_[-1])}

    def first_losses(self, api, steps):
        """:func:`first_losses` of ``api``."""
        return {"losses": first_losses(self.makers[api], *self.data, self.batch_size, steps)}

    def answer(self, request):
        """The answer to one request (see the module's text)."""
        if "load" in request:
            return self.load(**request["load"])
        if "fit" in request:
            return self.fit(request["fit"], request["epochs"])
        return self.first_losses(request["first_losses"], request["steps"])


def serve(backend, threads, requests=sys.stdin, answers=sys.stdout):
    """Answer each request line until the input ends; an error is an answer, not the end."""
    fits = Fits(backend, threads)
    print(json.dumps({"ready": backend}), file=answers, flush=True)
    for line in requests:
        try:
            answer = fits.answer(json.loads(line))
        except Exception as exc:  # noqa: BLE001  (the parent reports it, with its type)
            answer = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[-500:]}"}
        print(json.dumps(answer), file=answers, flush=True)


class BackendServer(ProcessServer):
    """A process serving the fits of one backend in the interpreter ``python``.

    Parameters
    ----------
    backend : {'onnxruntime-training', 'onnx'}
    threads : int
        Intra-op threads of every session of the fits.
    python : str
        The interpreter (its environment needs ``helpers``' imports; the maintained one finds the
        project through ``PYTHONPATH``).

    Examples
    --------
    >>> with BackendServer("onnx", 1, sys.executable) as server:
    ...     server.request({"fit": "ort whole-training", "epochs": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: The onnx process failed: TypeError: ...
    """

    def __init__(self, backend, threads, python):
        self.backend, self.threads, self.python = backend, threads, python
        self.name, self.process = backend, None

    def command(self):
        """This module, serving ``backend`` on ``threads`` threads."""
        return ["benchmarks.studies.backend_process", self.backend, str(self.threads)]


def main(argv=None):
    """``BACKEND THREADS``: serve; see the module's text."""
    backend, threads = (sys.argv[1:] if argv is None else argv)[:2]
    serve(backend, int(threads))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
