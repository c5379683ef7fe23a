"""The conditions a timing ran under, and whether a ratio measured under them is a finding.

A ratio of two step times is a finding only when both were measured on a
quiet machine, in turns, with repeats that agree. This module says, in
words, when that is not so:

* :func:`machine_conditions`: the load on the machine (load average against
  its cores) and how much processor time this process got against the wall
  time, from a start to now;
* :func:`sharing`: whether other runs shared the cores (runs at once times
  their threads, against the cores);
* :func:`timing_caveat`: the caveat a ratio carries, or ``''``.

Examples
--------
>>> timing_caveat(spread=3.1)
'noisy: repeats spread 3.1x'
>>> timing_caveat(
...     spread=1.1, conditions={"busy": "load average 3.2 on 2 cores, this run used 2 threads"}
... )
'busy machine: load average 3.2 on 2 cores, this run used 2 threads'
>>> timing_caveat(spread=1.1)
''
"""

import math
import os
import time

#: Repeats whose slowest estimate exceeds the fastest by more than this are noisy.
NOISY_SPREAD = 2.0
#: Load beyond the run's own threads, per core, above which the machine was busy.
BUSY_EXTRA_LOAD = 0.5


def usable_cores():
    """The cores this process may run on.

    Examples
    --------
    >>> usable_cores() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class RunClock:
    """When a run started: wall time (``time.time()``) and this process's processor time.

    Parameters
    ----------
    wall, cpu : float, optional
        The start; now by default. ``RunClock(started, 0.0)`` counts the
        processor time from the process's start (a benchmark notebook's
        kernel runs one run).

    Examples
    --------
    >>> clock = RunClock()
    >>> sorted(machine_conditions(clock, threads=1))
    ['busy', 'cores', 'cpu_s', 'load_average', 'threads', 'wall_s']
    """

    def __init__(self, wall=None, cpu=None):
        self.wall = time.time() if wall is None else wall
        self.cpu = time.process_time() if cpu is None else cpu


def _load_average():
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this platform
        return float("nan")


def machine_conditions(clock, threads):
    """The load on the machine while a run used ``threads`` threads, from ``clock``'s start to now.

    Parameters
    ----------
    clock : RunClock
        Made when the run started.
    threads : int
        The threads the run's frameworks used.

    Returns
    -------
    dict
        ``load_average`` (one minute, now), ``cores``, ``threads``,
        ``wall_s`` and ``cpu_s`` (this process's processor time), and
        ``busy``: ``''``, or the sentence saying that other work ran on the
        machine (a load average beyond this run's threads).

    Examples
    --------
    >>> conditions = machine_conditions(RunClock(), threads=1)
    >>> conditions["cores"] >= 1, isinstance(conditions["busy"], str)
    (True, True)
    """
    load, cores = _load_average(), usable_cores()
    extra = load - min(threads, cores)
    busy = ""
    if not math.isnan(load) and extra > BUSY_EXTRA_LOAD * cores:
        busy = f"load average {load:.1f} on {cores} cores, this run used {threads} thread(s)"
    return {
        "load_average": load,
        "cores": cores,
        "threads": threads,
        "wall_s": time.time() - clock.wall,
        "cpu_s": time.process_time() - clock.cpu,
        "busy": busy,
    }


def sharing(jobs, threads, cores=None):
    """The sentence saying that runs shared the cores, or ``''``.

    Parameters
    ----------
    jobs : int
        Runs at once on the machine (``--jobs``, or the tasks a dask host
        runs at once).
    threads : int
        Threads of each run.
    cores : int, optional
        The machine's cores (this machine's by default).

    Examples
    --------
    >>> sharing(jobs=2, threads=2, cores=2)
    '2 runs at once, 2 threads each, on 2 cores: the runs shared the cores'
    >>> sharing(jobs=1, threads=2, cores=2)
    ''
    """
    cores = cores or usable_cores()
    if jobs > 1 and jobs * threads > cores:
        return (
            f"{jobs} runs at once, {threads} threads each, on {cores} cores: the runs shared the "
            "cores"
        )
    return ""


def timing_caveat(spread=1.0, conditions=None, shared="", note=""):
    """The caveat a timing carries, in words; ``''`` when it is a clean measurement.

    Parameters
    ----------
    spread : float
        The slowest repeat over the fastest (``inf`` when a repeat gave no
        estimate).
    conditions : dict, optional
        :func:`machine_conditions`.
    shared : str
        :func:`sharing`.
    note : str
        A caveat the measure itself gave (``'not measurable: ...'``), which
        comes first.

    Returns
    -------
    str
        The caveats, separated by ``'; '``.

    Examples
    --------
    >>> timing_caveat(spread=float("inf"), note="set-up not measurable: negative estimate")
    'set-up not measurable: negative estimate; noisy: a repeat gave no estimate'
    """
    caveats = [note] if note else []
    if math.isinf(spread):
        caveats.append("noisy: a repeat gave no estimate")
    elif spread > NOISY_SPREAD:
        caveats.append(f"noisy: repeats spread {spread:.1f}x")
    if shared:
        caveats.append(f"shared cores: {shared}")
    if conditions and conditions.get("busy"):
        caveats.append(f"busy machine: {conditions['busy']}")
    return "; ".join(caveats)
