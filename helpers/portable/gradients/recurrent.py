"""Recurrent layers (``GRU``, ``LSTM``, ``RNN``) unrolled over time into standard operators.

onnxruntime-training 1.19.2's CPU build has no usable gradient for these operators. Rather
than a gradient function per operator writing backpropagation through time by hand,
:func:`unrolled_recurrences` rewrites each recurrent node whose sequence length the model fixes
into its cell equations, one step per time step, with operators that already have a gradient
(``MatMul``, ``Gemm``, ``Add``, ``Sub``, ``Mul``, ``Sigmoid``, ``Tanh``, ``Relu``, ``Split``,
``Squeeze``, ``Unsqueeze``, ``Concat``, ``Transpose``). The rewritten graph computes the node's
outputs (the same values, to float rounding), and :func:`~helpers.portable.gradients.
build_gradients` differentiates it as any other graph: the backward pass it writes *is*
backpropagation through time.

Why this form: the backward recursion of a hand-written gradient would be the same chain of
small per-step products (standard ONNX has no fused backward cell), and it would need every
gate's value, which the fused forward kernel does not output and a gradient would recompute.
The one gain it could keep is the fused kernel's forward pass. Measured on onnxruntime 1.19.2
(CPU, one thread, best of 400 runs; 32 inputs, 64 units, batch 64, 20 steps, a linear head):
GRU forward 1.02 ms fused, 0.92 ms unrolled, 2.9 ms for the unrolled forward and backward
(torch: 4.4 ms); LSTM 0.79 ms fused, 1.22 ms unrolled, 3.5 ms forward and backward (torch:
3.1 ms). A hand-written gradient could save nothing on a GRU and at most 12 % of an LSTM's
step, before recomputing its gates. Inside, the layer is batch-major: one ``MatMul`` projects
the inputs of all time steps, one ``Split`` cuts them into steps (its gradient is one
``Concat``; no axis to squeeze), the states are concatenated back the same way; only the
recurrent product ``h R^T`` is per step.

Cost of a long sequence: each time step adds about 10 forward and 20 backward nodes, and
onnxruntime's session creation grows faster than linearly with the nodes (an LSTM of 160
steps: about 5 s, two bidirectional layers of 100 steps: about 45 s).

What is covered, as torch exports it and beyond: directions ``forward``, ``reverse`` and
``bidirectional``; ``linear_before_reset`` 0 and 1 (torch writes 1); ``layout`` 0 and 1;
``B``, ``initial_h`` and ``initial_c`` given or absent (an initial state that is zeros, as
torch's ``ConstantOfShape`` writes it, is known to be absent); the activations ``Sigmoid``,
``Tanh`` and ``Relu`` in any slot (``nn.RNN(nonlinearity="relu")`` included); any of the
outputs ``Y``, ``Y_h``, ``Y_c`` used or not; stacked layers (one node each). A node is left
as it is, and its gradient refused with the reason, for a sequence length the model leaves
free (export with a fixed one: ``Loop`` and ``Scan`` have no gradient here either), a
``sequence_lens`` input, ``clip``, LSTM's peepholes ``P`` or ``input_forget=1``, or another
activation.
"""

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..node_attributes import names_read, node_attribute
from .registry import gradient, value_shapes_and_types

#: Operator to its number of gates and its default activations (one direction).
RECURRENT = {
    "GRU": (3, ["Sigmoid", "Tanh"]),
    "LSTM": (4, ["Sigmoid", "Tanh", "Tanh"]),
    "RNN": (1, ["Tanh"]),
}

#: Activations that are standard operators without parameters.
_ACTIVATIONS = {"Sigmoid", "Tanh", "Relu"}

#: Operators through which a tensor of zeros stays zeros.
_KEEPS_ZEROS = {"Slice", "Gather", "Squeeze", "Unsqueeze", "Reshape", "Transpose", "Identity"}


def _input(node, index):
    return node.input[index] if len(node.input) > index else ""


def _hidden_size(node, shapes):
    size = node_attribute(node, "hidden_size")
    if size is None:
        size = (shapes.get(node.input[2]) or [None])[-1]
    return size if isinstance(size, int) else None


def _length(node, shapes):
    """The static sequence length of ``node``'s input, or None."""
    shape = shapes.get(node.input[0])
    length = shape[node_attribute(node, "layout", 0)] if shape is not None else None
    return length if isinstance(length, int) else None


