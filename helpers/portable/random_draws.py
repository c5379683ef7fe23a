"""The random values a step draws: ``Dropout`` masks and the like, from the runner's seed.

A training graph built with random draws
(:func:`helpers.core.model_graphs.random_draws.random_operators_as_inputs`) takes the random
values of its ``Dropout`` (``RandomNormal``, ``RandomUniform``, their ``Like`` forms,
``Bernoulli``) as inputs; :class:`RandomDraw` says what each input holds and draws it from a
``numpy.random.Generator``. The optimizers and :class:`~helpers.portable.trainer.PortableTrainer`
draw with it alike. numpy only.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class RandomDraw:
    """One input of the training graph that holds random values.

    A step model records its draws (:meth:`to_record`) with their shape as a function of the
    batch's rows, ``dims``: one ``[constant, per_row]`` pair per dimension.

    Parameters
    ----------
    name : str
        The graph input.
    kind : str
        ``'dropout'`` (a scaled keep-mask), ``'uniform'`` or ``'normal'``.
    params : tuple of float
        ``(ratio,)``, ``(low, high)`` or ``(mean, scale)``.
    dtype : numpy.dtype
        The input's element type.
    like : str, optional
        The value whose shape the draw takes (None: ``shape``).
    shape : tuple of int, optional
        The draw's fixed shape, when ``like`` is None.
    operator : str
        The node it replaces, for messages.

    Examples
    --------
    >>> draw = RandomDraw("m", "dropout", (0.5,), np.dtype("float32"), like="x")
    >>> draw.sample(np.random.default_rng(0), (2, 3)).tolist()
    [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    >>> again, dims = RandomDraw.from_record(draw.to_record([[0, 1], [3, 0]]))
    >>> again == draw, shape_for_rows(dims, 5)
    (True, (5, 3))
    """

    name: str
    kind: str
    params: tuple
    dtype: np.dtype
    like: str = None
    shape: tuple = None
    operator: str = ""

    def sample(self, generator, shape):
        """Draw the input for a value of ``shape`` from ``generator``.

        ``generator`` has the methods of a :class:`numpy.random.Generator`: ``random(size,
        dtype)`` (uniform on [0, 1)) and ``standard_normal(size, dtype)``.
        """
        if self.kind == "dropout":
            ratio = np.float32(self.params[0])
            scale = np.float32(1) / (np.float32(1) - ratio)  # onnxruntime's, in float32
            kept = generator.random(shape, dtype=np.float32) >= ratio
            return np.multiply(kept, scale, dtype=self.dtype)
        precision = np.float64 if self.dtype == np.float64 else np.float32
        if self.kind == "uniform":
            low, high = self.params
            values = low + (high - low) * generator.random(shape, dtype=precision)
        else:
            mean, scale = self.params
            values = mean + scale * generator.standard_normal(shape, dtype=precision)
        return values.astype(self.dtype)

    def to_record(self, dims):
        """The draw as a step model's record keeps it (JSON), with its ``dims``."""
        fields = dataclasses.asdict(self)
        fields.update(params=list(self.params), dtype=np.dtype(self.dtype).name, dims=dims)
        if self.shape is not None:
            fields["shape"] = list(self.shape)
        return fields

    @classmethod
    def from_record(cls, fields):
        """The draw and its ``dims`` from :meth:`to_record`'s fields."""
        fields = dict(fields)
        dims = fields.pop("dims")
        fields.update(params=tuple(fields["params"]), dtype=np.dtype(fields["dtype"]))
        if fields.get("shape") is not None:
            fields["shape"] = tuple(fields["shape"])
        return cls(**fields), dims


def shape_for_rows(dims, rows):
    """The shape of a draw for a batch of ``rows`` rows, from its ``[constant, per_row]`` dims.

    Examples
    --------
    >>> shape_for_rows([[0, 1], [64, 0]], 32)
    (32, 64)
    """
    return tuple(int(constant + per_row * rows) for constant, per_row in dims)
