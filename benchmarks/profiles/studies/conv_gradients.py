"""Convolutions as windows and products against ``ConvGrad``: exactness, then training steps.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/conv_gradients.py [--threads 1 2] [--rounds 2] \\
        [MODEL ...]

onnxruntime 1.19.2 computes the gradient of ``Conv`` with ``ConvGrad``,
which loops over the images of the batch with an ``im2col`` and small
matrix products for each. ``fast_gradients`` may write the convolution of
the training graph as windows (``Slice``) and one matrix product
(:mod:`helpers.core.rewrites.convolution_rewrites`), whose gradients are copies
and large products. The variants, per model (all but ``conv`` and ``rule``
rewrite every convolution the rewrite handles):

* ``conv``: the convolution rewrite off (``ConvGrad``), the reference;
* ``last``: windows in channels-last order, one product ``(rows, offsets x channels)``;
* ``first``: windows in channels-first order, products batched over the images
  (checked, not timed: see :data:`TIMED`);
* ``rule``: ``last`` where :func:`~helpers.core.rewrites.convolution_rewrites.measured_faster`
  says so (the library as it is), ``ConvGrad`` elsewhere.

The script first checks each variant on single convolutions (1-D, 2-D,
strided, dilated, depthwise) against torch in float64, then times training
steps of the zoo's CNNs (``benchmarks/example_models.py``) and of two
blocks built here, on 3 x 32 x 32 images (a ResNet-style block, a
MobileNetV2-style block with depthwise convolutions), batches of 64, plain
SGD, both APIs, interleaved (:mod:`benchmarks.profiles.ab_timing`). It
writes its section of ``results/kernel_survey.md`` (a section of its own
for a run on some of the models).
"""

import os
import sys
from unittest import mock

import numpy as np
import onnx
import torch
from torch import nn

from benchmarks.profiles.ab_timing import (
    BUSY_NOTE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, zoo_model
from helpers import OrtGradientForwardBackward, export_for_training, get_train_initializer
from helpers.core.rewrites import gradient_rewrites
from helpers.core.rewrites.convolution_rewrites import (
    LAYOUTS,
    convolutions_as_products,
    everywhere,
    measured_faster,
)

#: Variant name to the ``layout`` of the rewrite (None: the rewrite off).
VARIANTS = {"conv": None, **{layout: layout for layout in LAYOUTS}}
#: The variants timed: ``first`` runs its products batched over the images (``FusedMatMul``
#: of one image's columns), 6.1 ms a step of ``sequence_conv_large`` against 2.5 ms for ``last``'s
#: one product (onnxruntime's profiler, one thread): it is checked, not timed.
#: Timed variant to the convolutions it rewrites (``where``), in the ``last`` layout; ``rule``
#: is the library as it is (:func:`~helpers.core.rewrites.convolution_rewrites.measured_faster`).
TIMED = {"conv": None, "last": everywhere, "rule": measured_faster}
#: Single convolutions of the exactness check: label to (Conv class, in, out, size, options).
CASES = {
    "1-D k5 pad 2": (nn.Conv1d, 4, 8, 32, {"kernel_size": 5, "padding": 2}),
    "1-D k3 stride 2 dilation 2": (
        nn.Conv1d,
        4,
        8,
        33,
        {"kernel_size": 3, "stride": 2, "dilation": 2},
    ),
    "2-D k3 pad 1": (nn.Conv2d, 3, 8, 12, {"kernel_size": 3, "padding": 1}),
    "2-D k3 stride 2 pad 1": (nn.Conv2d, 3, 8, 13, {"kernel_size": 3, "stride": 2, "padding": 1}),
    "2-D k3 dilation 2 pad 2": (
        nn.Conv2d,
        3,
        8,
        12,
        {"kernel_size": 3, "dilation": 2, "padding": 2},
    ),
    "2-D depthwise k3 pad 1": (nn.Conv2d, 8, 8, 12, {"kernel_size": 3, "padding": 1, "groups": 8}),
    "2-D depthwise k3 stride 2": (
        nn.Conv2d,
        8,
        8,
        13,
        {"kernel_size": 3, "stride": 2, "padding": 1, "groups": 8},
    ),
}
#: Timed model to (steps per epoch, epochs of the long fit).
MODELS = {
    "sequence_conv_small": (20, 6),
    "sequence_conv_large": (10, 3),
    "image_cnn_small": (10, 3),
    "image_cnn_large": (5, 3),
    "resnet_block": (5, 3),
    "depthwise_block": (5, 3),
}


class ResidualBlock(nn.Module):
    """A ResNet-style network: a 3x3 stem, a residual block of two 3x3 convolutions, a strided 3x3.

    Examples
    --------
    >>> ResidualBlock()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """

    def __init__(self, channels=32):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.down = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1)
        self.head = nn.Linear(2 * channels, 10)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = torch.relu(h + self.conv2(torch.relu(self.conv1(h))))
        return self.head(torch.relu(self.down(h)).mean(dim=(2, 3)))


class DepthwiseBlock(nn.Module):
    """A MobileNetV2-style network: inverted residual blocks, 3x3 depthwise convolutions.

    Examples
    --------
    >>> DepthwiseBlock()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """

    def __init__(self, channels=16, expansion=4):
        super().__init__()
        wide = channels * expansion
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(channels, wide, 1),
                nn.ReLU(),
                nn.Conv2d(wide, wide, 3, stride=stride, padding=1, groups=wide),
                nn.ReLU(),
                nn.Conv2d(wide, channels, 1),
            )
            for stride in (1, 2)
        )
        self.head = nn.Linear(channels, 10)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = h + self.blocks[0](h)
        return self.head(self.blocks[1](h).mean(dim=(2, 3)))


