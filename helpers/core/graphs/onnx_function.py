"""A small ONNX graph compiled once and run on the training device.

Losses, penalties and learning rates of the forward/backward API are such
graphs: their inputs and outputs stay on the device (CPU or GPU) as
:class:`onnxruntime.OrtValue`, so a training step never copies to the host.
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from ..machine.sessions import make_session

#: Opset and IR version of the graphs this package builds.
OPSET, IR_VERSION = 15, 8


def make_model(nodes, inputs, outputs, name):
    """Assemble a model from nodes and ``(name, shape)`` float inputs and outputs.

    Examples
    --------
    >>> from onnx import helper
    >>> model = make_model(
    ...     [helper.make_node("Neg", ["x"], ["y"])], [("x", None)], [("y", None)], "neg"
    ... )
    >>> [i.name for i in model.graph.input], model.ir_version
    (['x'], 8)
    """
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def to_ortvalue(value, device):
    """Return ``value`` as an OrtValue on ``device`` (no copy for a CPU array).

    Arrays become float32, except integer arrays (indices, token ids),
    which keep their type.

    The returned OrtValue keeps a reference to the array, so the buffer lives
    as long as the OrtValue.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> value = to_ortvalue(np.arange(3), Device("cpu"))  # int64 indices stay int64
    >>> value.data_type(), to_ortvalue([1.5, 2.5], Device("cpu")).data_type()
    ('tensor(int64)', 'tensor(float)')
    """
    if isinstance(value, onnxruntime.OrtValue):
        return value
    array = np.asarray(value)
    return ortvalue_of(
        array.astype(
            array.dtype if array.dtype in (np.int64, np.int32) else np.float32, copy=False
        ),
        device,
    )


def ortvalue_of(array, device):
    """Return the numpy ``array`` as an OrtValue on ``device``, of its own element type.

    The OrtValue keeps a reference to the array (no copy on the CPU).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> ortvalue_of(np.ones(2, dtype=np.float16), Device("cpu")).data_type()
    'tensor(float16)'
    """
    array = np.ascontiguousarray(array)
    return onnxruntime.OrtValue.ortvalue_from_numpy(array, device.type, device.index)


class OnnxFunction:
    """Run one ONNX model on a device, inputs and outputs as OrtValues.

    Parameters
    ----------
    model : onnx.ModelProto
    device : helpers.core.machine.devices.Device
    n_threads : int
        Intra-op threads of its session. One by default: the losses,
        penalties and batch gathers run as such functions are elementwise on
        a batch, and a thread pool's wake-ups would cost more than they save.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper
    >>> from helpers.core.machine.devices import Device
    >>> model = make_model(
    ...     [helper.make_node("Mul", ["x", "x"], ["y"])], [("x", [2])], [("y", [2])], "square"
    ... )
    >>> OnnxFunction(model, Device("cpu"))(np.array([2, 3], dtype=np.float32))[0].numpy()
    array([4., 9.], dtype=float32)
    """

    def __init__(self, model, device, n_threads=1):
        self.model = model
        self.device = device
        self._sess = make_session(model, device, n_threads, model.graph.name)
        self.input_names = [i.name for i in self._sess.get_inputs()]
        self.output_names = [o.name for o in self._sess.get_outputs()]

    def __call__(self, *inputs):
        """Run the model; inputs are OrtValues or arrays, in the model's order.

        Returns
        -------
        list of OrtValue
            The outputs, allocated on the device and owned by the caller.
        """
        if len(inputs) != len(self.input_names):
            raise ValueError(f"Expected inputs {self.input_names}, got {len(inputs)} values.")
        # The C session is called directly: the Python wrapper iterates the
        # result vector, which costs about 40 microseconds (indexing: 2).
        # The outputs belong to the caller, unlike those of an IOBinding,
        # which change with the binding's next run.
        feeds = {
            name: (
                v if isinstance(v, onnxruntime.OrtValue) else to_ortvalue(v, self.device)
            )._ortvalue
            for name, v in zip(self.input_names, inputs)
        }
        result = self._sess._sess.run_with_ort_values(feeds, self.output_names, None)
        return [onnxruntime.OrtValue(result[i]) for i in range(len(result))]
