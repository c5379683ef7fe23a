"""Minibatches taken where the training runs.

On the CPU, numpy slices of the shuffled arrays are already in place. On a
GPU, the data is copied to the device once per ``fit``; each epoch sends only
the permutation (indices) and each batch is gathered there by a small ONNX
graph, so the rows never travel back and forth.
"""
import numpy as np
from onnx import TensorProto, helper

from .onnx_function import IR_VERSION, OPSET, OnnxFunction, to_ortvalue


def _gather_model(n_arrays):
    """Gather rows ``order[start:end]`` of ``n_arrays`` float tensors."""
    inputs = [
        helper.make_tensor_value_info("order", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("start", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("end", TensorProto.INT64, [1]),
    ]
    nodes = [helper.make_node("Slice", ["order", "start", "end"], ["rows"])]
    outputs = []
    for i in range(n_arrays):
        inputs.append(helper.make_tensor_value_info(f"A{i}", TensorProto.FLOAT, None))
        nodes.append(helper.make_node("Gather", [f"A{i}", "rows"], [f"B{i}"], axis=0))
        outputs.append(helper.make_tensor_value_info(f"B{i}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "gather_batch", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


class Batches:
    """Cut shuffled minibatches of several arrays on a device.

    Parameters
    ----------
    arrays : list of numpy.ndarray
        Float32 arrays with the same number of rows.
    device : helpers.devices.Device
    on_device : bool or None
        Gather the batches with an ONNX graph on the device (the default for
        a GPU) instead of slicing numpy arrays (the default for the CPU).
    """

    def __init__(self, arrays, device, on_device=None):
        self.device = device
        self.on_device = device.type != "cpu" if on_device is None else on_device
        self.n_rows = arrays[0].shape[0]
        if self.on_device:
            self._data = [to_ortvalue(a, device) for a in arrays]
            self._gather = OnnxFunction(_gather_model(len(arrays)), device)
        else:
            self._data = arrays

    def epoch(self, order, batch_size):
        """Yield ``(start, end, batch arrays)`` for one pass over the rows.

        Parameters
        ----------
        order : numpy.ndarray of int
            A permutation of the rows.
        batch_size : int

        Yields
        ------
        tuple
            ``start``, ``end`` and a list with the rows ``order[start:end]``
            of each array (numpy arrays on the CPU, OrtValues on a device).
        """
        n = self.n_rows
        if not self.on_device:
            shuffled = [a[order] for a in self._data]
            for start in range(0, n, batch_size):
                end = min(start + batch_size, n)
                yield start, end, [a[start:end] for a in shuffled]
            return
        order = to_ortvalue(np.asarray(order, dtype=np.int64), self.device)
        for start in range(0, n, batch_size):
            end = min(start + batch_size, n)
            bounds = [np.array([start], dtype=np.int64), np.array([end], dtype=np.int64)]
            yield start, end, self._gather(order, *bounds, *self._data)