def with_layout(layout, where=everywhere):
    """A context in which ``fast_gradients`` writes convolutions in ``layout`` (None: none).

    Examples
    --------
    >>> from benchmarks.profiles.survey.profiled_models import zoo_model
    >>> onx = zoo_model("sequence_conv_small", 4)[0]
    >>> with with_layout(None):
    ...     "Conv" in [n.op_type for n in gradient_rewrites.rewrite_for_training(onx).graph.node]
    True
    """

    def rewrite(model):
        return model if layout is None else convolutions_as_products(model, layout, where)

    return mock.patch.object(gradient_rewrites, "convolutions_as_products", rewrite)


def _gradients(net, x, layout):
    """Output and gradients (weights, then input) of the training graph of ``net`` in ``layout``."""
    model = export_for_training(nn.Sequential(nn.Identity(), net), torch.from_numpy(x[:1]))
    model.doc_string = f"convolutions: {layout}"  # another entry of the caches of sessions
    with with_layout(layout):
        fb = OrtGradientForwardBackward(model, input_names_require_grad=["x"])
        weights = get_train_initializer(model)
        fn = fb.new_instance()
        inputs = [x, *[weights[n] for n in fb.weights_to_train]]
        y = fn.forward(inputs, training=True)[0].numpy().copy()
        grad_out = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
        return [y, *[g.numpy().copy() for g in fn.backward([grad_out])]], grad_out


def exactness():
    """Rows: the largest error of each variant's output and gradients against float64 torch."""
    rows = []
    for label, (conv, cin, cout, size, options) in CASES.items():
        torch.manual_seed(0)
        net = conv(cin, cout, **options)
        dims = 1 if conv is nn.Conv1d else 2
        x = np.random.default_rng(0).standard_normal((4, cin, *[size] * dims)).astype(np.float32)
        row = {"convolution": label}
        for variant, layout in VARIANTS.items():
            got, grad_out = _gradients(net, x, layout)
            double, xt = net.double(), torch.tensor(x, dtype=torch.float64, requires_grad=True)
            y = double(xt)
            y.backward(torch.from_numpy(grad_out).double())
            want = [
                y.detach().numpy(),
                *[p.grad.numpy() for p in double.parameters()],
                xt.grad.numpy(),
            ]
            double.zero_grad()
            net.float()
            error = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, want))
            row[variant] = f"{error:.1e}"
        rows.append(row)
    return rows


def timed_model(name, n_samples):
    """``(onnx model, X, y, loss)`` of a zoo model or of a block of this module (3 x 32 x 32)."""
    if name not in ("resnet_block", "depthwise_block"):
        return zoo_model(name, n_samples)
    torch.manual_seed(0)
    module = ResidualBlock() if name == "resnet_block" else DepthwiseBlock()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_samples, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, n_samples).astype(np.int64)
    return export_for_training(module, torch.from_numpy(X[:2])), X, y, "cross_entropy"


def _time_steps(names, threads, rounds, repeats):
    """Rows of :func:`ab_rows` for the models ``names`` and both APIs at ``threads``."""
    rows = []
    for name in names:
        steps, e2 = MODELS[name]
        onx, X, y, loss = timed_model(name, ZOO_BATCH * steps)
        fits = {}
        for variant, where in TIMED.items():
            layout = None if where is None else "last"
            model = onnx.ModelProto()
            model.CopyFrom(onx)
            model.doc_string = f"convolutions: {variant}"  # another entry of the training caches

            def context(layout=layout, where=where):
                return with_layout(layout, where)

            fitted = step_fits(model, X, y, ZOO_BATCH, threads, loss=loss, lr=1e-4, context=context)
            fits.update({(api, variant): fit for api, fit in fitted.items()})
        estimates, busy = ab_rounds(fits, steps, rounds=rounds, repeats=repeats, e2=e2)
        for api in dict.fromkeys(api for api, _ in fits):
            per_variant = {v: values for (a, v), values in estimates.items() if a == api}
            rows += ab_rows(
                per_variant, "conv", model=name, threads=threads, API=api, busy=busy_note(busy)
            )
            print(markdown(rows[-len(TIMED) :], list(rows[-1])), flush=True)
    return rows


def main(argv=None):
    """Check and time the variants; write their section of ``results/kernel_survey.md``."""
    argv = sys.argv[1:] if argv is None else argv
    extra = [a for a in argv if a == "--models" or a in MODELS]
    args = parse_arguments(__doc__.split("\n", 1)[0], [a for a in argv if a not in extra])
    names = [a for a in extra if a in MODELS] or list(MODELS)
    load = os.getloadavg()[0]
    checked = exactness()
    print(markdown(checked, list(checked[0])), flush=True)
    rows = [
        row
        for threads in args.threads
        for row in _time_steps(names, threads, args.rounds, args.repeats)
    ]
    made = conditions("benchmarks/profiles/studies/conv_gradients.py", argv, load)
    some = [] if names == list(MODELS) else names  # a run on some models: a section of its own
    title = f": {', '.join(some)}" if some else ""
    text = (
        f"## Convolution gradients{title}\n\n{made} Largest error of the output and of the "
        "gradients (weights, bias, input) of one convolution, relative to the largest value, "
        f"against torch in float64:\n\n{markdown(checked, list(checked[0]))}\n\nMarginal cost "
        "of a training step (batches of 64), median over the rounds of the best of the "
        "repeats, with the range over the rounds; "
        "the ratio to `conv` (`ConvGrad`) is taken within each round; "
        f"{BUSY_NOTE}.\n\n{markdown(rows, list(rows[0]))}"
    )
    write_section(args.output, "-".join(["conv-gradients", *some]), text)


if __name__ == "__main__":
    main()
