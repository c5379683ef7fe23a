"""Stochastic gradient descent updates run as one ONNX graph.

The weights and their gradients stay where the runtime keeps them (CPU or
GPU): one graph updates every weight at once, so a step costs one call into
onnxruntime whatever the number of weights. The update rules are those of
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
    """Applies an SGD step to a list of weights held in :class:`OrtValue`.

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
    """

    def __init__(self, shapes, momentum=0.0, nesterov=False, device="cpu", device_id=0):
        self.shapes = [tuple(s) for s in shapes]
        self.momentum = float(momentum)
        self.nesterov = nesterov
        self.device, self.device_id = device, device_id
        providers = (
            ["CUDAExecutionProvider", "CPUExecutionProvider"]
            if device == "cuda"
            else ["CPUExecutionProvider"]
        )
        model = build_sgd_update_graph(len(shapes), self.momentum > 0, nesterov)
        self._sess = onnxruntime.InferenceSession(
            model.SerializeToString(), session_options(), providers=providers
        )
        self._binding = self._sess.io_binding()
        self._lr = self._scalar(0.0)
        self._binding.bind_ortvalue_input("lr", self._lr)
        if self.momentum > 0:
            self._mu = self._scalar(self.momentum)
            self._binding.bind_ortvalue_input("momentum", self._mu)
            self.velocities = [self._zeros(s) for s in self.shapes]
            self._next_velocities = [self._zeros(s) for s in self.shapes]
        else:
            self.velocities = []
        self._new_weights = [self._zeros(s) for s in self.shapes]

    def _scalar(self, value):
        return OrtValue.ortvalue_from_numpy(
            np.array(value, dtype=np.float32), self.device, self.device_id
        )

    def _zeros(self, shape):
        return OrtValue.ortvalue_from_numpy(
            np.zeros(shape, dtype=np.float32), self.device, self.device_id
        )

    def step(self, weights, gradients, learning_rate):
        """Compute the updated weights.

        Parameters
        ----------
        weights, gradients : list of OrtValue
            Current weights and their gradients, on the updater's device.
        learning_rate : float
            The learning rate of this step.

        Returns
        -------
        list of OrtValue
            The new weights. They are buffers of this object, overwritten by
            the next call: copy them into the weights before calling again.
        """
        self._lr.update_inplace(np.array(learning_rate, dtype=np.float32))
        bind = self._binding
        for i, (w, g, new_w) in enumerate(zip(weights, gradients, self._new_weights)):
            bind.bind_ortvalue_input(f"W{i}", w)
            bind.bind_ortvalue_input(f"G{i}", g)
            bind.bind_ortvalue_output(f"W{i}_new", new_w)
            if self.velocities:
                bind.bind_ortvalue_input(f"V{i}", self.velocities[i])
                bind.bind_ortvalue_output(f"V{i}_new", self._next_velocities[i])
        self._sess.run_with_iobinding(bind)
        if self.velocities:
            self.velocities, self._next_velocities = self._next_velocities, self.velocities
        return self._new_weights

    def step_inplace(self, weights, gradients, learning_rate):
        """Update ``weights`` (a list of OrtValue), swapping buffers, not copying.

        After the call, ``weights[i]`` is a buffer holding the new weight and
        the old buffer becomes this object's output buffer for the next step.
        The arrays behind the OrtValues first given must not be used directly
        afterwards: read the weights through the list.
        """
        new = self.step(weights, gradients, learning_rate)
        for i, value in enumerate(new):
            weights[i], self._new_weights[i] = value, weights[i]

    def get_velocities(self):
        """Return the velocities as numpy arrays (empty without momentum)."""
        return [v.numpy() for v in self.velocities]

    def set_velocities(self, values):
        """Set the velocities from numpy arrays, one per weight."""
        if len(values) != len(self.velocities):
            raise ValueError(f"Expected {len(self.velocities)} velocities, got {len(values)}.")
        for v, value in zip(self.velocities, values):
            v.update_inplace(np.ascontiguousarray(value, dtype=np.float32))
