"""The running statistics of batch normalization layers, updated as torch updates them.

The training graph (:mod:`helpers.core.layers.batch_norm`) returns each layer's
batch mean and unbiased batch variance; :class:`RunningStatistics` blends
them into the running ones after each step, with torch's formula
(:meth:`BatchNormLayer.blend`), for the optimizers in numpy and for
:class:`helpers.OrtTorchModule` on the module's own buffers.

torch's ``momentum=None`` keeps a cumulative average: the weight of the
batch is ``1 / num_batches_tracked``, the number of training batches seen,
this one included. The ONNX node cannot say so (torch exports a momentum
of 0), so :func:`helpers.export_for_training` records
such layers and their counters in the model's metadata
(:data:`CUMULATIVE_METADATA_KEY`, :func:`cumulative_layers`), and
:class:`RunningStatistics` keeps the counters beside the statistics
(pickles, checkpoints and warm fits continue them).
"""

import json
from dataclasses import dataclass

import numpy as np

#: Metadata key of the layers with a cumulative average (torch's ``momentum=None``): JSON,
#: running mean's initializer name to ``{"counter": name, "count": batches seen}``.
CUMULATIVE_METADATA_KEY = "helpers.batch_norm.cumulative"


@dataclass(frozen=True)
class BatchNormLayer:
    """One ``BatchNormalization`` node in training mode and the names around it.

    Attributes
    ----------
    running_mean, running_var : str
        The initializers holding its running statistics.
    momentum : float
        torch's momentum, the weight of the batch statistic in the update.
    mean_output, var_output : str
        The values of the training graph holding the batch mean and the
        unbiased batch variance, one per channel.
    counter : str or None
        For a cumulative average (torch's ``momentum=None``, ``momentum``
        then unused), the name of its batch counter; None otherwise.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.layers.batch_norm import decompose_batch_norm
    >>> from helpers import export_for_training
    >>> net = torch.nn.BatchNorm1d(3, momentum=0.2)
    >>> _, statistics = decompose_batch_norm(export_for_training(net, torch.zeros(4, 3)))
    >>> layer = statistics.layers[0]
    >>> layer.running_mean, round(layer.momentum, 6)
    ('running_mean', 0.2)
    """

    running_mean: str
    running_var: str
    momentum: float
    mean_output: str
    var_output: str
    counter: str = None

    def blend(self, running_mean, running_var, mean, var, count=None):
        """Blend batch statistics into running ones in place, as torch does (arrays or tensors).

        ``count`` is the number of batches seen, this one included: the
        weight of the batch for a cumulative average.

        Examples
        --------
        >>> layer = BatchNormLayer("mean", "var", 0.0, "batch_mean", "batch_var", counter="n")
        >>> mean, var = np.zeros(1, dtype=np.float32), np.ones(1, dtype=np.float32)
        >>> layer.blend(mean, var, np.array([4.0]), np.array([3.0]), count=2)
        >>> mean, var
        (array([2.], dtype=float32), array([2.], dtype=float32))
        """
        factor = self.momentum if self.counter is None else 1.0 / count
        for running, batch in ((running_mean, mean), (running_var, var)):
            running *= 1 - factor
            running += factor * batch


