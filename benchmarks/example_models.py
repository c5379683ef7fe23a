"""Example model builders for ``bench_your_model.ipynb``: ``"benchmarks.example_models:digits_mlp"``.

A builder takes no argument and returns a ``torch.nn.Module`` whose input is a
batch of float32 rows; write your own in any importable module and give its
``"package.module:function"`` to the notebook.
"""


def digits_mlp():
    """A ReLU MLP 64 -> 64 -> 10 for scikit-learn's digits (raw class scores out).

    Examples
    --------
    >>> import torch
    >>> digits_mlp()(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """
    import torch  # noqa: PLC0415

    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def tanh_regressor():
    """A regression MLP 16 -> 32 -> 1 with tanh, for random data of 16 features.

    Examples
    --------
    >>> import torch
    >>> tanh_regressor()(torch.zeros(3, 16)).shape
    torch.Size([3, 1])
    """
    import torch  # noqa: PLC0415

    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def upsampling_model():
    """A model onnxruntime cannot train: ``interpolate`` exports to ``Resize``, which has no gradient."""
    import torch  # noqa: PLC0415

    class Upsample(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            h = self.linear(x).unsqueeze(1)
            return torch.nn.functional.interpolate(h, scale_factor=2.0, mode="nearest").sum(dim=2)

    return Upsample()
