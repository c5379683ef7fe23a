"""The matrix products of one training step alone: the references of the scaling benchmark.

:class:`NumpyMatmul` runs the five products of a one-hidden-layer MLP's step in numpy (BLAS);
:class:`OrtStepProducts` runs the same products in onnxruntime's kernels, one session call per
step: the runtime's own bound, which no step of either training API can beat. Both have the
trainers' ``prepare(X, y)`` and ``step(*prepared)`` (:mod:`benchmarks.workloads.trainers`
drives them), and ``flops(batch_size)``.
"""

import numpy as np


class NumpyMatmul:
    """The matrix products of one training step of a one-hidden-layer MLP, in numpy.

    With ``X`` (batch, d), ``W1`` (d, h), ``W2`` (h, 1), ``g`` the gradient
    of the loss with respect to the output (batch, 1), a step computes five
    products (:data:`PRODUCTS`): two forward, ``h = X @ W1`` and
    ``p = h @ W2``; three backward, ``grad_W2 = h.T @ g``,
    ``grad_h = g @ W2.T`` and ``grad_W1 = X.T @ grad_h``. The gradient with
    respect to ``X`` is not needed, so a training step has no sixth product.
    Everything else (bias, ReLU and its mask, the loss, the update) is left
    out: their time over this one is the overhead of a framework.

    Parameters
    ----------
    layers : list of tuple
        Two ``(W, b)`` layers (see :func:`benchmarks.workloads.models.mlp_layers`).

    Examples
    --------
    >>> layers = [(np.ones((3, 4), np.float32), np.zeros(4, np.float32)),
    ...           (np.ones((4, 1), np.float32), np.zeros(1, np.float32))]
    >>> products = NumpyMatmul(layers)
    >>> products.step(*products.prepare(np.ones((2, 3), np.float32), np.zeros(2, np.float32)))
    0.0
    >>> products.flops(batch_size=2)  # 2 x 2 x (12 + 4 + 4 + 4 + 12)
    144
    """

    #: The products of a step, by name, for the record.
    PRODUCTS = ("X @ W1", "h @ W2", "h.T @ g", "g @ W2.T", "X.T @ grad_h")

    def __init__(self, layers):
        if len(layers) != 2:
            raise ValueError(f"NumpyMatmul expects one hidden layer (2 layers), got {len(layers)}.")
        (self.W1, _), (self.W2, _) = layers
        self.W2T = np.ascontiguousarray(self.W2.T)

    def prepare(self, X, y):
        """The batch, and a gradient ``g`` of the output's shape (drawn once per batch)."""
        g = (y.reshape(-1, 1) - 0.5).astype(np.float32)
        h = np.maximum(X @ self.W1, 0)
        return X, g, h

    def step(self, X, g, h):
        """The five products of one step; returns nothing useful (0.0)."""
        hidden = X @ self.W1
        out = h @ self.W2
        grad_W2 = h.T @ g
        grad_h = g @ self.W2T
        grad_W1 = X.T @ grad_h
        del hidden, out, grad_W2, grad_W1
        return 0.0

    def flops(self, batch_size):
        """Floating point operations of the five products (2 per multiply-add)."""
        d, h = self.W1.shape
        o = self.W2.shape[1]
        return 2 * batch_size * (d * h + h * o + h * o + o * h + d * h)


class OrtStepProducts:
    """The matrix products of one training step, run by onnxruntime's kernels: the runtime's bound.

    The five products of :class:`NumpyMatmul` in one ONNX graph
    (:class:`helpers.measure.profiling.StepProducts`: the forward ``MatMul`` nodes,
    the backward ``Gemm`` nodes with the transposes a gradient graph uses),
    run in one session call per step. Both training APIs run these kernels
    and more: no step of theirs can be faster, and their time over this one
    is what the rest of the step (biases, ReLU, loss, update, calls) costs.
    numpy's BLAS may be faster or slower than onnxruntime's own GEMM (MLAS),
    so :class:`NumpyMatmul` is no bound for onnxruntime; this is.

    Parameters
    ----------
    layers : list of tuple
        Two ``(W, b)`` layers (see :func:`benchmarks.workloads.models.mlp_layers`), one output.
    n_threads : int, optional
        Intra-op threads of the session, as for the optimizers.

    Examples
    --------
    >>> layers = [(np.ones((3, 4), np.float32), np.zeros(4, np.float32)),
    ...           (np.ones((4, 1), np.float32), np.zeros(1, np.float32))]
    >>> bound = OrtStepProducts(layers, n_threads=1)
    >>> bound.step(*bound.prepare(np.ones((2, 3), np.float32), np.zeros(2, np.float32)))
    0.0
    >>> bound.flops(batch_size=2) == NumpyMatmul(layers).flops(batch_size=2)
    True
    """

    #: The products of a step, by name, as :class:`NumpyMatmul`'s.
    PRODUCTS = NumpyMatmul.PRODUCTS

    def __init__(self, layers, n_threads=None):
        from helpers.measure.profiling import StepProducts  # noqa: PLC0415

        if len(layers) != 2:
            raise ValueError(
                f"OrtStepProducts expects one hidden layer (2 layers), got {len(layers)}."
            )
        (W1, _), (W2, _) = layers
        if W2.shape[1] != 1:
            raise ValueError(f"OrtStepProducts expects one output, the network has {W2.shape[1]}.")
        self.products = StepProducts(W1.shape[0], W1.shape[1], n_threads=n_threads)
        # the network's own weights: the values change no time, but the step is the step of this
        # network
        self.products.w1 = np.ascontiguousarray(W1, dtype=np.float32)
        self.products.w2 = np.ascontiguousarray(W2, dtype=np.float32)

    def prepare(self, X, y):
        """The batch as the session takes it (the gradient ``g`` is drawn once per batch size)."""
        return (np.ascontiguousarray(X, dtype=np.float32),)

    def step(self, X):
        """The five products of one step, one session call; returns nothing useful (0.0)."""
        self.products.run(X)
        return 0.0

    def flops(self, batch_size):
        """Floating point operations of the five products (2 per multiply-add)."""
        return self.products.flops(batch_size)
