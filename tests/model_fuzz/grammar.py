"""Random small torch models: seed N always gives the same model, with source code that rebuilds it.

:func:`generate_model` draws an input (tabular, sequence, image or token
ids), a few blocks of :mod:`model_fuzz.layers` and a head (a linear layer or
a small MLP; a regression of one or more outputs, or a classification), with
a numpy Generator seeded by the seed. Each block is run on a batch as it is
drawn, so that only blocks torch accepts are kept and the shape of the next
one is known. The model's source defines ``Model`` and ``build()``, which
returns the module (its weights from ``torch.manual_seed(seed)``), the
samples and the targets: a failure prints it, and running it rebuilds the
model exactly.
"""

import contextlib
import copy
import dataclasses
import functools
import textwrap
import warnings

import numpy as np
import torch
from torch import nn

from helpers.teaching.torch_reference import torch_fit

from .layers import draw_block, pick

#: At most this many weights, and this many values per sample before the head.
MAX_WEIGHTS = 4000
MAX_FEATURES = 300
#: The activations of a hidden layer in the head: common ones.
HEAD_ACTIVATIONS = ["nn.ReLU()", "nn.Tanh()", "nn.GELU()", "nn.SiLU()"]
#: How every path trains a model: SGD from this learning rate (smaller where torch's own
#: training diverges with it), full batches for the optimizers (each step's loss is compared)
#: and minibatches of ``GeneratedModel.batch_size`` for OrtTorchModule.
LEARNING_RATE = 0.02
OPTIMIZER_STEPS = 3
MODULE_EPOCHS = 2
#: The smallest batch a model sees (OrtTorchModule's last minibatch): blocks are tried on it.
SMALLEST_BATCH = 2

_SOURCE = '''\
import numpy as np
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{inits}

    def forward(self, x):
{lines}
        return x


def build():
    """Fuzzer model {seed}: the module, its samples and their targets."""
    n = {n}
    rng = np.random.default_rng({seed})
    X = {samples}
    y = {targets}
    torch.manual_seed({seed})
    return Model(), X, y
'''


@dataclasses.dataclass(frozen=True)
class GeneratedModel:
    """A model of the fuzzer and how it is trained.

    Attributes
    ----------
    seed : int
    source : str
        Python source defining ``Model`` and ``build()``.
    loss : {'squared_error', 'cross_entropy'}
    batch_size : int
        OrtTorchModule's minibatches (the optimizers train on full batches).
    names : tuple of str
        The torch classes and attribute names of its layers: a refusal names one of them.
    dropout : bool
        Whether it holds a Dropout: its training cannot be compared step by step.
    learning_rate : float
        SGD's learning rate: ``LEARNING_RATE``, or a quarter of it (or less) where torch's
        own training would diverge.
    """

    seed: int
    source: str
    loss: str
    batch_size: int
    names: tuple
    dropout: bool
    learning_rate: float = LEARNING_RATE

    def build(self):
        """The module, the samples and the targets, as the source builds them."""
        namespace = {"__name__": f"fuzz_model_{self.seed}"}
        exec(compile(self.source, f"<fuzz model {self.seed}>", "exec"), namespace)
        return namespace["build"]()


class _Holder(nn.Module):
    pass


