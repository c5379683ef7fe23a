"""Where a zoo model's portable step spends more time than the whole-training API's: profiles.

For each model (by default those whose portable step was slower than whole-training's in
``results/portable_zoo.csv``), one epoch of batches of 64 on 2 threads, plain SGD, under
onnxruntime's profiler, twice:

* the whole-training API (``OrtGradientOptimizer``, onnxruntime-training 1.19.2, this process):
  :func:`benchmarks.profiles.survey.ort_kernels.profile_ort`;
* its step model as exported (onnxruntime-training's gradients, their contrib operators lowered
  to standard ones), trained by :class:`helpers.portable.trainer.PortableTrainer` on the
  maintained onnxruntime (``.venv-maintained``: this module's ``profile`` command runs there).

Each operator type's kernel time is summed and divided by the steps profiled (the first three
left out). The profiler adds a little to every kernel; the two sides pay it alike. Run::

    python -m benchmarks.studies.step_profiles --out results [--models resnet_large ...]

writes ``step_profiles.md``.
"""

import argparse
import collections
import gc
import glob
import json
import os
import subprocess
import sys
import tempfile

from benchmarks.profiles.survey.ort_kernels import run_starts

#: Batch, threads, learning rate, batches profiled, steps left out at the start of each side.
BATCH, THREADS, LEARNING_RATE, STEPS, WARMUP = 64, 2, 1e-3, 12, 3
#: Operator types in a model's table: the largest differences.
TOP = 6


def op_times(trace_paths, warmup=WARMUP):
    """Operator type to ``[kernel microseconds, kernel calls]`` per step, over the runs of the
    traces after the first ``warmup``, and the steps counted: ``({op: [us, calls]}, steps)``.

    Examples
    --------
    >>> import tempfile
    >>> events = [{"cat": "Session", "name": "SequentialExecutor::Execute", "ts": t}
    ...           for t in (0, 10, 20)]
    >>> events += [{"cat": "Node", "name": "n_kernel_time", "ts": t + 1, "dur": 5,
    ...             "args": {"op_name": "Add"}} for t in (0, 10, 20)]
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
    ...     json.dump(events, file)
    >>> op_times([file.name], warmup=1)
    ({'Add': [5.0, 1.0]}, 2)
    """
    totals, calls, steps = collections.Counter(), collections.Counter(), 0
    for path in trace_paths:
        with open(path, encoding="utf-8") as file:
            events = json.load(file)
        starts = run_starts(events)[warmup:]
        if not starts:
            continue
        steps += len(starts)
        for event in events:
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                if event["ts"] >= starts[0]:
                    totals[event["args"]["op_name"]] += float(event["dur"])
                    calls[event["args"]["op_name"]] += 1
    return {op: [us / steps, calls[op] / steps] for op, us in totals.items()}, steps


def profile_portable(step_path, data_path, folder):
    """In the maintained environment: one epoch of the step under the profiler; prints the
    operator times (JSON)."""
    import numpy as np  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415

    from helpers.portable.trainer import PortableTrainer  # noqa: PLC0415

    data = np.load(data_path)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(folder, "portable")
    trainer = PortableTrainer(
        step_path, max_iter=1, batch_size=BATCH, random_state=0, session_options=options
    )
    trainer.fit(data["X"], data["y"])
    del trainer  # its sessions write their traces as they end
    gc.collect()
    print(json.dumps(op_times(glob.glob(os.path.join(folder, "portable*.json")))))


def profile_model(name, maintained_python):
    """``(whole-training op times, portable op times)`` of zoo model ``name``."""
    import numpy as np  # noqa: PLC0415

    from benchmarks.profiles.survey.ort_kernels import profile_ort  # noqa: PLC0415
    from benchmarks.profiles.survey.profiled_models import (  # noqa: PLC0415
        WHOLE,
        ort_makers,
        zoo_model,  # noqa: PLC0415
    )

    onx, X, y, loss = zoo_model(name, BATCH * STEPS)
    optimizer = ort_makers(
        onx, loss, optimizer="sgd", learning_rate=LEARNING_RATE, batch_size=BATCH,
        n_threads=THREADS,
    )[WHOLE]()  # fmt: skip
    kernels = profile_ort(optimizer, X, y, warmup=WARMUP)
    per_step = kernels.groupby("name").us.agg(["sum", "count"]) / kernels.step.nunique()
    whole = {op: [row["sum"], row["count"]] for op, row in per_step.iterrows()}
    with tempfile.TemporaryDirectory() as folder:
        step_path = os.path.join(folder, "step.onnx")
        optimizer.fit(X[:BATCH], y[:BATCH])
        optimizer.export_training_step(step_path)
        data_path = os.path.join(folder, "data.npz")
        np.savez(data_path, X=X, y=y)
        module = "benchmarks.studies.step_profiles"
        command = [maintained_python, "-m", module, "profile", step_path, data_path, folder]
        out = subprocess.run(command, capture_output=True, text=True, check=True)
    portable, _ = json.loads(out.stdout.strip().splitlines()[-1])
    return whole, portable


