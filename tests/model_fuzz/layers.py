"""The grammar of the fuzzer: blocks of torch layers, each written as source code.

A block is a function ``block(rng, shape)`` of a numpy Generator and the
shape of one sample (without the batch dimension) that returns the
constructors of the submodules it adds, as source strings, and one line of
``forward`` that uses them: ``self.{0}``, ``self.{1}``... stand for their
attribute names. Whether a block fits the shape it is given is not decided
here: :mod:`model_fuzz.grammar` runs it on a batch and draws another when
torch refuses it (a kernel larger than the sequence, a 'reflect' padding
wider than the input...). The kind of a sample follows from its number of
dimensions: tabular (F,), sequence (C, L), image (C, H, W).
"""


def pick(rng, options):
    """One of ``options``, drawn with ``rng``.

    Examples
    --------
    >>> import numpy as np
    >>> pick(np.random.default_rng(0), ["a", "b", "c"]) in "abc"
    True
    """
    return options[int(rng.integers(len(options)))]


def _chance(rng, p=0.5):
    return bool(rng.random() < p)


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


ACTIVATIONS = [
    "nn.ReLU()",
    "nn.LeakyReLU(0.1)",
    "nn.GELU()",
    "nn.GELU(approximate='tanh')",
    "nn.SiLU()",
    "nn.Tanh()",
    "nn.Sigmoid()",
    "nn.ELU()",
    "nn.ELU(alpha=0.5)",
    "nn.CELU(alpha=1.5)",
    "nn.SELU()",
    "nn.Softplus()",
    "nn.Softplus(beta=2.0, threshold=5.0)",
    "nn.Mish()",
    "nn.Hardswish()",
    "nn.Hardsigmoid()",
    "nn.ReLU6()",
]

#: Convolutions' padding modes: zeros half the time, so that the others do not hide the rest.
PADDING_MODES = ["zeros", "zeros", "zeros", "reflect", "replicate", "circular"]

_APPLY = "x = self.{0}(x)"


def activation(rng, shape):
    return [pick(rng, ACTIVATIONS)], _APPLY


def dropout(rng, shape):
    return [f"nn.Dropout({pick(rng, [0.1, 0.25, 0.5])})"], _APPLY


def linear(rng, shape):
    return [f"nn.Linear({shape[0]}, {int(rng.integers(1, 33))}, bias={_chance(rng, 0.8)})"], _APPLY


def batch_norm(rng, shape):
    dims = "2d" if len(shape) == 3 else "1d"
    momentum = pick(rng, [0.1, 0.3, None])
    affine, track = _chance(rng, 0.75), _chance(rng, 0.8)
    return [
        f"nn.BatchNorm{dims}({shape[0]}, momentum={momentum}, affine={affine}, "
        f"track_running_stats={track})"
    ], _APPLY


def layer_norm(rng, shape):
    over = list(shape[-int(rng.integers(1, len(shape) + 1)) :])
    affine = _chance(rng, 0.75)
    bias = f", bias={_chance(rng, 0.75)}" if affine else ""
    return [f"nn.LayerNorm({over}, elementwise_affine={affine}{bias})"], _APPLY


def group_norm(rng, shape):
    groups = pick(rng, _divisors(shape[0]))
    return [f"nn.GroupNorm({groups}, {shape[0]}, affine={_chance(rng, 0.75)})"], _APPLY


def instance_norm(rng, shape):
    dims = f"{len(shape) - 1}d"
    affine, track = _chance(rng), _chance(rng, 0.3)
    layer = f"nn.InstanceNorm{dims}({shape[0]}, affine={affine}, track_running_stats={track})"
    return [layer], _APPLY


def _channels(rng, channels):
    """Output channels and groups: plain, grouped or depthwise."""
    kind = pick(rng, ["plain", "plain", "grouped", "depthwise"])
    if kind == "depthwise":
        return channels * int(rng.integers(1, 3)), channels
    out = int(rng.integers(1, 17))
    if kind == "grouped":
        common = [d for d in _divisors(channels) if out % d == 0]
        return out, pick(rng, common)
    return out, 1


