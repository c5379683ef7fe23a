"""Minibatches taken where the training runs.

On the CPU, numpy slices of the shuffled arrays are already in place. On a
GPU, the data is copied to the device once per ``fit``; each epoch sends only
the permutation (indices) and each batch is gathered there by a small ONNX
graph, so the rows never travel back and forth.
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from ...portable.batch_order import batch_bounds
from ..graphs.onnx_function import IR_VERSION, OPSET, OnnxFunction, to_ortvalue


def _gather_model(elem_types):
    """Gather rows ``order[start:end]`` of tensors of the element types ``elem_types``."""
    inputs = [
        helper.make_tensor_value_info("order", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("start", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("end", TensorProto.INT64, [1]),
    ]
    nodes = [helper.make_node("Slice", ["order", "start", "end"], ["rows"])]
    outputs = []
    for i, elem_type in enumerate(elem_types):
        inputs.append(helper.make_tensor_value_info(f"A{i}", elem_type, None))
        nodes.append(helper.make_node("Gather", [f"A{i}", "rows"], [f"B{i}"], axis=0))
        outputs.append(helper.make_tensor_value_info(f"B{i}", elem_type, None))
    graph = helper.make_graph(nodes, "gather_batch", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


class Batch:
    """One minibatch: rows ``start:end`` of the shuffled data.

    Attributes
    ----------
    start, end : int
        The rows of the shuffled data in this batch.
    arrays : list
        The batch of each array: numpy arrays on the CPU, OrtValues on a device.

    Examples
    --------
    >>> import numpy as np
    >>> batch = Batch(0, 2, [np.ones((2, 3), dtype=np.float32)])
    >>> batch.end - batch.start, batch.ortvalues()[0].shape()
    (2, [2, 3])
    """

    __slots__ = ("start", "end", "arrays", "_ortvalues")

    def __init__(self, start, end, arrays):
        self.start, self.end, self.arrays = start, end, arrays
        self._ortvalues = None

    def ortvalues(self):
        """The arrays as OrtValues, made once (no copy: views of the batch's rows)."""
        if self._ortvalues is None:
            self._ortvalues = [
                value
                if isinstance(value, onnxruntime.OrtValue)
                else onnxruntime.OrtValue.ortvalue_from_numpy(value)
                for value in self.arrays
            ]
        return self._ortvalues


class Batches:
    """Cut shuffled minibatches of several arrays on a device.

    On the CPU, each epoch copies the rows in the order of the permutation
    into buffers allocated once per ``fit``; the batches are views of these
    buffers, the same objects from one epoch to the next, so whatever a
    training step derives from a batch once (its OrtValues) stays valid.

    Parameters
    ----------
    arrays : list of numpy.ndarray
        Arrays with the same number of rows, of any rank (float32 features
        and labels, integer ids).
    device : helpers.core.machine.devices.Device
    on_device : bool or None
        Gather the batches with an ONNX graph on the device (the default for
        a GPU) instead of slicing numpy arrays (the default for the CPU).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.core.machine.devices import Device
    >>> batches = Batches([np.arange(5, dtype=np.float32)], Device("cpu"))
    >>> [(b.start, b.end, b.arrays[0].tolist()) for b in batches.epoch([4, 3, 2, 1, 0], 2)]
    [(0, 2, [4.0, 3.0]), (2, 4, [2.0, 1.0]), (4, 5, [0.0])]
    >>> [(b.start, b.end) for b in batches.epoch([4, 3, 2, 1, 0], 2, first_row=2)]
    [(2, 4), (4, 5)]
    """

    def __init__(self, arrays, device, on_device=None):
        self.device = device
        self.on_device = device.type != "cpu" if on_device is None else on_device
        self.n_rows = arrays[0].shape[0]
        if self.on_device:
            self._data = [to_ortvalue(a, device) for a in arrays]
            types = [helper.np_dtype_to_tensor_dtype(a.dtype) for a in arrays]
            self._gather = OnnxFunction(_gather_model(types), device)
        else:
            self._data = arrays
            self._buffers = None
            self._batches = {}

    def _cpu_batches(self, batch_size):
        if self._buffers is None:
            self._buffers = [np.empty_like(a) for a in self._data]
        if batch_size not in self._batches:
            self._batches[batch_size] = [
                Batch(start, end, [b[start:end] for b in self._buffers])
                for start, end in batch_bounds(self.n_rows, batch_size)
            ]
        return self._batches[batch_size]

    def epoch(self, order, batch_size, first_row=0):
        """Yield the :class:`Batch` objects of one pass over the rows.

        Parameters
        ----------
        order : numpy.ndarray of int
            A permutation of the rows.
        batch_size : int
        first_row : int
            Start at this row of ``order`` (an interrupted epoch resumes):
            the rows before it are skipped.

        Yields
        ------
        Batch
            Rows ``order[start:end]`` of each array (numpy arrays on the CPU,
            OrtValues on a device). On the CPU the arrays are overwritten by
            the next epoch.
        """
        if not self.on_device:
            batches = self._cpu_batches(batch_size)
            order = np.asarray(order)
            for data, buffer in zip(self._data, self._buffers):
                np.take(data, order, axis=0, out=buffer)
            if first_row == 0:
                yield from batches
                return
            for start, end in batch_bounds(self.n_rows, batch_size, first_row):
                yield Batch(start, end, [b[start:end] for b in self._buffers])  # a resumed epoch
            return
        order = to_ortvalue(np.asarray(order, dtype=np.int64), self.device)
        for start, end in batch_bounds(self.n_rows, batch_size, first_row):
            bounds = [np.array([start], dtype=np.int64), np.array([end], dtype=np.int64)]
            yield Batch(start, end, self._gather(order, *bounds, *self._data))
