"""onnxruntime-training's checkpoint file, read and written with flatbuffers alone.

onnxruntime-training 1.19.2 saves a checkpoint (``CheckpointState.save_checkpoint``) as one
flatbuffer of the schema onnxruntime ships (``onnxruntime.tools.ort_format_model``), file
identifier ``ODTC``, version :data:`CHECKPOINT_VERSION` (the only one it loads: "Checkpoint
version 1 is not supported"). It holds a module state (the parameters to train,
``requires_grad_params``, and the frozen ones, ``frozen_params``, each a tensor with a name,
dimensions, an ONNX data type and little-endian ``raw_data``; neither nominal nor with external
data), optimizer groups and a property bag (int64, float32 and string properties; no bag when
there are none). 1.19.2 writes one optimizer group, :data:`GROUP_NAME`, whenever an optimizer runs
on the weights: its step, its initial learning rate and, for each trained weight, its moments
(``momentum0`` and ``momentum1`` for AdamW, ``momentum0`` for SGD). Its optimizer reads that
group only: under another name, a checkpoint loads and the optimizer starts afresh (zero moments,
step 0).

:func:`read_checkpoint_file` reads such a file and :func:`write_checkpoint_file` writes one that
1.19.2's ``CheckpointState.load_checkpoint`` loads and whose moments its optimizer continues from,
without the training package: the onnxruntime that goes on being maintained has none.
"""

import os
import struct
from collections import namedtuple

import flatbuffers
import numpy as np
from onnx import helper
from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs import (
    Checkpoint,
    FloatProperty,
    IntProperty,
    ModuleState,
    OptimizerGroup,
    ParameterOptimizerState,
    PropertyBag,
    StringProperty,
    Tensor,
)

#: The checkpoint version onnxruntime-training 1.19.2 writes, the only one it loads.
CHECKPOINT_VERSION = 2

#: The flatbuffers file identifier of a checkpoint (bytes 4 to 8 of the file).
FILE_IDENTIFIER = b"ODTC"

#: The name of the optimizer group onnxruntime-training writes and looks for.
GROUP_NAME = "group0"

CheckpointContent = namedtuple(
    "CheckpointContent", ["trained", "frozen", "properties", "moments", "step"]
)
CheckpointContent.__doc__ = """What a checkpoint holds: :func:`read_checkpoint_file` returns it.

Its fields are, in the order of :func:`write_checkpoint_file`'s arguments after ``path``,
``trained`` (name to float32 array), ``frozen`` (name to array), ``properties`` (name to int,
float or str), ``moments`` (weight name to moment name to array) and ``step`` (int).

Examples
--------
>>> content = read_checkpoint_file(checkpoint_bytes({"w": [0.5]}, properties={"epoch": 2}))
>>> content.trained, content.frozen, content.properties, content.moments, content.step
({'w': array([0.5], dtype=float32)}, {}, {'epoch': 2}, {}, 0)
"""

_INT64 = (-(2**63), 2**63 - 1)


def _text(table, slot, default=None):
    """The string in field ``slot`` (its vtable offset) of ``table``, checked to lie within."""
    tab = table._tab
    field = tab.Offset(slot)
    if field == 0:
        if default is None:
            raise ValueError("a name is missing")
        return default
    start = tab.Indirect(field + tab.Pos)
    length = tab.Get(flatbuffers.number_types.UOffsetTFlags, start)
    if start + 4 + length > len(tab.Bytes):
        raise ValueError("a string runs past the end of the buffer")
    return bytes(tab.Bytes[start + 4 : start + 4 + length]).decode("utf-8")


