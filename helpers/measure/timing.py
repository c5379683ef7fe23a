"""Time training code as the project's benchmarks do, from a notebook or a script.

Machines are shared and noisy: compare functions measured side by side, in
turns, and keep the fastest of several runs. :func:`marginal_step_cost`
gives the cost of one training step free of what a fit pays once (graphs,
sessions, artifacts): the fit of more epochs minus the fit of fewer, over the
extra steps.
"""

import statistics
import time

import numpy as np

from helpers.measure.conditions import timing_caveat


def measure(function, repeat=5, number=None, min_time=0.05):
    """Time ``function()`` and return seconds per call, as the median of ``repeat`` runs.

    Parameters
    ----------
    function : callable
        Called without arguments.
    repeat : int
        Number of timed runs; the median resists the noise of a shared machine.
    number : int, optional
        Calls per run; by default, enough calls for a run to last ``min_time``.
    min_time : float
        Seconds a run lasts at least when ``number`` is None.

    Returns
    -------
    dict
        ``median``, ``min`` and ``max`` seconds per call, ``number`` and ``repeat``.

    Examples
    --------
    >>> result = measure(lambda: sorted(range(100)), repeat=3, min_time=0.01)
    >>> sorted(result), result["repeat"]
    (['max', 'median', 'min', 'number', 'repeat'], 3)
    >>> bool(0 < result["min"] <= result["median"] <= result["max"])
    True
    """
    function()  # warm up: first-call allocations, lazy initializations
    if number is None:
        number, elapsed = 1, 0.0
        while True:
            start = time.perf_counter()
            for _ in range(number):
                function()
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
            number *= 2 if elapsed == 0 else max(2, int(min_time / elapsed * 1.2))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function()
        times.append((time.perf_counter() - start) / number)
    return {
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "number": number,
        "repeat": repeat,
    }


def _summary(times, number):
    return {
        "median": float(np.median(times)),
        "min": float(min(times)),
        "max": float(max(times)),
        "number": number,
        "repeat": len(times),
    }


def fit_times(prepare, fit, repeat=3):
    """Time ``fit()`` ``repeat`` times, each after an untimed ``prepare()``.

    ``prepare`` puts the estimator back to its starting weights, so that
    every timed fit does the same work.

    Parameters
    ----------
    prepare, fit : callable
        Called without arguments; only ``fit`` is timed.
    repeat : int
        Number of timed fits.

    Returns
    -------
    dict
        ``median``, ``min``, ``max`` seconds, ``number`` (1), ``repeat``.

    Examples
    --------
    >>> calls = []
    >>> result = fit_times(lambda: calls.append("prepare"), lambda: calls.append("fit"), repeat=2)
    >>> calls
    ['prepare', 'fit', 'prepare', 'fit']
    >>> sorted(result), result["number"], result["repeat"]
    (['max', 'median', 'min', 'number', 'repeat'], 1, 2)
    """
    return interleaved_fit_times({"fit": (prepare, fit)}, repeat)["fit"]


def interleaved_fit_times(fits, repeat=3):
    """Time several fits in turn, ``repeat`` rounds, each fit after its ``prepare()``.

    On a shared machine the load changes from second to second. Timing the
    frameworks in turn, round after round, spreads those changes over all
    of them instead of penalizing the one measured at the wrong moment.

    Parameters
    ----------
    fits : dict
        Name to ``(prepare, fit)``, two callables without arguments.
    repeat : int

    Returns
    -------
    dict
        Name to ``median``, ``min``, ``max`` seconds, ``number`` (1), ``repeat``.

    Examples
    --------
    >>> calls = []
    >>> fits = {name: (lambda n=name: calls.append(f"prepare {n}"),
    ...                lambda n=name: calls.append(f"fit {n}")) for name in ("a", "b")}
    >>> result = interleaved_fit_times(fits, repeat=2)
    >>> calls  # in turn, round after round
    ['prepare a', 'fit a', 'prepare b', 'fit b', 'prepare a', 'fit a', 'prepare b', 'fit b']
    >>> sorted(result), result["a"]["repeat"]
    (['a', 'b'], 2)
    """
    times = {name: [] for name in fits}
    for _ in range(repeat):
        for name, (prepare, fit) in fits.items():
            prepare()
            start = time.perf_counter()
            fit()
            times[name].append(time.perf_counter() - start)
    return {name: _summary(values, 1) for name, values in times.items()}


def interleaved_measure(functions, repeat=5, min_time=0.05):
    """:func:`measure` for several functions, timed in turn.

    Each function is warmed up and calibrated by ``measure`` (enough calls
    for a run to last ``min_time``); then ``repeat`` rounds time one run of
    every function in turn, so that a burst of load from other processes
    falls on all of them.

    Parameters
    ----------
    functions : dict
        Name to a callable without arguments.
    repeat : int
    min_time : float

    Returns
    -------
    dict
        Name to ``median``, ``min``, ``max`` seconds per call, ``number`` of
        calls per run and ``repeat``.

    Examples
    --------
    >>> functions = {"sorted": lambda: sorted(range(100)), "sum": lambda: sum(range(100))}
    >>> result = interleaved_measure(functions, repeat=3, min_time=0.01)
    >>> sorted(result), sorted(result["sum"])
    (['sorted', 'sum'], ['max', 'median', 'min', 'number', 'repeat'])
    >>> bool(result["sum"]["min"] > 0), result["sum"]["repeat"]
    (True, 3)
    """

    numbers = {
        name: measure(function, repeat=1, min_time=min_time)["number"]
        for name, function in functions.items()
    }
    times = {name: [] for name in functions}
    for _ in range(repeat):
        for name, function in functions.items():
            number = numbers[name]
            start = time.perf_counter()
            for _ in range(number):
                function()
            times[name].append((time.perf_counter() - start) / number)
    return {name: _summary(values, numbers[name]) for name, values in times.items()}