def convolution(rng, shape):
    dims = len(shape) - 1
    out, groups = _channels(rng, shape[0])
    kernel = int(rng.integers(1, 5))
    stride, dilation = pick(rng, [1, 1, 2]), pick(rng, [1, 1, 2])
    padding = pick(rng, [0, 1, kernel // 2, "'same'", "'valid'"])
    if padding == "'same'":
        stride = 1
    mode = pick(rng, PADDING_MODES)
    return [
        f"nn.Conv{dims}d({shape[0]}, {out}, {kernel}, stride={stride}, padding={padding}, "
        f"dilation={dilation}, groups={groups}, bias={_chance(rng, 0.8)}, padding_mode='{mode}')"
    ], _APPLY


def transposed_convolution(rng, shape):
    dims = len(shape) - 1
    out, groups = _channels(rng, shape[0])
    kernel, stride, dilation = int(rng.integers(1, 4)), pick(rng, [1, 2]), pick(rng, [1, 1, 2])
    padding = int(rng.integers(0, kernel))
    output_padding = int(rng.integers(0, stride))
    return [
        f"nn.ConvTranspose{dims}d({shape[0]}, {out}, {kernel}, stride={stride}, padding={padding}, "
        f"output_padding={output_padding}, groups={groups}, bias={_chance(rng, 0.8)}, "
        f"dilation={dilation})"
    ], _APPLY


def max_pool(rng, shape):
    kernel = int(rng.integers(2, 4))
    return [
        f"nn.MaxPool{len(shape) - 1}d({kernel}, stride={pick(rng, [None, 1, 2])}, "
        f"padding={int(rng.integers(0, kernel // 2 + 1))}, dilation={pick(rng, [1, 1, 2])}, "
        f"ceil_mode={_chance(rng, 0.3)})"
    ], _APPLY


def average_pool(rng, shape):
    kernel = int(rng.integers(2, 4))
    return [
        f"nn.AvgPool{len(shape) - 1}d({kernel}, stride={pick(rng, [None, 1, 2])}, "
        f"padding={int(rng.integers(0, kernel // 2 + 1))}, ceil_mode={_chance(rng, 0.3)}, "
        f"count_include_pad={_chance(rng)})"
    ], _APPLY


def adaptive_pool(rng, shape):
    sizes = tuple(int(rng.integers(1, size + 1)) for size in shape[1:])
    size = sizes[0] if len(sizes) == 1 else sizes
    return [f"nn.Adaptive{pick(rng, ['Avg', 'Max'])}Pool{len(shape) - 1}d({size})"], _APPLY


def upsample(rng, shape):
    if _chance(rng):
        return ["nn.Upsample(scale_factor=2, mode='nearest')"], _APPLY
    mode = "linear" if len(shape) == 2 else "bilinear"
    return [f"nn.Upsample(scale_factor=2, mode='{mode}', align_corners={_chance(rng)})"], _APPLY


def _same_shape_layer(rng, shape):
    """A layer that keeps a sample's shape: a linear or 'same' convolution, and an activation."""
    if len(shape) == 1:
        layer = f"nn.Linear({shape[0]}, {shape[0]})"
    else:
        kernel = pick(rng, [1, 3])
        padding = pick(rng, [kernel // 2, "'same'"])
        mode = pick(rng, PADDING_MODES)
        layer = (
            f"nn.Conv{len(shape) - 1}d({shape[0]}, {shape[0]}, {kernel}, padding={padding}, "
            f"padding_mode='{mode}')"
        )
    return f"nn.Sequential({layer}, {pick(rng, ACTIVATIONS)})"


def residual(rng, shape):
    return [_same_shape_layer(rng, shape)], "x = x + self.{0}(x)"


def gate(rng, shape):
    return [_same_shape_layer(rng, shape)], "x = x * torch.sigmoid(self.{0}(x))"


def concatenation(rng, shape):
    out = int(rng.integers(1, 9))
    if len(shape) == 1:
        layer = f"nn.Linear({shape[0]}, {out})"
    else:
        kernel = pick(rng, [1, 3])
        layer = f"nn.Conv{len(shape) - 1}d({shape[0]}, {out}, {kernel}, padding={kernel // 2})"
    return [layer], "x = torch.cat([x, self.{0}(x)], dim=1)"


def unflatten(rng, shape):
    """Tabular to sequence or image: a reshape of the features."""
    channels = pick(rng, _divisors(shape[0]))
    rest = shape[0] // channels
    if _chance(rng):
        return [], f"x = x.reshape(-1, {channels}, {rest})"
    height = pick(rng, _divisors(rest))
    return [], f"x = x.unflatten(1, ({channels}, {height}, {rest // height}))"


def permutation(rng, shape):
    if len(shape) == 2:
        return [], "x = x.transpose(1, 2)"
    orders = ["(0, 1, 3, 2)", "(0, 2, 1, 3)", "(0, 3, 2, 1)"]
    return [], f"x = x.permute{pick(rng, orders)}"


def reduction(rng, shape):
    """A mean or a sum over one axis (or the image's two), or a flatten."""
    how = pick(rng, ["mean", "sum"])
    axis = int(rng.integers(1, len(shape) + 1))
    return [], pick(
        rng,
        [
            f"x = x.{how}(dim={axis})",
            "x = x.flatten(1)",
            f"x = x - x.{how}(dim=-1, keepdim=True)",
            f"x = x.{how}(dim=(2, 3))" if len(shape) == 3 else "x = x.flatten(1)",
        ],
    )


#: The blocks of sequences and images, with their weights (the same for both ranks).
_CHANNEL_BLOCKS = [
    (convolution, 4),
    (activation, 3),
    (batch_norm, 1),
    (layer_norm, 1),
    (group_norm, 1),
    (instance_norm, 1),
    (max_pool, 1),
    (average_pool, 1),
    (adaptive_pool, 1),
    (upsample, 1),
    (transposed_convolution, 1),
    (dropout, 1),
    (residual, 1),
    (gate, 1),
    (concatenation, 1),
    (permutation, 1),
    (reduction, 2),
]

#: The blocks each kind of sample draws from, with their weights.
BLOCKS = {
    1: [
        (linear, 4),
        (activation, 4),
        (batch_norm, 2),
        (layer_norm, 2),
        (dropout, 1),
        (residual, 1),
        (gate, 1),
        (concatenation, 1),
        (unflatten, 2),
    ],
    2: _CHANNEL_BLOCKS,
    3: _CHANNEL_BLOCKS,
}


def draw_block(rng, shape):
    """A block that suits samples of ``shape``, drawn by weight.

    Examples
    --------
    >>> import numpy as np
    >>> constructors, line = draw_block(np.random.default_rng(0), (6,))
    >>> line.startswith("x = ")
    True
    """
    blocks, weights = zip(*BLOCKS[len(shape)])
    weights = [w / sum(weights) for w in weights]
    return blocks[int(rng.choice(len(blocks), p=weights))](rng, shape)
