"""A model's graphs: exported from torch, made trainable, in inference mode, its weights.

:mod:`~helpers.core.model_graphs.training_graph` is the copy onnxruntime's gradient
builders are given, with the layers and rewrites applied. It may import
:mod:`helpers.core.machine`, :mod:`helpers.core.graphs`, :mod:`helpers.core.layers` and
:mod:`helpers.core.rewrites`.
"""
