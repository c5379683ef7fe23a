"""Where a training step spends its time, from onnxruntime's own profiler.

:func:`profile_training` fits a copy of an optimizer with every onnxruntime
session writing a trace (``SessionOptions.enable_profiling``), then reads
the traces back: the time of each kernel, grouped by operator and by the
session that ran it (the model's forward and backward, the loss, the update).
The time of a step that no kernel accounts for is the session's own
overhead (scheduling, allocations, the Python call).

Profiling slows every kernel call by about a microsecond: shares are
faithful for large kernels, and inflated for the many tiny ones of a small
network. Compare configurations profiled the same way.
"""

import glob
import json
import os
import re
import tempfile
import time

import numpy as np
import pandas as pd
from onnx import TensorProto, helper
from sklearn.base import clone

from ..core.machine.sessions import make_session, profiling_sessions

#: What each session label of the helpers runs, for the tables.
SESSION_ROLES = {
    "model": "model (forward + backward)",
    "update": "weight update",
    "loss": "loss and its gradient",
    "penalty": "penalty",
    "gather_batch": "batch gather",
    "score": "validation loss",
    "predict": "prediction",
}


def read_profile(path):
    """Return the kernels and runs of one onnxruntime trace.

    Parameters
    ----------
    path : str
        A JSON file written by a session with ``enable_profiling``.

    Returns
    -------
    tuple of pandas.DataFrame
        The kernels (``node``, ``op_type``, ``duration_us``, one row per
        call) and the runs (``duration_us``, one row per session run).

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from helpers.core.machine.sessions import make_session, profiling_sessions
    >>> feeds = {"x": np.ones((16, 4), np.float32), "w1": np.ones((4, 8), np.float32),
    ...          "w2": np.ones((8, 1), np.float32), "g": np.ones((16, 1), np.float32)}
    >>> with tempfile.TemporaryDirectory() as folder, profiling_sessions(folder):
    ...     session = make_session(step_products_model(), n_threads=1, label="model")
    ...     for _ in range(3):
    ...         _ = session.run(None, feeds)
    ...     kernels, runs = read_profile(session.end_profiling())
    >>> kernels["op_type"].value_counts().sort_index().to_dict(), len(runs)
    ({'Gemm': 9, 'MatMul': 6}, 3)
    """
    with open(path, encoding="utf-8") as stream:
        events = json.load(stream)
    kernels = [
        {
            "node": event["name"][: -len("_kernel_time")],
            "op_type": event["args"]["op_name"],
            "duration_us": event["dur"],
        }
        for event in events
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time")
    ]
    runs = [
        {"duration_us": event["dur"]}
        for event in events
        if event.get("cat") == "Session" and event["name"] == "SequentialExecutor::Execute"
    ]
    return (
        pd.DataFrame(kernels, columns=["node", "op_type", "duration_us"]),
        pd.DataFrame(runs, columns=["duration_us"]),
    )


def session_label(path):
    """The label of the session that wrote the profile ``path``: its role once looked up in
    :data:`SESSION_ROLES`.

    Profiles are named ``{label}-{number}_{date}_{time}.json``
    (:func:`helpers.core.machine.sessions.profiling_sessions` numbers them); onnxruntime 1.31.1
    adds the milliseconds, ``{label}-{number}_{date}_{time}_{ms}.json``.

    Examples
    --------
    >>> session_label("profiles/loss-12_2026-11-28_02-15-01.json")
    'loss'
    >>> SESSION_ROLES[session_label("model-3_2026-11-28_02-15-01.json")]
    'model (forward + backward)'
    >>> session_label("gather_batch-7_2026-11-29_04-29-26_429.json")
    'gather_batch'
    """
    name = os.path.basename(path)
    dated = re.match(r"(.+?)(?:-\d+)?_\d{4}-\d{2}-\d{2}_", name)
    if dated:
        return dated.group(1)
    name = name.rsplit("_", 2)[0] if name.count("_") >= 2 else name
    return re.sub(r"-\d+$", "", name)


