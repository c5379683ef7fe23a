"""The onnxruntime side of the kernel survey: the profiler's trace of training steps, the peak.

:func:`profile_ort` fits one epoch of an optimizer with onnxruntime's
profiler on and returns one row per kernel call with its family
(:func:`benchmarks.profiles.survey.kernel_families.ort_family`), its time
and its floating-point work (:func:`benchmarks.profiles.survey.kernel_flops.ort_flops`,
from the shapes of the trace). :func:`ort_peak_gflops` times a large matrix
product, the machine's peak for the GFLOP/s of the tables. The torch side:
:mod:`benchmarks.profiles.survey.torch_kernels`; both run by
``benchmarks/profiles/survey/kernels_side_by_side.py``.
"""

import glob
import json
import os
import tempfile
import time

import numpy as np
import pandas as pd
from onnx import TensorProto, helper
from sklearn.base import clone

from benchmarks.profiles.survey.kernel_families import ort_family
from benchmarks.profiles.survey.kernel_flops import ort_flops
from helpers.core.machine.sessions import make_session, profiling_sessions
from helpers.measure.profiling import SESSION_ROLES, session_label


def _shape(value):
    return next(iter(value.values())) if value else []


def run_starts(events):
    """The start times of the session runs of an onnxruntime trace's ``events``, in order.

    Examples
    --------
    >>> run_starts([{"cat": "Session", "name": "SequentialExecutor::Execute", "ts": 9},
    ...             {"cat": "Node", "name": "n_kernel_time", "ts": 10}])
    [9]
    """
    return sorted(
        e["ts"]
        for e in events
        if e.get("cat") == "Session" and e["name"] == "SequentialExecutor::Execute"
    )


def _trace_rows(path, n_steps):
    """One row per kernel call of one onnxruntime trace, with the step it belongs to."""
    if SESSION_ROLES.get(session_label(path)) in (
        SESSION_ROLES["score"],
        SESSION_ROLES["predict"],
    ):
        return []
    with open(path, encoding="utf-8") as stream:
        events = json.load(stream)
    starts = run_starts(events)
    rows = []
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time") or not starts:
            continue
        args = event["args"]
        run = int(np.searchsorted(starts, event["ts"], side="right")) - 1
        inputs = [_shape(v) for v in args.get("input_type_shape", [])]
        outputs = [_shape(v) for v in args.get("output_type_shape", [])]
        op_type = args["op_name"]
        rows.append(
            {
                "step": run * n_steps // len(starts),
                "name": op_type,
                "family": ort_family(op_type, event["name"]),
                "us": float(event["dur"]),
                "flops": ort_flops(op_type, inputs, outputs),
            }
        )
    return rows


def profile_ort(optimizer, X, y, warmup=3):
    """Fit one epoch of a copy of ``optimizer`` under onnxruntime's profiler: a row per kernel call.

    Returns
    -------
    pandas.DataFrame
        ``step``, ``name`` (operator type), ``family``, ``us``, ``flops``
        (from the shapes of the trace), the first ``warmup`` steps left out;
        the validation and prediction sessions are left out too.

    Examples
    --------
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(4, (8,))), batch_size=8)
    >>> kernels = profile_ort(opt, X, X[:, :1], warmup=1)
    >>> sorted(kernels["step"].unique().tolist()), "matrix products" in set(kernels["family"])
    ([1, 2, 3, 4], True)
    """
    estimator = clone(optimizer).set_params(
        max_iter=1, warm_start=False, verbose=0, validation_every=0
    )
    with tempfile.TemporaryDirectory(prefix="ort_profile_") as folder:
        with profiling_sessions(folder):
            estimator.fit(X, y)
            n_steps = estimator.t_
            del estimator  # a session writes its trace when it ends
        rows = [
            row
            for path in sorted(glob.glob(os.path.join(folder, "*.json")))
            for row in _trace_rows(path, n_steps)
        ]
    kernels = pd.DataFrame(rows, columns=["step", "name", "family", "us", "flops"])
    return kernels[kernels["step"] >= warmup].reset_index(drop=True)


def ort_peak_gflops(threads, n=2048, repeat=10):
    """GFLOP/s of onnxruntime's ``n x n`` ``MatMul`` on ``threads`` threads, best of ``repeat``.

    Examples
    --------
    >>> ort_peak_gflops(1, n=64, repeat=2) > 0
    True
    """
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "peak",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [n, n]) for name in "ab"],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    session = make_session(model, n_threads=threads, label="peak")
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal((n, n)).astype(np.float32) for name in "ab"}
    session.run(None, feeds)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9
