"""One generated model in one training path, compared with torch: the outcome is one word.

The paths: the whole-training optimizer (``whole``), the forward/backward optimizer
(``forward_backward``), :class:`helpers.OrtTorchModule` (``torch_module``), all three with
``backend="onnxruntime-training"`` (onnxruntime-training 1.19.2's gradients and training
objects); the whole-training optimizer's step model (``export_training_step``) trained by the
maintained onnxruntime in its own environment with ``python -m helpers.portable fit``
(``portable``; ``make setup-maintained`` builds it, ``PORTABLE_PYTHON`` names another
interpreter); the step made in that environment, with no training package, by
:func:`helpers.build_training_step` (its gradients written by :mod:`helpers.portable.gradients`)
and trained there (``built``); and the first three again with ``backend="onnx"`` (the gradients
of :mod:`helpers.portable.gradients` in a gradient session, or a forward and a backward graph)
run by the maintained onnxruntime: ``whole_onnx``, ``forward_backward_onnx`` and
``torch_module_onnx``. A process of that environment (:mod:`model_fuzz.maintained`) runs these
whole, torch's reference and the comparison included, with the same checks and tolerances.
Where the fuzzer's own environment has no onnxruntime-training (the maintained variant of
``.venv``), the paths that need it are not run (:func:`runnable_paths`).

``trains``: the path agrees with torch's plain SGD from the same weights on
the same batches (losses of every step, trained weights, running statistics,
predictions). ``refused``: it raised, before training, a ``ValueError``
(``UntrainableModelError`` is one) whose message names a layer of the model:
one of its torch classes, attribute names (ONNX node names hold them) or the
ONNX operators of its export. Every other outcome is a failure:

- ``disagrees``: it trained, and a number differs from torch's;
- ``unnamed refusal``: a ValueError naming none of the model's layers;
- ``raw error``: any other exception (onnxruntime's ``Fail``, a RuntimeError, the exporter's
  AssertionError);
- ``reference``: torch itself could not train the model (a fault of the grammar);
- ``crash`` and ``hang`` are found by :mod:`model_fuzz.runner`, which runs each model in a child
  process (a ``crash`` also where the maintained environment's process ends during a job).

Tolerances: float32 rounding on a few steps of small models. A value agrees
when ``|actual - expected| <= RTOL * (|expected| + scale / 10)``, where
``scale`` is the largest magnitude of the compared array, at least 1 (sums
over an axis make large values whose neighbours' rounding is absolute).
torch is also trained in float64 from the same weights: where its float32
result is itself off the float64 one (a normalization of nearly equal values
divides their rounding by ``sqrt(eps)``), the bound grows by ``CONDITIONING``
times that error, since onnxruntime's kernels round differently. Predictions,
compared value by value, are allowed ``PREDICTION_RTOL`` instead: onnxruntime's
``LayerNormalization`` computes the variance in one pass, E[x²] - E[x]², which
loses E[x²] / Var(x) ulps on values far from zero and close together (after a
Sigmoid) where torch loses none; the losses and weights, which average such
values, keep ``RTOL``.

Dropout draws different masks in torch and onnxruntime, so a model holding
one is compared by what dropout does: training gives finite losses, and the
path's predictions (inference, nothing dropped) equal torch's eval-mode
output with the weights and running statistics the path trained. Its masks
come from ``random_state``: a second fit repeats the first to the last bit,
and the step model, trained by the maintained runtime with the same seed,
draws the same masks, so its losses equal the whole-training fit's.
"""

import copy
import dataclasses
import json
import os
import re
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime
import torch
from onnx import numpy_helper

from helpers import (
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    OrtTorchModule,
    add_loss_output,
    export_for_training,
)
from helpers.core.machine.runtime import has_training_package
from helpers.teaching import MAINTAINED_PYTHON as SETUP_MAINTAINED_PYTHON
from helpers.teaching import torch_fit

