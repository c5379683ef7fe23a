"""What a step model takes and returns, and the record it carries.

A step model is one training step (forward, loss, gradients, update) written with standard ONNX
operators. Its graph:

* inputs: the batch (:attr:`StepRecord.batch_inputs`, one row per sample, the batch size free),
  the step count ``step`` (int64 scalar, from 1: the update's ``t``), every value carried
  from one step to the next (:attr:`StepRecord.state`: the trained weights, the running
  statistics, the optimizer's buffers), then the random values the runner draws for the step
  (:attr:`StepRecord.draws`: the masks of ``Dropout``, for a step exported with a seed);
* outputs: ``loss`` (float scalar), then ``NAME.next`` for each name of the state, in order.

The state's values at export (:func:`initial_state`) are kept where the ONNX standard keeps a
model's initial training state: the ``initialization`` graph of the model's ``training_info``,
bound to the state's names. They are not initializers of the step's graph: a runtime would
treat those as constants, and onnxruntime-web refuses to feed an input that has one.

The record (JSON in the model's ``metadata_props`` under :data:`RECORD_KEY`) names those parts
and keeps the training parameters the exporter used, and the inference model whose weights
are the state's (:func:`inference_model`).
"""

import base64
import dataclasses
import json
import os

import numpy as np
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
    draws : list of dict
        The random inputs, as :meth:`helpers.portable.random_draws.RandomDraw.to_record` writes
        them (what each holds, its shape per batch rows); empty without any.

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
    draws: list = dataclasses.field(default_factory=list)
    format: int = FORMAT_VERSION

    @property
    def draw_names(self):
        """The random inputs' names, in input order."""
        return [draw["name"] for draw in self.draws]

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


def read_model(step, what="step model"):
    """The :class:`onnx.ModelProto` of ``step``, a path or a model already loaded (``what`` it
    is, for the messages).

    A missing file or one that is not an ONNX model is refused with a sentence naming it. Only
    :mod:`onnx` is used: a command line checks its input before it imports a runtime.

    Examples
    --------
    >>> read_model("missing.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileNotFoundError: No step model at 'missing.onnx': give the path of an .onnx file.
    """
    if isinstance(step, onnx.ModelProto):
        return step
    path = os.fspath(step)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No {what} at {path!r}: give the path of an .onnx file.")
    try:
        return onnx.load(path)
    except Exception as error:  # protobuf's DecodeError and onnx's own
        raise ValueError(f"{path!r} is not an ONNX model ({error}).") from error


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


def write_initial_state(model, values):
    """Keep ``values`` (state name to array) as the model's initial training state.

    They become the initializers of the ``initialization`` graph of ``model.training_info``
    (standard ONNX), which returns them bound to the state's names; a previous initial state is
    replaced.

    Examples
    --------
    >>> import numpy as np
    >>> model = onnx.helper.make_model(onnx.helper.make_graph([], "step", [], []))
    >>> write_initial_state(model, {"w": np.ones(2, np.float32)})
    >>> {name: value.tolist() for name, value in initial_state(model).items()}
    {'w': [1.0, 1.0]}
    >>> onnx.checker.check_model(model)
    """
    from onnx import helper, numpy_helper

    nodes, outputs, tensors = [], [], []
    for name, value in values.items():
        array = np.asarray(value)
        tensors.append(numpy_helper.from_array(array, f"initial.{name}"))
        nodes.append(helper.make_node("Identity", [f"initial.{name}"], [f"{name}.initial"]))
        outputs.append(
            helper.make_tensor_value_info(
                f"{name}.initial", helper.np_dtype_to_tensor_dtype(array.dtype), array.shape
            )
        )
    del model.training_info[:]
    info = model.training_info.add()
    info.initialization.CopyFrom(
        helper.make_graph(nodes, "initial_state", [], outputs, initializer=tensors)
    )
    for name in values:
        binding = info.initialization_binding.add()
        binding.key, binding.value = name, f"{name}.initial"


def initial_state(model):
    """The state's values at export: state name to numpy array (see :func:`write_initial_state`).

    Examples
    --------
    >>> initial_state(onnx.helper.make_model(onnx.helper.make_graph([], "step", [], [])))
    {}
    """
    from onnx import numpy_helper

    values = {}
    for info in model.training_info:
        tensors = {t.name: t for t in info.initialization.initializer}
        produced = {n.output[0]: n.input[0] for n in info.initialization.node}
        for binding in info.initialization_binding:
            values[binding.key] = numpy_helper.to_array(tensors[produced[binding.value]])
    return values


def step_with_state(model, values, parameters):
    """A copy of the step model ``model`` that starts from ``values`` and records ``parameters``.

    What a trainer saves to resume from (:meth:`~helpers.portable.trainer.PortableTrainer.
    save_step`): the initial state replaced (:func:`write_initial_state`), the record's
    parameters updated (``steps_done``, ``epochs_done``, ``draws_state``...); ``model`` is left
    as it is.

    Parameters
    ----------
    model : onnx.ModelProto
        A step model.
    values : dict
        State name to numpy array, for every name of the record's state.
    parameters : dict
        Record parameters to set; the others are kept.

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> import numpy as np
    >>> model = onnx.helper.make_model(onnx.helper.make_graph([], "step", [], []))
    >>> write_record(model, StepRecord(["X", "label"], ["w"], ["w"], b"", parameters={"a": 1}))
    >>> saved = step_with_state(model, {"w": np.ones(2, np.float32)}, {"steps_done": 4})
    >>> read_record(saved).parameters, initial_state(saved)["w"].tolist(), initial_state(model)
    ({'a': 1, 'steps_done': 4}, [1.0, 1.0], {})
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    record = read_record(copy)
    missing = [name for name in record.state if name not in values]
    if missing:
        raise ValueError(f"No value for the state {missing}: give one for each name of the state.")
    write_initial_state(copy, {name: values[name] for name in record.state})
    record.parameters = {**record.parameters, **parameters}
    write_record(copy, record)
    return copy


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
