"""Stochastic gradient descent updates run as one ONNX graph.

The weights and their gradients stay where the runtime keeps them (CPU or
GPU): one graph updates every weight at once, in the weights' own buffers,
so a step costs one call into onnxruntime whatever the number of weights. The update rules are those of
scikit-learn's ``MLPRegressor(solver='sgd')``::

    velocity = momentum * velocity - lr * gradient
    weight = weight + velocity                             # momentum
    weight = weight + momentum * velocity - lr * gradient  # Nesterov

With ``momentum=0`` it is the plain update ``weight = weight - lr * gradient``.
"""
import numpy as np
from onnx import TensorProto, helper

import onnxruntime
from onnxruntime import OrtValue

from .runtime import session_options

#: Opset of the update graph; any runtime from 1.10 on runs it.
_OPSET = 13


def build_sgd_update_graph(n_weights, momentum=False, nesterov=False, ir_version=8):
    """Build the ONNX graph updating ``n_weights`` tensors at once.

    Parameters
    ----------
    n_weights : int
        Number of weights.
    momentum : bool
        Whether the graph keeps a velocity per weight.
    nesterov : bool
        Nesterov's update (needs ``momentum``).
    ir_version : int
        IR version to stamp, one the runtime accepts.

    Returns
    -------
    onnx.ModelProto
        Inputs ``lr``, then ``momentum`` when used, then ``W<i>``, ``G<i>``
        and ``V<i>`` (velocity) for each weight; outputs ``W<i>_new`` and
        ``V<i>_new``.
    """
    if nesterov and not momentum:
        raise ValueError("Nesterov's update needs momentum.")
    float_in = lambda name, shape=None: helper.make_tensor_value_info(  # noqa: E731
        name, TensorProto.FLOAT, shape
    )
    inputs, outputs, nodes = [float_in("lr", [])], [], []
    if momentum:
        inputs.append(float_in("momentum", []))
    for i in range(n_weights):
        w, g, v = f"W{i}", f"G{i}", f"V{i}"
        inputs += [float_in(w), float_in(g)]
        lr_g = f"lr_G{i}"
        nodes.append(helper.make_node("Mul", ["lr", g], [lr_g]))
        if not momentum:
            nodes.append(helper.make_node("Sub", [w, lr_g], [f"{w}_new"]))
            outputs.append(float_in(f"{w}_new"))
            continue
        inputs.append(float_in(v))
        mu_v = f"mu_{v}"
        nodes += [
            helper.make_node("Mul", ["momentum", v], [mu_v]),
            helper.make_node("Sub", [mu_v, lr_g], [f"{v}_new"]),
        ]
        if nesterov:
            nodes += [
                helper.make_node("Mul", ["momentum", f"{v}_new"], [f"mu_{v}_new"]),
                helper.make_node("Sub", [f"mu_{v}_new", lr_g], [f"step_{i}"]),
                helper.make_node("Add", [w, f"step_{i}"], [f"{w}_new"]),
            ]
        else:
            nodes.append(helper.make_node("Add", [w, f"{v}_new"], [f"{w}_new"]))
        outputs += [float_in(f"{w}_new"), float_in(f"{v}_new")]
    graph = helper.make_graph(nodes, "sgd_update", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = ir_version
    return model


class SGDUpdate:
    """Applies an SGD step, in place, to a list of weights held in :class:`OrtValue`.

    Each weight (and velocity) is bound as both the input and the output of
    the update graph, so a step writes into the buffers the weights already
    use: no allocation, no copy, and the bindings are made once for as long
    as the same weights are given. Every node of the graph is elementwise and
    reads a weight (or velocity) before any node writes it, which is what
    makes the aliasing safe.

    Parameters
    ----------
    shapes : list of tuple
        Shape of each weight.
    momentum : float
        0 for plain SGD.
    nesterov : bool
        Nesterov's momentum.
    device : str
        ``'cpu'`` or ``'cuda'``; weights, gradients and velocities live there.
    device_id : int
        The GPU index for ``'cuda'``.
    n_threads : int
        Threads of the update's session. One by default: the update is
        elementwise, and a thread pool of its own would spin beside the
        model's pool and slow the model down.

    Examples
    --------
    >>> import numpy as np
    >>> from onnxruntime import OrtValue
    >>> weight = OrtValue.ortvalue_from_numpy(np.ones(2, dtype=np.float32))
    >>> gradient = OrtValue.ortvalue_from_numpy(np.full(2, 10, dtype=np.float32))
    >>> SGDUpdate([(2,)]).update([weight], [gradient], learning_rate=0.01)
    >>> weight.numpy()
    array([0.9, 0.9], dtype=float32)
    """

    def __init__(self, shapes, momentum=0.0, nesterov=False, device="cpu", device_id=0, n_threads=1):
        self.shapes = [tuple(s) for s in shapes]
        self.momentum = float(momentum)
        self.nesterov = nesterov
        self.device, self.device_id = device, device_id
        providers = (
            [("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
            if device == "cuda"
            else ["CPUExecutionProvider"]
        )
        model = build_sgd_update_graph(len(shapes), self.momentum > 0, nesterov)
        self._sess = onnxruntime.InferenceSession(
            model.SerializeToString(), session_options(n_threads, "update"), providers=providers
        )
        self._binding = self._sess.io_binding()._iobinding
        self._lr_value = None
        self._lr = self._scalar(0.0)
        self._binding.bind_ortvalue_input("lr", self._lr._ortvalue)
        self.velocities = []
        if self.momentum > 0:
            self._mu = self._scalar(self.momentum)
            self._binding.bind_ortvalue_input("momentum", self._mu._ortvalue)
            self.velocities = [self._zeros(s) for s in self.shapes]
            for i, v in enumerate(self.velocities):
                self._binding.bind_ortvalue_input(f"V{i}", v._ortvalue)
                self._binding.bind_ortvalue_output(f"V{i}_new", v._ortvalue)
        self._bound_weights = [None] * len(self.shapes)
        self._bound_gradients = [None] * len(self.shapes)

    def _scalar(self, value):
        return OrtValue.ortvalue_from_numpy(
            np.array(value, dtype=np.float32), self.device, self.device_id
        )

    def _zeros(self, shape):
        return OrtValue.ortvalue_from_numpy(
            np.zeros(shape, dtype=np.float32), self.device, self.device_id
        )

    def update(self, weights, gradients, learning_rate):
        """Replace each weight by its updated value, in its own buffer.

        Parameters
        ----------
        weights : list of OrtValue
            Current weights, on the updater's device; overwritten.
        gradients : list of OrtValue
            Their gradients, same order and shapes.
        learning_rate : float
            The learning rate of this step.
        """
        if learning_rate != self._lr_value:
            self._lr.update_inplace(np.array(learning_rate, dtype=np.float32))
            self._lr_value = learning_rate
        bind = self._binding
        bound_w, bound_g = self._bound_weights, self._bound_gradients
        for i, (w, g) in enumerate(zip(weights, gradients)):
            if bound_w[i] is not w:
                bind.bind_ortvalue_input(f"W{i}", w._ortvalue)
                bind.bind_ortvalue_output(f"W{i}_new", w._ortvalue)
                bound_w[i] = w
            if bound_g[i] is not g:
                bind.bind_ortvalue_input(f"G{i}", g._ortvalue)
                bound_g[i] = g
        self._sess._sess.run_with_iobinding(bind, None)

    def get_velocities(self):
        """Return the velocities as numpy arrays (empty without momentum)."""
        return [v.numpy().copy() for v in self.velocities]

    def set_velocities(self, values):
        """Set the velocities from numpy arrays, one per weight."""
        if len(values) != len(self.velocities):
            raise ValueError(f"Expected {len(self.velocities)} velocities, got {len(values)}.")
        for v, value in zip(self.velocities, values):
            v.update_inplace(np.ascontiguousarray(value, dtype=np.float32))
