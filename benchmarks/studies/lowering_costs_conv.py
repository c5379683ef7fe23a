"""What the standard formulations of the convolution, pooling and normalization gradients cost
against 1.19.2's contrib kernels.

For each case (batch 64: 3 x 3 convolutions of 32 to 64 channels, the 3-channel stem, depthwise,
``1 x 1``, 1-D; max pooling; layer normalization), the script builds the one-node model of the
contrib kernel and one lowered model per formulation of
:mod:`helpers.portable.lowering` (``ConvGrad``: each formulation of ``dX`` and of ``dW`` on its
own, against the kernel asked for that output only, and the lowering's choice for all three
outputs), checks that each gives the kernel's values, and times them at 2 threads on 1.19.2.
Each model runs in rounds that alternate between the models of a case; its time is the best
run of all rounds (on a shared machine, the least disturbed run). ``MaxPoolGrad``'s models
include the forward ``MaxPool`` (the lowering reads its input's shape), in both columns.

The maintained onnxruntime cannot be installed beside the training package: ``--save DIR``
keeps the lowered models and their inputs, and ``--maintained-python PYTHON`` with
``--maintained-path SITE`` (a ``pip install --target SITE onnxruntime==1.31.1``) times them
again in a subprocess, ``PYTHONPATH=SITE PYTHON -m benchmarks.studies.lowering_costs_conv
--models DIR``, which needs only numpy and onnxruntime::

    pip install --target SITE onnxruntime==1.31.1
    .venv/bin/python -m benchmarks.studies.lowering_costs_conv --save results/local/lowering \\
        --maintained-python python3.11 --maintained-path SITE \\
        --out results/reference/lowering_costs_conv.csv

It writes one row per case and formulation: ``op, case, formulation, chosen, contrib_us``
(1.19.2's kernel), ``lowered_us_119``, ``lowered_us_131`` (empty where not measured),
``ratio`` (lowered on 1.19.2 over the kernel) and ``ratio_131`` (lowered on 1.31.1 over the
1.19.2 kernel). ``results/reference/lowering_costs_conv.csv`` was measured on a 16-core
Intel Xeon (2 threads used, Python 3.12, both runtimes installed from their wheels): on the
2-core reference machine, single timings were too noisy, up to 10x apart.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time

import numpy as np

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

THREADS = 2
COLUMNS = [
    "op", "case", "formulation", "chosen", "contrib_us", "lowered_us_119", "lowered_us_131",
    "ratio", "ratio_131",
]  # fmt: skip

#: ConvGrad cases: name to (batch, in channels, out channels, side, kernel, stride, pad, groups,
#: spatial axes); the stem's input gradient is never asked for (the input needs none).
CONV_CASES = {
    "3x3 32->32 16x16": (64, 32, 32, 16, 3, 1, 1, 1, 2),
    "3x3 64->64 8x8": (64, 64, 64, 8, 3, 1, 1, 1, 2),
    "3x3 32->64 16x16 stride 2": (64, 32, 64, 16, 3, 2, 1, 1, 2),
    "stem 3x3 3->32 32x32": (64, 3, 32, 32, 3, 1, 1, 1, 2),
    "depthwise 3x3 96 16x16": (64, 96, 96, 16, 3, 1, 1, 96, 2),
    "depthwise 3x3 32 16x16 stride 2": (64, 32, 32, 16, 3, 2, 1, 32, 2),
    "1x1 32->64 16x16": (64, 32, 64, 16, 1, 1, 0, 1, 2),
    "1-D k5 32->32 L64": (64, 32, 32, 64, 5, 1, 2, 1, 1),
}

#: MaxPool cases: name to (input shape, kernel, stride, pad).
POOL_CASES = {
    "2x2 stride 2, 64x32x32x32": ((64, 32, 32, 32), 2, 2, 0),
    "3x3 stride 2 pad 1, 64x32x32x32": ((64, 32, 32, 32), 3, 2, 1),
}

#: LayerNormalization cases: name to (input shape, axis).
NORM_CASES = {"64x32x128, last axis": ((64, 32, 128), -1), "64x512, last axis": ((64, 512), -1)}


def _session(model_bytes):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def best_times(sessions, feeds, rounds=5, runs=5):
    """Best time of one run, microseconds, of each session, rounds alternating between them."""
    for session in sessions:
        session.run(None, feeds)
    best = [float("inf")] * len(sessions)
    for _ in range(rounds):
        for i, session in enumerate(sessions):
            for _ in range(runs):
                start = time.perf_counter()
                session.run(None, feeds)
                best[i] = min(best[i], (time.perf_counter() - start) * 1e6)
    return best


def _conv_models(case):
    """``(feeds, [(formulation, chosen, contrib model, lowered model)])`` of one ConvGrad case."""
    from onnx import helper

    from helpers.portable.lowering import LoweringContext
    from helpers.portable.lowering.convolution import applicable_formulations, conv_grad_nodes

    n, c, m, side, k, stride, pad, group, rank = case
    rng = np.random.default_rng(0)
    out = (side + 2 * pad - k) // stride + 1
    feeds = {
        "dY": rng.standard_normal((n, m, *[out] * rank), dtype=np.float32),
        "X": rng.standard_normal((n, c, *[side] * rank), dtype=np.float32),
        "W": rng.standard_normal((m, c // group, *[k] * rank), dtype=np.float32),
    }
    attrs = dict(kernel_shape=[k] * rank, strides=[stride] * rank, pads=[pad] * 2 * rank)
    attrs.update(dilations=[1] * rank, group=group)
    stem = c == 3

    def pair(outputs, inputs=None, weights=None):
        node = helper.make_node(
            "ConvGrad", ["dY", "X", "W"], outputs, domain="com.microsoft", **attrs
        )
        ctx = LoweringContext(17)
        lowered = _model(conv_grad_nodes(node, ctx, inputs, weights), feeds, outputs)
        lowered.graph.initializer.extend(ctx.initializers)
        return _model([node], feeds, outputs), lowered

    node = helper.make_node("ConvGrad", ["dY", "X", "W"], ["dX"], **attrs)
    inputs, weights = applicable_formulations(node)
    models = [] if stem else [(f"dX: {f}", f == inputs[0], *pair(["dX", ""], f)) for f in inputs]
    models += [(f"dW: {f}", f == weights[0], *pair(["", "dW"], None, f)) for f in weights]
    everything = ["", "dW", "dB"] if stem else ["dX", "dW", "dB"]
    models.append(("all outputs: the lowering's choice", True, *pair(everything)))
    return feeds, models


def _model(nodes, feeds, outputs, shapes=None):
    from onnx import TensorProto, helper

    def value(name):
        shape = (shapes or {}).get(name)
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    graph = helper.make_graph(
        nodes, "case", [value(n) for n in feeds], [value(o) for o in outputs if o]
    )
    imports = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports, ir_version=9)


def _pool_models(case):
    from onnx import helper

    from helpers.portable.lowering import lower_model

    shape, k, stride, pad = case
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    out = (shape[2] + 2 * pad - k) // stride + 1
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal(shape, dtype=np.float32),
        "dY": rng.standard_normal((*shape[:2], out, out), dtype=np.float32),
    }
    nodes = [
        helper.make_node("MaxPool", ["X"], ["Y", "I"], **attrs),
        helper.make_node("MaxPoolGrad", ["dY", "I"], ["dX"], **attrs),
    ]
    free = ["N", *shape[1:]]
    contrib = _model(nodes, feeds, ["dX"], {"X": free, "dX": free})
    return feeds, [("scatter_add (MaxPool forward in both)", True, contrib, lower_model(contrib))]


def _norm_models(case):
    from onnx import helper

    from helpers.portable.lowering import lower_model

    shape, axis = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    rows = x.reshape(-1, shape[-1]).astype(np.float64)
    kept = (*shape[:-1], 1)
    feeds = {
        "dY": rng.standard_normal(shape, dtype=np.float32),
        "X": x,
        "S": rng.standard_normal(shape[-1:], dtype=np.float32),
        "mean": rows.mean(axis=1).reshape(kept).astype(np.float32),
        "inv": (1 / np.sqrt(rows.var(axis=1) + 1e-5)).reshape(kept).astype(np.float32),
    }
    node = helper.make_node(
        "LayerNormalizationGrad", ["dY", "X", "S", "mean", "inv"], ["dX", "dS", "dB"],
        domain="com.microsoft", axis=axis, epsilon=1e-5,
    )  # fmt: skip
    contrib = _model([node], feeds, ["dX", "dS", "dB"])
    return feeds, [("flattened rows", True, contrib, lower_model(contrib))]


def cases():
    """Every ``(op, case, builder of its models)``."""
    for name, case in CONV_CASES.items():
        yield "ConvGrad", name, lambda case=case: _conv_models(case)
    for name, case in POOL_CASES.items():
        yield "MaxPoolGrad", name, lambda case=case: _pool_models(case)
    for name, case in NORM_CASES.items():
        yield "LayerNormalizationGrad", name, lambda case=case: _norm_models(case)


def _file_stem(op, case, formulation):
    text = f"{op}__{case}__{formulation}"
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def measure_training_runtime(save=None):
    """Rows timed on this process's onnxruntime (1.19.2, with the contrib kernels)."""
    rows = []
    for op, case, build in cases():
        feeds, models = build()
        contribs = [_session(c.SerializeToString()) for _, _, c, _ in models]
        lowered = [_session(low.SerializeToString()) for _, _, _, low in models]
        for (formulation, _, _, _), a, b in zip(models, contribs, lowered):
            for e, v in zip(a.run(None, feeds), b.run(None, feeds)):
                error = float(np.abs(e - v).max() / max(np.abs(e).max(), 1e-30))
                if error > 1e-5:
                    raise AssertionError(f"{op} {case} {formulation}: relative error {error}")
        times = best_times(contribs + lowered, feeds)
        for i, (formulation, chosen, _, low) in enumerate(models):
            contrib_us, lowered_us = times[i], times[len(models) + i]
            rows.append(
                dict(op=op, case=case, formulation=formulation, chosen=chosen,
                     contrib_us=contrib_us, lowered_us_119=lowered_us, lowered_us_131=None)
            )  # fmt: skip
            if save:
                stem = _file_stem(op, case, formulation)
                _write(os.path.join(save, stem + ".onnx"), low.SerializeToString())
                buffer = io.BytesIO()
                np.savez(buffer, **feeds)
                _write(os.path.join(save, stem + ".npz"), buffer.getvalue())
        print(f"{op} {case}: done", file=sys.stderr, flush=True)
    return rows


