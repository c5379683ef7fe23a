"""Which engine trains each zoo model's step fastest: onnxruntime's CPU provider, OpenVINO's, torch.

Each model of the zoo (:data:`benchmarks.example_models.ZOO`, small and large) is trained
from the same weights on the same batches (batches of 64, plain SGD, the task's loss) by three
engines, each on ``--threads`` threads (2 by default):

* ``onnxruntime CPU``: its step model (``export_training_step``) trained by
  :class:`~helpers.portable.trainer.PortableTrainer` (which specialises it to the batch size:
  its ``lean`` parameter) on the
  maintained onnxruntime's CPU provider (``.venv-maintained``, ``make setup-maintained``);
* ``OpenVINO``: the same step on OpenVINO's execution provider, float32 forced
  (:data:`OPENVINO_PROVIDERS`), in ``.venv-openvino`` (``make setup-openvino``: the
  onnxruntime-openvino package); without that environment the rows say so;
* ``torch eager``: the zoo model in torch, :func:`helpers.teaching.torch_reference.torch_fit`.

The step models run in processes of those environments
(:mod:`benchmarks.studies.step_engines_process`). Each engine first trains one epoch: a step
model the engine refuses to read or run is a row ``refused: <the runtime's reason>``
(:func:`refusal`), and a loss that differs from the CPU provider's (relative tolerance
:data:`LOSS_RTOL`) is a row ``loss mismatch``; neither is timed. The others are timed side by
side, in turns, as the marginal cost of a step (:func:`benchmarks.studies.portable_speed.
timed_rows`: fits of ``E2`` epochs against fits of one, best of the repeats), with their caveats
(noisy repeats, a busy machine). ::

    python -m benchmarks.studies.step_engines --out results [--threads 2] [--models ...] [--quick]

writes ``step_engines.csv`` (:data:`COLUMNS`) and ``step_engines.md``
(:func:`benchmarks.report.step_engines.engines_markdown`).
"""

import argparse
import json
import os
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.report import step_engines as report
from benchmarks.studies import portable_fits as pf
from benchmarks.studies.step_engines_process import PROVIDERS

#: OpenVINO's execution provider on the CPU, float32 forced (its CPU plugin computes in bfloat16
#: where the processor has AMX, unless told).
OPENVINO_PROVIDERS = [("OpenVINOExecutionProvider", {"device_type": "CPU", "precision": "FP32"})]
#: The environment of onnxruntime-openvino (``make setup-openvino``).
OPENVINO_PYTHON = os.path.join(pf.ROOT, ".venv-openvino", "bin", "python")
#: The status of OpenVINO's rows without its environment.
OPENVINO_MISSING = (
    f"{report.NOT_MEASURED}no OpenVINO environment (`make setup-openvino` builds it, or pass "
    "--openvino-python)"
)
#: Batch size, learning rate, epochs of the short and long fits, repeats (and ``--quick``'s).
BATCH, LEARNING_RATE, EPOCHS, REPEATS = 64, 1e-3, (1, 4), 5
QUICK_EPOCHS, QUICK_REPEATS = (1, 2), 1
#: Relative tolerance of a loss after an epoch against the CPU provider's (float32 kernels that
#: sum in other orders).
LOSS_RTOL = 1e-4
#: The file's columns: ``engine`` (:data:`report.ENGINES`), ``runtime`` (its version),
#: ``trainer_lean``
#: (whether the trainer specialises it to the batch size itself: ``PortableTrainer``'s ``lean``
#: default; empty for torch), ``loss`` (after
#: an epoch), ``status`` (``''``, ``refused: ...``, ``loss mismatch: ...`` or
#: ``not measured: ...``), ``note`` (the timing's caveats), ``machine`` and ``cores``.
COLUMNS = [
    "model",
    "engine",
    "runtime",
    "trainer_lean",
    "threads",
    "batch_size",
    "steps_per_epoch",
    "step_s",
    "spread",
    "loss",
    "status",
    "note",
    "machine",
    "cores",
]


class EngineFits(pf.MaintainedFits):
    """Fits of step models on given execution providers, served by a process of ``python``.

    Parameters
    ----------
    fits : dict
        Name to the step model's path.
    data : str
        An ``.npz`` of ``X`` and ``y``.
    batch_size, threads : int
    python : str
        The interpreter of the environment whose onnxruntime trains them.
    providers : list, optional
        Execution providers, as ``PortableTrainer`` takes them; None: the CPU.

    Attributes
    ----------
    lean : bool
        Whether the process's trainer specialises a step to the batch size itself (known once
        the server started).

    Examples
    --------
    >>> EngineFits({"cpu": "step.onnx"}, "data.npz", 4, 1, "no/such/python")
    Traceback (most recent call last):
    ...
    FileNotFoundError: No maintained environment at no/such/python: `make setup-maintained` \
builds it (or pass --maintained-python).
    """

    def __init__(self, fits, data, batch_size, threads, python, providers=None):
        steps = {name: (path, False) for name, path in fits.items()}
        super().__init__(None, data, batch_size, 0, threads, python=python, fits=steps)
        self.spec[PROVIDERS] = providers
        self.lean = None

    def command(self):
        """The fit server of :mod:`benchmarks.studies.step_engines_process`, given the spec."""
        return ["benchmarks.studies.step_engines_process", "serve", json.dumps(self.spec)]

    def __enter__(self):
        self._start()
        self.lean = self._answer()["lean"]
        self._answer()  # ready: imported, step models read
        return self


