"""The artifacts one fit of :class:`helpers.OrtGradientOptimizer` trains with.

The training graph of the loss model (:mod:`helpers.core.model_graphs.training_graph`:
layers onnxruntime cannot train as exported, rewritten; the batch
statistics of batch normalization as extra outputs) goes to
``generate_artifacts`` (:func:`helpers.whole_training.artifacts.generate_training_artifacts`);
the evaluation model a user keeps (``artifact_dir``) is the loss model in
inference mode, not the training graph.
"""

import os

import onnx

from ..core.model_graphs.inference_mode import inference_graph
from ..core.model_graphs.onnx_graph import initializers_to_inputs
from ..core.model_graphs.training_graph import training_graph
from .artifacts import generate_training_artifacts


def loss_training_graph(onx_loss, fast_gradients=True, random_draws=False):
    """The training graph of a model from :func:`helpers.add_loss_output`.

    With ``random_draws``, its random operators take their values as inputs, after the batch's
    (:mod:`helpers.core.model_graphs.random_draws`).

    The inputs that are not initializers (features, label, sample weights)
    hold one row per sample: their first dimension is named as the batch
    (see :func:`helpers.core.model_graphs.training_graph.training_graph`).

    Examples
    --------
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> graph = loss_training_graph(add_loss_output(mlp_onnx(3, hidden=(4,))))
    >>> graph.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param, bool(graph.statistics)
    ('batch', False)
    """
    initializers = {i.name for i in onx_loss.graph.initializer}
    per_row = [i.name for i in onx_loss.graph.input if i.name not in initializers]
    return training_graph(onx_loss, per_row, fast_gradients, random_draws)


def write_training_artifacts(graph, names, folder, solver, adamw):
    """Write the artifacts of a training graph into ``folder``.

    Parameters
    ----------
    graph : helpers.core.model_graphs.training_graph.TrainingGraph
        From :func:`loss_training_graph`: the training model returns its
        batch statistics after the loss.
    names : list of str
        The weights to train.
    folder : str
        Existing folder that receives the artifacts.
    solver : str
        ``'adamw'`` or ``'sgd'``, as in :func:`generate_training_artifacts`.
    adamw : dict
        ``betas``, ``eps``, ``weight_decay`` of the AdamW optimizer model.

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from helpers import add_loss_output
    >>> from helpers.core.rewrites.gradient_rewrites import count_rewrites
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> graph = loss_training_graph(add_loss_output(mlp_onnx(3, hidden=(4,))))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_training_artifacts(graph, ["coefficient1", "intercept1"], folder, "sgd", {})
    ...     training_model = onnx.load(os.path.join(folder, "training_model.onnx"))
    >>> (
    ...     count_rewrites(training_model),
    ...     training_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param,
    ... )
    (1, 'batch')
    """
    generate_training_artifacts(
        graph.model,
        names,
        folder,
        solver,
        additional_output_names=graph.statistics.output_names,
        **adamw,
    )


def write_eval_model(folder, onx_loss, draws=()):
    """Replace the evaluation model of ``folder`` by the loss model as it runs for inference.

    ``generate_artifacts`` derives the evaluation model from the training
    graph it is given, rewritten for training
    (:mod:`helpers.core.model_graphs.training_graph`): batch normalization with the
    batch's statistics, ``Relu`` as a mask. The evaluation model written
    instead is ``onx_loss`` in inference mode
    (:func:`helpers.core.model_graphs.inference_mode.inference_graph`), its parameters fed
    from the checkpoint, as ``generate_artifacts`` feeds them.

    Parameters
    ----------
    folder : str
        A folder :func:`write_training_artifacts` wrote into.
    onx_loss : onnx.ModelProto
        The model the artifacts were written from, before any rewrite.
    draws : sequence of str
        The random inputs of the training graph: the inference model draws nothing.

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> onx_loss = add_loss_output(mlp_onnx(3, hidden=(4,)))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_training_artifacts(
    ...         loss_training_graph(onx_loss), ["intercept1"], folder, "sgd", {}
    ...     )
    ...     write_eval_model(folder, onx_loss)
    ...     evaluation = onnx.load(os.path.join(folder, "eval_model.onnx"))
    >>> (
    ...     "Relu" in [n.op_type for n in evaluation.graph.node],
    ...     [i.name for i in evaluation.graph.input][:2],
    ... )
    (True, ['X', 'label'])
    """
    path = os.path.join(folder, "eval_model.onnx")
    generated = [i.name for i in onnx.load(path).graph.input if i.name not in set(draws)]
    initializers = {i.name for i in onx_loss.graph.initializer}
    evaluation = initializers_to_inputs(
        inference_graph(onx_loss), [n for n in generated if n in initializers]
    )
    if [i.name for i in evaluation.graph.input] != generated:
        raise RuntimeError(
            f"generate_artifacts wrote an evaluation model with inputs {generated}; the inference "
            f"model has {[i.name for i in evaluation.graph.input]}."
        )
    onnx.save(evaluation, path)
