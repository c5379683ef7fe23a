"""The long fuzzer run: each model in a child process with a time limit, a table, a report.

A child process trains a few models, each in the paths of :mod:`model_fuzz.paths`, and
prints one JSON line per model and path as soon as it is done, so that when it dies
(a C++ abort) or runs past its time limit, the path it was in is a ``crash``
or a ``hang``, the ones before keep their outcomes, and the ones after it run
in a new child. Each child leads a process group of its own, which holds the process
of the maintained environment it starts (:mod:`model_fuzz.maintained`): a hang ends both.
``python -m model_fuzz --seeds 0-499`` (``make fuzz``) runs the seeds on two workers,
prints a table of outcomes per path and the failures, writes the report and exits 1 on
any failure.
"""

import collections
import concurrent.futures
import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading

from .paths import PASSING, PATHS, TRAINING_PACKAGE_PATHS, Outcome, runnable_paths

#: Seconds a path may run in a child process before it counts as a hang.
PATH_TIME_LIMIT = 60
#: Seeds one child process runs in turn (starting one, with torch and onnxruntime, takes seconds).
SEEDS_PER_CHILD = 10
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_seeds(text):
    """Seeds from ``'0-9,20,30-31'`` (ranges include both ends).

    Examples
    --------
    >>> parse_seeds("0-2,7,10-11")
    [0, 1, 2, 7, 10, 11]
    """
    seeds = []
    for part in text.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds


def child_command(tasks):
    """The command that runs ``tasks``, ``(seed, path)`` pairs, in a child: one JSON line each."""
    listed = ",".join(f"{seed}/{path}" for seed, path in tasks)
    return [sys.executable, "-m", "model_fuzz", "--child", listed]


def run_child(tasks):
    """The child's work: each task's outcome as a JSON line on stdout, flushed at once."""
    import torch

    from .grammar import generate_model
    from .paths import run_path

    torch.set_num_threads(1)
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the exporter or onnxruntime print goes to stderr, not among the results
    models = {}
    for seed, path in tasks:
        model = models.setdefault(seed, generate_model(seed))
        print(json.dumps(dataclasses.asdict(run_path(model, path))), file=results, flush=True)


