"""What a torch model takes as input, and random data of that kind.

``bench_your_model.ipynb`` trains a module it knows nothing about. Its first
layer often says what one sample is: ``nn.Linear(64, ...)`` takes rows of 64
floats, ``nn.Embedding(1000, ...)`` takes token ids below 1000. A
convolution says its channels, not the size of an image or a sequence, so
such a model needs its ``input_shape`` given. :func:`input_spec` reads what
it can and says what is missing; :func:`random_inputs` and
:func:`random_targets` draw data of that kind.

Only numpy is imported at module level: the peak-memory processes import
this module to draw their data without paying for torch.
"""

import numpy as np

#: The sequence length of token ids when a model starting with ``nn.Embedding`` is not told.
DEFAULT_SEQUENCE_LENGTH = 32
#: What a convolution's samples look like, for the message asking for ``input_shape``.
_CONV_SHAPES = {
    1: "(channels, length), e.g. [{c}, 32]",
    2: "(channels, height, width), e.g. [{c}, 28, 28]",
    3: "(channels, depth, height, width), e.g. [{c}, 8, 28, 28]",
}


class InputSpec:
    """The input of a model: the shape of one sample, its dtype, the vocabulary of token ids.

    Parameters
    ----------
    shape : tuple of int
        One sample, without the batch dimension.
    dtype : {'float32', 'int64'}
    vocabulary : int or None
        Token ids are drawn in ``[0, vocabulary)`` (``int64`` only).
    source : str
        Where the shape and dtype come from, for the notebook to say.

    Examples
    --------
    >>> InputSpec((4, 32), "float32", source="given")
    InputSpec(shape=(4, 32), dtype='float32', vocabulary=None, source='given')
    """

    def __init__(self, shape, dtype, vocabulary=None, source=""):
        self.shape, self.dtype, self.vocabulary, self.source = (
            tuple(shape),
            dtype,
            vocabulary,
            source,
        )

    def __repr__(self):
        return (
            f"InputSpec(shape={self.shape}, dtype={self.dtype!r}, vocabulary={self.vocabulary}, "
            f"source={self.source!r})"
        )


def weighted_layers(module):
    """The layers of ``module`` that hold weights of their own (no sub-layer), in the order it
    registers them.

    Examples
    --------
    >>> from torch import nn
    >>> [
    ...     type(m).__name__
    ...     for m in weighted_layers(nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.LayerNorm(2)))
    ... ]
    ['Linear', 'LayerNorm']
    """
    return (
        layer
        for layer in module.modules()
        if not list(layer.children()) and any(True for _ in layer.parameters(recurse=False))
    )


def first_layer(module):
    """The first layer of ``module`` that holds weights, in the order the module registers them.

    Examples
    --------
    >>> from torch import nn
    >>> first_layer(nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.ReLU()))
    Linear(in_features=4, out_features=2, bias=True)
    """
    return next(weighted_layers(module), None)


def _embedding(module):
    from torch import nn  # noqa: PLC0415  (the caller built a torch module: torch is imported)

    return next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)


def _shape_from_layer(layer):
    """``(shape, dtype, source)`` that ``layer`` implies, or a ValueError saying what to give."""
    from torch import nn  # noqa: PLC0415

    name = type(layer).__name__
    if isinstance(layer, nn.Embedding):
        return (
            (DEFAULT_SEQUENCE_LENGTH,),
            "int64",
            f"first layer {name}: sequences of {DEFAULT_SEQUENCE_LENGTH} token ids below "
            f"{layer.num_embeddings}",
        )
    if isinstance(layer, nn.Linear):
        return (
            (layer.in_features,),
            "float32",
            f"first layer {name}: rows of {layer.in_features} features",
        )
    if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        rank = len(layer.kernel_size)
        expected = _CONV_SHAPES.get(rank, "(channels, ...)").format(c=layer.in_channels)
        raise ValueError(
            f"The first layer is {name}: it says its {layer.in_channels} input channels, not the "
            f"size of a sample. Give input_shape, {expected}."
        )
    raise ValueError(
        f"The first layer is {name}: give input_shape (one sample, without the batch dimension) "
        "and input_dtype ('float32' or 'int64')."
    )