def _tensor(tensor):
    """The numpy array of a flatbuffers ``Tensor`` (a copy, owning its data)."""
    name = _text(tensor, 4)
    if not tensor.StringDataIsNone() or tensor.ExternalDataOffset() != -1:
        raise ValueError(f"tensor {name!r} holds strings or external data, which are not read")
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.DataType())).newbyteorder("<")
    except KeyError:
        raise ValueError(f"tensor {name!r} has no known data type ({tensor.DataType()})") from None
    shape = [tensor.Dims(i) for i in range(tensor.DimsLength())]
    data = tensor.RawDataAsNumpy() if tensor.RawDataLength() else np.zeros(0, np.uint8)
    if min(shape, default=0) < 0 or data.size != dtype.itemsize * int(np.prod(shape)):
        raise ValueError(f"tensor {name!r} has {data.size} bytes for shape {shape}")
    return name, data.view(dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _vector(table, kind):
    """The items of the vector of tables ``kind`` (``"FrozenParams"``...) of ``table``."""
    return [getattr(table, kind)(i) for i in range(getattr(table, kind + "Length")())]


def read_checkpoint_file(source):
    """The parameters, properties and optimizer state of an onnxruntime-training checkpoint.

    Parameters
    ----------
    source : str, os.PathLike or bytes
        The checkpoint file, or its content. Bytes after the flatbuffer (the checksum
        :func:`helpers.whole_training.checkpoints.append_checksum` appends) are ignored.

    Returns
    -------
    CheckpointContent
        ``trained`` (name to float32 array, the parameters to train, in the file's order),
        ``frozen`` (name to array), ``properties`` (name to int, float or str), ``moments``
        (weight name to moment name, such as ``"momentum0"``, to array; empty when the file has
        no optimizer group) and ``step`` (the optimizer group's, 0 when none).

    Raises
    ------
    ValueError
        When ``source`` is not a checkpoint, is cut short or damaged, or keeps its data apart.
        The reader checks the structure, not the values: a byte changed inside a tensor goes
        unnoticed (the project's checksum catches it).

    Examples
    --------
    >>> import numpy as np
    >>> content = read_checkpoint_file(checkpoint_bytes({"w": np.ones((2, 3))}, step=4))
    >>> content.trained["w"].shape, content.step, content.moments
    ((2, 3), 4, {})
    >>> read_checkpoint_file(b"not a checkpoint")
    Traceback (most recent call last):
    ...
    ValueError: not an onnxruntime training checkpoint: it lacks the file identifier b'ODTC'.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        buffer = bytes(source)
    else:
        with open(source, "rb") as f:
            buffer = f.read()
    if len(buffer) < 8 or buffer[4:8] != FILE_IDENTIFIER:
        raise ValueError(
            f"not an onnxruntime training checkpoint: it lacks the file identifier "
            f"{FILE_IDENTIFIER!r}."
        )
    try:
        return _parse(Checkpoint.Checkpoint.GetRootAs(buffer, 0))
    except ValueError as exc:
        raise ValueError(f"an unreadable onnxruntime training checkpoint: {exc}.") from None
    except (struct.error, IndexError, OverflowError, TypeError) as exc:
        # flatbuffers reads past the end of a buffer cut short, or follows damaged offsets
        raise ValueError(
            "a damaged or truncated onnxruntime training checkpoint: its offsets lead outside "
            f"it ({exc})."
        ) from None


def _parse(root):
    """The :class:`CheckpointContent` of the flatbuffers ``Checkpoint`` table ``root``."""
    version = root.Version()
    if version != CHECKPOINT_VERSION:
        raise ValueError(
            f"its version is {version}; onnxruntime-training 1.19.2 writes and loads version "
            f"{CHECKPOINT_VERSION} only"
        )
    module = root.ModuleState()
    if module is None:
        raise ValueError("it has no module state")
    if module.IsNominalState() or module.HasExternalData():
        raise ValueError("its parameters have no values (a nominal state) or lie in another file")
    trained = dict(_tensor(t) for t in _vector(module, "RequiresGradParams"))
    frozen = dict(_tensor(t) for t in _vector(module, "FrozenParams"))
    moments, step = {}, 0
    for group in _vector(root, "OptimizerGroups"):
        step = group.Step()
        for state in _vector(group, "OptimizerStates"):
            moments[_text(state, 4)] = dict(_tensor(t) for t in _vector(state, "Momentums"))
    properties = {}
    bag = root.PropertyBag()
    if bag is not None:
        for item in _vector(bag, "Ints") + _vector(bag, "Floats"):
            properties[_text(item, 4)] = item.Value()
        for item in _vector(bag, "Strings"):
            properties[_text(item, 4)] = _text(item, 6, default="")
    return CheckpointContent(trained, frozen, properties, moments, step)


def _offsets(builder, offsets):
    """A vector of the ``offsets`` of tables already built."""
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _build_tensor(builder, name, value, dtype=None):
    """A ``Tensor`` of ``value`` (converted to ``dtype`` when given)."""
    array = np.asarray(value, dtype=dtype)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"tensor {name!r}: a checkpoint holds numbers, not {array.dtype}")
    name = builder.CreateString(name)
    dims = builder.CreateNumpyVector(np.array(array.shape, dtype=np.int64))
    raw = builder.CreateByteVector(array.astype(array.dtype.newbyteorder("<")).tobytes())
    Tensor.Start(builder)
    Tensor.AddName(builder, name)
    Tensor.AddDims(builder, dims)
    Tensor.AddDataType(builder, helper.np_dtype_to_tensor_dtype(array.dtype))
    Tensor.AddRawData(builder, raw)
    return Tensor.End(builder)


def _build_property(builder, name, value):
    """The vector (``"ints"``, ``"floats"`` or ``"strings"``) and the table of a property."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, str, np.integer, np.floating)
    ):
        raise TypeError(f"property {name!r}: an int, a float or a str, not {type(value).__name__}")
    name = builder.CreateString(name)
    if isinstance(value, str):
        text = builder.CreateString(value)
        StringProperty.Start(builder)
        StringProperty.AddName(builder, name)
        StringProperty.AddValue(builder, text)
        return "strings", StringProperty.End(builder)
    if isinstance(value, (int, np.integer)):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"property {name!r}: {value} does not fit in an int64")
        IntProperty.Start(builder)
        IntProperty.AddName(builder, name)
        IntProperty.AddValue(builder, int(value))
        return "ints", IntProperty.End(builder)
    FloatProperty.Start(builder)
    FloatProperty.AddName(builder, name)
    FloatProperty.AddValue(builder, float(value))
    return "floats", FloatProperty.End(builder)


