"""Which kernels a training step spends its time in, for every model the project trains.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/survey/kernel_survey.py \\
        [--threads 2] [--size small large] [--only zoo]

For each configuration (model, loss, update rule) and each training API that
offers it, one epoch is fitted ``--repeat`` times with onnxruntime's profiler
on (:func:`helpers.measure.profiling.profile_training`), each kernel keeping its best
time; the script prints the top kernels of the step, then a summary: the top
kernel, the gradient kernels (operator types ending in ``Grad``) with their
shares, the session overhead and the *suspects*, kernels other than matrix
products and convolutions that take more than 10% of the step, with what
is known of their cause. The summary is written to its section of
``results/kernel_survey.md`` (:func:`write_section`).

The configurations, their sizes (``small``: the notebooks'; ``large``: a
500-500 network, batches of 1000 and the zoo's large models) and their
reference rows (``fast_gradients=False``) are those of
:func:`benchmarks.profiles.survey.profiled_models.configurations`.
``--only`` keeps the configurations whose label contains one of its words.
The same steps profiled in torch, family by family beside onnxruntime's:
``benchmarks/profiles/survey/kernels_side_by_side.py``.
"""

import argparse
import os
import sys
import time
import warnings

import pandas as pd

from benchmarks.profiles.ab_timing import busy_note, wait_until_quiet
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.profiled_models import SIZES, ZOO_BATCH, configurations
from benchmarks.profiles.survey.suspects import known_causes
from helpers.core.machine.runtime_output import quiet_runtime_logs
from helpers.measure.profiling import profile_training

#: Operator types that are matrix products or convolutions: never suspects.
MATRIX_PRODUCTS = {"Gemm", "MatMul", "FusedGemm", "FusedMatMul", "Conv", "FusedConv", "ConvGrad"}
#: Share of the step (%) above which another kernel is a suspect.
SUSPECT_SHARE = 10.0
#: Rows and columns of the per-configuration tables.
TOP = 8
KERNEL_COLUMNS = ["session", "op_type", "calls per step", "µs per step", "share of step (%)"]


def profile_best_of(optimizer, X, y, repeat):
    """Profile one epoch ``repeat`` times; keep each kernel's fastest time per step.

    On a shared machine a kernel preempted once takes milliseconds instead of
    microseconds: the minimum over the runs drops such outliers.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`helpers.measure.profiling.profile_training`'s table,
        sorted by time, with ``attrs['n_steps']``.
    """
    tables = [profile_training(optimizer, X, y) for _ in range(repeat)]
    best = (
        pd.concat(tables)
        .groupby(["session", "op_type"], as_index=False)
        .agg({"calls per step": "max", "µs per step": "min"})
    )
    best["share of step (%)"] = 100 * best["µs per step"] / best["µs per step"].sum()
    best = best.sort_values("µs per step", ascending=False, ignore_index=True)
    best.attrs["n_steps"] = tables[0].attrs["n_steps"]
    return best


def _gradient_kernels(table, top=3):
    """The ``top`` gradient kernels (operator types ending in ``Grad``) of ``table`` with their
    shares."""
    grads = (
        table[table["op_type"].str.endswith("Grad")].groupby("op_type")["share of step (%)"].sum()
    )
    return (
        ", ".join(
            f"{op} {share:.1f}"
            for op, share in grads.sort_values(ascending=False).head(top).items()
        )
        or "-"
    )


def summarize(table):
    """Top kernel, gradient kernels, overhead and suspects of a :func:`profile_training` table.

    Returns
    -------
    dict
        ``profiled µs/step`` (all sessions, their overhead included), ``top
        kernel`` (operator type and session), its ``share (%)``, ``gradient
        kernels (%)`` (the three largest), ``*Grad share (%)`` (all of them),
        ``overhead (%)`` (the run time of the sessions that no kernel
        accounts for) and ``suspect``: each suspect with its share, then
        calls per step × microseconds per call (one to three microseconds a
        call is the fixed cost of calling a kernel, not a slow one).
        ``suspects`` lists them as ``(session, op_type)``.

    Examples
    --------
    >>> table = pd.DataFrame(
    ...     {
    ...         "session": ["model (forward + backward)"] * 3 + ["weight update"],
    ...         "op_type": ["Gemm", "GatherGrad", "(overhead)", "Sub"],
    ...         "calls per step": [2.0, 1.0, 1.0, 2.0],
    ...         "µs per step": [50.0, 30.0, 15.0, 5.0],
    ...         "share of step (%)": [50.0, 30.0, 15.0, 5.0],
    ...     }
    ... )
    >>> row = summarize(table)
    >>> row["top kernel"], row["gradient kernels (%)"], row["overhead (%)"], row["suspect"]
    ('Gemm (model)', 'GatherGrad 30.0', '15.0', 'GatherGrad 30.0% (1 × 30 µs)')
    """
    kernels = table[table["op_type"] != "(overhead)"]
    top = kernels.iloc[0]
    share = table["share of step (%)"]
    others = kernels[~kernels["op_type"].isin(MATRIX_PRODUCTS)]
    suspects = others[others["share of step (%)"] > SUSPECT_SHARE]
    return {
        "profiled µs/step": f"{table['µs per step'].sum():.0f}",
        "top kernel": f"{top['op_type']} ({top['session'].split(' ')[0]})",
        "share (%)": f"{top['share of step (%)']:.1f}",
        "gradient kernels (%)": _gradient_kernels(table),
        "*Grad share (%)": f"{share[table['op_type'].str.endswith('Grad')].sum():.1f}",
        "overhead (%)": f"{share[table['op_type'] == '(overhead)'].sum():.1f}",
        "suspect": ", ".join(
            f"{r['op_type']} {r['share of step (%)']:.1f}% "
            f"({r['calls per step']:g} × {r['µs per step'] / r['calls per step']:.0f} µs)"
            for _, r in suspects.iterrows()
        )
        or "-",
        "suspects": [(r["session"], r["op_type"]) for _, r in suspects.iterrows()],
    }


