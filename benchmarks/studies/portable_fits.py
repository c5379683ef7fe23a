"""What ``portable_speed`` times: each framework's ``fit(epochs)``, the portable ones in the
maintained environment.

* :func:`linear_fits`: a linear regression fitted one row at a time, by scikit-learn's
  ``SGDRegressor`` and by the whole-training API;
* :func:`mlp_fits`: an MLP ``D -> H -> 1`` trained by the whole-training API;
* :func:`zoo_fits`: a model of the zoo, by the whole-training API and torch eager;
* each with the optimizer whose step model the portable fits train
  (``export_training_step``, :func:`export_step`);
* :class:`MaintainedFits`: those step models trained by
  :class:`helpers.portable.trainer.PortableTrainer` in a process of the maintained environment
  (:mod:`benchmarks.studies.portable_process`), whose fits are called like the others; its
  process handling (:class:`ProcessServer`: a JSON line per request) serves the other studies'
  processes too.

Every fit starts from the same weights and draws its batches from ``random_state`` as the
optimizers draw them, with plain SGD, a constant learning rate and the task's loss.
"""

import json
import os
import subprocess

from benchmarks.report.portable_section import REFUSED
from benchmarks.studies.portable_process import EPOCH_LOOP, FITS, STEP
from benchmarks.workloads import frameworks as fw
from helpers.teaching import MAINTAINED_PYTHON

#: The project's root: the maintained process imports :mod:`helpers.portable` from there.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The portable frameworks: a session call per step, or an epoch per call (an ONNX ``Scan``).
PORTABLE_MODES = {fw.PORTABLE_STEP: False, fw.PORTABLE_EPOCH_LOOP: True}


def maintained_python(path=None):
    """The maintained environment's interpreter, checked; ``path`` or :data:`MAINTAINED_PYTHON`.

    Examples
    --------
    >>> maintained_python("no/such/python")
    Traceback (most recent call last):
    ...
    FileNotFoundError: No maintained environment at no/such/python: `make setup-maintained` \
builds it (or pass --maintained-python).
    """
    path = path or MAINTAINED_PYTHON
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No maintained environment at {path}: `make setup-maintained` builds it "
            "(or pass --maintained-python)."
        )
    return path


def export_step(optimizer, path, gradient_builder="onnxruntime-training"):
    """Write ``optimizer``'s step model to ``path``: ``''``, or why it was refused.

    ``gradient_builder`` is ``export_training_step``'s: ``"onnxruntime-training"`` (1.19.2's
    builder, its operators lowered) or ``"onnx"`` (:mod:`helpers.portable.gradients`). The refusal
    (:class:`helpers.portable.lowering.registry.UnsupportedOperatorError`, or
    :class:`helpers.portable.gradients.registry.NoGradientError`) reads
    ``'refused: DOMAIN:OPERATOR (from the layer LAYER)'``; any other exception is a bug and is
    raised.

    Examples
    --------
    >>> class Refused:
    ...     def export_training_step(self, path, gradient_builder):
    ...         from helpers.portable.lowering.registry import UnsupportedOperatorError
    ...         raise UnsupportedOperatorError("Round", "com.microsoft", "/r/Round")
    >>> export_step(Refused(), "step.onnx")
    'refused: com.microsoft:Round (from the layer /r/Round)'
    """
    from helpers.portable.gradients.registry import NoGradientError  # noqa: PLC0415
    from helpers.portable.lowering.registry import UnsupportedOperatorError  # noqa: PLC0415

    try:
        optimizer.export_training_step(path, gradient_builder=gradient_builder)
    except (UnsupportedOperatorError, NoGradientError) as exc:
        domain = exc.domain or "ai.onnx"
        return f"{REFUSED}{domain}:{exc.op_type} (from the layer {exc.layer})"
    return ""


def onnxruntime_version(python):
    """``(onnxruntime's version, Python's)`` of the interpreter ``python``.

    Examples
    --------
    >>> import sys
    >>> import onnxruntime
    >>> onnxruntime_version(sys.executable)[0] == onnxruntime.__version__
    True
    """
    code = "import onnxruntime, platform; print(onnxruntime.__version__, platform.python_version())"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return tuple(out.stdout.split()[-2:])


