"""onnxruntime against torch, kernel family by kernel family, on the same training steps.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/survey/kernels_side_by_side.py [--threads 2] [--size large]
        [--only cnn] [--steps 10] [--rounds 3]

The defaults: 2 threads, the large models; ``--threads 1 2`` adds one
thread, ``--size small large`` the zoo's small models, ``--only`` keeps the
models whose name holds one of its words.

For every model of the zoo (:data:`benchmarks.example_models.ZOO`, the
models :func:`benchmarks.profiles.survey.profiled_models.zoo_model` builds, batches
of 64) and the MLP 500-500-1 at batches of 1000 (``large``), the same
training step (same weights, batch, threads, plain SGD, softmax
cross-entropy or mean squared error) is profiled on both sides, after a
warm-up: onnxruntime's whole-training API with its profiler
(:func:`benchmarks.profiles.survey.ort_kernels.profile_ort`), torch eager with ``torch.profiler``
(:func:`benchmarks.profiles.survey.torch_kernels.profile_torch`). Kernels fall into
the families of :mod:`benchmarks.profiles.survey.kernel_families`; each family's
time is the median over the profiled steps of its sum. The step itself is
timed without any profiler, both frameworks interleaved
(:func:`benchmarks.profiles.ab_timing.ab_rounds`): what the kernels leave of
the fastest round's step is the fixed cost around kernels. Convolutions and matrix products get
their GFLOP/s, against the machine's peak: the faster framework's 2048 x 2048
float32 matrix product (:func:`peaks`). It writes the section
``torch-side`` of ``results/kernel_survey.md``.
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import torch

from benchmarks import example_models
from benchmarks.profiles.ab_timing import (
    WHOLE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
    wait_until_quiet,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.kernel_families import COLUMNS, FAMILIES, family_table, side_by_side
from benchmarks.profiles.survey.ort_kernels import ort_peak_gflops, profile_ort
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, make_optimizer, zoo_model
from benchmarks.profiles.survey.torch_kernels import (
    profile_torch,
    torch_peak_gflops,
    torch_threads,
)
from benchmarks.workloads.frameworks import LOSSES
from benchmarks.workloads.models import torch_mlp
from benchmarks.workloads.your_model import torch_fit
from helpers.teaching.model_factories import mlp_onnx

#: The large MLP of the survey: features, hidden units, batch.
MLP = (500, 500, 1000)
#: Warm-up steps left out of each profile.
WARMUP = 3
#: Steps of an epoch in the interleaved timing of whole steps, at least and at most: as many
#: as take about ``EPOCH_US`` (a difference of epochs above the noise of a fit's set-up).
TIMED_STEPS, MAX_TIMED_STEPS, EPOCH_US = 8, 64, 100_000
#: Seconds each model waits at most for the other jobs to leave the processors idle.
QUIET_WAIT_S = 30
#: Seconds of pause between the two frameworks: the threads of the one before stop spinning.
PAUSE_S = 0.2
#: The names of the two steps timed side by side.
ORT_STEP, TORCH_STEP = "ORT whole-training", "torch eager"
#: A family's share (%) of either step above which the conclusions name it.
NOTABLE_SHARE = 5.0


def peaks(threads, before=None):
    """GFLOP/s of a 2048 x 2048 float32 product in each framework, and the peak (the larger).

    Parameters
    ----------
    threads : int
    before : dict, optional
        Figures measured before: each keeps the larger (a burst of the
        other jobs' work during one measure does not lower the peak).

    Examples
    --------
    >>> first = peaks(1)
    >>> sorted(first), peaks(1, before=first)["ORT"] >= first["ORT"]
    (['ORT', 'peak', 'torch'], True)
    """
    figures = {"ORT": ort_peak_gflops(threads), "torch": torch_peak_gflops(threads)}
    figures = {name: max(value, (before or {}).get(name, 0.0)) for name, value in figures.items()}
    return {**figures, "peak": max(figures.values())}


def cases(sizes, steps, only=()):
    """The models compared: ``(name, onx, make_module, X, y, task, batch)``.

    ``X`` holds ``steps`` batches. The zoo's models of the given sizes,
    batches of :data:`ZOO_BATCH`, and for ``large`` the ReLU MLP of :data:`MLP`.
    ``only`` keeps the names containing one of its words.

    Examples
    --------
    >>> [(name, X.shape, task, batch)
    ...  for name, _, _, X, _, task, batch in cases(["small"], 2, ["token"])]
    [('token_classifier_small', (128, 32), 'classification', 64)]
    """

    def kept(name):
        return not only or any(word.lower() in name.lower() for word in only)

    for name, (_, _, task) in example_models.ZOO.items():
        if name.endswith(tuple(f"_{size}" for size in sizes)) and kept(name):
            onx, X, y, _ = zoo_model(name, ZOO_BATCH * steps)

            def make_module(name=name):
                torch.manual_seed(0)  # zoo_model's weights
                return getattr(example_models, name)()

            yield name, onx, make_module, X, y, task, ZOO_BATCH
    features, hidden, batch = MLP
    name = f"mlp_{features}_{hidden}_1"
    if "large" in sizes and kept(name):
        onx = mlp_onnx(features, (hidden,), 1)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((batch * steps, features)).astype(np.float32)
        y = (X @ rng.standard_normal((features, 1)) / np.sqrt(features)).astype(np.float32)
        yield name, onx, lambda: torch_mlp(onx), X, y, "regression", batch


def compare(case, threads, steps, rounds):
    """Profile one model on both sides and time its step.

    Returns
    -------
    timing : list of dict
        :func:`benchmarks.profiles.ab_timing.ab_rows` of the whole steps
        (ORT whole-training against torch eager), or empty when ``rounds`` is 0: then the
        torch step is timed after its profile, the ORT one not (no fixed cost).
    tables : dict
        ``'ORT'`` and ``'torch'`` to their :func:`family_table`.
    """
    name, onx, make_module, X, y, task, batch = case
    lr = 1e-4 if name.startswith("mlp") else 1e-3
    if rounds:  # a timed run: let the other jobs' bursts pass
        wait_until_quiet(timeout_s=QUIET_WAIT_S)
    optimizer = make_optimizer(WHOLE, onx, LOSSES[task][0], "sgd", True, batch, lr, threads)
    profiled = slice(0, batch * (WARMUP + steps))
    ort_kernels = profile_ort(optimizer, X[profiled], y[profiled], WARMUP)
    time.sleep(PAUSE_S)
    torch_kernels = profile_torch(
        make_module(), X[:batch], y[:batch], task, threads, steps, WARMUP, lr
    )
    step_us = {"ORT": None, "torch": torch_kernels.attrs["step_us"]}
    timing = []
    if rounds:
        profiled_us = max(step_us["torch"], ort_kernels.groupby("step")["us"].sum().median())
        timed = int(np.clip(EPOCH_US / profiled_us, TIMED_STEPS, MAX_TIMED_STEPS))
        repeat = -(-batch * timed // len(X))  # the batches again, for as many steps
        data = [np.concatenate([a] * repeat)[: batch * timed] for a in (X, y)]
        fits = {
            ORT_STEP: step_fits(onx, *data, batch, threads, loss=LOSSES[task][0], lr=lr)[WHOLE],
            TORCH_STEP: torch_fit(make_module, *data, task, learning_rate=lr, batch_size=batch),
        }
        with torch_threads(threads):
            estimates, busy = ab_rounds(fits, timed, rounds=rounds, repeats=1, e2=4, max_busy=1.0)
        timing = ab_rows(estimates, TORCH_STEP, model=name, threads=threads, busy=busy_note(busy))
        for side, key in (("ORT", ORT_STEP), ("torch", TORCH_STEP)):  # the least disturbed round
            finite = [v for v in estimates[key] if not math.isnan(v)]
            step_us[side] = min(finite) if finite else step_us[side]
    tables = {
        side: family_table(kernels, step_us[side])
        for side, kernels in (("ORT", ort_kernels), ("torch", torch_kernels))
    }
    return timing, tables


def _entry(model, tables, family):
    """``(ORT - torch µs, text)`` of one family of one model; None under :data:`NOTABLE_SHARE`."""
    ort, torch_ = (tables[side].get(family, (0.0, 0))[0] for side in ("ORT", "torch"))
    shares = [
        100 * us / max(sum(u for u, _ in tables[side].values()), 1e-9)
        for us, side in ((ort, "ORT"), (torch_, "torch"))
    ]
    if max(shares) < NOTABLE_SHARE or max(ort, torch_) < 1:
        return None
    ratio = (
        "torch has none"
        if torch_ < 1
        else "onnxruntime has none"
        if ort < 1
        else f"{ort / torch_:.2f}x"
    )
    return ort - torch_, f"{model} ({ratio}, {ort - torch_:+.0f} µs/step)"


def conclusions(results):
    """One line per family: the models where onnxruntime loses (or wins) by the most.

    Parameters
    ----------
    results : dict
        Model name to the ``tables`` of :func:`compare`.

    Examples
    --------
    >>> tables = {"ORT": {"matrix products": (30.0, 0), "optimizer update": (1.0, 0)},
    ...           "torch": {"matrix products": (10.0, 0), "optimizer update": (9.0, 0)}}
    >>> print(conclusions({"m": tables}))
    - **matrix products**: onnxruntime slower in m (3.00x, +20 µs/step)
    - **optimizer update**: onnxruntime faster in m (0.11x, -8 µs/step)
    """
    lines = []
    for family in FAMILIES:
        entries = sorted(
            filter(None, (_entry(m, t, family) for m, t in results.items())),
            key=lambda e: -abs(e[0]),
        )
        parts = [
            f"onnxruntime {word} in " + ", ".join(text for gap, text in entries if keep(gap))
            for word, keep in (("slower", lambda gap: gap > 0), ("faster", lambda gap: gap <= 0))
            if any(keep(gap) for gap, _ in entries)
        ]
        if parts:
            lines.append(f"- **{family}**: " + "; ".join(parts))
    return "\n".join(lines)


def _options(argv):
    """The options of this script, with those of :func:`ab_timing.parse_arguments`."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--size", nargs="+", choices=["small", "large"], default=["large"])
    parser.add_argument("--only", nargs="+", default=[], help="models whose name has one of these")
    parser.add_argument("--steps", type=int, default=10, help="profiled steps after the warm-up")
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="threads of both")
    options, rest = parser.parse_known_args(argv)
    args = parse_arguments(__doc__.split("\n", 1)[0], rest)  # --rounds, --output
    for name in ("size", "only", "steps", "threads"):
        setattr(args, name, getattr(options, name))
    return args


