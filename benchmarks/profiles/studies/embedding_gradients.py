"""An embedding table's gradient and update: each kernel's cost; is an exact variant faster?

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/embedding_gradients.py [--threads 1 2] [--rounds 3]

The zoo's ``token_classifier_large`` (``benchmarks/example_models.py``)
trains a 20000 x 128 table on batches of 64 x 32 token ids. Its gradient is
dense, as torch's without ``sparse=True``: every step writes, copies and
reads 10 MB per pass over it. Kernels on one step's shapes, alone (median
of runs in turn, 1 and 2 threads; each run of the others pushes the table
out of the cache, as a training step does):

* ``GatherNDGrad``: the gradient of the ``GatherND`` of ``fast_gradients``
  (:mod:`helpers.core.rewrites.gradient_rewrites`), and its two parts: the clearing
  of the table's gradient (one id) and the loop adding the rows (a
  2048-row table);
* ``GatherElementsGrad``: the gradient of ``GatherElements`` with the ids
  repeated along the rows, another exact way of gathering the rows;
* ``GatherGrad``: the gradient of ``Gather``, the exported graph's;
* ``ScatterND`` with ``reduction='add'`` into zeros: the scatter a
  gradient graph written by hand could use (the gradient builder gives it
  to no forward operator);
* ``Mul`` + ``Sub``: the update graph of plain SGD on the table
  (:class:`helpers.core.updates.weight_updater.WeightUpdater`).

Then training steps of the token classifiers, interleaved
(:mod:`benchmarks.profiles.ab_timing`): ``as is`` (the whole-training API
updates with the runtime's ``SGDOptimizerV2``, the forward/backward API
with the update graph on one thread) against ``threaded update`` (both
update with the update graph on the session's threads). It writes its
section of ``results/kernel_survey.md``.
"""

import contextlib
import functools
import os
import statistics
import sys
import time
from unittest import mock

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from benchmarks.profiles.ab_timing import BUSY_NOTE, conditions, parse_arguments
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.studies.zoo_variants import zoo_variant_rows
from helpers.core.updates import weight_updater
from helpers.forward_backward import session as forward_backward_session
from helpers.whole_training import session as whole_training_session

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
#: The table and the number of ids of one step of ``token_classifier_large``.
ROWS, WIDTH, IDS = 20000, 128, 64 * 32
#: Zoo model to (steps per epoch, epochs of the long fit).
MODELS = {"token_classifier_large": (20, 4), "token_classifier_small": (20, 11)}