def kernel_table(folder, n_steps):
    """Aggregate the traces of ``folder`` into time per training step.

    Parameters
    ----------
    folder : str
        Traces written inside :func:`helpers.core.machine.sessions.profiling_sessions`.
    n_steps : int
        Training steps the traces cover.

    Returns
    -------
    pandas.DataFrame
        One row per session role and operator type: ``calls per step``,
        ``µs per step`` and ``share of step (%)``; a row ``(overhead)`` per
        session holds the run time no kernel accounts for. Sorted by time.

    Examples
    --------
    >>> import json, os, tempfile
    >>> events = [
    ...     {
    ...         "cat": "Node",
    ...         "name": "MatMul_0_kernel_time",
    ...         "args": {"op_name": "MatMul"},
    ...         "dur": 30,
    ...     },
    ...     {"cat": "Session", "name": "SequentialExecutor::Execute", "dur": 40},
    ... ]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with open(os.path.join(folder, "model_2024-01-01_12-00-00.json"), "w") as stream:
    ...         json.dump(events, stream)
    ...     table = kernel_table(folder, n_steps=1)
    >>> table[["session", "op_type", "µs per step", "share of step (%)"]]
                          session     op_type  µs per step  share of step (%)
    0  model (forward + backward)      MatMul         30.0               75.0
    1  model (forward + backward)  (overhead)         10.0               25.0
    """
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        kernels, runs = read_profile(path)
        role = SESSION_ROLES.get(session_label(path), session_label(path))
        if role in (SESSION_ROLES["score"], SESSION_ROLES["predict"]) or runs.empty:
            continue
        for op_type, group in kernels.groupby("op_type"):
            rows.append(
                {
                    "session": role,
                    "op_type": op_type,
                    "calls per step": len(group) / n_steps,
                    "µs per step": group["duration_us"].sum() / n_steps,
                }
            )
        overhead = runs["duration_us"].sum() - kernels["duration_us"].sum()
        rows.append(
            {
                "session": role,
                "op_type": "(overhead)",
                "calls per step": len(runs) / n_steps,
                "µs per step": max(overhead, 0) / n_steps,
            }
        )
    table = pd.DataFrame(rows, columns=["session", "op_type", "calls per step", "µs per step"])
    total = table["µs per step"].sum()
    table["share of step (%)"] = 100 * table["µs per step"] / total if total else 0.0
    return table.sort_values("µs per step", ascending=False, ignore_index=True)


def profile_training(optimizer, X, y, max_iter=1, **fit_params):
    """Fit a copy of ``optimizer`` with onnxruntime's profiler on; return the kernel table.

    Parameters
    ----------
    optimizer : helpers.OrtGradientOptimizer or helpers.OrtGradientForwardBackwardOptimizer
        Left unchanged; a clone with ``max_iter``, no validation and no
        progress bar is fitted.
    X, y : array-like
        Training data.
    max_iter : int
        Epochs profiled.
    **fit_params
        Passed to ``fit`` (``sample_weight``).

    Returns
    -------
    pandas.DataFrame
        :func:`kernel_table` of the fit, with the attributes ``n_steps``,
        ``wall_us_per_step`` (the fit's wall time per step, profiler included) and
        ``backend`` (the one that trained: ``"onnxruntime-training"`` or ``"onnx"``) in
        ``DataFrame.attrs``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import OrtGradientForwardBackwardOptimizer
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    >>> opt = OrtGradientForwardBackwardOptimizer(mlp_onnx(4, 8), batch_size=16)
    >>> table = profile_training(opt, X, X[:, :1])
    >>> table.attrs["n_steps"], sorted(set(table["session"]))[:2]
    (4, ['loss and its gradient', 'model (forward + backward)'])
    >>> table.attrs["backend"] in ("onnxruntime-training", "onnx")
    True
    """
    estimator = clone(optimizer).set_params(
        max_iter=max_iter, warm_start=False, verbose=0, validation_every=0
    )
    with tempfile.TemporaryDirectory(prefix="ort_profile_") as folder:
        with profiling_sessions(folder):
            start = time.perf_counter()
            estimator.fit(X, y, **fit_params)
            elapsed = time.perf_counter() - start
            n_steps, backend = estimator.t_, estimator.backend_
            # a session writes its trace when it ends: end them all
            del estimator
        table = kernel_table(folder, n_steps)
    table.attrs["n_steps"] = n_steps
    table.attrs["wall_us_per_step"] = elapsed * 1e6 / n_steps
    table.attrs["backend"] = backend
    return table