def _intro(argv, load, seconds, args):
    return (
        f"{conditions('benchmarks/profiles/survey/kernels_side_by_side.py', argv, load)} It took "
        f"{seconds:.0f} s. Batches of {ZOO_BATCH} samples for the zoo, {MLP[2]} for the MLP, plain "
        "SGD; onnxruntime's whole-training API under its profiler, torch eager under "
        f"`torch.profiler` (self CPU time of the `aten::` operators), {WARMUP} warm-up steps, then "
        f"each family's median over {args.steps} steps. The step is the marginal cost of a step "
        "timed without profilers, ORT whole-training and torch eager interleaved on the same data "
        f"(the step lines give the median and range of {args.rounds} rounds, each the difference "
        f"of fits of 1 and 4 epochs of {TIMED_STEPS} to {MAX_TIMED_STEPS} steps); the fixed cost "
        "around kernels is the fastest round's step (the least disturbed) minus the "
        "kernels (never below 0: profiled kernels can add up to more than a step timed without "
        "profiler, most for small steps; the row `step` is then their sum). `ConvGrad` computes "
        "the input's and the weight's gradients in one kernel, as `aten::convolution_backward` "
        "does: one family on both sides; "
        "their GFLOP/s count both gradients (only the weight's for a first layer). ORT/torch "
        "above 1: onnxruntime slower. `busy`: how busy other jobs kept the processors before each "
        f"round (each model first waits up to {QUIET_WAIT_S} s for them to fall under 10%)."
    )


