"""Model builders for ``bench_your_model.ipynb``: ``"benchmarks.example_models:digits_mlp"``.

A builder takes no argument and returns a ``torch.nn.Module``; write your own
in any importable module and give its ``"package.module:function"`` to the
notebook. Besides the digits example, the benchmark's model zoo: one builder
per layer family at a small and a larger size (:data:`ZOO`, with the input
each takes), which the full grid runs against torch eager and
``torch.compile``.
"""
import torch
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
    """A model onnxruntime cannot train: ``interpolate`` by 1.5 exports to a ``Resize``, which has no gradient.

    The training graph rewrites upsamplings by integer factors
    (:mod:`helpers.core.resampling`), not this one.

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
        nn.Conv2d(1, channels, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * channels * 5 * 5, hidden), nn.ReLU(), nn.Linear(hidden, 10),
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
        nn.Linear(features, width), norm(width), activation(),
        nn.Linear(width, width), norm(width), activation(), nn.Linear(width, 1),
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
        nn.Conv1d(4, channels, 5, padding=2), nn.ReLU(),
        nn.Conv1d(channels, channels, 5, padding=2), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(channels, 1),
    )


def sequence_conv_small():
    """A 1-D CNN over sequences of 4 channels and 32 steps: two convolutions of 16 channels, average pooling.

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
        self.head = nn.Sequential(nn.Linear(dimension, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

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
    """The classifier of :func:`token_classifier_small` with a vocabulary of 20000 and embeddings of 128.

    Examples
    --------
    >>> token_classifier_large()(torch.zeros(2, 32, dtype=torch.int64)).shape
    torch.Size([2, 7])
    """
    return TokenClassifier(20000, 128, 256)


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
}
