"""Random small torch models: seed N always gives the same model, with source code that rebuilds it.

:func:`generate_model` draws an input (tabular, sequence, image or token
ids), a few blocks of :mod:`model_fuzz.layers` and a head (a regression of
one or more outputs, or a classification), with a numpy Generator seeded by
the seed. Each block is run on a batch as it is drawn, so that only blocks
torch accepts are kept and the shape of the next one is known. The model's
source defines ``Model`` and ``build()``, which returns the module (its
weights from ``torch.manual_seed(seed)``), the samples and the targets: a
failure prints it, and running it rebuilds the model exactly.
"""
import dataclasses
import textwrap
import warnings

import numpy as np
import torch
from torch import nn

from .layers import draw_block, pick

#: At most this many weights, and this many values per sample before the head.
MAX_WEIGHTS = 4000
MAX_FEATURES = 300
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
    """

    seed: int
    source: str
    loss: str
    batch_size: int
    names: tuple
    dropout: bool

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
        length, vocabulary = int(rng.integers(3, 9)), int(rng.integers(6, 17))
        padding = pick(rng, [None, 0, vocabulary - 1])
        width = int(rng.integers(2, 7))
        constructor = f"nn.Embedding({vocabulary}, {width}, padding_idx={padding})"
        holder.add_module("l0", eval(constructor, {"nn": nn}))
        inits.append(f"self.l0 = {constructor}")
        x = holder.l0(torch.randint(0, vocabulary, (SMALLEST_BATCH, length)))
        return f"rng.integers(0, {vocabulary}, (n, {length}))", x, ["x = self.l0(x)"]
    shape = {
        "tabular": lambda: (int(rng.integers(3, 11)),),
        "sequence": lambda: (int(rng.integers(1, 5)), int(rng.integers(6, 17))),
        "image": lambda: (
            int(rng.integers(1, 4)), int(rng.integers(5, 10)), int(rng.integers(5, 10))
        ),
    }[kind]()
    x = torch.randn(SMALLEST_BATCH, *shape, requires_grad=True)
    return f"rng.standard_normal((n, {', '.join(map(str, shape))})).astype(np.float32)", x, []


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
    for _ in range(int(rng.integers(1, 6))):
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
    head = f"nn.Linear({int(np.prod(x.shape[1:]))}, {outputs})"
    name = f"l{len(holder._modules)}"
    holder.add_module(name, eval(head, {"nn": nn}))
    inits.append(f"self.{name} = {head}")
    lines.append(f"x = self.{name}(x)")
    n = int(rng.integers(16, 25))
    batch_size = pick(rng, [b for b in range(5, 11) if n % b == 0 or n % b >= SMALLEST_BATCH])
    targets = (f"rng.integers(0, {outputs}, n)" if classify
               else f"rng.standard_normal((n, {outputs})).astype(np.float32)")
    source = _SOURCE.format(
        inits=textwrap.indent("\n".join(inits), " " * 8),
        lines=textwrap.indent("\n".join(lines), " " * 8),
        seed=seed, n=n, samples=samples, targets=targets,
    )
    names = {type(m).__name__ for m in holder.modules()} - {"_Holder", "Sequential"}
    return GeneratedModel(
        seed=seed, source=source, loss="cross_entropy" if classify else "squared_error",
        batch_size=batch_size, names=tuple(sorted(names | set(holder._modules))),
        dropout=any(isinstance(m, nn.Dropout) for m in holder.modules()),
    )