def _child_environment():
    environment = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    roots = [_TESTS, os.path.dirname(_TESTS), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(r for r in roots if r)
    return environment


def _read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_tasks(tasks, time_limit=PATH_TIME_LIMIT, command=child_command):
    """The :class:`~model_fuzz.paths.Outcome` of each ``(seed, path)`` task, crashes included.

    One child process runs the tasks in order; when it dies or a task runs past
    ``time_limit`` seconds, that task is a ``crash`` or a ``hang`` and a new
    child takes the tasks after it. A hang kills the child's process group: the
    processes it started too.

    Parameters
    ----------
    tasks : sequence of (int, str)
    time_limit : float
        Seconds a task may take.
    command : callable
        ``command(tasks)``: the child's command line (tests give another).

    Examples
    --------
    >>> import sys
    >>> def dies(tasks):
    ...     return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    >>> [o.kind for o in run_tasks([(3, "whole"), (3, "torch_module")], command=dies)]
    ['crash', 'crash']
    """
    outcomes, remaining = [], list(tasks)
    while remaining:
        with tempfile.TemporaryFile("w+") as errors:
            child = subprocess.Popen(
                command(remaining),
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=_child_environment(),
                start_new_session=True,
            )
            lines = queue.Queue()
            threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
            kind = None
            while remaining:
                try:
                    line = lines.get(timeout=time_limit)
                except queue.Empty:
                    os.killpg(child.pid, signal.SIGKILL)
                    kind, detail = "hang", f"no outcome in {time_limit:g} s"
                    break
                if line is None:
                    child.wait()
                    errors.seek(0)
                    tail = re.sub(r"\x1b\[[0-9;]*m", "", errors.read()).strip().splitlines()[-3:]
                    kind = "crash"
                    ended = f"the child process ended with code {child.returncode}"
                    detail = "\n".join([ended, *tail])
                    break
                if line.startswith("{"):
                    outcomes.append(Outcome(**json.loads(line)))
                    remaining.pop(0)
            child.wait()
        if kind:
            seed, path = remaining.pop(0)
            outcomes.append(Outcome(seed, path, kind, detail))
    return outcomes


def failure_signature(outcome):
    """The kind of a failure, without its numbers and node names: failures of one cause share it.

    Examples
    --------
    >>> failure_signature(Outcome(1, "whole", "raw error", "Fail: node '/l3/Conv' 12 != 7"))
    "raw error: Fail: node '/#/Conv' # != #"
    """
    detail = outcome.detail.splitlines()[0] if outcome.detail else ""
    detail = re.sub(r"\S*/onnxruntime_src/\S+ .*?\)( const)? ", "", detail)  # the C++ function
    detail = re.sub(r"\bl\d+\b", "#", detail)
    detail = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", detail)
    return f"{outcome.kind}: {detail[:160]}"


def summary_table(outcomes):
    """Counts of each outcome (rows) in each path run (columns), as fixed-width text.

    Examples
    --------
    >>> print(summary_table([Outcome(0, "whole", "trains"), Outcome(0, "torch_module", "crash"),
    ...                      Outcome(1, "whole_onnx", "refused")]))
    outcome  whole  torch_module  whole_onnx
    trains       1             0           0
    refused      0             0           1
    crash        0             1           0
    """
    counts = collections.Counter((o.kind, o.path) for o in outcomes)
    paths = [p for p in PATHS if any(o.path == p for o in outcomes)]
    kinds = [k for k in PASSING if any(o.kind == k for o in outcomes)]
    kinds += sorted({o.kind for o in outcomes} - set(PASSING))
    width = max([len("outcome")] + [len(k) for k in kinds]) + 2
    lines = ["outcome".ljust(width) + "  ".join(paths)]
    for kind in kinds:
        cells = (str(counts[kind, path]).rjust(len(path)) for path in paths)
        lines.append(kind.ljust(width) + "  ".join(cells))
    return "\n".join(lines)


def _by_signature(outcomes):
    """``- signature: seed/path, ...`` lines, one per kind of outcome."""
    kinds = collections.defaultdict(list)
    for outcome in outcomes:
        kinds[failure_signature(outcome)].append(f"{outcome.seed}/{outcome.path}")
    return [f"- {kind}: {', '.join(cases)}" for kind, cases in sorted(kinds.items())] or ["none"]


def report(outcomes, models):
    """The report: the table, each kind of failure and of refusal, each failing model's code.

    ``models`` maps each failing seed to its :class:`~model_fuzz.grammar.GeneratedModel`.
    """
    failures = [o for o in outcomes if o.failed]
    failing = sorted({o.seed for o in failures})
    parts = [
        f"# Model fuzzer: {len({o.seed for o in outcomes})} seeds, "
        f"{len(failures)} failures in {len(outcomes)} trainings",
        "",
        summary_table(outcomes),
        "",
        f"Failing seeds: {', '.join(map(str, failing)) or 'none'}",
        "",
        "## Kinds of failure (seed/path)",
        "",
        *_by_signature(failures),
        "",
        "## Refusals (seed/path)",
        "",
        *_by_signature([o for o in outcomes if o.kind == "refused"]),
        "",
        "## Failures",
        "",
    ]
    for seed in failing:
        model = models[seed]
        parts.append(f"### Seed {seed}  (rerun: make fuzz FUZZ_SEEDS={seed})")
        parts.append(
            f"SGD, learning rate {model.learning_rate:g}, loss {model.loss}, "
            f"OrtTorchModule's minibatches of {model.batch_size}"
        )
        parts += [f"- {o.path}: {o.kind}: {o.detail}" for o in failures if o.seed == seed]
        parts += ["", "```python", model.source.rstrip(), "```", ""]
    return "\n".join(parts)


def _arguments(argv):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m model_fuzz", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", default="0-499", help="seeds and ranges: 0-499, 3,17,500-599")
    parser.add_argument("--jobs", type=int, default=2, help="child processes at once")
    parser.add_argument(
        "--time-limit", type=float, default=PATH_TIME_LIMIT, help="seconds a path may take"
    )
    parser.add_argument(
        "--paths",
        default=",".join(runnable_paths()),
        help=f"the paths to run, comma-separated (default: all of {','.join(PATHS)}; without "
        f"onnxruntime-training, all but {','.join(TRAINING_PACKAGE_PATHS)})",
    )
    parser.add_argument("--report", help="the report's path (results/local/fuzz/seeds-SEEDS.md)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    """Run the fuzzer; 0 when every outcome is ``trains`` or ``refused``, else 1."""
    args = _arguments(argv)
    if args.child is not None:
        tasks = (task.split("/") for task in args.child.split(","))
        run_child([(int(seed), path) for seed, path in tasks])
        return 0
    seeds = parse_seeds(args.seeds)
    paths = [p for p in args.paths.split(",") if p]
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        raise SystemExit(f"error: unknown paths {unknown}: choose among {list(PATHS)}")
    unrunnable = [p for p in paths if p not in runnable_paths()]
    if unrunnable:
        raise SystemExit(
            f"error: the paths {unrunnable} need onnxruntime-training 1.19.2, which this "
            f"environment lacks: choose among {list(runnable_paths())}, or run the fuzzer in "
            "the training package's environment (make setup VARIANT=cpu)"
        )
    chunks = [seeds[i : i + SEEDS_PER_CHILD] for i in range(0, len(seeds), SEEDS_PER_CHILD)]
    outcomes = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(
                run_tasks, [(seed, path) for seed in chunk for path in paths], args.time_limit
            )
            for chunk in chunks
        ]
        for future in concurrent.futures.as_completed(futures):
            done = future.result()
            outcomes.extend(done)
            failed = sorted({o.seed for o in done if o.failed})
            count = len({o.seed for o in outcomes})
            print(f"[{count}/{len(seeds)} seeds] failing: {failed}", flush=True)
    outcomes.sort(key=lambda o: (o.seed, PATHS.index(o.path)))
    from .grammar import generate_model

    failing = sorted({o.seed for o in outcomes if o.failed})
    text = report(outcomes, {seed: generate_model(seed) for seed in failing})
    path = args.report or os.path.join(
        os.path.dirname(_TESTS),
        "results",
        "local",
        "fuzz",
        f"seeds-{args.seeds.replace(',', '_')}"
        + ("" if set(paths) == set(runnable_paths()) else f"-{'_'.join(paths)}")
        + ".md",
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as stream:
        stream.write(text + "\n")
    print("\n" + text.split("\n## Failures")[0].rstrip())
    print(f"\nreport: {path}")
    return 1 if failing else 0
