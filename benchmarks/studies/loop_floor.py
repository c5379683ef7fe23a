"""Why a step of the linear regression fitted one row at a time cannot reach 5 microseconds.

With the epoch loop, onnxruntime runs the step's nodes inside a ``Scan`` (one iteration per
batch: :mod:`helpers.portable.epoch_loop`). This study measures what an iteration costs the
runtime with nothing but ``k`` scalar ``Add`` nodes in its body, for ``k`` from 1 to 40, fits
``fixed + k * per_node`` to those times, and counts the nodes of the linear regression's lean step
once onnxruntime optimized it (its ``MatMul`` and ``Add`` fused). The floor of that step is the
fit at its node count; the step itself is timed beside it, in the same run, with the same
harness: the marginal cost of an iteration, the time of 5,000 iterations minus that of 200 (the
best of 15 runs each, the cases taking turns, in CPU time of the calling thread, on one
thread).

Run with the maintained environment (numpy, onnx and onnxruntime only)::

    .venv-maintained/bin/python -m benchmarks.studies.loop_floor --out results

writes ``loop_floor.csv`` (one row per body: its nodes and its time per iteration) and
``loop_floor.md``.
"""

import argparse
import csv
import functools
import io
import os
import tempfile
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from benchmarks.sweep.records import machine_info
from helpers import build_training_step
from helpers.measure.timing import marginal_step_cost
from helpers.portable.atomic_files import write_atomic
from helpers.portable.epoch_loop import epoch_model, loop_names
from helpers.portable.lean_step import lean_step
from helpers.portable.step_model import load_step
from helpers.teaching.model_factories import mlp_onnx

#: The body sizes timed, the iterations of the short and the long run, the runs of each.
NODES = (1, 2, 5, 10, 20, 40)
SHORT, LONG, REPEATS = 200, 5000, 15
#: The goal of a step of the linear regression, one row at a time, in seconds.
GOAL_S = 5e-6
#: The linear regression: features, learning rate (plain SGD, squared error).
FEATURES, LEARNING_RATE = 20, 0.005


def _options():
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return options