from .grammar import MODULE_EPOCHS, OPTIMIZER_STEPS, one_thread

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The paths run with ``backend="onnx"`` in the maintained environment, and the path each repeats.
ONNX_PATHS = {
    "whole_onnx": "whole",
    "forward_backward_onnx": "forward_backward",
    "torch_module_onnx": "torch_module",
}
PATHS = ("whole", "forward_backward", "torch_module", "portable", "built", *ONNX_PATHS)
#: The paths that need onnxruntime-training 1.19.2 in the fuzzer's own environment (its backend,
#: or the step model its gradient builder writes): the maintained variant of ``.venv`` has none.
TRAINING_PACKAGE_PATHS = ("whole", "forward_backward", "torch_module", "portable")
PASSING = ("trains", "refused")
#: The backend of the paths ``whole``, ``forward_backward`` and ``torch_module``.
TRAINING_PACKAGE = "onnxruntime-training"
RTOL = 1e-4
CONDITIONING = 10
PREDICTION_RTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one path did with one model: ``kind`` is a word of the module's docstring."""

    seed: int
    path: str
    kind: str
    detail: str = ""

    @property
    def failed(self):
        return self.kind not in PASSING


class Disagreement(Exception):
    """A path trained, and a number differs from torch's."""


def runnable_paths():
    """The paths this environment runs: every path where onnxruntime-training is installed, else
    those that need none of it (:data:`TRAINING_PACKAGE_PATHS`).

    Examples
    --------
    >>> set(runnable_paths()) >= {"built", *ONNX_PATHS}
    True
    """
    if has_training_package():
        return PATHS
    return tuple(p for p in PATHS if p not in TRAINING_PACKAGE_PATHS)


def close(actual, expected, what, expected64=None, rtol=RTOL):
    """Raise :class:`Disagreement` unless ``actual`` agrees with torch's ``expected``.

    The bound is the module's: ``rtol`` times the value plus a tenth of the array's scale.

    ``expected64``, torch's value in float64, widens the bound by ``CONDITIONING``
    times torch's own float32 error where a value is ill-conditioned.

    Examples
    --------
    >>> close([1.0, 2.0], np.array([1.0, 2.00001]), "losses")
    >>> close([1.0], [1.1], "losses")
    Traceback (most recent call last):
    ...
    model_fuzz.paths.Disagreement: losses: 1 of 1 values differ, the worst 1 against 1.1
    >>> close([1.0], [1.1], "losses", expected64=[1.09])
    """
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if actual.size != expected.size:
        raise Disagreement(f"{what}: shape {actual.shape} against torch's {expected.shape}")
    actual = actual.reshape(expected.shape)
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    bound = rtol * (np.abs(expected) + scale / 10)
    if expected64 is not None:
        expected64 = np.asarray(expected64, np.float64).reshape(expected.shape)
        bound = bound + CONDITIONING * np.abs(expected - expected64)
    error = np.abs(actual - expected)
    bad = ~(error <= bound)
    if bad.any():
        ranked = np.where(bad, np.nan_to_num(error, nan=np.inf), -1)
        worst = np.unravel_index(np.argmax(ranked), bad.shape)
        raise Disagreement(
            f"{what}: {int(bad.sum())} of {bad.size} values differ, "
            f"the worst {actual[worst]:.7g} against {expected[worst]:.7g}"
        )


def _trained_with(backend, expected):
    """Raise :class:`Disagreement` unless the path trained with the ``expected`` backend."""
    if backend != expected:
        raise Disagreement(f"trained with the backend {backend!r}, not {expected!r}")


def _finite(losses, what):
    if not np.isfinite(losses).all():
        raise Disagreement(f"{what}: the losses are not finite: {list(losses)}")


def _float64(array):
    return array.astype(np.float64) if array.dtype == np.float32 else array


def _torch_output(module, X):
    module.eval()
    with torch.no_grad():
        return module(torch.from_numpy(X)).numpy()


def _eval_outputs(module, X):
    """torch's eval-mode output of ``module`` on ``X``, in float32 and in float64."""
    return _torch_output(module, X), _torch_output(copy.deepcopy(module).double(), _float64(X))


def _torch_training(module, X, y, model, batch_size, epochs):
    """torch's SGD on ``module`` and on a float64 copy: ``{what: (float32, float64 value)}``."""
    results = {}
    double = copy.deepcopy(module).double()
    for net, inputs, targets in ((module, X, y), (double, _float64(X), _float64(y))):
        _, steps = torch_fit(
            net, inputs, targets, model.loss, batch_size, epochs, model.learning_rate
        )
        values = {f"trained {name}": value.numpy() for name, value in net.state_dict().items()}
        values["losses of each step"] = np.array(steps)
        values["predict"] = _torch_output(net, inputs)
        values["predict on 5 rows"] = _torch_output(net, inputs[:5])
        for what, value in values.items():
            results.setdefault(what, []).append(value)
    return results