def linear_fits(X, y, learning_rate, threads, random_state=0):
    """``fit(epochs)`` of ``SGDRegressor`` and the whole-training API, batches of one row; and the
    whole-training optimizer (its step model is the portable fits').

    ``SGDRegressor`` minimizes half the squared error: the ONNX runs get half its learning rate,
    which gives its updates (:func:`benchmarks.workloads.models.ort_learning_rate`). The ONNX
    model is ``X @ coefficient + intercept`` (:func:`helpers.teaching.model_factories.mlp_onnx`
    without a hidden layer, opset 15); both shuffle the rows at each epoch.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.ones((4, 2), np.float32), np.ones(4, np.float32)
    >>> fits, optimizer = linear_fits(X, y, 0.01, threads=1)
    >>> sorted(fits), optimizer.batch_size
    (['ort whole-training', 'scikit-learn'], 1)
    """
    from sklearn.linear_model import SGDRegressor  # noqa: PLC0415

    from benchmarks.workloads import models as bm  # noqa: PLC0415
    from benchmarks.workloads.your_model import ort_fit  # noqa: PLC0415
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    onx = mlp_onnx(X.shape[1], hidden=(), random_state=random_state)
    make = fw.ort_makers(
        onx,
        "squared_error",
        learning_rate=bm.ort_learning_rate(learning_rate),
        batch_size=1,
        n_threads=threads,
        random_state=random_state,
        validation_every=0,
    )[fw.ORT_WHOLE]

    def sgd_regressor(epochs):
        SGDRegressor(
            penalty=None,
            learning_rate="constant",
            eta0=learning_rate,
            max_iter=epochs,
            tol=None,
            shuffle=True,
            random_state=random_state,
        ).fit(X, y)

    return {fw.SKLEARN: sgd_regressor, fw.ORT_WHOLE: ort_fit(make, X, y)}, make()


def mlp_fits(X, y, hidden, batch_size, learning_rate, threads, random_state=0):
    """``fit(epochs)`` of the whole-training API on an MLP ``D -> hidden -> 1``; and its optimizer.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.ones((8, 3), np.float32), np.ones(8, np.float32)
    >>> fits, optimizer = mlp_fits(X, y, 4, 4, 1e-4, threads=1)
    >>> sorted(fits), optimizer.batch_size
    (['ort whole-training'], 4)
    """
    from benchmarks.workloads.your_model import ort_fit  # noqa: PLC0415
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    onx = mlp_onnx(X.shape[1], hidden=(hidden,), random_state=random_state)
    make = fw.ort_makers(
        onx,
        "squared_error",
        learning_rate=learning_rate,
        batch_size=batch_size,
        n_threads=threads,
        random_state=random_state,
        validation_every=0,
    )[fw.ORT_WHOLE]
    return {fw.ORT_WHOLE: ort_fit(make, X, y)}, make()


def zoo_fits(name, n_samples, batch_size, learning_rate, threads, random_state=0):
    """``fit(epochs)`` of the whole-training API and torch eager for one zoo model; its optimizer
    and data.

    The model exported with the weights torch starts from, random samples of its input
    (:func:`benchmarks.profiles.survey.profiled_models.zoo_model`), the task's loss. Torch's
    threads are the caller's (``torch.set_num_threads``).

    Returns
    -------
    fits : dict
    optimizer : helpers.OrtGradientOptimizer
    X, y : numpy.ndarray
    """
    import torch  # noqa: PLC0415

    from benchmarks import example_models  # noqa: PLC0415
    from benchmarks.profiles.survey.profiled_models import zoo_model  # noqa: PLC0415
    from benchmarks.workloads.your_model import ort_fit, torch_fit  # noqa: PLC0415

    onx, X, y, loss = zoo_model(name, n_samples, random_state)
    task = example_models.ZOO[name][2]
    common = {"learning_rate": learning_rate, "batch_size": batch_size}
    make = fw.ort_makers(
        onx, loss, n_threads=threads, random_state=random_state, validation_every=0, **common
    )[fw.ORT_WHOLE]

    def make_module():
        torch.manual_seed(random_state)  # the weights zoo_model exported
        return getattr(example_models, name)()

    torch_eager = torch_fit(make_module, X, y, task, random_state=random_state, **common)
    return {fw.ORT_WHOLE: ort_fit(make, X, y), fw.TORCH: torch_eager}, make(), X, y