def survey(size_name, threads, repeat, only=()):
    """Profile the configurations of one size, print their tables, return the summary rows.

    Each configuration first waits (30 s at most) for the other jobs to
    leave the processors idle; the rows keep how busy they were (``busy``).
    """
    rows = []
    for label, api, optimizer, X, y in configurations(size_name, threads, only):
        busy = wait_until_quiet(timeout_s=30)
        table = profile_best_of(optimizer, X, y, repeat)
        print(
            f"\n### {label}, {api} ({size_name}, {table.attrs['n_steps']} steps, best of {repeat})"
        )
        print("\n" + markdown(table.head(TOP).round(1).to_dict("records"), KERNEL_COLUMNS))
        rows.append(
            {
                "size": size_name,
                "configuration": label,
                "API": api,
                **summarize(table),
                "busy": busy,
            }
        )
    return rows


def main(argv=None):
    """Run the survey and write its section of ``results/kernel_survey.md``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads of the sessions")
    parser.add_argument(
        "--size",
        nargs="+",
        choices=sorted(SIZES),
        default=["small", "large"],
        help="small: the notebooks' sizes; large: hidden 500, batch 1000 (default: both)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="keep the configurations whose label contains one of these words (e.g. zoo, MLP)",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="profiled epochs; each kernel keeps its best"
    )
    parser.add_argument(
        "--output",
        default=os.path.join("results", "kernel_survey.md"),
        help="markdown file of the summary",
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    quiet_runtime_logs()
    warnings.simplefilter("ignore")  # one epoch of training: convergence warnings
    started = time.perf_counter()
    load = os.getloadavg()[0]
    rows = [
        row
        for size_name in args.size
        for row in survey(size_name, args.threads, args.repeat, args.only)
    ]
    columns = [
        "size",
        "configuration",
        "API",
        "profiled µs/step",
        "top kernel",
        "share (%)",
        "gradient kernels (%)",
        "*Grad share (%)",
        "overhead (%)",
        "suspect",
    ]
    summary = markdown(rows, columns)
    causes = known_causes(rows)
    busy = [row["busy"] for row in rows if row["busy"] is not None] or [None]
    print("\n## Summary\n\n" + summary + "\n\n" + causes)
    command = " ".join([".venv/bin/python", "benchmarks/profiles/survey/kernel_survey.py", *argv])
    sizes = "; ".join(
        f"{name}: {SIZES[name]['n_features']}-{SIZES[name]['hidden']}-1, batch "
        f"{SIZES[name]['batch']}, zoo batch {ZOO_BATCH}"
        for name in args.size
    )
    products = ", ".join(sorted(MATRIX_PRODUCTS))
    intro = (
        f"Made by `{command}` ({time.perf_counter() - started:.0f} s) on a machine with "
        f"{os.cpu_count()} hardware threads, load average {load:.1f} -> {os.getloadavg()[0]:.1f} "
        "during the run (other jobs kept the processors "
        f"{busy_note([min(busy), max(busy)]).replace(', ', ' to ')} busy before the "
        "configurations, each waiting up to 30 s for under 10%), intra-op threads per session: "
        f"{args.threads} ({sizes}); shares of the profiled step come from onnxruntime's profiler "
        f"(each kernel's best time, profiled epochs: {args.repeat}). A suspect is a kernel other "
        f"than a matrix product or a convolution ({products}) above {SUSPECT_SHARE:g}% of the "
        "step. The profiler adds about a microsecond to each kernel call: shares of small "
        "networks overstate their many tiny kernels."
    )
    write_section(
        args.output,
        "survey",
        f"## Where the steps spend their time\n\n{intro}\n\n{summary}\n\n"
        f"### The suspects\n\n{causes or 'None.'}",
    )


if __name__ == "__main__":
    main()