def _names_a_layer(message, model, module, X):
    """Whether ``message`` names one of the model's torch classes, attributes or ONNX operators."""
    words = set(model.names)
    try:
        onx = export_for_training(copy.deepcopy(module), torch.from_numpy(X[:2]))
        words |= {n.op_type for n in onx.graph.node}
    except Exception:  # the export is what failed: the torch names are left
        pass
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", message) for w in words)


def _optimizer(path, module, X, model, backend=TRAINING_PACKAGE):
    onx = export_for_training(module, torch.from_numpy(X[:2]))
    common = dict(
        max_iter=OPTIMIZER_STEPS,
        batch_size=len(X),
        learning_rate=model.learning_rate,
        solver="sgd",
        random_state=0,
        validation_every=0,
        n_threads=1,
        backend=backend,
    )
    if path == "whole":
        return OrtGradientOptimizer(add_loss_output(onx, score_name=model.loss), **common)
    return OrtGradientForwardBackwardOptimizer(
        onx, learning_loss=model.loss, learning_rate_schedule="constant", **common
    )


_WITH_ITS_WEIGHTS = "predict against torch eval with its weights"


def _compare(actual, torch_values):
    """``close`` on each ``{what: value}`` of a path and ``{what: (float32, float64)}`` of torch."""
    for what, value in actual.items():
        rtol = PREDICTION_RTOL if what.startswith("predict") else RTOL
        close(value, torch_values[what][0], what, torch_values[what][1], rtol)


def _check_optimizer(path, model, module, X, y, backend):
    opt = _optimizer(path, copy.deepcopy(module), X, model, backend).fit(X, y)
    _trained_with(opt.backend_, backend)
    trained = {**opt.get_state(), **opt.get_running_statistics()}
    if model.dropout:
        _finite(opt.train_losses_, "training")
        again = _optimizer(path, copy.deepcopy(module), X, model, backend).fit(X, y)
        if again.train_losses_ != opt.train_losses_:
            raise Disagreement(
                f"two fits with random_state=0 differ: {opt.train_losses_} then "
                f"{again.train_losses_}"
            )
        close(opt.predict(X), opt.predict(X), "predict twice (no mask at inference)")
        state = {name: torch.from_numpy(np.asarray(value)) for name, value in trained.items()}
        module.load_state_dict(state, strict=False)
        expected, expected64 = _eval_outputs(module, X)
        close(opt.predict(X), expected, _WITH_ITS_WEIGHTS, expected64, PREDICTION_RTOL)
        return
    torch_values = _torch_training(module, X, y, model, len(X), OPTIMIZER_STEPS)
    missing = sorted(set(n for n, _ in module.named_parameters()) - set(trained))
    if missing:
        raise Disagreement(f"weights not trained: {missing}")
    actual = {"losses of each step": opt.train_losses_}
    actual.update({f"trained {name}": value for name, value in trained.items()})
    actual.update({"predict": opt.predict(X), "predict on 5 rows": opt.predict(X[:5])})
    _compare(actual, torch_values)


#: The interpreter of the maintained onnxruntime (``make setup-maintained``); ``PORTABLE_PYTHON``
#: names another.
MAINTAINED_PYTHON = os.environ.get("PORTABLE_PYTHON", SETUP_MAINTAINED_PYTHON)