def scan_of_adds(nodes):
    """A model that scans ``order`` (int64 ``[N, 1]``) with ``nodes`` chained scalar ``Add``
    nodes in the body, each adding one to the carried value.

    Examples
    --------
    >>> model = scan_of_adds(3)
    >>> session = onnxruntime.InferenceSession(model.SerializeToString(),
    ...                                        providers=["CPUExecutionProvider"])
    >>> session.run(None, {"order": np.zeros((4, 1), np.int64),
    ...                    "start": np.zeros(1, np.float32)})[0].tolist()
    [12.0]
    """
    body_nodes, value = [], "value"
    for k in range(nodes):
        body_nodes.append(helper.make_node("Add", [value, "one"], [f"add_{k}"]))
        value = f"add_{k}"

    def tensor(name, elem, shape):
        return helper.make_tensor_value_info(name, elem, shape)

    body = helper.make_graph(
        body_nodes,
        "body",
        [tensor("value", TensorProto.FLOAT, [1]), tensor("rows", TensorProto.INT64, [1])],
        [tensor(value, TensorProto.FLOAT, [1])],
    )
    scan = helper.make_node("Scan", ["start", "order"], ["end"], body=body, num_scan_inputs=1)
    graph = helper.make_graph(
        [scan],
        "scan_of_adds",
        [tensor("order", TensorProto.INT64, ["N", 1]), tensor("start", TensorProto.FLOAT, [1])],
        [tensor("end", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def per_iteration(cases):
    """The marginal seconds of an iteration of each case, ``(session, feeds_for)``, where
    ``feeds_for(iterations)`` gives a run's inputs: :func:`helpers.measure.timing.
    marginal_step_cost` with runs of :data:`SHORT` and :data:`LONG` iterations for epochs, the
    cases in turns round after round (:data:`REPEATS`), timed in CPU time of the calling
    thread."""

    def fit(epochs, case):
        session, feeds_for = case
        session.run(None, feeds_for(epochs * SHORT))

    fits = {k: functools.partial(fit, case=case) for k, case in enumerate(cases)}
    costs = marginal_step_cost(
        fits, SHORT, e2=LONG // SHORT, repeats=REPEATS, clock=time.thread_time, pause_s=0
    )
    return [costs[k]["step_s"] for k in range(len(cases))]


def linear_step():
    """The lean epoch model of a linear regression's SGD step, batches of one row, and its
    data: ``(epoch model, feeds_for)``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, FEATURES)).astype(np.float32)
    y = (X @ rng.normal(size=FEATURES)).astype(np.float32)[:, None]
    model = mlp_onnx(FEATURES, hidden=())  # the linear case of benchmarks.studies.portable_speed
    step = build_training_step(model, "squared_error", "sgd", LEARNING_RATE)
    epoch = epoch_model(lean_step(step, 1))
    names, state = loop_names(step), load_step(step).initial

    def feeds_for(iterations):
        order = np.arange(iterations, dtype=np.int64) % len(X)
        fixed = {names.order: order, names.batch_size: np.array(1), "step": np.array(1)}
        return {"X": X, "label": y, **fixed, **state}

    return epoch, feeds_for


def optimized_body_nodes(model):
    """The nodes of the ``Scan`` body of ``model`` once onnxruntime optimized it."""
    with tempfile.TemporaryDirectory() as folder:
        options = _options()
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        optimized = onnx.load(options.optimized_model_filepath)
    scan = next(n for n in optimized.graph.node if n.op_type == "Scan")
    return len(next(a.g.node for a in scan.attribute if a.name == "body"))


def measure():
    """The rows of the study: one per body of scalar ``Add`` nodes, then the linear step."""
    start = np.zeros(1, np.float32)

    def adds_feeds(iterations):
        return {"order": np.zeros((iterations, 1), np.int64), "start": start}

    cases, rows = [], []
    for nodes in NODES:
        model = scan_of_adds(nodes).SerializeToString()
        session = onnxruntime.InferenceSession(model, _options(), ["CPUExecutionProvider"])
        cases.append((session, adds_feeds))
        rows.append({"body": "scalar Add nodes", "nodes": nodes})
    epoch, feeds_for = linear_step()
    session = onnxruntime.InferenceSession(
        epoch.SerializeToString(), _options(), ["CPUExecutionProvider"]
    )
    cases.append((session, feeds_for))
    rows.append({"body": "linear regression step (batch 1)", "nodes": optimized_body_nodes(epoch)})
    machine = f"{machine_info()['cpu']}, {os.cpu_count()} cores"
    for row, seconds in zip(rows, per_iteration(cases)):
        row.update(iteration_s=seconds, onnxruntime=onnxruntime.__version__, machine=machine)
    return rows


def fit_floor(rows):
    """``(fixed, per_node)`` seconds: least squares over the rows of scalar ``Add`` bodies.

    Examples
    --------
    >>> rows = [{"body": "scalar Add nodes", "nodes": n, "iteration_s": 1e-6 + n * 5e-7}
    ...         for n in (1, 10)]
    >>> [round(v * 1e6, 3) for v in fit_floor(rows)]
    [1.0, 0.5]
    """
    adds = [r for r in rows if r["body"] == "scalar Add nodes"]
    nodes = np.array([r["nodes"] for r in adds], dtype=float)
    seconds = np.array([r["iteration_s"] for r in adds])
    per_node, fixed = np.polyfit(nodes, seconds, 1)
    return float(fixed), float(per_node)


def markdown(rows):
    """The answer in a sentence, then the table of iterations.

    Examples
    --------
    >>> rows = [{"body": "scalar Add nodes", "nodes": n, "iteration_s": 1e-6 + n * 5e-7,
    ...          "onnxruntime": "1.31.1", "machine": "x86_64, 2 cores"} for n in (1, 10)]
    >>> rows.append({"body": "linear regression step (batch 1)", "nodes": 16,
    ...              "iteration_s": 9.5e-6, "onnxruntime": "1.31.1", "machine": "x86_64, 2 cores"})
    >>> print(markdown(rows).splitlines()[0])  # doctest: +ELLIPSIS
    A step of the linear regression fitted one row at a time runs 16 nodes in the epoch loop's \
Scan and takes 9.5 us. An iteration of scalar nodes costs onnxruntime 1.0 us plus 0.50 us a \
node, so even 16 nodes as cheap as a scalar Add would take 9.0 us: the 5 us goal needs at most 8 \
nodes, fewer than the step's arithmetic.
    """
    fixed, per_node = fit_floor(rows)
    step = next(r for r in rows if r["body"] != "scalar Add nodes")
    floor = fixed + step["nodes"] * per_node
    most = int((GOAL_S - fixed) // per_node)
    lines = [
        f"A step of the linear regression fitted one row at a time runs {step['nodes']} nodes "
        f"in the epoch loop's Scan and takes {step['iteration_s'] * 1e6:.1f} us. An iteration "
        f"of scalar nodes costs onnxruntime {fixed * 1e6:.1f} us plus {per_node * 1e6:.2f} us a "
        f"node, so even {step['nodes']} nodes as cheap as a scalar Add would take "
        f"{floor * 1e6:.1f} us: the {GOAL_S * 1e6:.0f} us goal needs at most {most} nodes, "
        "fewer than the step's arithmetic.",
        "",
        "| body of an iteration | nodes | us per iteration |",
        "| --- | --- | --- |",
        *(f"| {r['body']} | {r['nodes']} | {r['iteration_s'] * 1e6:.2f} |" for r in rows),
        "",
        "Each time is the marginal cost of an iteration (5,000 iterations against 200, the best "
        "of 15 runs, CPU time of the calling thread, one thread): the fit is a floor no body of "
        "that many nodes goes under on this machine, and the times move from run to run. "
        f"onnxruntime {rows[0]['onnxruntime']}; {rows[0]['machine']}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results", help="folder of loop_floor.csv and .md")
    args = parser.parse_args(argv)
    rows = measure()
    os.makedirs(args.out, exist_ok=True)
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    text = markdown(rows)
    write_atomic(os.path.join(args.out, "loop_floor.csv"), table.getvalue())
    write_atomic(os.path.join(args.out, "loop_floor.md"), text)
    print(text)


if __name__ == "__main__":
    main()
