"""OrtTorchModule shared by threads: each backward pairs with its own forward, whatever the order.

Two threads interleave on one module in a forced order: thread A's forward
runs onnxruntime, thread B's forward runs onnxruntime, then A finishes its
forward and its backward, then B. Each thread's gradients must be torch's for
its own input, and the running statistics those of A's batch then B's.
"""

import copy
import threading

import onnxruntime
import pytest
import torch

from helpers.core.layers.running_statistics import BatchNormLayer
from helpers.forward_backward.torch_module import OrtTorchModule

WAIT_S = 60  # a step that never comes fails the test instead of hanging it


def _network(kind):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(5, 6)]
    if kind == "batch_norm":
        layers.append(torch.nn.BatchNorm1d(6))
    elif kind == "cumulative_batch_norm":  # momentum=None: the batch counter weighs each batch
        layers.append(torch.nn.BatchNorm1d(6, momentum=None))
    layers += [torch.nn.Tanh(), torch.nn.Linear(6, 2)]
    return torch.nn.Sequential(*layers)


def _batches(n):
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randn(8, 5, generator=generator), torch.randn(8, 2, generator=generator))
        for _ in range(n)
    ]


def _torch_gradients(reference, x, weight):
    """torch's gradients of ``(net(x) * weight).sum()``, parameters then input, in float64."""
    net = copy.deepcopy(reference).double().train()
    x = x.double().requires_grad_()
    loss = (net(x) * weight.double()).sum()
    return torch.autograd.grad(loss, [*net.parameters(), x])


def _ort_gradients(ort, x, weight):
    """The module's gradients of ``(ort(x) * weight).sum()``, parameters then input."""
    x = x.clone().requires_grad_()
    loss = (ort(x) * weight).sum()
    return torch.autograd.grad(loss, [*ort.parameters(), x])


def _assert_gradients(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-5)


class _PausingAgent:
    """The runner of the forward and backward passes (either backend's); marks the running
    thread after each forward run."""

    def __init__(self, agent, ran):
        self._agent, self._ran = agent, ran

    def forward(self, values):
        result = self._agent.forward(values)
        self._ran.forward = True
        return result

    def backward(self, output_gradients, state):
        return self._agent.backward(output_gradients, state)


def _run_interleaved(ort, batches, monkeypatch):
    """A's onnxruntime forward, B's, then A's module forward ends and A's backward runs, then B's.

    A thread pauses where the forward pass, onnxruntime's run done and its
    state kept, wraps its first output (the first ``OrtValue`` made after
    the run): the state of a forward in flight is then wherever the forward
    keeps it. Returns each thread's gradients and any exception a thread raised.
    """
    a_forwarded, b_forwarded, a_done = threading.Event(), threading.Event(), threading.Event()
    waited, ran = [], threading.local()

    def pause():
        if threading.current_thread().name == "A":  # A holds its forward open until B's has run
            a_forwarded.set()
            waited.append(b_forwarded.wait(WAIT_S))
        else:  # B holds its forward open until A's backward is done
            b_forwarded.set()
            waited.append(a_done.wait(WAIT_S))

    class PausingOrtValue(onnxruntime.OrtValue):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if getattr(ran, "forward", False):
                ran.forward = False
                pause()

    monkeypatch.setattr(onnxruntime, "OrtValue", PausingOrtValue)
    fn = ort.function("cpu", ["input"], training=True)
    fn.parent._agent = _PausingAgent(fn.parent._agent, ran)
    results, errors = {}, []

    def work(name, batch):
        try:
            if name == "B":
                waited.append(a_forwarded.wait(WAIT_S))
            results[name] = _ort_gradients(ort, *batch)
        except Exception as exc:  # reported by the test
            errors.append(exc)
        finally:
            if name == "A":
                a_done.set()

    threads = [
        threading.Thread(target=work, args=args, name=args[0]) for args in zip("AB", batches)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(waited), "a thread waited for a step that never came"
    return results, errors


@pytest.mark.parametrize("kind", ["mlp", "batch_norm", "cumulative_batch_norm"])
def test_interleaved_threads_pair_each_backward_with_its_own_forward(kind, monkeypatch):
    reference = _network(kind)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    batches = _batches(2)
    results, errors = _run_interleaved(ort, batches, monkeypatch)
    assert not errors, errors
    for name, batch in zip("AB", batches):
        _assert_gradients(results[name], _torch_gradients(reference, *batch))
    # the running statistics: A's batch blended first (its forward ended first), then B's
    with torch.no_grad():
        for x, _ in batches:
            reference(x)
    for (name, got), expected in zip(ort.module.named_buffers(), reference.buffers()):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("kind", ["mlp", "batch_norm"])
def test_one_thread_two_forwards_then_backwards_in_reverse_order(kind):
    reference = _network(kind)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    (xa, wa), (xb, wb) = _batches(2)
    xa, xb = xa.clone().requires_grad_(), xb.clone().requires_grad_()
    loss_a, loss_b = (ort(xa) * wa).sum(), (ort(xb) * wb).sum()
    parameters = list(ort.parameters())
    got_b = torch.autograd.grad(loss_b, [*parameters, xb])  # the second forward's backward first
    got_a = torch.autograd.grad(loss_a, [*parameters, xa])
    _assert_gradients(got_a, _torch_gradients(reference, xa.detach(), wa))
    _assert_gradients(got_b, _torch_gradients(reference, xb.detach(), wb))


def test_a_forward_without_autograd_between_a_forward_and_its_backward():
    """A training forward under no_grad (statistics only) keeps no state, takes no other's."""
    reference = _network("batch_norm")
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    (xa, wa), (xb, _) = _batches(2)
    xa = xa.clone().requires_grad_()
    loss = (ort(xa) * wa).sum()
    with torch.no_grad():  # a training forward without autograd: no state is left behind
        ort(xb)
    _assert_gradients(
        torch.autograd.grad(loss, [*ort.parameters(), xa]),
        _torch_gradients(reference, xa.detach(), wa),
    )
    assert ort.function("cpu").states_ == [] and ort.function("cpu", ["input"]).states_ == []


@pytest.mark.parametrize("kind", ["batch_norm", "cumulative_batch_norm"])
def test_running_statistics_updates_of_two_threads_apply_whole(kind, monkeypatch):
    """Thread B's training forward ends while thread A blends its batch statistics.

    A's blend waits for B's update to end, or half a second when B cannot
    start it (the module's lock): B's update must not land inside A's.
    """
    reference = _network(kind)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    (xa, _), (xb, _) = _batches(2)
    a_blending, b_updated = threading.Event(), threading.Event()
    blend, update = BatchNormLayer.blend, OrtTorchModule._update_statistics

    def slow_blend(self, *args, **kwargs):
        if threading.current_thread().name == "A":
            a_blending.set()
            b_updated.wait(0.5)
        blend(self, *args, **kwargs)

    def signalled_update(self, *args):
        update(self, *args)
        if threading.current_thread().name == "B":
            b_updated.set()

    monkeypatch.setattr(BatchNormLayer, "blend", slow_blend)
    monkeypatch.setattr(OrtTorchModule, "_update_statistics", signalled_update)
    errors = []

    def work(x, after=None):
        try:
            if after is not None:
                assert after.wait(WAIT_S)
            with torch.no_grad():
                ort(x)
        except Exception as exc:  # reported by the test
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(xa,), name="A"),
        threading.Thread(target=work, args=(xb, a_blending), name="B"),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    with torch.no_grad():  # A's batch, then B's
        reference(xa)
        reference(xb)
    for (name, got), expected in zip(ort.module.named_buffers(), reference.buffers()):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, msg=name)