def marginal_step_cost(
    fits, steps_per_epoch, e1=1, e2=4, repeats=3, clock=time.perf_counter, pause_s=0.2
):
    """The marginal cost of one training step: what each extra epoch costs, per step.

    Each fit is warmed up once (``fit(1)``), then ``repeats`` rounds time
    ``fit(e1)`` and ``fit(e2)`` of every framework in turn. With the fastest
    time of each, ``(t(e2) - t(e1)) / ((e2 - e1) * steps_per_epoch)`` is the
    cost of one step, free of what a fit pays once (building the graphs and
    sessions, generating artifacts); that fixed cost is ``t(e1)`` minus the
    ``e1`` epochs' steps. Each round also gives its own estimate of the
    step: their spread says how much the machine's noise moved the figure.

    Parameters
    ----------
    fits : dict
        Name to ``fit(epochs)``: a whole training of that many epochs.
    steps_per_epoch : int
    e1, e2 : int
        Epochs of the short and the long fit, ``e2 > e1``.
    repeats : int
        Rounds; the fastest time of each fit is kept.
    clock : callable
        Returns seconds (tests pass a fake one).
    pause_s : float
        Idle time before each timed fit: the thread pools of the framework
        timed before (OpenMP, OpenBLAS, onnxruntime) spin a while after their
        last task, and would take cores from the next one.

    Returns
    -------
    dict
        Name to ``step_s``, ``fixed_s``, ``steps_s`` (the estimate of each
        round), ``spread`` (the largest estimate over the smallest; ``inf``
        when a round gave none) and ``note``: ``''``, or why a figure is NaN.
        A figure is never negative: the step is NaN when the long fit was not
        slower than the short one (the machine's noise was larger than the
        extra epochs: time more epochs, or on a quieter machine), the set-up
        NaN when the estimate would be negative.

    Examples
    --------
    >>> now = [0.0]  # a fake clock, and a fit costing 2 s once plus 8 steps of 0.125 s per epoch
    >>> def fit(epochs):
    ...     now[0] += 2.0 + epochs * 8 * 0.125
    >>> cost = marginal_step_cost({"fake": fit}, steps_per_epoch=8, clock=lambda: now[0], pause_s=0)
    >>> (
    ...     cost["fake"]["step_s"],
    ...     cost["fake"]["fixed_s"],
    ...     cost["fake"]["spread"],
    ...     cost["fake"]["note"],
    ... )
    (0.125, 2.0, 1.0, '')
    """
    if not e2 > e1 >= 1:
        raise ValueError(f"Expected e2 > e1 >= 1, got e1={e1}, e2={e2}.")
    for fit in fits.values():
        fit(1)  # warm-up: caches, first-call allocations
    short = {name: [] for name in fits}
    long = {name: [] for name in fits}
    for _ in range(repeats):
        for name, fit in fits.items():
            for epochs, times in ((e1, short), (e2, long)):
                if pause_s:
                    time.sleep(pause_s)
                start = clock()
                fit(epochs)
                times[name].append(clock() - start)
    extra_steps = (e2 - e1) * steps_per_epoch
    return {
        name: _step_estimate(short[name], long[name], e1 * steps_per_epoch, extra_steps)
        for name in fits
    }


def _step_estimate(short, long, short_steps, extra_steps):
    """The step and set-up estimates of one fit from its short and long times (see
    :func:`marginal_step_cost`)."""
    rounds = [(b - a) / extra_steps for a, b in zip(short, long)]
    spread = max(rounds) / min(rounds) if min(rounds) > 0 else float("inf")
    a, b = min(short), min(long)
    if b <= a:  # the machine's noise exceeded the extra epochs' work: no honest figure
        note = (
            "not measurable: the longer fit was not slower than the shorter one (the machine's "
            "noise was larger)"
        )
        return {
            "step_s": float("nan"),
            "fixed_s": float("nan"),
            "steps_s": rounds,
            "spread": spread,
            "note": note,
        }
    step = (b - a) / extra_steps
    fixed, note = a - short_steps * step, ""
    if fixed < 0:
        fixed, note = (
            float("nan"),
            "set-up not measurable: its estimate was negative (the machine's noise was larger)",
        )
    return {"step_s": step, "fixed_s": fixed, "steps_s": rounds, "spread": spread, "note": note}


def timing_note(timing):
    """The caveat of a timing whose runs disagree (a busy machine), else ''.

    The words are :func:`helpers.measure.conditions.timing_caveat`'s, the one
    wording of a noisy timing, for the spread of ``timing``'s runs.

    Parameters
    ----------
    timing : dict
        With ``min`` and ``max`` seconds, as :func:`measure` returns it.

    Returns
    -------
    str
        ``''`` when ``max / min`` is at most
        :data:`helpers.measure.conditions.NOISY_SPREAD`, else the caveat giving the ratio.

    Examples
    --------
    >>> timing_note({"min": 1.0, "max": 1.5})
    ''
    >>> timing_note({"min": 1.0, "max": 3.0})
    'noisy: repeats spread 3.0x'
    """
    spread = timing["max"] / timing["min"] if timing["min"] > 0 else float("inf")
    return timing_caveat(spread)
