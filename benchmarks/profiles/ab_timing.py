"""Side-by-side timing of variants of a training step, interleaved, with the spread of the rounds.

The A/B scripts of this folder (``relu_masks.py``, ``gather_rewrite.py``)
compare variants of the graph a training step runs. Each round calls
:func:`helpers.measure.timing.marginal_step_cost` once on every variant,
in turn: the cost of one step is what the extra epochs of a longer fit
cost, so building graphs and sessions is left out. Several rounds give a
spread; the ratio of a variant to the baseline is taken within each round,
where both saw the same load. On a machine shared with other jobs, each
round first waits for the processors to be idle (:func:`wait_until_quiet`)
and records how busy they were.
"""

import argparse
import contextlib
import os
import statistics
import time
import warnings

from benchmarks.workloads import frameworks as fw
from helpers.core.machine.runtime_output import quiet_runtime_logs
from helpers.measure.timing import marginal_step_cost

WHOLE, FORWARD_BACKWARD = "whole-training", "forward/backward"
#: What the ``busy`` column of the tables means.
BUSY_NOTE = (
    "`busy`: how busy other jobs kept the processors just before each round (each round waits up "
    "to two minutes for them to fall under 10%)"
)


def parse_arguments(description, argv):
    """The options of the A/B scripts, parsed; the runtime's logs and the warnings of short fits
    silenced.

    Examples
    --------
    >>> args = parse_arguments("A/B", ["--threads", "2", "--rounds", "5"])
    >>> args.threads, args.rounds, args.repeats, args.output
    ([2], 5, 2, 'results/kernel_survey.md')
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="intra-op threads of the sessions"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of interleaved timings (the spread)"
    )
    parser.add_argument(
        "--repeats", type=int, default=2, help="fits of each length per round; the fastest counts"
    )
    parser.add_argument("--output", default=os.path.join("results", "kernel_survey.md"))
    args = parser.parse_args(argv)
    quiet_runtime_logs()
    warnings.simplefilter("ignore")
    return args


def conditions(script, argv, load):
    """The sentence saying how a script's figures were made: command, processors, load average.

    Examples
    --------
    >>> conditions("benchmarks/profiles/x.py", ["--rounds", "2"], 0.5).startswith(
    ...     "Made by `.venv/bin/python benchmarks/profiles/x.py --rounds 2` on a machine with")
    True
    """
    command = " ".join([".venv/bin/python", script, *argv])
    return (
        f"Made by `{command}` on a machine with {os.cpu_count()} hardware threads (load average "
        f"{load:.1f} -> {os.getloadavg()[0]:.1f} during the run)."
    )


def ort_makers(model, loss, **params):
    """``make()`` of each API's optimizer for a loss, by this package's labels.

    The benchmarks' optimizers (:func:`benchmarks.workloads.frameworks.ort_makers`), whose
    ``params`` it passes on.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> makers = ort_makers(mlp_onnx(3, hidden=(4,)), "squared_error", fast_gradients=False)
    >>> sorted(makers), makers[WHOLE]().fast_gradients
    (['forward/backward', 'whole-training'], False)
    """
    made = fw.ort_makers(model, loss, **params)
    return {WHOLE: made[fw.ORT_WHOLE], FORWARD_BACKWARD: made[fw.ORT_FORWARD_BACKWARD]}


def step_fits(
    model,
    X,
    y,
    batch_size,
    threads,
    loss="squared_error",
    fast_gradients=True,
    lr=1e-4,
    context=contextlib.nullcontext,
):
    """``fit(epochs)`` of both APIs for one model, as :func:`marginal_step_cost` takes them.

    Parameters
    ----------
    model : onnx.ModelProto
        The forward model.
    X, y : numpy.ndarray
    batch_size, threads : int
    loss : str
        ``add_loss_output``'s score name, also the forward/backward API's ``learning_loss``.
    fast_gradients : bool
    lr : float
        Learning rate of plain SGD.
    context : callable
        Returns the context manager each fit runs in (a variant of the
        library, say); the default changes nothing.

    Returns
    -------
    dict
        ``'whole-training'`` and ``'forward/backward'`` to a function of the number of epochs.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> X = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
    >>> fits = step_fits(mlp_onnx(3, hidden=(4,)), X, X[:, :1], batch_size=8, threads=1)
    >>> sorted(fits)
    ['forward/backward', 'whole-training']
    >>> fits["whole-training"](1)
    """
    makers = ort_makers(
        model,
        loss,
        learning_rate=lr,
        batch_size=batch_size,
        n_threads=threads,
        fast_gradients=fast_gradients,
        validation_every=0,
    )

    def fit_of(make):
        def fit(epochs):
            with context():
                make().set_params(max_iter=epochs).fit(X, y)

        return fit

    return {api: fit_of(make) for api, make in makers.items()}


def busy_fraction(window_s=0.5):
    """The fraction of the machine's processor time spent busy during the next ``window_s`` seconds.

    Read from ``/proc/stat`` while this process sleeps, so it measures the
    other jobs; None where ``/proc/stat`` does not exist.

    Examples
    --------
    >>> busy = busy_fraction(0.05)
    >>> busy is None or 0.0 <= busy <= 1.0
    True
    """

    def ticks():
        with open("/proc/stat", encoding="utf-8") as stream:
            values = [int(v) for v in stream.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # all, idle + iowait

    if not os.path.exists("/proc/stat"):
        return None
    total0, idle0 = ticks()
    time.sleep(window_s)
    total1, idle1 = ticks()
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_until_quiet(max_busy=0.1, timeout_s=120.0, window_s=0.5):
    """Sleep until the other jobs keep the processors at most ``max_busy`` busy, or ``timeout_s``
    passed.

    Returns
    -------
    float or None
        The last :func:`busy_fraction` seen.

    Examples
    --------
    >>> busy = wait_until_quiet(max_busy=1.0, window_s=0.05)
    >>> busy is None or busy <= 1.0
    True
    """
    deadline = time.monotonic() + timeout_s
    busy = busy_fraction(window_s)
    while busy is not None and busy > max_busy and time.monotonic() < deadline:
        busy = busy_fraction(window_s)
    return busy


def ab_rounds(fits, steps_per_epoch, rounds=3, repeats=2, e1=1, e2=4, max_busy=0.1):
    """Microseconds per step of every fit, one estimate per round.

    Parameters
    ----------
    fits : dict
        Name to ``fit(epochs)``, timed in turn within each round.
    steps_per_epoch : int
    rounds : int
        Calls of :func:`helpers.measure.timing.marginal_step_cost`.
    repeats, e1, e2 : int
        Passed to it: the fastest of ``repeats`` fits of ``e1`` and of ``e2`` epochs.
    max_busy : float
        Each round waits (two minutes at most) for the other jobs to keep
        the processors at most this busy (:func:`wait_until_quiet`).

    Returns
    -------
    estimates : dict
        Name to the list of the rounds' estimates (NaN where noise beat the extra epochs).
    busy : list
        How busy the other jobs kept the processors just before each round.

    Examples
    --------
    >>> # a 10 ms step: above a busy machine's noise
    >>> sleep = lambda epochs: time.sleep(0.01 * epochs)
    >>> estimates, busy = ab_rounds({"sleep": sleep}, 1, rounds=2, repeats=1, max_busy=1.0)
    >>> len(estimates["sleep"]), 5000 < min(estimates["sleep"]) < 20000, len(busy)
    (2, True, 2)
    """
    estimates, busy = {name: [] for name in fits}, []
    for _ in range(rounds):
        busy.append(wait_until_quiet(max_busy))
        costs = marginal_step_cost(fits, steps_per_epoch, e1=e1, e2=e2, repeats=repeats)
        for name, cost in costs.items():
            estimates[name].append(cost["step_s"] * 1e6)
    return estimates, busy


def _spread(values, digits):
    finite = [v for v in values if v == v]
    if not finite:
        return "noise", "-"
    return (
        f"{statistics.median(finite):.{digits}f}",
        f"{min(finite):.{digits}f}-{max(finite):.{digits}f}",
    )


def busy_note(busy):
    """How busy the other jobs kept the processors before the rounds, for a table cell.

    Examples
    --------
    >>> busy_note([0.02, 0.5, None])
    '2%, 50%, ?'
    """
    return ", ".join("?" if b is None else f"{100 * b:.0f}%" for b in busy)


def ab_rows(estimates, baseline, **common):
    """Table rows of :func:`ab_rounds`' estimates, with each variant's ratio to ``baseline``.

    Parameters
    ----------
    estimates : dict
        Name to per-round microseconds per step.
    baseline : str
        The name the ratios divide by, round by round.
    **common
        Columns repeated on every row (size, threads, API).

    Returns
    -------
    list of dict
        ``variant``, ``µs/step`` (median of the rounds), ``range``, ``ratio``
        to the baseline (median of the rounds' ratios) and ``ratio range``.

    Examples
    --------
    >>> rows = ab_rows({"old": [10.0, 12.0, 11.0], "new": [8.0, 9.0, 9.9]}, "old", API="whole")
    >>> rows[1]  # doctest: +NORMALIZE_WHITESPACE
    {'API': 'whole', 'variant': 'new', 'µs/step': '9', 'range': '8-10', 'ratio': '0.80',
     'ratio range': '0.75-0.90'}
    """
    base = estimates[baseline]
    rows = []
    for name, values in estimates.items():
        ratios = [v / b for v, b in zip(values, base)]
        (median, spread), (ratio, ratio_spread) = _spread(values, 0), _spread(ratios, 2)
        rows.append(
            {
                **common,
                "variant": name,
                "µs/step": median,
                "range": spread,
                "ratio": ratio,
                "ratio range": ratio_spread,
            }
        )
    return rows
