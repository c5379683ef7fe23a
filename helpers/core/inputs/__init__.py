"""The data given to ``fit``, ``predict`` and ``score``: checks, class labels, feature names.

It may import :mod:`helpers.core.machine` and :mod:`helpers.core.graphs`.
"""