def _train_portable(step, X, y, epochs, folder):
    """Train the step model ``step`` with ``python -m helpers.portable fit`` in the maintained
    environment; its losses, trained weights and a session of its inference model."""
    data, out = os.path.join(folder, "data.npz"), os.path.join(folder, "out")
    np.savez(data, X=X, y=y)
    command = [
        MAINTAINED_PYTHON,
        "-m",
        "helpers.portable",
        "fit",
        step,
        "--data",
        data,
        "--epochs",
        str(epochs),
        "--batch-size",
        str(len(X)),
        "--random-state",
        "0",
        "--out",
        out,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=folder, env={**os.environ, "PYTHONPATH": _ROOT}
    )
    if done.returncode:
        raise RuntimeError(f"helpers.portable fit failed ({done.returncode}): {done.stderr[-600:]}")
    with open(os.path.join(out, "losses.json")) as f:
        losses = json.load(f)
    trained = onnx.load(os.path.join(out, "model.onnx"))
    weights = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    session = onnxruntime.InferenceSession(
        trained.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return np.asarray(losses), weights, session


def _check_portable(model, module, X, y):
    """The whole-training optimizer's step model, trained by the maintained onnxruntime."""
    opt = _optimizer("whole", copy.deepcopy(module), X, model)
    with tempfile.TemporaryDirectory() as folder:
        step = os.path.join(folder, "step.onnx")
        opt.export_training_step(step)
        losses, weights, session = _train_portable(step, X, y, OPTIMIZER_STEPS, folder)
    _check_trained_step(model, module, X, y, (losses, weights, session), TRAINING_PACKAGE)


def _check_trained_step(model, module, X, y, trained_step, backend):
    """A step model's training (``trained_step``: its losses, trained weights and inference
    session) against torch; with dropout, against the whole-training fit on ``backend``, whose
    masks come from the same seed."""
    losses, weights, session = trained_step

    def predict(rows):
        return session.run(None, {session.get_inputs()[0].name: rows})[0]

    if model.dropout:
        _finite(losses, "training")
        opt = _optimizer("whole", copy.deepcopy(module), X, model, backend)
        fitted = opt.fit(X, y).train_losses_  # one step an epoch, the masks of the same seed
        close(losses, fitted, "losses of each step against the whole-training fit's", rtol=RTOL)
        state = {n: torch.from_numpy(v) for n, v in weights.items() if n in module.state_dict()}
        module.load_state_dict(state, strict=False)
        expected, expected64 = _eval_outputs(module, X)
        close(predict(X), expected, _WITH_ITS_WEIGHTS, expected64, PREDICTION_RTOL)
        return
    torch_values = _torch_training(module, X, y, model, len(X), OPTIMIZER_STEPS)
    trained = {n: v for n, v in weights.items() if f"trained {n}" in torch_values}
    missing = sorted(set(n for n, _ in module.named_parameters()) - set(trained))
    if missing:
        raise Disagreement(f"weights not trained: {missing}")
    actual = {"losses of each step": losses}
    actual.update({f"trained {name}": value for name, value in trained.items()})
    actual.update({"predict": predict(X), "predict on 5 rows": predict(X[:5])})
    _compare(actual, torch_values)


_MAINTAINED = []  # the process of model_fuzz.maintained and its stderr file, while it runs


class MaintainedProcessEnded(RuntimeError):
    """The maintained environment's process ended during a job (an abort, a kill)."""


def _maintained_process():
    """The process of :mod:`model_fuzz.maintained` (started at the first job, and again after one
    ended) and the file that holds its standard error."""
    if not _MAINTAINED:
        path = os.pathsep.join([_ROOT, os.path.join(_ROOT, "tests")])
        errors = tempfile.TemporaryFile("w+")
        server = subprocess.Popen(
            [MAINTAINED_PYTHON, "-m", "model_fuzz.maintained"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        _MAINTAINED[:] = [server, errors]
    return _MAINTAINED


def _ask_maintained(kind, **job):
    """Run a job of ``kind`` in the maintained environment's process; its answer (a dict).

    Raises
    ------
    MaintainedProcessEnded
        When the process ends before it answers, with its exit code and its last lines of
        standard error.
    """
    server, errors = _maintained_process()
    try:
        server.stdin.write(json.dumps({"kind": kind, **job}) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
    except BrokenPipeError:  # it ended before it read the job
        answer = ""
    if not answer:
        server.communicate()  # its pipes closed, the job it did not read dropped
        errors.seek(0)
        tail = re.sub(r"\x1b\[[0-9;]*m", "", errors.read()).strip().splitlines()[-3:]
        errors.close()
        _MAINTAINED.clear()
        ended = f"the maintained process ended with code {server.returncode}"
        raise MaintainedProcessEnded("\n".join([ended, *tail]))
    return json.loads(answer)


def _train_built(model, module, X, y, folder):
    """Build and train the step of ``module``'s export in the maintained environment
    (:func:`model_fuzz.maintained.train_built`); its losses, trained weights and inference
    session."""
    paths = {n: os.path.join(folder, n) for n in ("model.onnx", "data.npz", "out")}
    onnx.save(
        export_for_training(copy.deepcopy(module), torch.from_numpy(X[:2])), paths["model.onnx"]
    )
    np.savez(paths["data.npz"], X=X, y=y)
    result = _ask_maintained(
        "built",
        model_path=paths["model.onnx"],
        data_path=paths["data.npz"],
        out=paths["out"],
        loss=model.loss,
        learning_rate=model.learning_rate,
        epochs=OPTIMIZER_STEPS,
    )
    if "error" in result:
        kind = ValueError if result["refused"] else RuntimeError
        raise kind(f"{result['error']}: {result['message']}")
    trained = onnx.load(os.path.join(paths["out"], "model.onnx"))
    weights = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    session = onnxruntime.InferenceSession(
        trained.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return np.asarray(result["losses"]), weights, session


def _check_built(model, module, X, y):
    """The step built without the training package, trained by the maintained onnxruntime."""
    with tempfile.TemporaryDirectory() as folder:
        trained_step = _train_built(model, module, X, y, folder)
    _check_trained_step(model, module, X, y, trained_step, "onnx")


def _check_torch_module(model, module, X, y, backend):
    ort_module = OrtTorchModule(
        copy.deepcopy(module), torch.from_numpy(X[:2]), n_threads=1, backend=backend
    )
    _trained_with(ort_module.backend, backend)
    _, ort_steps = torch_fit(
        ort_module, X, y, model.loss, model.batch_size, MODULE_EPOCHS, model.learning_rate
    )
    trained = ort_module.module
    if model.dropout:
        _finite(ort_steps, "training")
        expected, expected64 = _eval_outputs(trained, X)
        predictions = _torch_output(ort_module, X)
        close(predictions, expected, _WITH_ITS_WEIGHTS, expected64, PREDICTION_RTOL)
        return
    torch_values = _torch_training(module, X, y, model, model.batch_size, MODULE_EPOCHS)
    actual = {"losses of each step": ort_steps}
    actual.update({f"trained {name}": v.numpy() for name, v in trained.state_dict().items()})
    actual["predict"] = _torch_output(ort_module, X)
    _compare(actual, torch_values)


def _message(error):
    """The exception's type and message, cut to its first lines (the exporter's run to pages)."""
    text = "\n".join(f"{type(error).__name__}: {error}".strip().splitlines()[:4])
    return text if len(text) <= 800 else text[:800] + "..."


def run_path(model, path):
    """Train ``model`` (a :class:`~model_fuzz.grammar.GeneratedModel`) in ``path``; its outcome.

    The paths of :data:`ONNX_PATHS` run in the maintained environment's process, the others here.

    Examples
    --------
    >>> from helpers.core.machine.runtime import has_training_package
    >>> from model_fuzz.grammar import generate_model
    >>> path = "torch_module" if has_training_package() else "torch_module_onnx"
    >>> run_path(generate_model(6), path).kind
    'trains'
    """
    if path not in ONNX_PATHS:
        return run_here(model, path)
    try:
        answer = _ask_maintained("check", model=dataclasses.asdict(model), path=path)
    except MaintainedProcessEnded as error:
        return Outcome(model.seed, path, "crash", str(error))
    return Outcome(**answer)


def run_here(model, path):
    """:func:`run_path` in this process, whatever the path."""
    with one_thread():
        return _outcome(model, path)


def _outcome(model, path):
    module, X, y = model.build()
    try:
        torch_fit(copy.deepcopy(module), X, y, model.loss, model.batch_size, 1, model.learning_rate)
    except Exception as error:
        return Outcome(model.seed, path, "reference", _message(error))
    backend = "onnx" if path in ONNX_PATHS else TRAINING_PACKAGE
    repeated = ONNX_PATHS.get(path, path)
    try:
        if repeated == "torch_module":
            _check_torch_module(model, module, X, y, backend)
        elif repeated == "portable":
            _check_portable(model, module, X, y)
        elif repeated == "built":
            _check_built(model, module, X, y)
        else:
            _check_optimizer(repeated, model, module, X, y, backend)
    except Disagreement as error:
        return Outcome(model.seed, path, "disagrees", str(error))
    except MaintainedProcessEnded as error:
        return Outcome(model.seed, path, "crash", str(error))
    except ValueError as error:
        named = _names_a_layer(str(error), model, *model.build()[:2])
        kind = "refused" if named else "unnamed refusal"
        return Outcome(model.seed, path, kind, _message(error))
    except Exception as error:
        return Outcome(model.seed, path, "raw error", _message(error))
    return Outcome(model.seed, path, "trains")
