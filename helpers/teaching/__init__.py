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
  notebooks' first cells (``python -m helpers.teaching.learning_path``).

What a notebook calls is importable from the package itself, loaded on first use:
``from helpers.teaching import format_table, plot_loss_curves``.
"""

from ..portable.module_names import lazy_names

#: Each public name a notebook may call, and the module that defines it.
_PUBLIC = {
    "train_side_by_side": ".comparison",
    "summarize_runs": ".comparison",
    "check_same_level": ".comparison",
    "split_standardized": ".datasets",
    "make_synthetic_regression": ".datasets",
    "load_diabetes_standardized": ".datasets",
    "make_friedman1_standardized": ".datasets",
    "load_diabetes_scaled": ".datasets",
    "CLASSIFICATION_DATASETS": ".datasets",
    "load_classification_standardized": ".datasets",
    "random_regression": ".datasets",
    "PARTS": ".graph_parts",
    "operators_by_part": ".graph_parts",
    "gradient_graph_parts": ".graph_parts",
    "summarize_parts": ".graph_parts",
    "plot_kernel_times": ".kernel_plots",
    "plot_kernel_comparison": ".kernel_plots",
    "ACTIVATIONS": ".model_factories",
    "mlp_onnx": ".model_factories",
    "use_device": ".notebook",
    "REPOSITORY": ".notebook",
    "repository_path": ".notebook",
    "MAINTAINED_PYTHON": ".notebook",
    "maintained_python": ".notebook",
    "run_python": ".notebook",
    "literal_parameter": ".notebook",
    "layer_sizes_parameter": ".notebook",
    "require": ".notebook",
    "check_claim": ".notebook",
    "milestone_rows": ".notebook",
    "COLORS": ".palette",
    "OTHER": ".palette",
    "UNNAMED": ".palette",
    "LINESTYLES": ".palette",
    "library_of": ".palette",
    "color": ".palette",
    "shades": ".palette",
    "line_styles": ".palette",
    "plot_loss_panels": ".panels",
    "bar_style": ".plotting",
    "new_axes": ".plotting",
    "loss_label": ".plotting",
    "plot_loss_curves": ".plotting",
    "plot_training_history": ".plotting",
    "plot_coefficients": ".plotting",
    "plot_loss_spread": ".plotting",
    "mlp_weight_names": ".sklearn_bridge",
    "mlp_coefficient_names": ".sklearn_bridge",
    "mlp_onnx_weights": ".sklearn_bridge",
    "onnx_weights_of": ".sklearn_bridge",
    "mlp_with_weights": ".sklearn_bridge",
    "fit_first_epoch": ".sklearn_training",
    "continue_mlp_training": ".sklearn_training",
    "mlp_update_parameters": ".sklearn_training",
    "column_format": ".tables",
    "BAR_COLOR": ".tables",
    "format_table": ".tables",
    "TORCH_LOSSES": ".torch_reference",
    "torch_fit": ".torch_reference",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())