def checkpoint_bytes(
    trained, frozen=None, properties=None, moments=None, step=0, learning_rate=0.0
):
    """The content of a checkpoint file that onnxruntime-training 1.19.2 loads.

    Parameters
    ----------
    trained : dict
        Name to value of each parameter to train (stored as float32).
    frozen : dict, optional
        Name to value of each parameter not trained (such as batch normalization's running
        statistics), stored with its own type.
    properties : dict, optional
        Name to an int (int64), a float (stored as float32: 0.1 comes back as
        0.10000000149011612) or a str.
    moments : dict, optional
        Weight name to moment name (``"momentum0"`` and ``"momentum1"`` for AdamW) to value
        (stored as float32). When given, the file has one optimizer group, :data:`GROUP_NAME`;
        onnxruntime's optimizer built on the loaded checkpoint continues from it.
    step : int
        The optimizer group's step (AdamW's bias correction counts from it).
    learning_rate : float
        The optimizer group's initial learning rate. 1.19.2 writes its optimizer's (0.001 for
        the project's optimizer models) and does not read it back: an optimizer built on the
        loaded checkpoint starts at 0.001 until ``set_learning_rate``.

    Returns
    -------
    bytes

    Examples
    --------
    >>> import numpy as np
    >>> moments = {"w": {"momentum0": np.zeros(2), "momentum1": np.ones(2)}}
    >>> data = checkpoint_bytes({"w": [1.0, 2.0]}, {"mean": np.zeros(3, np.float64)},
    ...                         {"epoch": 3, "tag": "é"}, moments, step=7, learning_rate=0.01)
    >>> data[4:8], len(data) % 4
    (b'ODTC', 0)
    >>> content = read_checkpoint_file(data)
    >>> content.trained["w"], content.frozen["mean"].dtype, content.properties
    (array([1., 2.], dtype=float32), dtype('float64'), {'epoch': 3, 'tag': 'é'})
    >>> content.moments["w"]["momentum1"], content.step
    (array([1., 1.], dtype=float32), 7)
    """
    builder = flatbuffers.Builder(1024)
    trained_tensors = [_build_tensor(builder, n, v, np.float32) for n, v in trained.items()]
    frozen_tensors = [_build_tensor(builder, n, v) for n, v in (frozen or {}).items()]
    trained_vector = _offsets(builder, trained_tensors)
    frozen_vector = _offsets(builder, frozen_tensors)
    ModuleState.Start(builder)
    ModuleState.AddRequiresGradParams(builder, trained_vector)
    ModuleState.AddFrozenParams(builder, frozen_vector)
    ModuleState.AddIsNominalState(builder, False)
    ModuleState.AddHasExternalData(builder, False)
    module = ModuleState.End(builder)

    groups = []
    if moments or step:
        states = []
        for weight, named in (moments or {}).items():
            tensors = [_build_tensor(builder, n, v, np.float32) for n, v in named.items()]
            tensor_vector = _offsets(builder, tensors)
            weight_name = builder.CreateString(weight)
            ParameterOptimizerState.Start(builder)
            ParameterOptimizerState.AddParamName(builder, weight_name)
            ParameterOptimizerState.AddMomentums(builder, tensor_vector)
            states.append(ParameterOptimizerState.End(builder))
        state_vector = _offsets(builder, states)
        group_name = builder.CreateString(GROUP_NAME)
        OptimizerGroup.Start(builder)
        OptimizerGroup.AddGroupName(builder, group_name)
        OptimizerGroup.AddStep(builder, int(step))
        OptimizerGroup.AddInitialLearningRate(builder, float(learning_rate))
        OptimizerGroup.AddOptimizerStates(builder, state_vector)
        groups.append(OptimizerGroup.End(builder))
    group_vector = _offsets(builder, groups)

    bag = None
    if properties:  # 1.19.2 writes no bag when there are no properties
        kinds = {"ints": [], "floats": [], "strings": []}
        for name, value in properties.items():
            kind, offset = _build_property(builder, name, value)
            kinds[kind].append(offset)
        vectors = {kind: _offsets(builder, offsets) for kind, offsets in kinds.items()}
        PropertyBag.Start(builder)
        PropertyBag.AddInts(builder, vectors["ints"])
        PropertyBag.AddFloats(builder, vectors["floats"])
        PropertyBag.AddStrings(builder, vectors["strings"])
        bag = PropertyBag.End(builder)

    Checkpoint.Start(builder)
    Checkpoint.AddVersion(builder, CHECKPOINT_VERSION)
    Checkpoint.AddModuleState(builder, module)
    Checkpoint.AddOptimizerGroups(builder, group_vector)
    if bag is not None:
        Checkpoint.AddPropertyBag(builder, bag)
    builder.Finish(Checkpoint.End(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def write_checkpoint_file(
    path, trained, frozen=None, properties=None, moments=None, step=0, learning_rate=0.0
):
    """Write the checkpoint :func:`checkpoint_bytes` makes of the other arguments to ``path``.

    A plain write: writing beside ``path`` and renaming, and appending a checksum, are the
    caller's (:meth:`helpers.whole_training.session.WholeTrainingSession.save`).

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "checkpoint")
    ...     write_checkpoint_file(path, {"w": [[1.0]]}, properties={"rate": 0.5})
    ...     content = read_checkpoint_file(path)
    >>> content.trained["w"].tolist(), content.properties
    ([[1.0]], {'rate': 0.5})
    """
    data = checkpoint_bytes(trained, frozen, properties, moments, step, learning_rate)
    with open(os.fspath(path), "wb") as f:
        f.write(data)