def input_spec(module, input_shape=None, input_dtype=None):
    """The input of ``module``: ``input_shape`` and ``input_dtype`` when given, else read from its
    first layer.

    ``nn.Linear(d, ...)`` first: rows of ``d`` float32 features.
    ``nn.Embedding(v, ...)`` first: int64 token ids below ``v``, sequences
    of :data:`DEFAULT_SEQUENCE_LENGTH` unless ``input_shape`` says. A
    convolution or another first layer: ``input_shape`` is needed.

    Parameters
    ----------
    module : torch.nn.Module
    input_shape : sequence of int, optional
        One sample, without the batch dimension.
    input_dtype : {'float32', 'int64'}, optional

    Returns
    -------
    InputSpec

    Raises
    ------
    ValueError
        When the shape cannot be read from the model and is not given, or
        int64 ids are asked of a model without an ``nn.Embedding``.

    Examples
    --------
    >>> from torch import nn
    >>> tokens = nn.Sequential(nn.Embedding(50, 8), nn.Flatten(), nn.Linear(8 * 32, 3))
    >>> input_spec(tokens).vocabulary
    50
    >>> input_spec(nn.Linear(16, 1)).shape
    (16,)
    >>> input_spec(nn.Conv2d(1, 4, 3))
    Traceback (most recent call last):
    ...
    ValueError: The first layer is Conv2d: it says its 1 input channels, not the size of a sample. \
Give input_shape, (channels, height, width), e.g. [1, 28, 28].
    """
    embedding = _embedding(module)
    layer = first_layer(module)
    if input_shape is None:
        shape, dtype, source = _shape_from_layer(layer)
    else:
        shape, source = tuple(int(d) for d in input_shape), "input_shape"
        dtype = "int64" if embedding is not None and embedding is layer else "float32"
    if input_dtype is not None:
        dtype, source = str(input_dtype), f"{source}, input_dtype"
    if dtype not in ("float32", "int64"):
        raise ValueError(f"input_dtype must be 'float32' or 'int64', got {dtype!r}.")
    if dtype == "int64" and embedding is None:
        raise ValueError(
            "int64 inputs are token ids: the model has no nn.Embedding to say how many ids there "
            "are."
        )
    vocabulary = embedding.num_embeddings if dtype == "int64" else None
    return InputSpec(shape, dtype, vocabulary, source)


def random_inputs(n_samples, spec, random_state=0):
    """``n_samples`` random samples of ``spec``: standard normal floats, or token ids below its
    vocabulary.

    Examples
    --------
    >>> X = random_inputs(5, InputSpec((3,), "int64", vocabulary=10))
    >>> X.shape, X.dtype, bool(X.max() < 10)
    ((5, 3), dtype('int64'), True)
    """
    rng = np.random.default_rng(random_state)
    if spec.dtype == "int64":
        return rng.integers(0, spec.vocabulary, (n_samples, *spec.shape), dtype=np.int64)
    return rng.standard_normal((n_samples, *spec.shape), dtype=np.float32)


def random_targets(X, task, n_outputs, random_state=0):
    """Targets a model can learn from ``X``: a fixed random function of each sample.

    Float samples go through a random linear map; token ids through a
    random table averaged over the sequence (what an embedding averages).
    ``'classification'`` keeps the index of the largest of ``n_outputs``
    values (int64 class indices), ``'regression'`` their ``tanh`` (float32,
    shape ``(n, n_outputs)``).

    Examples
    --------
    >>> X = random_inputs(200, InputSpec((4, 8), "float32"))
    >>> labels = random_targets(X, "classification", 7)
    >>> labels.dtype, sorted(set(labels)) == list(range(7))
    (dtype('int64'), True)
    >>> random_targets(X, "regression", 1).shape
    (200, 1)
    """
    rng = np.random.default_rng(random_state + 1)
    if np.issubdtype(X.dtype, np.integer):
        table = rng.standard_normal((int(X.max()) + 1, n_outputs))
        values = table[X.reshape(len(X), -1)].mean(axis=1) * np.sqrt(X[0].size)
    else:
        flat = X.reshape(len(X), -1).astype(np.float64)
        values = flat @ rng.standard_normal((flat.shape[1], n_outputs)) / np.sqrt(flat.shape[1])
    if task == "classification":
        return values.argmax(axis=1).astype(np.int64)
    return np.tanh(values).astype(np.float32)


def output_width(module, spec):
    """How many values ``module`` returns per sample (the classes of a classifier), from two random
    samples.

    The module runs once in inference mode (``eval``), so that its buffers
    (``BatchNorm``'s running statistics) stay as they are.

    Raises
    ------
    ValueError
        When the module does not take samples of ``spec`` (with torch's
        reason), or does not return a batch of rows ``(batch, outputs)``.

    Examples
    --------
    >>> import torch
    >>> output_width(torch.nn.Linear(16, 7), InputSpec((16,), "float32"))
    7
    """
    import torch  # noqa: PLC0415

    training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module(torch.from_numpy(random_inputs(2, spec)))
    except Exception as exc:
        raise ValueError(
            f"The model does not take samples of shape {list(spec.shape)} ({spec.dtype}): {exc}"
        ) from exc
    finally:
        module.train(training)
    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"The model returns {shape} for 2 samples: it must return (batch, outputs), "
            "one row of scores or values per sample."
        )
    return int(out.shape[1])