def _try_block(holder, x, constructors, line):
    """Run a drawn block on ``x``; the output, or None when torch refuses it or it is too large."""
    names = [f"l{len(holder._modules) + i}" for i in range(len(constructors))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            modules = [eval(c, {"nn": nn, "torch": torch}) for c in constructors]
            trial = _Holder()
            for name, module in zip(names, modules):
                trial.add_module(name, module)
            scope = {"x": x, "self": trial, "torch": torch}
            exec(line.format(*names), scope)
            out = scope["x"]
            out.sum().backward()
            trial.eval()
            scope["x"] = x
            exec(line.format(*names), scope)
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None
    weights = sum(p.numel() for m in (holder, *modules) for p in m.parameters())
    too_large = out[0].numel() > MAX_FEATURES or weights > MAX_WEIGHTS - 200
    if out.dim() < 2 or out.dim() > 4 or too_large or any(size < 1 for size in out.shape):
        return None
    for name, module in zip(names, modules):
        holder.add_module(name, module)
    return out.detach().requires_grad_(x.requires_grad), names


def _stem(rng, holder, inits):
    """The input: samples' shape and source, the first tensor, and the lines an embedding adds."""
    kind = pick(rng, ["tabular", "sequence", "image", "ids"])
    if kind == "ids":
        length, vocabulary = int(rng.integers(3, 11)), int(rng.integers(6, 21))
        padding = pick(rng, [None, 0, vocabulary - 1])
        width = int(rng.integers(2, 9))
        constructor = f"nn.Embedding({vocabulary}, {width}, padding_idx={padding})"
        holder.add_module("l0", eval(constructor, {"nn": nn}))
        inits.append(f"self.l0 = {constructor}")
        x = holder.l0(torch.randint(0, vocabulary, (SMALLEST_BATCH, length)))
        return f"rng.integers(0, {vocabulary}, (n, {length}))", x, ["x = self.l0(x)"]
    shape = {
        "tabular": lambda: (int(rng.integers(3, 17)),),
        "sequence": lambda: (int(rng.integers(1, 7)), int(rng.integers(6, 21))),
        "image": lambda: (
            int(rng.integers(1, 5)),
            int(rng.integers(5, 13)),
            int(rng.integers(5, 13)),
        ),
    }[kind]()
    x = torch.randn(SMALLEST_BATCH, *shape, requires_grad=True)
    return f"rng.standard_normal((n, {', '.join(map(str, shape))})).astype(np.float32)", x, []


@contextlib.contextmanager
def one_thread():
    """torch on one thread meanwhile: on models this small, more threads only wait for each other.

    Examples
    --------
    >>> with one_thread():
    ...     torch.get_num_threads()
    1
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _steady(model):
    """``model`` with the largest learning rate, down from ``LEARNING_RATE`` by fours, at which
    torch's training gives finite losses and the full-batch loss grows less than tenfold."""
    module, X, y = model.build()
    for _ in range(4):
        rate = model.learning_rate
        _, steps = torch_fit(copy.deepcopy(module), X, y, model.loss, len(X), OPTIMIZER_STEPS, rate)
        _, minibatches = torch_fit(
            copy.deepcopy(module), X, y, model.loss, model.batch_size, MODULE_EPOCHS, rate
        )
        if np.isfinite(steps + minibatches).all() and steps[-1] < 10 * steps[0]:
            break
        model = dataclasses.replace(model, learning_rate=rate / 4)
    return model


@functools.lru_cache(maxsize=None)
def generate_model(seed):
    """The model of ``seed``: always the same for the same seed.

    Parameters
    ----------
    seed : int

    Returns
    -------
    GeneratedModel

    Examples
    --------
    >>> model = generate_model(3)
    >>> model.source == generate_model(3).source
    True
    >>> module, X, y = model.build()
    >>> module(torch.from_numpy(X)).shape[0] == len(X)
    True
    """
    rng = np.random.default_rng(seed)
    holder, inits = _Holder(), []
    samples, x, lines = _stem(rng, holder, inits)
    for _ in range(int(rng.integers(2, 6))):
        for _attempt in range(20):
            constructors, line = draw_block(rng, tuple(x.shape[1:]))
            tried = _try_block(holder, x, constructors, line)
            if tried is not None:
                x, names = tried
                inits.extend(f"self.{n} = {c}" for n, c in zip(names, constructors))
                lines.append(line.format(*names))
                break
    if x.dim() > 2:
        lines.append("x = x.flatten(1)")
    classify = bool(rng.random() < 0.35)
    outputs = int(rng.integers(2, 6)) if classify else pick(rng, [1, 1, 2, 3])
    features = int(np.prod(x.shape[1:]))
    head = [f"nn.Linear({features}, {outputs})"]
    if rng.random() < 0.5:  # a hidden layer: an MLP head
        hidden = int(rng.integers(8, 33))
        head = [
            f"nn.Linear({features}, {hidden})",
            pick(rng, HEAD_ACTIVATIONS),
            f"nn.Linear({hidden}, {outputs})",
        ]
    for constructor in head:
        name = f"l{len(holder._modules)}"
        holder.add_module(name, eval(constructor, {"nn": nn}))
        inits.append(f"self.{name} = {constructor}")
        lines.append(f"x = self.{name}(x)")
    n = int(rng.integers(16, 25))
    batch_size = pick(rng, [b for b in range(5, 11) if n % b == 0 or n % b >= SMALLEST_BATCH])
    targets = (
        f"rng.integers(0, {outputs}, n)"
        if classify
        else f"rng.standard_normal((n, {outputs})).astype(np.float32)"
    )
    source = _SOURCE.format(
        inits=textwrap.indent("\n".join(inits), " " * 8),
        lines=textwrap.indent("\n".join(lines), " " * 8),
        seed=seed,
        n=n,
        samples=samples,
        targets=targets,
    )
    names = {type(m).__name__ for m in holder.modules()} - {"_Holder", "Sequential"}
    with one_thread():
        return _steady(
            GeneratedModel(
                seed=seed,
                source=source,
                loss="cross_entropy" if classify else "squared_error",
                batch_size=batch_size,
                names=tuple(sorted(names | set(holder._modules))),
                dropout=any(isinstance(m, nn.Dropout) for m in holder.modules()),
            )
        )
