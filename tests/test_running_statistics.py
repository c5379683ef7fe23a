"""One running-statistics update for numpy and torch: torch BatchNorm's, with a momentum or not."""

import numpy as np
import pytest
import torch
from torch import nn

from helpers.core.layers.running_statistics import BatchNormLayer, RunningStatistics

COUNTER = "num_batches_tracked"


@pytest.mark.parametrize("momentum", [0.3, None])
def test_the_update_on_arrays_and_on_tensors_is_torch_batch_norm(momentum):
    """Four batches through torch's BatchNorm1d, their statistics blended by the one update."""
    batch_norm = nn.BatchNorm1d(3, momentum=momentum)
    counter = COUNTER if momentum is None else None
    layer = BatchNormLayer("running_mean", "running_var", momentum or 0.0, "m", "v", counter)
    counts = {COUNTER: 0} if counter else {}
    stats = RunningStatistics(
        [layer], {"running_mean": np.zeros(3), "running_var": np.ones(3)}, counts
    )
    buffers = {name: b.clone() for name, b in batch_norm.named_buffers()}
    mean_buffer = buffers["running_mean"]
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = torch.from_numpy((2 * rng.standard_normal((8, 3)) + 1).astype(np.float32))
        batch_norm(x)
        batch = [x.mean(dim=0), x.var(dim=0)]  # the training graph's mean and unbiased variance
        stats.update([b.numpy() for b in batch])
        stats.update(batch, buffers, buffers)
    for name in ("running_mean", "running_var"):
        expected = getattr(batch_norm, name).numpy()
        np.testing.assert_allclose(stats.values[name], expected, rtol=1e-6)
        np.testing.assert_allclose(buffers[name].numpy(), expected, rtol=1e-6)
    assert buffers["running_mean"] is mean_buffer  # in place: a module's own buffers
    if counter:
        assert stats.counts[COUNTER] == int(buffers[COUNTER]) == int(batch_norm.num_batches_tracked)
