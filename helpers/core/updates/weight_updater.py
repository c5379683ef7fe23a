"""An update rule run on the device: one ONNX graph updates every weight in place, each in its
own buffer."""

import numpy as np
from onnxruntime import OrtValue

from ..graphs.onnx_function import make_model
from ..machine.devices import Device
from ..machine.sessions import make_session
from .update_rules import make_update_rule


def build_update_graph(rule, n_weights):
    """The ONNX graph applying ``rule`` to ``n_weights`` weights at once.

    Parameters
    ----------
    rule : helpers.core.updates.update_rules.BaseUpdateRule
    n_weights : int

    Returns
    -------
    onnx.ModelProto
        Inputs: the step's scalars, then ``W<i>``, ``G<i>`` and the buffers
        ``<state><i>`` of each weight; outputs ``W<i>_new`` and
        ``<state><i>_new``.

    Examples
    --------
    >>> from helpers.core.updates.update_rules import SGDRule
    >>> graph = build_update_graph(SGDRule(), 2).graph
    >>> [i.name for i in graph.input], [o.name for o in graph.output]
    (['lr', 'W0', 'G0', 'W1', 'G1'], ['W0_new', 'W1_new'])
    """
    scalars = list(rule.step_scalars(0.0, 1))
    inputs, outputs, nodes = [(name, []) for name in scalars], [], []
    for i in range(n_weights):
        w, g = f"W{i}", f"G{i}"
        states = [f"{s}{i}" for s in rule.state_names]
        new = [f"{w}_new"] + [f"{s}_new" for s in states]
        inputs += [(w, None), (g, None)] + [(s, None) for s in states]
        outputs += [(name, None) for name in new]
        nodes += rule.nodes(w, g, states, new)
    return make_model(nodes, inputs, outputs, f"{rule.name}_update")


class WeightUpdater:
    """Apply an update rule, in place, to weights held in :class:`OrtValue`.

    Each weight (and buffer) is bound as both the input and the output of
    the update graph, so a step writes into the buffers the weights already
    use: no allocation, no copy, and the bindings are made once for as
    long as the same weights are given. Every node is elementwise and
    reads a weight (or buffer) before any node writes it, which is what
    makes the aliasing safe.

    Parameters
    ----------
    rule : helpers.core.updates.update_rules.BaseUpdateRule or str
        The rule, or its name with default hyper-parameters.
    shapes : list of tuple
        Shape of each weight.
    device : helpers.core.machine.devices.Device, optional
        Where weights, gradients and buffers live; the CPU by default.
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
    >>> WeightUpdater("sgd", [(2,)]).update([weight], [gradient], learning_rate=0.01, t=1)
    >>> weight.numpy()
    array([0.9, 0.9], dtype=float32)
    """

    def __init__(self, rule, shapes, device=None, n_threads=1):
        self.rule = make_update_rule(rule) if isinstance(rule, str) else rule
        self.shapes = [tuple(s) for s in shapes]
        self.device = device or Device("cpu")
        model = build_update_graph(self.rule, len(self.shapes))
        self._sess = make_session(model, self.device, n_threads, "update")
        self._binding = self._sess.io_binding()._iobinding
        self._scalars = {}
        for name, value in self.rule.step_scalars(0.0, 1).items():
            self._scalars[name] = [None, self._ortvalue(np.array(value, dtype=np.float32))]
            self._binding.bind_ortvalue_input(name, self._scalars[name][1]._ortvalue)
        self.states = []
        for i, shape in enumerate(self.shapes):
            for state in self.rule.state_names:
                buffer = self._ortvalue(np.zeros(shape, dtype=np.float32))
                self._binding.bind_ortvalue_input(f"{state}{i}", buffer._ortvalue)
                self._binding.bind_ortvalue_output(f"{state}{i}_new", buffer._ortvalue)
                self.states.append(buffer)
        self._bound_weights = [None] * len(self.shapes)
        self._bound_gradients = [None] * len(self.shapes)

    def _ortvalue(self, array):
        return OrtValue.ortvalue_from_numpy(array, self.device.type, self.device.index)

    def update(self, weights, gradients, learning_rate, t):
        """Replace each weight by its updated value, in its own buffer.

        Parameters
        ----------
        weights : list of OrtValue
            Current weights, on the updater's device; overwritten.
        gradients : list of OrtValue
            Their gradients, same order and shapes.
        learning_rate : float
            The learning rate of this step.
        t : int
            The update count, from 1 (AdamW's bias correction).
        """
        for name, value in self.rule.step_scalars(learning_rate, t).items():
            slot = self._scalars[name]
            if value != slot[0]:
                slot[1].update_inplace(np.array(value, dtype=np.float32))
                slot[0] = value
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

    def get_state(self):
        """The buffers as numpy arrays, weight by weight (empty for plain SGD)."""
        return [s.numpy().copy() for s in self.states]

    def set_state(self, values):
        """Set the buffers from numpy arrays, in the order :meth:`get_state` gives."""
        if len(values) != len(self.states):
            raise ValueError(
                f"{self.rule.name!r} keeps {len(self.states)} buffers for these weights, got "
                f"{len(values)}."
            )
        for buffer, value in zip(self.states, values):
            value = np.ascontiguousarray(value, dtype=np.float32)
            if value.shape != tuple(buffer.shape()):
                raise ValueError(f"A buffer has shape {tuple(buffer.shape())}, got {value.shape}.")
            buffer.update_inplace(value)
