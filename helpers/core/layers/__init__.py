"""Layers onnxruntime 1.19.2 cannot train as exported, rewritten exactly as torch trains them.

Activations, padding, poolings, resampling, normalizations, batch normalization and its
running statistics, an embedding's padding row. It may import :mod:`helpers.core.machine`
and :mod:`helpers.core.graphs`.
"""