def measure_saved(folder):
    """``{file stem: best microseconds}`` of every lowered model saved in ``folder``, on the
    onnxruntime this process imports (numpy and onnxruntime only)."""
    timings = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".onnx"):
            continue
        stem = name[: -len(".onnx")]
        with open(os.path.join(folder, name), "rb") as f:
            session = _session(f.read())
        with np.load(os.path.join(folder, stem + ".npz")) as data:
            feeds = {k: data[k] for k in data.files}
        timings[stem] = best_times([session], feeds)[0]
    return timings


def _write(path, data):
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def _with_maintained(rows, save, python, site):
    env = dict(os.environ, PYTHONPATH=site)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [python, "-m", "benchmarks.studies.lowering_costs_conv", "--models", save],
        env=env, cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    print(f"maintained onnxruntime {result['version']}", file=sys.stderr)
    for row in rows:
        row["lowered_us_131"] = result["timings"][
            _file_stem(row["op"], row["case"], row["formulation"])
        ]
    return rows


def to_csv(rows):
    """The rows as CSV text, times rounded to the microsecond, ratios to 0.01."""
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        contrib, maintained = row["contrib_us"], row["lowered_us_131"]
        writer.writerow(
            dict(row, contrib_us=round(contrib), lowered_us_119=round(row["lowered_us_119"]),
                 lowered_us_131="" if maintained is None else round(maintained),
                 ratio=f"{row['lowered_us_119'] / contrib:.2f}",
                 ratio_131="" if maintained is None else f"{maintained / contrib:.2f}")
        )  # fmt: skip
    return out.getvalue()


def main(argv=None):
    """Command line: see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="CSV file of the rows (default: standard output)")
    parser.add_argument("--save", help="folder keeping the lowered models and their inputs")
    parser.add_argument("--models", help="time the lowered models saved in this folder only")
    parser.add_argument("--maintained-python", help="interpreter for the maintained onnxruntime")
    parser.add_argument("--maintained-path", help="folder where onnxruntime 1.31.1 is installed")
    args = parser.parse_args(argv)
    if args.models:
        import onnxruntime

        timings = measure_saved(args.models)
        print(json.dumps({"version": onnxruntime.__version__, "timings": timings}))
        return
    rows = measure_training_runtime(args.save)
    if args.maintained_python and args.save:
        rows = _with_maintained(rows, args.save, args.maintained_python, args.maintained_path)
    text = to_csv(rows)
    if args.out:
        _write(args.out, text.encode())
    else:
        sys.stdout.write(text)


if __name__ == "__main__":  # pragma: no cover
    main()
