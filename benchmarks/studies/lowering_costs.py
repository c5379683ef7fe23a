"""What each lowering costs against the contrib kernel it replaces, one node at a time.

For each operator of :mod:`helpers.portable.lowering` (but convolution, pooling and
normalization), a model of one node at a representative size (a batch of 64) runs on this
onnxruntime's ``InferenceSession`` as written (the training build's contrib kernel) and lowered
to standard operators; the best of ``--repeats`` runs of ``--calls`` calls, the two models
taking turns, 2 threads that do not spin (a machine shared with other work)::

    python -m benchmarks.studies.lowering_costs [--out results/reference] [--threads 2]

writes ``lowering_costs.csv``: ``op``, ``formulation`` (the first line of the lowering's
docstring), ``contrib_us``, ``lowered_us``, ``ratio`` (lowered over contrib), ``size``.
"""

import argparse
import csv
import os
import sys
import time

import numpy as np

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: The file this study writes, under ``--out``.
CSV_NAME = "lowering_costs.csv"
_RNG = np.random.default_rng(0)


def _normal(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


def _cases():
    """(label, op_type, feeds, outputs, attributes, size) of each measured node."""
    x, dy = _normal(64, 512), _normal(64, 512)
    f32 = {"out": np.float32}
    ids = _RNG.integers(0, 1000, (64, 32))
    logits = _normal(64, 10)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    softmax = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    return [
        ("Scale", "Scale", {"a": x, "s": np.array(64, np.int64)}, f32, {"scale_down": 1}, "64x512"),
        ("BroadcastGradientArgs", "BroadcastGradientArgs",
         {"a": np.array([64, 512], np.int64), "b": np.array([512], np.int64)},
         {"ya": np.int64, "yb": np.int64}, {}, "shapes [64, 512], [512]"),
        ("InPlaceAccumulatorV2", "InPlaceAccumulatorV2",
         {"buffer": _normal(512, 512), "value": _normal(512, 512), "overwrite": np.array([True])},
         {"updated": np.bool_, "acc": np.float32}, {}, "512x512, overwrite an input"),
        ("ReluGrad", "ReluGrad", {"dy": dy, "x": x}, f32, {}, "64x512"),
        ("LeakyReluGrad", "LeakyReluGrad", {"dy": dy, "x": x}, f32, {"alpha": 0.1}, "64x512"),
        ("SigmoidGrad", "SigmoidGrad", {"dy": dy, "y": softmax}, f32, {}, "64x512"),
        ("TanhGrad", "TanhGrad", {"dy": dy, "y": np.tanh(x)}, f32, {}, "64x512"),
        ("Gelu", "Gelu", {"x": x}, f32, {}, "64x512"),
        ("GeluGrad", "GeluGrad", {"dy": dy, "x": x}, f32, {}, "64x512"),
        ("QuickGelu", "QuickGelu", {"x": x}, f32, {"alpha": 1.0}, "64x512"),
        ("QuickGeluGrad", "QuickGeluGrad", {"dy": dy, "x": x}, f32, {"alpha": 1.0}, "64x512"),
        ("SoftmaxGrad_13", "SoftmaxGrad_13", {"dy": dy, "y": softmax}, f32, {"axis": -1}, "64x512"),
        ("LogSoftmaxGrad_13", "LogSoftmaxGrad_13", {"dy": _normal(64, 10), "y": log_softmax},
         f32, {"axis": -1}, "64x10"),
        ("FusedMatMul (2-D: Gemm)", "FusedMatMul", {"a": x, "b": _normal(64, 256)}, f32,
         {"transA": 1}, "(64x512)T @ 64x256"),
        ("FusedMatMul (ranks known: Transpose, MatMul)", "FusedMatMul",
         {"a": _normal(32, 32), "b": _normal(64, 4, 32, 32)}, f32, {"transA": 1},
         "(32x32)T @ 64x4x32x32"),
        ("DivGrad", "DivGrad", {"dy": dy, "a": x, "b": 1.5 + _RNG.random(512).astype(np.float32)},
         {"da": np.float32, "db": np.float32}, {}, "64x512 / 512"),
        ("GatherGrad", "GatherGrad",
         {"shape": np.array([1000, 32], np.int64), "indices": ids, "dy": _normal(64, 32, 32)},
         f32, {"axis": 0}, "1000x32 table, 64x32 ids"),
        ("GatherNDGrad", "GatherNDGrad",
         {"shape": np.array([1000, 32], np.int64), "indices": ids[..., None],
          "dy": _normal(64, 32, 32)}, f32, {}, "1000x32 table, 64x32 ids"),
        ("SliceGrad", "SliceGrad",
         {"dy": _normal(64, 256), "shape": np.array([64, 512], np.int64),
          "starts": np.array([1], np.int64), "ends": np.array([257], np.int64),
          "axes": np.array([1], np.int64)}, f32, {}, "64x256 into 64x512"),
        ("ConcatTraining", "ConcatTraining", {"a": _normal(64, 256), "b": _normal(64, 256)},
         {"y": np.float32, "lengths": np.int64}, {"axis": 1}, "2 x 64x256"),
        ("SplitTraining", "SplitTraining", {"x": x, "split": np.array([256, 256], np.int64)},
         {"y0": np.float32, "y1": np.float32}, {"axis": 1}, "64x512 in 2"),
        ("DropoutGrad", "DropoutGrad",
         {"dy": dy, "mask": _RNG.random((64, 512)) > 0.3, "ratio": np.array(0.3, np.float32)},
         f32, {}, "64x512"),
    ]  # fmt: skip


def best_calls_us(models, feeds, threads, calls, repeats):
    """The fastest mean time of one ``run`` of each model (microseconds), over ``repeats`` runs
    of ``calls``; the models take turns in every repeat, so that a busy machine slows both.

    Examples
    --------
    >>> from helpers.portable.lowering.single_node import single_node_model
    >>> feeds = {"dy": np.ones(4, np.float32), "x": np.ones(4, np.float32)}
    >>> model = single_node_model("ReluGrad", feeds, {"dx": np.float32})
    >>> [t > 0 for t in best_calls_us([model, model], feeds, threads=1, calls=3, repeats=2)]
    [True, True]
    """
    import onnxruntime  # noqa: PLC0415

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sessions = [
        onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        for model in models
    ]
    best = [float("inf")] * len(sessions)
    for _ in range(repeats):
        for k, session in enumerate(sessions):
            session.run(None, feeds)
            start = time.perf_counter()
            for _ in range(calls):
                session.run(None, feeds)
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    return [t * 1e6 for t in best]


def measure(threads=2, calls=30, repeats=30, log=print):
    """One row per case of :func:`_cases`: the CSV's columns."""
    from helpers.portable.lowering import LOWERINGS, lower_model  # noqa: PLC0415
    from helpers.portable.lowering.single_node import single_node_model  # noqa: PLC0415

    rows = []
    for label, op_type, feeds, outputs, attributes, size in _cases():
        model = single_node_model(op_type, feeds, outputs, **attributes)
        # the in-place accumulator adds into its buffer at every call, either way
        contrib, standard = best_calls_us(
            [model, lower_model(model)], feeds, threads, calls, repeats
        )
        formulation = LOWERINGS["com.microsoft", op_type].__doc__.strip().split("\n")[0]
        rows.append([label, formulation, round(contrib, 1), round(standard, 1),
                     round(standard / contrib, 2), size])  # fmt: skip
        log(" | ".join(map(str, rows[-1])))
    return rows


def main(argv=None):
    """Command line: measure, write the CSV atomically."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join("results", "reference"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    rows = measure(args.threads, args.calls, args.repeats)
    path = os.path.join(args.out, CSV_NAME)
    with open(path + ".tmp", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["op", "formulation", "contrib_us", "lowered_us", "ratio", "size"])
        writer.writerows(rows)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