def unrolling_refused(node, shapes):
    """Why the recurrent ``node`` cannot be unrolled, or None when it can.

    Examples
    --------
    >>> node = helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4, clip=3.0)
    >>> unrolling_refused(node, {"x": [5, "N", 3]})
    'Its clip attribute is not supported: export without clipping.'
    >>> unrolling_refused(helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4),
    ...                   {"x": ["T", "N", 3]})[:48]
    'Its sequence length is not fixed by the model, s'
    """
    _, defaults = RECURRENT[node.op_type]
    directions = 2 if node_attribute(node, "direction", "forward") == "bidirectional" else 1
    activations = node_attribute(node, "activations", [])
    if _input(node, 4):
        return "Its sequence_lens input is not supported: pad the sequences to one length."
    if node.op_type == "LSTM" and _input(node, 7):
        return "Its peepholes (input P) are not supported."
    if node_attribute(node, "input_forget", 0):
        return "Its input_forget=1 is not supported."
    if node_attribute(node, "clip") is not None:
        return "Its clip attribute is not supported: export without clipping."
    if activations and (
        len(activations) != len(defaults) * directions or set(activations) - _ACTIVATIONS
    ):
        return f"Its activations {activations} are not supported (only {sorted(_ACTIVATIONS)})."
    if _hidden_size(node, shapes) is None:
        return "Its hidden size is unknown (no hidden_size attribute, no static R)."
    if _length(node, shapes) is None:
        return (
            "Its sequence length is not fixed by the model, so it cannot be unrolled over "
            "time: export it with a fixed sequence length (dynamic axes on the batch only)."
        )
    return None


@gradient("GRU")
@gradient("LSTM")
@gradient("RNN")
def recurrent_grad(node, dy, ctx):
    """Refused with the reason: a node that can be is unrolled before the gradients.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext, NoGradientError
    >>> node = helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4, name="/gru")
    >>> ctx = GradientContext({"x": ["T", "N", 3]}, {}, {"x"}, 17)  # a free sequence length
    >>> ctx.node = node
    >>> try:
    ...     recurrent_grad(node, ["dy"], ctx)
    ... except NoGradientError as error:
    ...     "Its sequence length is not fixed" in str(error)
    True
    """
    ctx.refuse(unrolling_refused(node, ctx.shapes) or "Unroll it first: unrolled_recurrences.")


class _Writer:
    """Adds the nodes of the unrolled layers, named after the node they replace."""

    def __init__(self, taken):
        self.taken, self.nodes, self.initializers, self.base = taken, [], [], ""
        self._constants, self._count = {}, 0

    def name(self, tag):
        name = f"{self.base}/{tag}_{self._count}"
        while name in self.taken:
            self._count += 1
            name = f"{self.base}/{tag}_{self._count}"
        self.taken.add(name)
        return name

    def op(self, op_type, inputs, outputs=1, **attributes):
        if isinstance(outputs, int):
            outputs = [self.name(op_type) for _ in range(outputs)]
        self.nodes.append(
            helper.make_node(op_type, inputs, outputs, name=self.name(op_type), **attributes)
        )
        return outputs[0] if len(outputs) == 1 else outputs

    def ints(self, values):
        key = tuple(values)
        if key not in self._constants:
            self._constants[key] = self.name("const")
            array = np.array(values, dtype=np.int64)
            self.initializers.append(numpy_helper.from_array(array, self._constants[key]))
        return self._constants[key]

    # pieces that treat None as a tensor of zeros ------------------------------------------
    def add(self, a, b):
        return a if b is None else b if a is None else self.op("Add", [a, b])

    def mul(self, a, b):
        return None if a is None or b is None else self.op("Mul", [a, b])

    def gemm(self, h, weight, c):
        """``h weight^T + c``."""
        if h is None:
            return c
        return self.op("Gemm", [h, weight] + ([c] if c else []), transB=1)

    def split(self, value, sizes, axis):
        if value is None:
            return [None] * len(sizes)
        if len(sizes) == 1:
            return [value]
        return self.op("Split", [value, self.ints(sizes)], len(sizes), axis=axis)

    def unstack(self, value, count, axis):
        """``value`` cut into ``count`` slices along ``axis``, that axis removed."""
        parts = self.split(value, [1] * count, axis)
        return [None if p is None else self.op("Squeeze", [p, self.ints([axis])]) for p in parts]

    def concat(self, parts, axis):
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=axis)

    def stack(self, parts, axis):
        """``parts`` stacked along a new axis ``axis``."""
        return self.concat([self.op("Unsqueeze", [p, self.ints([axis])]) for p in parts], axis)

    def rename(self, value, output):
        """Name ``value``, the output of the last node added, ``output``."""
        assert self.nodes[-1].output[0] == value
        self.nodes[-1].output[0] = output


