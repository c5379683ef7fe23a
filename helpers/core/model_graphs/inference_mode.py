"""The graph of a model as it runs for predictions, as torch's ``.eval()`` runs a module.

A torch module exported for training keeps its layers in training mode:
``Dropout`` drops units and ``BatchNormalization`` normalizes with the
batch's statistics. Predictions, exported models and the evaluation models
of the training artifacts need them in inference mode.
"""

import onnx

from ..graphs.graph_nodes import is_onnx_op
from ..layers.batch_norm import batch_norm_in_training_mode


def inference_graph(onx):
    """Return ``onx`` as it must run for predictions, as torch's ``.eval()`` runs a module.

    A torch module exported for training (``TrainingMode.TRAINING``) keeps
    its layers in training mode:

    * ``Dropout`` nodes have their ``training_mode`` input set to true, so
      that the training graph drops units; run as they are, they would drop
      units in every prediction too. Each becomes an ``Identity`` (whose
      gradient, unlike that of ``Dropout`` without ``training_mode``, is
      exact: onnxruntime's ``DropoutGrad`` still scales by
      ``1 / (1 - ratio)``); one whose mask output is used keeps its node,
      without ``training_mode``.
    * ``BatchNormalization`` nodes normalize with the batch's statistics;
      each is put in inference mode, normalizing with its running
      statistics (the initializers the training updates).

    A model without such a node is returned unchanged (the same object).

    Parameters
    ----------
    onx : onnx.ModelProto

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Dropout", ["x", "ratio", "train"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor("ratio", TensorProto.FLOAT, [], [0.5]),
    ...      helper.make_tensor("train", TensorProto.BOOL, [], [True])])
    >>> node = inference_graph(helper.make_model(graph)).graph.node[0]
    >>> node.op_type, list(node.input), list(node.output)
    ('Identity', ['x'], ['y'])
    """
    if not any(_in_training_mode(n) for n in onx.graph.node):
        return onx
    model = onnx.ModelProto()
    model.CopyFrom(onx)
    used = {name for node in model.graph.node for name in node.input} | {
        o.name for o in model.graph.output
    }
    for node in model.graph.node:
        if not _in_training_mode(node):
            continue
        if node.op_type == "BatchNormalization":
            del node.output[1:]
            kept = [a for a in node.attribute if a.name != "training_mode"]
            del node.attribute[:]
            node.attribute.extend(kept)
        elif len(node.output) > 1 and node.output[1] in used:
            del node.input[2:]
        else:
            node.CopyFrom(
                onnx.helper.make_node("Identity", [node.input[0]], [node.output[0]], name=node.name)
            )
    return model


def _in_training_mode(node):
    """Whether ``node`` is a ``Dropout`` or ``BatchNormalization`` that behaves differently in
    training."""
    if is_onnx_op(node, "Dropout"):
        return len(node.input) > 2 and bool(node.input[2])
    return is_onnx_op(node, "BatchNormalization") and batch_norm_in_training_mode(node)