def _session(nodes, inputs, threads):
    """A session running ``nodes``; ``inputs`` name to element type; the output is ``y``."""
    graph = helper.make_graph(
        nodes,
        "kernel",
        [helper.make_tensor_value_info(n, t, None) for n, t in inputs.items()],
        [helper.make_tensor_value_info("y", FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def kernel_cases(rows=ROWS, width=WIDTH, ids=IDS, seed=0):
    """The kernels timed alone: name to ``(nodes, input types, feeds)``.

    Examples
    --------
    >>> cases = kernel_cases(rows=10, width=3, ids=4)
    >>> sorted(cases)[:3]
    ['GatherElementsGrad', 'GatherGrad', 'GatherNDGrad']
    >>> all(_session(n, t, 1).run(None, f)[0].size in (4 * 3, 10 * 3) for n, t, f in cases.values())
    True
    """
    rng = np.random.default_rng(seed)
    index = rng.integers(0, rows, ids).astype(np.int64)
    rows_gradient = rng.standard_normal((ids, width)).astype(np.float32)
    table = rng.standard_normal((rows, width)).astype(np.float32)
    shape = np.array([rows, width], dtype=np.int64)

    def gather_nd_grad(n_rows, chosen):
        node = helper.make_node(
            "GatherNDGrad", ["shape", "ids", "dy"], ["y"], domain="com.microsoft"
        )
        feeds = {
            "shape": np.array([n_rows, width], dtype=np.int64),
            "ids": chosen[:, None],
            "dy": rows_gradient[: len(chosen)],
        }
        return [node], {"shape": INT64, "ids": INT64, "dy": FLOAT}, feeds

    both = {"shape": INT64, "ids": INT64, "dy": FLOAT}
    zeros = helper.make_node("ConstantOfShape", ["shape"], ["zeros"])
    return {
        "GatherNDGrad": gather_nd_grad(rows, index),
        "GatherNDGrad, clearing (one id)": gather_nd_grad(rows, index[:1]),
        f"GatherNDGrad, adding the rows ({ids}-row table)": gather_nd_grad(ids, np.arange(ids)),
        "GatherElementsGrad": (
            [
                helper.make_node(
                    "GatherElementsGrad",
                    ["dy", "shape", "ids"],
                    ["y"],
                    domain="com.microsoft",
                    axis=0,
                )
            ],
            both,
            {"shape": shape, "ids": np.repeat(index[:, None], width, 1), "dy": rows_gradient},
        ),
        "GatherGrad": (
            [
                helper.make_node(
                    "GatherGrad", ["shape", "ids", "dy"], ["y"], domain="com.microsoft", axis=0
                )
            ],
            both,
            {"shape": shape, "ids": index, "dy": rows_gradient},
        ),
        "ScatterND add into zeros": (
            [zeros, helper.make_node("ScatterND", ["zeros", "ids", "dy"], ["y"], reduction="add")],
            both,
            {"shape": shape, "ids": index[:, None], "dy": rows_gradient},
        ),
        "SGD update graph (Mul + Sub)": (
            [
                helper.make_node("Mul", ["lr", "g"], ["step"]),
                helper.make_node("Sub", ["w", "step"], ["y"]),
            ],
            {"lr": FLOAT, "g": FLOAT, "w": FLOAT},
            {"lr": np.array(1e-3, dtype=np.float32), "g": table[::-1].copy(), "w": table},
        ),
    }


def kernel_times(runs=30, threads=(1, 2), **shapes):
    """Median microseconds of each of :func:`kernel_cases`, at each thread count, runs interleaved.

    Returns
    -------
    dict
        Case name to ``{threads: microseconds}``.

    Examples
    --------
    >>> times = kernel_times(runs=2, rows=10, width=3, ids=4)
    >>> sorted(times["GatherNDGrad"])
    [1, 2]
    """
    bindings = {}
    for name, (nodes, types, feeds) in kernel_cases(**shapes).items():
        for count in threads:
            session = _session(nodes, types, count)
            binding = session.io_binding()
            for key, value in feeds.items():
                binding.bind_cpu_input(key, value)
            binding.bind_output("y")
            session.run_with_iobinding(binding)  # allocates the output once
            bindings[name, count] = (session, binding, [])
    for _ in range(runs):  # in turn: a burst of load falls on all
        for session, binding, times in bindings.values():
            start = time.perf_counter()
            session.run_with_iobinding(binding)
            times.append(time.perf_counter() - start)
    result = {}
    for (name, count), (_, _, times) in bindings.items():
        result.setdefault(name, {})[count] = statistics.median(times) * 1e6
    return result


def threaded_update(threads):
    """A context in which both APIs update the weights with the update graph on ``threads`` threads.

    Examples
    --------
    >>> with threaded_update(2):
    ...     whole_training_session.RUNTIME_RULES
    ('adamw',)
    """
    updater = functools.partial(weight_updater.WeightUpdater, n_threads=threads)
    return _Patches(
        mock.patch.object(whole_training_session, "RUNTIME_RULES", ("adamw",)),
        mock.patch.object(whole_training_session, "WeightUpdater", updater),
        mock.patch.object(forward_backward_session, "WeightUpdater", updater),
    )


class _Patches:
    """Several ``mock.patch`` contexts entered as one."""

    def __init__(self, *patches):
        self.patches = patches

    def __enter__(self):
        for patch in self.patches:
            patch.start()

    def __exit__(self, *exc):
        for patch in reversed(self.patches):
            patch.stop()


def main(argv=None):
    """Time the kernels and both variants of the steps; write their section of the survey."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    kernels = kernel_times(threads=tuple(args.threads))
    kernel_rows = [
        {"kernel": name, **{f"µs, {t} thread{'s' * (t > 1)}": f"{us:.0f}" for t, us in by.items()}}
        for name, by in kernels.items()
    ]
    print(markdown(kernel_rows, list(kernel_rows[0])), flush=True)
    rows = [
        row
        for threads in args.threads
        for row in zoo_variant_rows(
            MODELS,
            {
                "as is": contextlib.nullcontext,
                "threaded update": functools.partial(threaded_update, threads),
            },
            "as is",
            threads,
            args.rounds,
            args.repeats,
        )
    ]
    text = (
        f"## An embedding table's gradient and update\n\n"
        f"{conditions('benchmarks/profiles/studies/embedding_gradients.py', argv, load)}\n\n"
        f"Kernels alone on one step of token_classifier_large ({ROWS} x {WIDTH} table, "
        f"{IDS} ids), median of runs in turn with the other kernels (which push the table "
        "out of the cache, as the other kernels of a training step do):\n\n"
        f"{markdown(kernel_rows, list(kernel_rows[0]))}\n\n"
        "Training steps (batches of 64, plain SGD): `as is` against `threaded update` (the "
        "update graph on the session's threads in both APIs), median over the rounds of the "
        "best of the repeats, the ratio taken within each round; "
        f"{BUSY_NOTE}.\n\n{markdown(rows, list(rows[0]))}"
    )
    write_section(args.output, "embedding-gradients", text)


if __name__ == "__main__":
    main()
