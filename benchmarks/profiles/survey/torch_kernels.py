"""The torch side of the kernel survey: ``torch.profiler`` on training steps, the machine's peak.

:func:`profile_torch` runs torch eager training steps of a module (forward,
loss, backward, plain SGD) under ``torch.profiler`` on the CPU, after a
warm-up, and returns one row per kernel call with its family
(:func:`benchmarks.profiles.survey.kernel_families.torch_family`), its self time
(the time of the operators it calls is theirs, so nothing counts twice) and
its floating-point work. :func:`torch_peak_gflops` times a large matrix
product, the machine's peak for the GFLOP/s of the tables. Both leave
torch's thread count as they found it. Run by
``benchmarks/profiles/survey/kernels_side_by_side.py``.
"""

import contextlib
import time

import numpy as np
import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from benchmarks.profiles.survey.kernel_families import torch_family
from benchmarks.profiles.survey.kernel_flops import torch_flops
from benchmarks.workloads.frameworks import LOSSES
from helpers.teaching.torch_reference import TORCH_LOSSES

#: Name of the record function around each profiled step.
STEP = "train_step"


@contextlib.contextmanager
def torch_threads(threads):
    """Run torch's operators on ``threads`` intra-op threads inside the block.

    Examples
    --------
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def torch_step(module, X, y, task, lr=1e-3):
    """One training step of ``module`` on the batch ``(X, y)``: a function of no argument.

    Plain SGD (``torch.optim.SGD`` without momentum), the gradients set to
    None before each step; the task's loss (:data:`benchmarks.workloads.frameworks.LOSSES`)
    as the torch loop computes it (:data:`helpers.teaching.torch_reference.TORCH_LOSSES`):
    softmax cross-entropy on class indices, or the squared error averaged over every element.

    Examples
    --------
    >>> X, y = np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32)
    >>> step = torch_step(torch.nn.Linear(3, 1), X, y, "regression")
    >>> step() > 0
    True
    """
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    loss_of = TORCH_LOSSES[LOSSES[task][0]]
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(module(Xt), yt)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step


def _names(event):
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    return names


def profile_torch(module, X, y, task, threads, steps=10, warmup=3, lr=1e-3):
    """Profile ``steps`` training steps of ``module`` after ``warmup``: one row per kernel call.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place.
    X, y : numpy.ndarray
        One batch.
    task : {'classification', 'regression'}
    threads : int
        ``torch.set_num_threads`` during the steps.
    steps, warmup : int
    lr : float

    Returns
    -------
    pandas.DataFrame
        ``step``, ``name``, ``family``, ``us`` (self CPU time), ``flops``:
        the ``aten::`` operators only (autograd's nodes and record functions
        are the fixed cost around kernels), with ``attrs['step_us']``, the
        median wall time of a step without the profiler, timed after it.

    Examples
    --------
    >>> from benchmarks.example_models import image_cnn_small
    >>> X, y = np.zeros((2, 1, 28, 28), np.float32), np.zeros(2, np.int64)
    >>> kernels = profile_torch(image_cnn_small(), X, y, "classification", 1, steps=1, warmup=1)
    >>> sorted(set(kernels["family"]))[:3]
    ['conv gradients (input+weight)', 'elementwise, activations, loss', 'forward convolution']
    >>> int(kernels["step"].max()), kernels.attrs["step_us"] > 0
    (0, True)
    """
    step = torch_step(module, X, y, task, lr)
    with torch_threads(threads):
        for _ in range(warmup):
            step()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
            for _ in range(steps):
                with record_function(STEP):
                    step()
        walls = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            walls.append(time.perf_counter() - start)
    events = profiler.events()
    starts = sorted(e.time_range.start for e in events if e.name == STEP)
    rows = []
    for event in events:
        family = torch_family(_names(event))
        if family is None:
            continue
        arguments = getattr(event, "concrete_inputs", None) or [None] * len(event.input_shapes)
        rows.append(
            {
                "step": int(np.searchsorted(starts, event.time_range.start, side="right")) - 1,
                "name": event.name,
                "family": family,
                "us": event.self_cpu_time_total,
                "flops": torch_flops(event.name, event.input_shapes, arguments),
            }
        )
    kernels = pd.DataFrame(rows, columns=["step", "name", "family", "us", "flops"])
    kernels.attrs["step_us"] = float(np.median(walls)) * 1e6
    return kernels


def torch_peak_gflops(threads, n=2048, repeat=10):
    """GFLOP/s of torch's float32 ``n x n`` product on ``threads`` threads, best of ``repeat``.

    Examples
    --------
    >>> torch_peak_gflops(1, n=64, repeat=2) > 0
    True
    """
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    with torch_threads(threads):
        torch.mm(a, b)
        for _ in range(repeat):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9