def _is_zeros(name, producers):
    """Whether ``name`` is a zero ``ConstantOfShape``, possibly sliced or reshaped (an
    initializer never is: it may be a trained weight)."""
    node = producers.get(name)
    if node is None:
        return False
    if node.op_type == "ConstantOfShape":
        value = node_attribute(node, "value")
        return value is None or not numpy_helper.to_array(value).any()
    return node.op_type in _KEEPS_ZEROS and _is_zeros(node.input[0], producers)


def _gru_step(w, x, h, weights, lbr, act, size):
    """One GRU step: ``x`` its two input projections (gates z r, gate h), ``h`` the state."""
    (x_zr, x_h), (r_all, r_zr, r_h), (b_all, b_zr, b_h) = x, *weights
    if lbr:  # h~ = g(x W_h^T + r (h R_h^T + Rb_h) + Wb_h)
        gh_zr, gh_h = w.split(w.gemm(h, r_all, b_all), [2 * size, size], -1)
    else:  # h~ = g(x W_h^T + (r h) R_h^T + Rb_h + Wb_h)
        gh_zr = w.gemm(h, r_zr, b_zr)
    z, r = w.split(w.op(act[0], [w.add(x_zr, gh_zr)]), [size, size], -1)
    inner = w.mul(r, gh_h) if lbr else w.gemm(w.mul(r, h), r_h, b_h)
    n = w.op(act[1], [w.add(x_h, inner)])
    if h is None:  # (1 - z) n
        return w.op("Sub", [n, w.op("Mul", [z, n])]), None
    return w.op("Add", [n, w.op("Mul", [z, w.op("Sub", [h, n])])]), None  # (1 - z) n + z h


def _lstm_step(w, x, h, c, weight, act, size):
    """One LSTM step, gates ``i o f c``: ``x`` the input projection with both biases."""
    ifo, candidate = w.split(w.gemm(h, weight, x), [3 * size, size], -1)
    i, o, f = w.split(w.op(act[0], [ifo]), [size] * 3, -1)
    c = w.add(w.mul(f, c), w.op("Mul", [i, w.op(act[1], [candidate])]))
    return w.op("Mul", [o, w.op(act[2], [c])]), c


def _direction(w, node, d, inputs, length, size):
    """The states of direction ``d`` in time order, its last state and last cell state."""
    kind, (x, weight, recurrence, bias, h, c) = node.op_type, inputs
    gates, defaults = RECURRENT[kind]
    act = node_attribute(node, "activations", []) or defaults * (d + 1)
    act = act[d * len(defaults) : (d + 1) * len(defaults)]
    wb, rb = w.split(bias, [gates * size] * 2, 0)
    projected = w.op("MatMul", [x, w.op("Transpose", [weight], perm=[1, 0])])  # N T G*H
    if kind == "GRU":
        lbr = node_attribute(node, "linear_before_reset", 0)
        cell_weights = (
            (recurrence, *(w.split(recurrence, [2 * size, size], 0) if not lbr else [None] * 2)),
            (rb, *(w.split(rb, [2 * size, size], 0) if not lbr else [None] * 2)),
        )
        projected = w.add(projected, wb)
        sizes = [2 * size, size] * length  # gates z r, gate h, at each time step
    else:
        projected = w.add(w.add(projected, wb), rb)
        sizes = [gates * size] * length
    flat = w.op("Reshape", [projected, w.ints([0, length * gates * size])])
    steps = w.split(flat, sizes, 1)
    if kind == "GRU":
        steps = list(zip(steps[::2], steps[1::2]))
    reverse = node_attribute(node, "direction", "forward") == "reverse" or d == 1
    states = [None] * length
    for t in reversed(range(length)) if reverse else range(length):  # h is the last state
        if kind == "GRU":
            h, c = _gru_step(w, steps[t], h, cell_weights, lbr, act, size)
        elif kind == "LSTM":
            h, c = _lstm_step(w, steps[t], h, c, recurrence, act, size)
        else:
            h = w.op(act[0], [w.gemm(h, recurrence, steps[t])])
        states[t] = h
    return states, h, c


