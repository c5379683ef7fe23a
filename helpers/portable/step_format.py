"""What a step model takes and returns, and the record it carries.

A step model is one training step (forward, loss, gradients, update) written with standard ONNX
operators. Its graph:

* inputs: the batch (:attr:`StepRecord.batch_inputs`, one row per sample, the batch size free),
  the step count ``step`` (int64 scalar, from 1: the update's ``t``), then every value carried
  from one step to the next (:attr:`StepRecord.state`: the trained weights, the running
  statistics, the optimizer's buffers), each one an input with a default value, the
  initializer of the same name, which holds its value at export;
* outputs: ``loss`` (float scalar), then ``NAME.next`` for each name of the state, in order.

The record (JSON in the model's ``metadata_props`` under :data:`RECORD_KEY`) names those parts
and keeps the training parameters the exporter used, and the inference model whose weights
are the state's (:func:`inference_model`).
"""

import base64
import dataclasses
import json

import onnx

#: The key of ``metadata_props`` that holds the record of a step model.
RECORD_KEY = "helpers.portable.step"
#: The version of the step model's layout; a runner refuses another.
FORMAT_VERSION = 1
#: The input that counts the updates (int64 scalar, from 1).
STEP_INPUT = "step"
#: The output holding the batch's loss (before the update).
LOSS_OUTPUT = "loss"
#: Suffix of the output holding a state value after the step.
NEXT_SUFFIX = ".next"


@dataclasses.dataclass
class StepRecord:
    """The parts of a step model, and the parameters it was exported with.

    Attributes
    ----------
    batch_inputs : list of str
        Features, label, then sample weights when the loss takes them.
    state : list of str
        Values carried from step to step, in input order.
    trained : list of str
        The weights among :attr:`state` (the others are statistics and optimizer buffers).
    inference : bytes
        The inference model, serialized, without the state's values (:func:`inference_model`).
    prediction_output : str
        The output of the inference model that ``predict`` returns.
    parameters : dict
        The training parameters of the exporting optimizer (``batch_size``, ``max_iter``,
        ``random_state``, ``solver``, ``learning_rate``...): the runner's defaults.

    Examples
    --------
    >>> record = StepRecord(batch_inputs=["X", "label"], state=["w", "w.momentum_buffer"],
    ...                     trained=["w"], inference=b"")
    >>> record.next_name("w")
    'w.next'
    >>> StepRecord.from_json(record.to_json()) == record
    True
    """

    batch_inputs: list
    state: list
    trained: list
    inference: bytes
    prediction_output: str = "variable"
    parameters: dict = dataclasses.field(default_factory=dict)
    format: int = FORMAT_VERSION

    @staticmethod
    def next_name(name):
        """The output holding ``name`` after the step."""
        return name + NEXT_SUFFIX

    def to_json(self):
        """The record as the JSON string stored in the model."""
        fields = dataclasses.asdict(self)
        fields["inference"] = base64.b64encode(self.inference).decode("ascii")
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls, text):
        """The record stored as ``text``; a layout of another version raises ``ValueError``."""
        fields = json.loads(text)
        if fields.get("format") != FORMAT_VERSION:
            raise ValueError(
                f"This step model has layout version {fields.get('format')}; this runner reads "
                f"version {FORMAT_VERSION}. Export it again with this version of the project."
            )
        fields["inference"] = base64.b64decode(fields["inference"])
        return cls(**fields)


def write_record(model, record):
    """Store ``record`` in ``model`` (replacing a previous one).

    Examples
    --------
    >>> model = onnx.helper.make_model(onnx.helper.make_graph([], "step", [], []))
    >>> write_record(model, StepRecord(["X", "label"], ["w"], ["w"], b""))
    >>> read_record(model).state
    ['w']
    """
    kept = [p for p in model.metadata_props if p.key != RECORD_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.helper.set_model_props(
        model, {**{p.key: p.value for p in kept}, RECORD_KEY: record.to_json()}
    )


def read_record(model):
    """The record of a step model; ``ValueError`` when ``model`` is not one.

    Examples
    --------
    >>> empty = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    >>> read_record(empty)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: This ONNX model is not a training step: it has no helpers.portable record. ...

    """
    for prop in model.metadata_props:
        if prop.key == RECORD_KEY:
            return StepRecord.from_json(prop.value)
    raise ValueError(
        "This ONNX model is not a training step: it has no helpers.portable record. Write one "
        "with export_training_step of OrtGradientOptimizer or OrtGradientForwardBackwardOptimizer."
    )


def inference_model(record, values):
    """The inference model of a step model, its weights and statistics set to ``values``.

    Parameters
    ----------
    record : StepRecord
    values : dict
        State name to numpy array; names the inference model does not use are ignored.

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("MatMul", ["X", "w"], ["variable"])], "predict",
    ...     [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
    ...     [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])])
    >>> inference = helper.make_model(graph).SerializeToString()
    >>> record = StepRecord(["X", "label"], ["w"], ["w"], inference)
    >>> model = inference_model(record, {"w": np.ones((2, 1), np.float32)})
    >>> [t.name for t in model.graph.initializer]
    ['w']
    """
    model = onnx.ModelProto()
    model.ParseFromString(record.inference)
    graph_inputs = {i.name for i in model.graph.input}
    used = {name for node in model.graph.node for name in node.input} | graph_inputs
    model.graph.initializer.extend(
        onnx.numpy_helper.from_array(values[name], name)
        for name in record.state
        if name in used and name in values and name not in graph_inputs
    )
    return model
