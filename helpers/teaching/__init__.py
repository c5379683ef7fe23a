"""What the notebooks use to teach: data sets, small models, plots, and side-by-side comparisons
with scikit-learn.

* :mod:`~helpers.teaching.datasets` and :mod:`~helpers.teaching.model_factories`:
  standardized data sets and ONNX models built directly;
* :mod:`~helpers.teaching.sklearn_bridge` and
  :mod:`~helpers.teaching.sklearn_training`: scikit-learn's MLPs and the
  ONNX weights of the same network, and training scikit-learn's MLP one
  epoch at a time;
* :mod:`~helpers.teaching.comparison`: several seeds of two trainers, side
  by side;
* :mod:`~helpers.teaching.torch_reference`: the torch training an optimizer
  is compared with (the same batches, the same update);
* :mod:`~helpers.teaching.plotting`, :mod:`~helpers.teaching.panels` and
  :mod:`~helpers.teaching.kernel_plots`:
  the figures of the notebooks;
* :mod:`~helpers.teaching.graph_parts`: the nodes of a training graph, by part of the
  step (forward, loss, gradient, accumulation, optimizer);
* :mod:`~helpers.teaching.palette`: one colour per library in every figure;
* :mod:`~helpers.teaching.tables`: the tables of the notebooks, rounded, with
  units in their headers;
* :mod:`~helpers.teaching.notebook`: the device choice, the parameters and the claims of a notebook.
* :mod:`~helpers.teaching.learning_path`: the README's learning path, written from the
  notebooks' first cells.
"""
