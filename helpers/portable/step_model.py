"""A step model loaded and checked: its record, its batch inputs' types, its initial state.

:func:`load_step` accepts a path or an :class:`onnx.ModelProto` and refuses, with a sentence
naming the problem, a file that is not ONNX, a model without a step record, a graph whose
inputs and outputs differ from the record's layout (:mod:`helpers.portable.step_format`),
and a model the installed onnxruntime cannot load.
"""

import dataclasses
import os

import numpy as np
import onnx
from onnx import helper

from .runtime_support import check_runtime_loads
from .step_format import (
    LOSS_OUTPUT,
    STEP_INPUT,
    StepRecord,
    initial_state,
    read_model,
    read_record,
)


@dataclasses.dataclass
class TensorSpec:
    """The element type and shape a graph input declares (``None`` for a free dimension).

    Examples
    --------
    >>> TensorSpec("X", np.dtype(np.float32), (None, 3)).rank
    2
    """

    name: str
    dtype: np.dtype
    shape: tuple

    @property
    def rank(self):
        return len(self.shape)

    @classmethod
    def of(cls, value_info):
        """The spec of an ONNX ``ValueInfoProto``."""
        tensor = value_info.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        return cls(
            value_info.name, np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)), shape
        )


@dataclasses.dataclass
class StepModel:
    """A checked step model.

    Attributes
    ----------
    model : onnx.ModelProto
    record : StepRecord
    batch : list of TensorSpec
        The batch inputs, in order (features, label, sample weights).
    initial : dict
        The state's values at export (the inputs' defaults), numpy arrays.

    Examples
    --------
    >>> record = StepRecord(["X", "label"], ["w", "w.momentum_buffer"], ["w"], b"")
    >>> StepModel(onnx.ModelProto(), record, [], {}).next_names
    ['w.next', 'w.momentum_buffer.next']
    """

    model: onnx.ModelProto
    record: StepRecord
    batch: list
    initial: dict

    @property
    def next_names(self):
        """The outputs holding the state after the step, in the state's order."""
        return [self.record.next_name(name) for name in self.record.state]

    def setting(self, name, given, minimum):
        """The training parameter ``name`` (``max_iter``, ``batch_size``): ``given``, else the
        record's; ``ValueError`` when neither is an integer >= ``minimum``.

        Examples
        --------
        >>> record = StepRecord(["X", "label"], ["w"], ["w"], b"", parameters={"batch_size": 8})
        >>> step = StepModel(onnx.ModelProto(), record, [], {})
        >>> step.setting("batch_size", None, 1), step.setting("batch_size", 4, 1)
        (8, 4)
        >>> step.setting("max_iter", None, 0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: max_iter is not given and the step model's record has none: pass ...
        """
        value = self.record.parameters.get(name) if given is None else given
        if value is None:
            raise ValueError(
                f"{name} is not given and the step model's record has none: pass "
                f"PortableTrainer(..., {name}=...)."
            )
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
        return int(value)


def check_layout(model, record):
    """Raise ``ValueError`` unless ``model``'s graph has the inputs and outputs ``record`` names.

    Examples
    --------
    >>> graph = helper.make_graph([], "g", [], [])
    >>> record = StepRecord(["X"], ["w"], ["w"], b"")
    >>> check_layout(helper.make_model(graph), record)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: The step model's inputs are [], but its record expects ['X', 'step', 'w']: ...
    """
    expected_inputs = [*record.batch_inputs, STEP_INPUT, *record.state, *record.draw_names]
    expected_outputs = [LOSS_OUTPUT, *(record.next_name(name) for name in record.state)]
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    for what, found, expected in (
        ("inputs", inputs, expected_inputs),
        ("outputs", outputs, expected_outputs),
    ):
        if found != expected:
            raise ValueError(
                f"The step model's {what} are {found}, but its record expects {expected}: the "
                "graph was edited after export. Export the step again."
            )
    defaults = initial_state(model)
    missing = [name for name in record.state if name not in defaults]
    if missing:
        raise ValueError(
            f"The state values {missing} have no initial value (the model's training_info "
            "initialization) in the step model: export the step again."
        )


def load_step(step):
    """Load and check a step model.

    Parameters
    ----------
    step : str, path-like or onnx.ModelProto

    Returns
    -------
    StepModel

    Examples
    --------
    >>> load_step("missing.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileNotFoundError: No step model at 'missing.onnx': give the path of an .onnx file.
    """
    model = read_model(step)
    record = read_record(model)
    check_layout(model, record)
    check_runtime_loads(model, "step model")
    if record.inference:  # predict's model, checked now rather than after the training
        inference = onnx.ModelProto()
        inference.ParseFromString(record.inference)
        check_runtime_loads(inference, "inference model")
    inputs = {i.name: i for i in model.graph.input}
    state = set(record.state)
    initial = {name: value for name, value in initial_state(model).items() if name in state}
    batch = [TensorSpec.of(inputs[name]) for name in record.batch_inputs]
    return StepModel(model, record, batch, initial)


def step_source(step):
    """What identifies the step model a trainer is given, to tell when it changes.

    Parameters
    ----------
    step : str, path-like or onnx.ModelProto

    Returns
    -------
    tuple
        ``(kind, the model object or the path, the version of the file)``; the version (inode,
        size, modification time) is None for a model object or a missing file.

    Examples
    --------
    >>> step_source("missing.onnx")
    ('file', 'missing.onnx', None)
    """
    if isinstance(step, onnx.ModelProto):
        return ("model", step, None)
    path = os.fspath(step)
    try:
        stat = os.stat(path)
    except OSError:
        return ("file", path, None)
    return ("file", path, (stat.st_ino, stat.st_size, stat.st_mtime_ns))


def same_step(first, second, content=True):
    """Whether two :func:`step_source` values name the same step: the same object, or the same
    path (and, with ``content``, the same version of its file).

    Examples
    --------
    >>> model = onnx.ModelProto()
    >>> same_step(step_source(model), step_source(model)), same_step(
    ...     step_source(model), step_source(onnx.ModelProto()))
    (True, False)
    >>> same_step(step_source("a.onnx"), step_source("b.onnx")), same_step(None, None)
    (False, False)
    """
    if first is None or second is None or first[0] != second[0]:
        return False
    if first[0] == "model":
        return first[1] is second[1]
    return first[1] == second[1] and (not content or first[2] == second[2])