def torch_engine(name, X, y, random_state=0):
    """``fit(epochs)`` of the zoo model ``name`` in torch eager: the last step's loss.

    The weights the step model was exported with (torch's seed), the batches the step's trainer
    draws, plain SGD (:func:`helpers.teaching.torch_reference.torch_fit`). Torch's threads are
    the caller's.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((8, 32), dtype=np.float32)
    >>> fit = torch_engine("layernorm_mlp_small", X, np.zeros((8, 1), np.float32))
    >>> fit(1) > 0
    True
    """
    import torch  # noqa: PLC0415

    from benchmarks import example_models  # noqa: PLC0415
    from benchmarks.workloads import frameworks as fw  # noqa: PLC0415
    from helpers.teaching.torch_reference import torch_fit  # noqa: PLC0415

    loss = fw.LOSSES[example_models.ZOO[name][2]][0]

    def fit(epochs):
        torch.manual_seed(random_state)
        module = getattr(example_models, name)()
        _, losses = torch_fit(module, X, y, loss, BATCH, epochs, LEARNING_RATE, "sgd", random_state)
        return float(losses[-1])

    return fit


def refusal(message):
    """The runtime's reason in one line, from the error of a step model it refused.

    OpenVINO's reader names the ONNX node it could not translate, then the reason; onnxruntime's
    own errors say it after their code.

    Examples
    --------
    >>> refusal("Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during initialization: x.cc:1\\n"
    ...         "While validating ONNX node '<Node(ReduceSum): lower_6>': Check 'a' failed at b\\n"
    ...         "FrontEnd API failed with GeneralFailure:\\n"
    ...         "The axes tensor's shape needs to be known(static). Node: lower_6\\n")
    "ReduceSum: The axes tensor's shape needs to be known(static). Node: lower_6"
    >>> refusal("Fail: [ONNXRuntimeError] : 1 : FAIL : This is an invalid model. Error: the graph"
    ...         " is not acyclic.")
    'This is an invalid model. Error: the graph is not acyclic.'
    """
    import re  # noqa: PLC0415

    node = re.search(r"While validating ONNX node '<Node\((\w+)\)[^']*'", message)
    if node:
        lines = [line.strip() for line in message[node.end() :].splitlines()]
        skipped = ("Check '", "FrontEnd API", ":")
        reason = next((x for x in lines if x and not x.startswith(skipped)), "")
        op = node.group(1)
        return reason if reason.startswith(op) else f"{op}: {reason}".rstrip(": ")
    message = re.sub(r"^.*?\[ONNXRuntimeError\] : \d+ : \w+ : ", "", message, flags=re.S)
    return message.strip().splitlines()[0] if message.strip() else "no reason given"


def checked(fits, reference=report.CPU):
    """Train each fit one epoch: its loss, and its status (``''`` when it may be timed).

    A fit that raises :class:`RuntimeError` (the process of its runtime reported an error) is
    ``refused: <reason>`` (:func:`refusal`); a loss farther than :data:`LOSS_RTOL` from the
    ``reference`` fit's is ``loss mismatch: ...`` (no check without a reference loss).

    Examples
    --------
    >>> def refused(epochs):
    ...     raise RuntimeError("Fail: [ONNXRuntimeError] : 1 : FAIL : not read")
    >>> checked({"onnxruntime CPU": lambda e: 1.0, "torch eager": lambda e: 1.00001,
    ...          "OpenVINO": refused, "other": lambda e: 1.1})[1]  # doctest: +NORMALIZE_WHITESPACE
    {'onnxruntime CPU': '', 'torch eager': '', 'OpenVINO': 'refused: not read',
     'other': "loss mismatch: 1.1 against the CPU provider's 1"}
    """
    import math  # noqa: PLC0415

    losses, status = {}, {}
    for name, fit in fits.items():
        try:
            losses[name], status[name] = fit(1), ""
        except RuntimeError as exc:
            losses[name], status[name] = math.nan, report.REFUSED + refusal(str(exc))
    expected = losses.get(reference, math.nan)
    for name, loss in losses.items():
        if status[name] or math.isnan(expected) or math.isclose(loss, expected, rel_tol=LOSS_RTOL):
            continue
        status[name] = f"{report.MISMATCH}{loss:.6g} against the CPU provider's {expected:.6g}"
    return losses, status


def _step_file(name, optimizer, folder):
    """The exported step's path, or the export's refusal."""
    exported = os.path.join(folder, f"{name}.onnx")
    return pf.export_step(optimizer, exported) or exported