def summarize_by_session(table):
    """Time per step of each session (model, loss, update...) from :func:`kernel_table`.

    Parameters
    ----------
    table : pandas.DataFrame
        A :func:`kernel_table` (or :func:`profile_training`) result.

    Returns
    -------
    pandas.DataFrame
        Index ``session``, columns ``µs per step`` and ``share of step (%)``,
        summed over the operators of each session, the slowest first.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"session": ["model", "model", "update"],
    ...                       "op_type": ["MatMul", "Add", "Sub"],
    ...                       "µs per step": [30.0, 10.0, 10.0],
    ...                       "share of step (%)": [60.0, 20.0, 20.0]})
    >>> summarize_by_session(table)  # doctest: +NORMALIZE_WHITESPACE
             µs per step  share of step (%)
    session
    model           40.0               80.0
    update          10.0               20.0
    """
    return (
        table.groupby("session", sort=False)[["µs per step", "share of step (%)"]]
        .sum()
        .sort_values("µs per step", ascending=False)
    )


def step_products_model(opset=15):
    """The five matrix products of a training step of a one-hidden-layer MLP, in one graph.

    With ``x`` (batch, d), ``w1`` (d, h), ``w2`` (h, 1) and ``g`` the
    gradient of the loss with respect to the output (batch, 1): two forward
    products ``h = x @ w1`` and ``p = h @ w2``, three backward ones with the
    transposes a gradient graph uses, ``grad_w2 = h.T @ g``,
    ``grad_h = g @ w2.T``, ``grad_w1 = x.T @ grad_h``. Nothing else (biases,
    activation, loss, update): the time of a training step over this one is
    what the rest of the step costs.

    Returns
    -------
    onnx.ModelProto
        Inputs ``x``, ``w1``, ``w2``, ``g``; outputs ``p``, ``grad_w1``, ``grad_w2``.

    Examples
    --------
    >>> model = step_products_model()
    >>> [node.op_type for node in model.graph.node]
    ['MatMul', 'MatMul', 'Gemm', 'Gemm', 'Gemm']
    >>> [i.name for i in model.graph.input], [o.name for o in model.graph.output]
    (['x', 'w1', 'w2', 'g'], ['p', 'grad_w1', 'grad_w2'])
    """
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["p"]),
        helper.make_node("Gemm", ["h", "g"], ["grad_w2"], transA=1),
        helper.make_node("Gemm", ["g", "w2"], ["grad_h"], transB=1),
        helper.make_node("Gemm", ["x", "grad_h"], ["grad_w1"], transA=1),
    ]
    graph = helper.make_graph(
        nodes,
        "step_products",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "w1", "w2", "g")],
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
            for n in ("p", "grad_w1", "grad_w2")
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


class StepProducts:
    """The runtime's bound for a training step: its matrix products, one session call.

    Parameters
    ----------
    n_features, hidden : int
        The network ``n_features -> hidden -> 1``.
    n_threads : int, optional
        Threads of the session, as for the optimizers.
    random_state : int
        Seeds the weights and the output gradient.

    Examples
    --------
    >>> import numpy as np
    >>> bound = StepProducts(n_features=4, hidden=8)
    >>> bound.run(np.ones((16, 4), dtype=np.float32))
    >>> bound.flops(16)
    2816
    """

    def __init__(self, n_features, hidden, n_threads=None, random_state=0):
        rng = np.random.default_rng(random_state)
        self.w1 = rng.standard_normal((n_features, hidden)).astype(np.float32)
        self.w2 = rng.standard_normal((hidden, 1)).astype(np.float32)
        self._rng = rng
        self._gradients = {}
        self._session = make_session(
            step_products_model(), n_threads=n_threads, label="step_products"
        )

    def run(self, X):
        """Compute the five products for the batch ``X``."""
        n = X.shape[0]
        if n not in self._gradients:
            self._gradients[n] = self._rng.standard_normal((n, 1)).astype(np.float32)
        self._session.run(None, {"x": X, "w1": self.w1, "w2": self.w2, "g": self._gradients[n]})

    def flops(self, batch_size):
        """Floating point operations of the five products (two per multiply-add)."""
        d, h = self.w1.shape
        return 2 * batch_size * (2 * d * h + 3 * h)