class RunningStatistics:
    """The running statistics of a model's batch normalization layers, updated after each step.

    Parameters
    ----------
    layers : list of BatchNormLayer
    values : dict
        Initializer name to initial value, for every running statistic.
    counts : dict, optional
        Counter name to the batches seen, for every layer with a cumulative
        average (:attr:`BatchNormLayer.counter`).

    Attributes
    ----------
    values : dict
        Initializer name to its current float32 value.
    counts : dict
        Counter name to the batches seen so far, an int.

    Examples
    --------
    >>> layer = BatchNormLayer("mean", "var", 0.1, "batch_mean", "batch_var")
    >>> stats = RunningStatistics([layer], {"mean": np.zeros(2), "var": np.ones(2)})
    >>> stats.output_names
    ['batch_mean', 'batch_var']
    >>> stats.update([np.array([1.0, 2.0]), np.array([3.0, 1.0])])
    >>> stats.values["mean"], stats.values["var"]
    (array([0.1, 0.2], dtype=float32), array([1.2, 1. ], dtype=float32))

    A cumulative average counts its batches; :meth:`get` returns the counter too:

    >>> layer = BatchNormLayer("mean", "var", 0.0, "batch_mean", "batch_var", counter="n")
    >>> stats = RunningStatistics([layer], {"mean": np.zeros(1), "var": np.ones(1)}, {"n": 1})
    >>> stats.update([np.array([3.0]), np.array([1.0])])
    >>> stats.get()
    {'mean': array([1.5], dtype=float32), 'var': array([1.], dtype=float32), 'n': array(2)}
    """

    def __init__(self, layers, values, counts=None):
        self.layers = list(layers)
        self.values = {name: np.array(value, dtype=np.float32) for name, value in values.items()}
        self.counts = {name: int(count) for name, count in (counts or {}).items()}

    def __bool__(self):
        return bool(self.layers)

    @property
    def output_names(self):
        """The batch statistics the training graph returns, two per layer (mean, variance)."""
        return [name for layer in self.layers for name in (layer.mean_output, layer.var_output)]

    @property
    def names(self):
        """The initializers holding the running statistics, two per layer (mean, variance)."""
        return [name for layer in self.layers for name in (layer.running_mean, layer.running_var)]

    def update(self, batch_values, running=None, counts=None):
        """Blend the batch statistics ``batch_values`` (:attr:`output_names` order) in.

        The one update of the running statistics, for numpy arrays and torch
        tensors alike: by default into :attr:`values` and :attr:`counts`; with
        ``running`` and ``counts``, into those mappings in place (name to
        tensor: :class:`helpers.OrtTorchModule`'s buffers), each batch statistic
        converted to its running one's array type, device and shape.

        Parameters
        ----------
        batch_values : list of arrays or tensors
        running : dict, optional
            Initializer name to its running statistic, updated in place.
        counts : dict, optional
            Counter name to the batches seen (an int, or a tensor updated in place).

        Examples
        --------
        >>> import torch
        >>> layer = BatchNormLayer("mean", "var", 0.5, "batch_mean", "batch_var")
        >>> buffers = {"mean": torch.zeros(2), "var": torch.ones(2)}
        >>> RunningStatistics([layer], {}).update([torch.ones(2), torch.ones(2)], buffers, {})
        >>> buffers["mean"]
        tensor([0.5000, 0.5000])
        """
        running = self.values if running is None else running
        counts = self.counts if counts is None else counts
        for layer, mean, var in zip(self.layers, batch_values[0::2], batch_values[1::2]):
            if layer.counter is not None:
                counts[layer.counter] += 1
            running_mean, running_var = running[layer.running_mean], running[layer.running_var]
            count = None if layer.counter is None else int(counts[layer.counter])
            layer.blend(
                running_mean, running_var, _like(mean, running_mean), _like(var, running_var), count
            )

    def copy(self):
        """Another :class:`RunningStatistics` of the same layers, starting from these values."""
        return RunningStatistics(self.layers, self.values, self.counts)

    def get(self):
        """A copy of the running statistics, name to array, and of the batch counters (int64)."""
        counts = {name: np.array(count, dtype=np.int64) for name, count in self.counts.items()}
        return {**{name: value.copy() for name, value in self.values.items()}, **counts}

    def set(self, values):
        """Overwrite the running statistics and counters with ``values`` (as :meth:`get` gives)."""
        expected = [*self.values, *self.counts]
        if set(expected) != set(values):
            raise ValueError(
                f"Running statistics {sorted(expected)} expected, got {sorted(values)}."
            )
        for name, value in values.items():
            if name in self.counts:
                self.counts[name] = int(value)
            else:
                shape = self.values[name].shape
                self.values[name] = np.array(value, dtype=np.float32).reshape(shape)


def _like(batch, running):
    """``batch`` as an array or tensor of ``running``'s kind, dtype, device and shape."""
    if isinstance(running, np.ndarray):
        return np.asarray(batch, dtype=running.dtype).reshape(running.shape)
    return batch.to(running.device, running.dtype).reshape(running.shape)


def statistic_initializers(values):
    """The running means and variances of ``values`` (:meth:`RunningStatistics.get`), no counter.

    They are the initializers of the model; the counters are not.

    Examples
    --------
    >>> statistic_initializers({"mean": np.zeros(2, dtype=np.float32), "n": np.array(3)})
    {'mean': array([0., 0.], dtype=float32)}
    """
    return {name: value for name, value in values.items() if np.asarray(value).dtype.kind == "f"}


def cumulative_layers(model):
    """The layers of ``model`` with a cumulative average, as its metadata records them.

    Returns
    -------
    dict
        Running mean's initializer name to ``{"counter": name, "count": batches seen}``.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2, momentum=None))
    >>> cumulative_layers(export_for_training(net, torch.zeros(4, 3)))
    {'1.running_mean': {'counter': '1.num_batches_tracked', 'count': 0}}
    """
    for prop in model.metadata_props:
        if prop.key == CUMULATIVE_METADATA_KEY:
            return json.loads(prop.value)
    return {}
