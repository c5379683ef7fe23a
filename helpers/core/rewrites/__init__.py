"""Exact rewrites of a training graph whose gradient kernels run faster.

Gathers, ReLU masks, convolutions as windows and one product, max poolings moved before
their activation. It may import :mod:`helpers.core.machine`, :mod:`helpers.core.graphs`
and :mod:`helpers.core.layers`.
"""
