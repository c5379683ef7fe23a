"""Model builders for ``bench_your_model.ipynb``: ``"benchmarks.example_models:digits_mlp"``.

A builder takes no argument and returns a ``torch.nn.Module``; write your own
in any importable module and give its ``"package.module:function"`` to the
notebook. Besides the digits example, the benchmark's model zoo: one builder
per layer family at a small and a larger size (:data:`ZOO`, with the input
each takes), which the full grid runs against torch eager and
``torch.compile``; among them two real architectures on 3x32x32 images,
written from their papers' descriptions: a ResNet of BasicBlocks and a
MobileNetV2 of inverted residuals.
"""

import torch  # noqa: F401  (the examples call it)
from torch import nn


def digits_mlp():
    """A ReLU MLP 64 -> 64 -> 10 for scikit-learn's digits (raw class scores out).

    Examples
    --------
    >>> digits_mlp()(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def tanh_regressor():
    """A regression MLP 16 -> 32 -> 1 with tanh, for random data of 16 features.

    Examples
    --------
    >>> tanh_regressor()(torch.zeros(3, 16)).shape
    torch.Size([3, 1])
    """
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))


def upsampling_model():
    """A model onnxruntime cannot train: ``interpolate`` by 1.5 exports to a ``Resize``, which has
    no gradient.

    The training graph rewrites upsamplings by integer factors
    (:mod:`helpers.core.layers.resampling`), not this one.

    Examples
    --------
    >>> upsampling_model()(torch.zeros(2, 8)).shape
    torch.Size([2, 1])
    """

    class Upsample(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 4)

        def forward(self, x):
            h = self.linear(x).unsqueeze(1)
            return nn.functional.interpolate(h, scale_factor=1.5, mode="nearest").sum(dim=2)

    return Upsample()


def _image_cnn(channels, hidden):
    return nn.Sequential(
        nn.Conv2d(1, channels, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * channels * 5 * 5, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def image_cnn_small():
    """A CNN for 1x28x28 images, 10 classes: two 3x3 convolutions (8, 16 channels), max pooling.

    Examples
    --------
    >>> image_cnn_small()(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    """
    return _image_cnn(8, 32)


def image_cnn_large():
    """The CNN of :func:`image_cnn_small` with 32 and 64 channels and 128 hidden units.

    Examples
    --------
    >>> image_cnn_large()(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    """
    return _image_cnn(32, 128)


def _normalized_mlp(features, width, norm, activation):
    """Linear, ``norm``, ``activation``, twice, ``width`` wide, then one output."""
    return nn.Sequential(
        nn.Linear(features, width),
        norm(width),
        activation(),
        nn.Linear(width, width),
        norm(width),
        activation(),
        nn.Linear(width, 1),
    )


def layernorm_mlp_small():
    """A transformer-style MLP block for 32 features: Linear, LayerNorm, GELU, twice, 64 wide.

    Examples
    --------
    >>> layernorm_mlp_small()(torch.zeros(2, 32)).shape
    torch.Size([2, 1])
    """
    return _normalized_mlp(32, 64, nn.LayerNorm, nn.GELU)


def layernorm_mlp_large():
    """The block of :func:`layernorm_mlp_small`, 512 wide on 256 features.

    Examples
    --------
    >>> layernorm_mlp_large()(torch.zeros(2, 256)).shape
    torch.Size([2, 1])
    """
    return _normalized_mlp(256, 512, nn.LayerNorm, nn.GELU)


def batchnorm_mlp_small():
    """An MLP with batch normalization for 32 features: Linear, BatchNorm1d, ReLU, twice, 64 wide.

    Examples
    --------
    >>> batchnorm_mlp_small()(torch.zeros(4, 32)).shape
    torch.Size([4, 1])
    """
    return _normalized_mlp(32, 64, nn.BatchNorm1d, nn.ReLU)


def batchnorm_mlp_large():
    """The network of :func:`batchnorm_mlp_small`, 512 wide on 256 features.

    Examples
    --------
    >>> batchnorm_mlp_large()(torch.zeros(4, 256)).shape
    torch.Size([4, 1])
    """
    return _normalized_mlp(256, 512, nn.BatchNorm1d, nn.ReLU)


def _sequence_conv(channels):
    return nn.Sequential(
        nn.Conv1d(4, channels, 5, padding=2),
        nn.ReLU(),
        nn.Conv1d(channels, channels, 5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(channels, 1),
    )


def sequence_conv_small():
    """A 1-D CNN over sequences of 4 channels and 32 steps: two convolutions of 16 channels, average
    pooling.

    Examples
    --------
    >>> sequence_conv_small()(torch.zeros(2, 4, 32)).shape
    torch.Size([2, 1])
    """
    return _sequence_conv(16)


def sequence_conv_large():
    """The 1-D CNN of :func:`sequence_conv_small` with 128 channels.

    Examples
    --------
    >>> sequence_conv_large()(torch.zeros(2, 4, 32)).shape
    torch.Size([2, 1])
    """
    return _sequence_conv(128)


class TokenClassifier(nn.Module):
    """Token ids -> embeddings -> mean over the sequence -> MLP -> 7 class scores.

    Examples
    --------
    >>> TokenClassifier(100, 8, 16)(torch.zeros(2, 5, dtype=torch.int64)).shape
    torch.Size([2, 7])
    """

    def __init__(self, vocabulary, dimension, hidden, n_classes=7):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dimension)
        self.head = nn.Sequential(
            nn.Linear(dimension, hidden), nn.ReLU(), nn.Linear(hidden, n_classes)
        )

    def forward(self, ids):
        return self.head(self.embedding(ids).mean(dim=1))


def token_classifier_small():
    """A text classifier on token ids: vocabulary 1000, embeddings of 32, 7 classes.

    Examples
    --------
    >>> token_classifier_small()(torch.zeros(2, 32, dtype=torch.int64)).shape
    torch.Size([2, 7])
    """
    return TokenClassifier(1000, 32, 64)


def token_classifier_large():
    """The classifier of :func:`token_classifier_small` with a vocabulary of 20000 and embeddings of
    128.

    Examples
    --------
    >>> token_classifier_large()(torch.zeros(2, 32, dtype=torch.int64)).shape
    torch.Size([2, 7])
    """
    return TokenClassifier(20000, 128, 256)


def _conv_bn(in_channels, out_channels, kernel, stride=1, groups=1):
    """A convolution without bias (the BatchNorm after it has one), then its BatchNorm2d."""
    conv = nn.Conv2d(
        in_channels, out_channels, kernel, stride, padding=kernel // 2, groups=groups, bias=False
    )
    return [conv, nn.BatchNorm2d(out_channels)]


class BasicBlock(nn.Module):
    """A residual block of two 3x3 convolutions with BatchNorm, ReLU after the sum.

    The shortcut is the identity, or a strided 1x1 convolution and BatchNorm
    where the block changes the stride or the number of channels.

    Examples
    --------
    >>> BasicBlock(4, 8, stride=2)(torch.zeros(2, 4, 8, 8)).shape
    torch.Size([2, 8, 4, 4])
    """

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.body = nn.Sequential(
            *_conv_bn(in_channels, out_channels, 3, stride),
            nn.ReLU(),
            *_conv_bn(out_channels, out_channels, 3),
        )
        same = stride == 1 and in_channels == out_channels
        projection = _conv_bn(in_channels, out_channels, 1, stride)
        self.shortcut = nn.Identity() if same else nn.Sequential(*projection)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


def _resnet(stem, blocks, n_classes=10):
    """A conv-BN-ReLU stem of ``stem`` channels, BasicBlocks ``(channels, stride)``, a head."""
    layers, channels = [*_conv_bn(3, stem, 3), nn.ReLU()], stem
    for out_channels, stride in blocks:
        layers.append(BasicBlock(channels, out_channels, stride))
        channels = out_channels
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, n_classes)]
    return nn.Sequential(*layers, *head)


def resnet_small():
    """A ResNet-style network for 3x32x32 images, 10 classes: a stem of 8 channels, two BasicBlocks.

    Examples
    --------
    >>> resnet_small()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return _resnet(8, [(8, 1), (16, 2)])


def resnet_large():
    """A ResNet-8 for 3x32x32 images: a stem of 16 channels, BasicBlocks of 16, 32 and 64 channels.

    The last two have stride 2 and a projection shortcut.

    The widths of the CIFAR ResNets (ResNet-20 has three such blocks per stage).

    Examples
    --------
    >>> resnet_large()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return _resnet(16, [(16, 1), (32, 2), (64, 2)])


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise convolution, 1x1 linear projection.

    BatchNorm after each convolution, ReLU6 after the first two; the input is
    added back where the stride is 1 and the channels stay the same.

    Examples
    --------
    >>> InvertedResidual(8, 8, stride=1, expansion=4)(torch.zeros(2, 8, 6, 6)).shape
    torch.Size([2, 8, 6, 6])
    """

    def __init__(self, in_channels, out_channels, stride, expansion):
        super().__init__()
        hidden = in_channels * expansion
        self.body = nn.Sequential(
            *_conv_bn(in_channels, hidden, 1),
            nn.ReLU6(),
            *_conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.ReLU6(),
            *_conv_bn(hidden, out_channels, 1),
        )
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def _mobilenet(stem, blocks, last, n_classes=10):
    """A conv-BN-ReLU6 stem, inverted residuals ``(channels, stride, expansion)``, a head.

    The head: a 1x1 convolution to ``last`` channels, BN, ReLU6, pooling, linear.
    """
    layers, channels = [*_conv_bn(3, stem, 3), nn.ReLU6()], stem
    for out_channels, stride, expansion in blocks:
        layers.append(InvertedResidual(channels, out_channels, stride, expansion))
        channels = out_channels
    return nn.Sequential(
        *layers,
        *_conv_bn(channels, last, 1),
        nn.ReLU6(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(last, n_classes),
    )


def mobilenet_small():
    """A MobileNetV2-style network for 3x32x32 images, 10 classes: two inverted residuals.

    Examples
    --------
    >>> mobilenet_small()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return _mobilenet(8, [(16, 2, 4), (16, 1, 4)], 64)


def mobilenet_large():
    """MobileNetV2 for 3x32x32 images, narrowed: five inverted residuals of expansion 6.

    From 24 to 64 channels, three of stride 2 (32 -> 4 pixels), two with
    their residual; a last 1x1 convolution to 256 channels before the pooling.

    Examples
    --------
    >>> mobilenet_large()(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """
    return _mobilenet(16, [(24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (64, 2, 6)], 256)


#: The model zoo: builder name -> (family, the shape of one sample, task).
ZOO = {
    "image_cnn_small": ("CNN on images", [1, 28, 28], "classification"),
    "image_cnn_large": ("CNN on images", [1, 28, 28], "classification"),
    "layernorm_mlp_small": ("LayerNorm + GELU MLP", [32], "regression"),
    "layernorm_mlp_large": ("LayerNorm + GELU MLP", [256], "regression"),
    "batchnorm_mlp_small": ("BatchNorm MLP", [32], "regression"),
    "batchnorm_mlp_large": ("BatchNorm MLP", [256], "regression"),
    "sequence_conv_small": ("1-D CNN on sequences", [4, 32], "regression"),
    "sequence_conv_large": ("1-D CNN on sequences", [4, 32], "regression"),
    "token_classifier_small": ("embedding classifier on token ids", [32], "classification"),
    "token_classifier_large": ("embedding classifier on token ids", [32], "classification"),
    "resnet_small": ("ResNet-style CNN", [3, 32, 32], "classification"),
    "resnet_large": ("ResNet-style CNN", [3, 32, 32], "classification"),
    "mobilenet_small": ("MobileNetV2-style CNN", [3, 32, 32], "classification"),
    "mobilenet_large": ("MobileNetV2-style CNN", [3, 32, 32], "classification"),
}
