"""What both training APIs share, in sub-packages that import only those listed before them.

* :mod:`~helpers.core.machine`: sessions, the installed runtime, devices, files on disk;
* :mod:`~helpers.core.graphs`: what every graph edit shares, small graphs, loss formulas;
* :mod:`~helpers.core.layers`: layers onnxruntime cannot train as exported, rewritten;
* :mod:`~helpers.core.rewrites`: exact rewrites for faster gradient kernels;
* :mod:`~helpers.core.model_graphs`: a model exported from torch, its training graph,
  its inference graph and its weights;
* :mod:`~helpers.core.inputs`: checks of the data given to ``fit``, ``predict``, ``score``;
* :mod:`~helpers.core.updates`: learning rates, update rules, penalties;
* :mod:`~helpers.core.training`: the scikit-learn estimator both optimizers derive from;
* :mod:`~helpers.core.export`: one training step of either optimizer as a standard ONNX model.

``tests/test_import_layers.py`` checks that order, and that :mod:`helpers.core` imports
neither API package.
"""