def _step_line(timing):
    line = "; ".join(f"{row['variant']} {row['µs/step']} µs ({row['range']})" for row in timing)
    ratio = next(
        (
            f"; ratio ORT/torch {row['ratio']} ({row['ratio range']})"
            for row in timing
            if row["variant"] == ORT_STEP
        ),
        "",
    )
    return f"Step, timed without profilers: {line or 'not timed'}{ratio}."


def main(argv=None):
    """Compare both frameworks; write the section ``torch-side`` of ``results/kernel_survey.md``."""
    argv = sys.argv[1:] if argv is None else argv
    args = _options(argv)
    load, started = os.getloadavg()[0], time.perf_counter()
    sections, timing_rows, results = [], [], {}
    for threads in args.threads:
        label, compared = f"{threads} thread{'s' * (threads > 1)}", []
        wait_until_quiet(timeout_s=QUIET_WAIT_S)
        first = peaks(threads)
        for case in cases(args.size, WARMUP + max(args.steps, TIMED_STEPS), args.only):
            compared.append((case[0], *compare(case, threads, args.steps, args.rounds)))
            print(case[0], label, _step_line(compared[-1][1]), flush=True)
        peak = peaks(threads, before=first)
        sections.append(
            f"### {label}\n\nA 2048 x 2048 float32 matrix product (the best of before "
            f"and after the models): onnxruntime {peak['ORT']:.0f} GFLOP/s, torch "
            f"{peak['torch']:.0f} GFLOP/s; the percentages are of {peak['peak']:.0f}."
        )
        for name, timing, tables in compared:
            results[f"{name}, {label}"] = tables
            timing_rows += timing
            rows = side_by_side(tables["ORT"], tables["torch"], peak["peak"])
            sections.append(
                f"#### {name}, {label}\n\n{_step_line(timing)}\n\n" + markdown(rows, COLUMNS)
            )
    steps_table = markdown(timing_rows, list(timing_rows[0])) if timing_rows else "Not timed."
    text = "\n\n".join(
        [
            "## onnxruntime against torch, kernel by kernel",
            _intro(argv, load, time.perf_counter() - started, args),
            *sections,
            "### Where onnxruntime loses, family by family",
            f"Families above {NOTABLE_SHARE:g}% of either step, the largest differences first.",
            conclusions(results),
            "### Whole steps, interleaved",
            steps_table,
        ]
    )
    write_section(args.output, "torch-side", text)


if __name__ == "__main__":
    main()