def model_table(name, whole, portable, top=TOP):
    """Markdown lines: the kernel time per step of each side, then the ``top`` operator types
    whose times differ most (``{op: [us, calls]}`` per step, each side).

    Examples
    --------
    >>> print("\\n".join(model_table("m", {"ConvGrad": [900.0, 2], "Conv": [400.0, 2]},
    ...                              {"Conv": [1500.0, 6], "ConvTranspose": [300.0, 1]}, top=2)))
    #### m
    <BLANKLINE>
    Kernels of a step: whole-training 1300 us in 4 calls, portable 1800 us in 7.
    <BLANKLINE>
    | operator | whole-training: us (calls) | portable: us (calls) |
    | --- | --- | --- |
    | Conv | 400 (2) | 1500 (6) |
    | ConvGrad | 900 (2) | 0 (0) |
    """
    none = [0.0, 0]

    def cell(times, op):
        us, calls = times.get(op, none)
        return f"{us:.0f} ({calls:.0f})"

    def total(times, index):
        return sum(value[index] for value in times.values())

    ops = sorted(
        set(whole) | set(portable),
        key=lambda op: -abs(portable.get(op, none)[0] - whole.get(op, none)[0]),
    )[:top]
    return [
        f"#### {name}",
        "",
        f"Kernels of a step: whole-training {total(whole, 0):.0f} us in {total(whole, 1):.0f} "
        f"calls, portable {total(portable, 0):.0f} us in {total(portable, 1):.0f}.",
        "",
        "| operator | whole-training: us (calls) | portable: us (calls) |",
        "| --- | --- | --- |",
        *(f"| {op} | {cell(whole, op)} | {cell(portable, op)} |" for op in ops),
    ]


def replaced_kernels(whole, portable, top=3):
    """``(fused, replacements)``: the operator types on which the whole-training step spends
    more than the portable one, and those on which it spends less, each with the difference
    per step (ms), largest first, at most ``top`` of each.

    Examples
    --------
    >>> replaced_kernels({"ConvGrad": [900.0, 2], "Conv": [400.0, 2]},
    ...                  {"Conv": [500.0, 3], "Slice": [300.0, 9], "Concat": [50.0, 2]})
    ([('ConvGrad', 0.9)], [('Slice', 0.3), ('Conv', 0.1), ('Concat', 0.05)])
    """
    none = [0.0, 0]
    gaps = {
        op: (portable.get(op, none)[0] - whole.get(op, none)[0]) / 1000
        for op in set(whole) | set(portable)
    }
    more = sorted(((op, gap) for op, gap in gaps.items() if gap > 0), key=lambda i: -i[1])
    less = sorted(((op, -gap) for op, gap in gaps.items() if gap < 0), key=lambda i: -i[1])
    return less[:top], more[:top]


def answer(profiles):
    """The page's first sentence: for each model, where the whole-training step spends more
    (its fused kernels) and where the portable step does (their standard forms).

    Examples
    --------
    >>> print(answer({"m": ({"ConvGrad": [900.0, 2]}, {"Slice": [300.0, 9]})}))
    Where the portable step is slower than whole-training's, onnxruntime-training's fused \
gradient kernels run as several standard operators (the largest differences a step): m: \
ConvGrad -0.9 ms, Slice +0.3 ms.
    """
    parts = []
    for name, (whole, portable) in profiles.items():
        fused, replacements = replaced_kernels(whole, portable)
        said = [f"{op} -{ms:.2g} ms" for op, ms in fused]
        said += [f"{op} +{ms:.2g} ms" for op, ms in replacements]
        parts.append(f"{name}: {', '.join(said)}")
    return (
        "Where the portable step is slower than whole-training's, onnxruntime-training's fused "
        "gradient kernels run as several standard operators (the largest differences a step): "
        + "; ".join(parts)
        + "."
    )


def slower_models(path):
    """The zoo models whose portable step was slower than whole-training's in ``path``
    (:func:`benchmarks.report.portable_section.slower_models`)."""
    import pandas as pd  # noqa: PLC0415

    from benchmarks.report import portable_section as ps  # noqa: PLC0415
    from benchmarks.workloads import frameworks as fw  # noqa: PLC0415

    zoo = ps.section_rows(pd.read_csv(path))
    return ps.slower_models(ps.ratios(zoo, group="model", reference=fw.ORT_WHOLE))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "profile":
        profile_portable(*argv[1:4])
        return 0
    from benchmarks.studies.portable_fits import maintained_python  # noqa: PLC0415
    from helpers.portable.atomic_files import write_atomic  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results")
    parser.add_argument("--models", nargs="+", help="default: the slower ones of portable_zoo.csv")
    parser.add_argument("--maintained-python", help="default: .venv-maintained/bin/python")
    args = parser.parse_args(argv)
    models = args.models or slower_models(os.path.join(args.out, "portable_zoo.csv"))
    python = maintained_python(args.maintained_python)
    from benchmarks.report.portable_section import _zoo_label  # noqa: PLC0415

    profiles = {}
    for name in models:
        profiles[_zoo_label(name)] = profile_model(name, python)
        print(name, flush=True)
    lines = [
        answer(profiles),
        "",
        "The kernel time of each operator type per step, one epoch of batches of "
        f"{BATCH} on {THREADS} threads under onnxruntime's profiler (whole-training on "
        "onnxruntime-training 1.19.2, the step model as exported, its contrib operators "
        "lowered, on the maintained onnxruntime); the operator types whose times differ most.",
        "",
    ]
    for name, (whole, portable) in profiles.items():
        lines += [*model_table(name, whole, portable), ""]
    lines.append(
        f"`python -m benchmarks.studies.step_profiles --out {args.out}` (one run: the times move "
        "from run to run, the profiler adds a little to every kernel)."
    )
    text = "\n".join(lines) + "\n"
    write_atomic(os.path.join(args.out, "step_profiles.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