def write_data(path, X, y):
    """Save ``X`` and ``y`` as the ``.npz`` the maintained process reads; return ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = write_data(os.path.join(folder, "d.npz"), np.ones((2, 3)), np.zeros(2))
    ...     sorted(np.load(path).files)
    ['X', 'y']
    """
    import numpy as np  # noqa: PLC0415

    np.savez(path, X=X, y=y)
    return path


class ProcessServer:
    """A process of ``python`` that answers each JSON line it reads by a JSON line.

    Its first line says it is ready; an answer ``{"error": ...}`` raises ``RuntimeError`` here
    (:meth:`request`), naming the process by :attr:`name`. Subclasses set ``python`` and say the
    module and arguments it runs (:meth:`command`).
    """

    #: What the messages call the process.
    name = "maintained"

    def command(self):
        """The module the process runs (``-m``), and its arguments."""
        raise NotImplementedError

    def _start(self):
        self.process = subprocess.Popen(
            [self.python, "-m", *self.command()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": ROOT},
        )

    def __enter__(self):
        self._start()
        self._answer()  # ready: imported, models read
        return self

    def __exit__(self, *exc):
        self.process.stdin.close()
        self.process.wait(timeout=120)
        self.process.stderr.close()
        self.process.stdout.close()

    def _answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"The {self.name} process stopped:\n" + self.process.stderr.read()[-2000:]
            )
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"The {self.name} process failed: {answer['error']}")
        return answer

    def request(self, request):
        """Send one request (a dict); its answer, or ``RuntimeError``."""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()


class MaintainedFits(ProcessServer):
    """Portable fits of step models, run by a server in the maintained environment.

    Parameters
    ----------
    step : str
        The step model's path; the fits are :data:`PORTABLE_MODES` (a call per step, the epoch
        loop), unless ``fits`` names others.
    data : str
        An ``.npz`` of ``X`` and ``y``.
    batch_size, random_state, threads : int
        The trainer's (threads: :func:`benchmarks.studies.portable_process.limit_threads`).
    python : str, optional
        The maintained interpreter (:func:`maintained_python`); another interpreter whose
        environment has ``helpers.portable``'s imports runs the same fits on its onnxruntime.
    fits : dict, optional
        Name to ``(step model's path, epoch loop)``: the fits, instead of ``step``'s.

    Examples
    --------
    >>> MaintainedFits("step.onnx", "data.npz", 1, 0, 1, python="no/such/python")
    Traceback (most recent call last):
    ...
    FileNotFoundError: No maintained environment at no/such/python: `make setup-maintained` \
builds it (or pass --maintained-python).
    """

    def __init__(self, step, data, batch_size, random_state, threads, python=None, fits=None):
        self.python = maintained_python(python)
        fits = fits or {name: (step, loop) for name, loop in PORTABLE_MODES.items()}
        self.spec = {
            FITS: {name: {STEP: path, EPOCH_LOOP: loop} for name, (path, loop) in fits.items()},
            "data": data,
            "batch_size": batch_size,
            "random_state": random_state,
            "threads": threads,
        }
        self.process = None

    def command(self):
        """The fit server of :mod:`benchmarks.studies.portable_process`, given the spec."""
        return ["benchmarks.studies.portable_process", "serve", json.dumps(self.spec)]

    def fit(self, name, epochs):
        """Train the portable fit ``name`` for ``epochs`` epochs in the server; its last loss."""
        return self.request({"fit": name, "epochs": epochs})["loss"]

    def fits(self):
        """``fit(epochs)`` of each portable fit, by its name (a framework's, by default)."""
        return {name: lambda epochs, n=name: self.fit(n, epochs) for name in self.spec[FITS]}


def portable_memory(step, data, batch_size, epochs, epoch_loop, threads, python=None):
    """Peak memory of a fresh maintained process that imports, loads and trains a step model.

    Returns
    -------
    dict
        ``import_mb`` (imports and the step model loaded) and ``peak_mb``.
    """
    spec = {
        STEP: step,
        EPOCH_LOOP: epoch_loop,
        "data": data,
        "batch_size": batch_size,
        "random_state": 0,
        "epochs": epochs,
        "threads": threads,
    }
    out = subprocess.run(
        [maintained_python(python), "-m", "benchmarks.studies.portable_process", "memory"]
        + [json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    if out.returncode:
        raise RuntimeError(f"The maintained process failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