def measure_model(name, folder, epochs, repeats, threads, pythons):
    """The rows of one zoo model: each engine's step (or why not), its loss after an epoch.

    ``pythons``: engine to interpreter for :data:`report.CPU` and :data:`report.OPENVINO` (an
    OpenVINO interpreter that does not exist gives a ``not measured`` row).
    """
    import contextlib  # noqa: PLC0415
    import math  # noqa: PLC0415

    from benchmarks.studies.portable_speed import step_labels, timed_rows, zoo_steps  # noqa: PLC0415
    from helpers.measure.conditions import RunClock  # noqa: PLC0415

    steps = zoo_steps(name)
    _, optimizer, X, y = pf.zoo_fits(name, BATCH * steps, BATCH, LEARNING_RATE, threads)
    step = _step_file(name, optimizer, folder)
    data = pf.write_data(os.path.join(folder, f"{name}.npz"), X, step_labels(name, y))
    servers = {report.CPU: {report.CPU: step}}
    if os.path.exists(pythons[report.OPENVINO]):
        servers[report.OPENVINO] = {report.OPENVINO: step}
    untimed = {} if len(servers) > 1 else {report.OPENVINO: OPENVINO_MISSING}
    if step.startswith(report.REFUSED):  # no step model: the onnxruntime engines have none
        untimed.update({engine: step for engine in servers})
        servers = {}
    columns = {"model": name, "batch_size": BATCH}
    with contextlib.ExitStack() as stack:
        fits, lean = {}, {}
        for engine, engine_fits in servers.items():
            providers = OPENVINO_PROVIDERS if engine == report.OPENVINO else None
            server = EngineFits(engine_fits, data, BATCH, threads, pythons[engine], providers)
            fits.update(stack.enter_context(server).fits())
            lean.update(dict.fromkeys(engine_fits, server.lean))
        fits[report.TORCH] = torch_engine(name, X, y)
        losses, status = checked(fits)
        timed = {engine: fit for engine, fit in fits.items() if not status[engine]}
        rows = timed_rows(timed, steps, epochs, repeats, threads, RunClock(), **columns)
    nothing = {"threads": threads, "steps_per_epoch": steps, "step_s": math.nan, "note": ""}
    rows += [
        {**columns, "framework": engine, **nothing}
        for engine in [*untimed, *(e for e in fits if e not in timed)]
    ]
    status.update(untimed)
    return [
        {
            **{key: value for key, value in row.items() if key != "framework"},
            "engine": row["framework"],
            "trainer_lean": lean.get(row["framework"]),
            "loss": losses.get(row["framework"], math.nan),
            "status": status[row["framework"]],
        }
        for row in rows
    ]


def runtimes_of(pythons):
    """Engine to its runtime and version (and Python's, for a process of another environment).

    Examples
    --------
    >>> runtimes_of({})[report.TORCH].startswith("torch ")
    True
    """
    import torch  # noqa: PLC0415

    found = {report.TORCH: f"torch {torch.__version__.split('+')[0]}"}
    for engine, python in pythons.items():
        if os.path.exists(python):
            runtime, version = pf.onnxruntime_version(python)
            package = "onnxruntime-openvino" if engine == report.OPENVINO else "onnxruntime"
            found[engine] = f"{package} {runtime}, Python {version}"
    return found


def main(argv=None):
    """Measure and write; see ``--help``."""
    import pandas as pd  # noqa: PLC0415

    from benchmarks.example_models import ZOO  # noqa: PLC0415
    from benchmarks.sweep.records import atomic_write_text, machine_info  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.studies.step_engines", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--threads", type=int, default=2, help="threads of every engine")
    parser.add_argument("--models", nargs="+", choices=list(ZOO), help="default: every one")
    parser.add_argument("--quick", action="store_true", help="short fits, one repeat")
    parser.add_argument("--maintained-python", help="default: .venv-maintained/bin/python")
    parser.add_argument(
        "--openvino-python", default=OPENVINO_PYTHON, help=f"default: {OPENVINO_PYTHON}"
    )
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    pythons = {
        report.CPU: pf.maintained_python(args.maintained_python),
        report.OPENVINO: args.openvino_python,
    }
    if not os.path.exists(args.openvino_python):
        print(f"OpenVINO {OPENVINO_MISSING}", flush=True)
    epochs, repeats = (QUICK_EPOCHS, QUICK_REPEATS) if args.quick else (EPOCHS, REPEATS)
    machine = machine_info()
    start, rows = time.perf_counter(), []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models or list(ZOO):
            rows += measure_model(name, folder, epochs, repeats, args.threads, pythons)
            print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    frame = pd.DataFrame(rows).assign(
        runtime=lambda d: d.engine.map(runtimes_of(pythons)),
        machine=machine["cpu"],
        cores=machine["logical_cores"],
    )
    frame = frame.reindex(columns=COLUMNS)
    os.makedirs(args.out, exist_ok=True)
    atomic_write_text(os.path.join(args.out, "step_engines.csv"), frame.to_csv(index=False))
    text = report.engines_markdown(frame)
    atomic_write_text(os.path.join(args.out, "step_engines.md"), text + "\n")
    print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