def _unroll(w, node, length, size, producers, used):
    """Write the nodes computing ``node``'s used outputs, batch-major inside (``N T ...``:
    a time step is a slice of the last axis, no axis to squeeze)."""
    wanted = [(k, o) for k, o in enumerate(node.output) if o in used]
    if not wanted:
        return
    layout = node_attribute(node, "layout", 0)
    directions = 2 if node_attribute(node, "direction", "forward") == "bidirectional" else 1
    x, weight, recurrence, bias, h0, c0 = (_input(node, k) for k in (0, 1, 2, 3, 5, 6))
    if not layout:
        x = w.op("Transpose", [x], perm=[1, 0, 2])
    per_direction = []
    for name in (weight, recurrence, bias, h0, c0):
        if not name or (name in (h0, c0) and _is_zeros(name, producers)):
            per_direction.append([None] * directions)
        else:  # the states are D N H (layout 0) or N D H (layout 1)
            per_direction.append(w.unstack(name, directions, layout if name in (h0, c0) else 0))
    runs = [
        _direction(w, node, d, [x, *(v[d] for v in per_direction)], length, size)
        for d in range(directions)
    ]
    for k, output in wanted:
        if k == 0:  # Y: T D N H (layout 0) or N T D H (layout 1)
            shape = w.ints([0, length, 1, size])
            value = w.concat([w.op("Reshape", [w.concat(s, 1), shape]) for s, _, _ in runs], 2)
            if not layout:
                value = w.op("Transpose", [value], perm=[1, 2, 0, 3])
        else:  # Y_h, Y_c: D N H (layout 0) or N D H (layout 1)
            value = w.stack([run[k] for run in runs], layout)
        w.rename(value, output)


def unrolled_recurrences(model):
    """``model`` with each ``GRU``, ``LSTM`` and ``RNN`` node that can be unrolled over time
    rewritten into its cell equations (the same outputs); ``model`` itself if it has none.

    A node that cannot (:func:`unrolling_refused`) is left as it is: its gradient is refused
    with the reason if the loss depends on a trained value through it.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> node = helper.make_node("RNN", ["x", "w", "r"], ["", "h"], hidden_size=2)
    >>> graph = helper.make_graph([node], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, "N", 1])],
    ...     [helper.make_tensor_value_info("h", TensorProto.FLOAT, None)],
    ...     [numpy_helper.from_array(np.ones((1, 2, 1), np.float32), "w"),
    ...      numpy_helper.from_array(np.eye(2, dtype=np.float32)[None], "r")])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> unrolled = unrolled_recurrences(model)
    >>> sorted({n.op_type for n in unrolled.graph.node})
    ['Gemm', 'MatMul', 'Reshape', 'Split', 'Squeeze', 'Tanh', 'Transpose', 'Unsqueeze']
    >>> from onnx.reference import ReferenceEvaluator
    >>> x = np.array([[[0.5]], [[1.0]], [[-1.0]]], np.float32)
    >>> ReferenceEvaluator(unrolled).run(None, {"x": x})[0].round(4)  # tanh(x_t + h_{t-1})
    array([[[-0.1016, -0.1016]]], dtype=float32)
    >>> ReferenceEvaluator(model).run(None, {"x": x})[0].round(4)
    array([[[-0.1016, -0.1016]]], dtype=float32)
    """
    graph = model.graph
    standard = ("", "ai.onnx")
    if not any(n.op_type in RECURRENT and n.domain in standard for n in graph.node):
        return model
    shapes, _ = value_shapes_and_types(model)
    inputs = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    used = names_read(graph) | {o.name for o in graph.output}
    writer = _Writer({v for n in graph.node for v in [n.name, *n.input, *n.output]} | inputs)
    nodes = []
    for node in graph.node:
        if node.op_type not in RECURRENT or node.domain not in standard:
            nodes.append(node)
            continue
        if unrolling_refused(node, shapes) is not None:
            nodes.append(node)
            continue
        writer.base = node.name or node.output[0]
        start = len(writer.nodes)
        length, size = _length(node, shapes), _hidden_size(node, shapes)
        _unroll(writer, node, length, size, producers, used)
        nodes.extend(writer.nodes[start:])
    result = onnx.ModelProto()
    result.CopyFrom(model)
    del result.graph.node[:]
    result.graph.node.extend(nodes)
    result.graph.initializer.extend(writer.initializers)
    return result
