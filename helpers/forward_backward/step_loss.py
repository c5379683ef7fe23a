"""The forward/backward API's loss, as the step model takes it.

The step model of :class:`helpers.OrtGradientForwardBackwardOptimizer` is built from the model
followed by its loss class's graph (:meth:`~helpers.forward_backward.base_loss.BaseLearningLoss.
gradient_model`, the loss value): ``generate_artifacts`` derives the gradients of the weights
from it. The gradient with respect to the prediction is then the loss class's own, as ``fit``
computes it (the log loss's gradient is ``p - y``, not that of its clipped value), and the
penalty's gradient is added to the weights' as :mod:`helpers.core.updates.penalties` adds it.
Every sample is weighted: the step takes sample weights (ones for an unweighted fit, the same
values).
"""

import onnx
from onnx import TensorProto, helper

from ..core.export.graph_inlining import inline_graph
from ..core.export.optimizer_step import StepLoss
from ..core.graphs.graph_nodes import nodes_reaching
from ..core.graphs.onnx_function import OPSET
from ..core.machine.devices import Device
from ..core.machine.runtime import main_opset
from .base_loss import LABEL, PREDICTION, WEIGHT


def _free_name(name, taken):
    while name in taken:
        name += "_"
    return name


def forward_backward_step_loss(model, loss, penalty, weights):
    """The :class:`~helpers.core.export.optimizer_step.StepLoss` of the forward/backward API.

    Parameters
    ----------
    model : onnx.ModelProto
        The model trained, one output.
    loss : helpers.forward_backward.base_loss.BaseLearningLoss
    penalty : helpers.core.updates.penalties.BaseLearningPenalty
    weights : list of str
        The trained weights.

    Returns
    -------
    helpers.core.export.optimizer_step.StepLoss
        Its model's inputs: the model's, then ``label`` and ``sample_weight``; its output
        ``loss``.

    Examples
    --------
    >>> from helpers import SquareLearningLoss, NoLearningPenalty
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> step_loss = forward_backward_step_loss(
    ...     mlp_onnx(3, hidden=(4,)), SquareLearningLoss(), NoLearningPenalty(), ["intercept1"])
    >>> [i.name for i in step_loss.model.graph.input], step_loss.penalty
    (['X', 'label', 'sample_weight'], None)
    """
    if main_opset(model) < OPSET:
        raise ValueError(
            f"The model has opset {main_opset(model)}: the step model of the forward/backward "
            f"API needs opset {OPSET} or more (its loss graph's). Convert the model with a newer "
            "opset (target_opset)."
        )
    output = model.graph.output[0]
    rank = len(output.type.tensor_type.shape.dim)
    graph = loss.gradient_model(rank, weighted=True)
    taken = {v.name for v in (*model.graph.input, *model.graph.initializer)}
    taken |= {name for node in model.graph.node for name in node.output}
    label, weight = _free_name("label", taken), _free_name("sample_weight", taken)
    loss_name = _free_name("loss", taken)
    bindings = {LABEL: label, PREDICTION: output.name, WEIGHT: weight}
    nodes, initializers = inline_graph(graph, {**bindings, "loss": loss_name}, "fb_loss__")
    loss_model = onnx.ModelProto()
    loss_model.CopyFrom(model)
    loss_model.graph.node.extend(nodes)
    loss_model.graph.initializer.extend(initializers)
    label_info = onnx.ValueInfoProto()
    label_info.CopyFrom(output)
    label_info.name = label
    batch = output.type.tensor_type.shape.dim[0]
    weight_info = helper.make_tensor_value_info(weight, TensorProto.FLOAT, [None])
    weight_info.type.tensor_type.shape.dim[0].CopyFrom(batch)
    loss_model.graph.input.extend([label_info, weight_info])
    del loss_model.graph.output[:]
    loss_model.graph.output.append(helper.make_tensor_value_info(loss_name, TensorProto.FLOAT, []))
    kept = nodes_reaching(loss_model.graph, {loss_name})
    del loss_model.graph.node[:]
    loss_model.graph.node.extend(kept)
    gradient = (graph, {**bindings, "gradient": f"{output.name}_grad"})
    penalty_graph = None
    if penalty.coefficients(weights):
        penalty_graph = penalty._function(Device("cpu"), list(weights)).model
    return StepLoss(loss_model, gradient, penalty_graph)
