"""Activations onnxruntime 1.19.2 cannot differentiate, written with operators it can.

The gradient builder of onnxruntime-training 1.19.2 has no gradient for
``Elu``, ``Celu``, ``Selu``, ``Softplus`` (torch's ``Softplus``, ``Mish`` and
``LogSigmoid`` export to it), ``HardSigmoid``, ``HardSwish`` and ``PRelu``
("no gradient for ... on this device"). The training graph computes each of
them from ``Greater``, ``Less``, ``And``, ``Where``, ``Exp``, ``Log``, ``Mul``,
``Add``, ``Sub``, ``Div`` and ``Neg``, which have gradients; the model a user
exports for inference keeps the original operator.

The rewrites give torch's values and torch's gradients, including where the
function has a kink, and never an ``inf * 0``:

* Each branch is picked with ``Where`` on a comparison, which has no
  gradient: the gradient at a kink is the one of the branch torch picks
  there (``x > 0`` is the linear branch of ``Elu``, ``Celu``, ``Selu``,
  ``PRelu``; at ``x = 0``, torch's gradient is the exponential branch's,
  ``alpha`` for ``Elu``, the slope for ``PRelu``).
* ``Exp`` only ever sees values at most 0: the exponential branch reads
  ``Where(x > 0, 0, x)``, and ``Softplus(x)`` is
  ``Where(x > 0, x, 0) + Log(1 + Exp(-|x|))``, with ``-|x|`` written
  ``Where(x > 0, -x, x)`` (``Abs`` has gradient 0 at 0, torch's
  ``Softplus`` has 1/2). Large inputs of either sign give finite values and
  gradients.
* ``HardSwish`` is ``x * (x + 3) / 6`` for ``-3 < x < 3``, 0 below and
  ``x`` above, so its gradient is 0 at ``-3`` and 1 at ``3``, as in torch;
  ``HardSigmoid`` has gradient 0 at both ends of its ramp, as in torch.

torch's ``Hardtanh`` and ``ReLU6`` export to ``Clip``, as ``torch.clamp``
does, but their gradient is 0 at the bounds where ``clamp``'s, and
onnxruntime's ``Clip``'s, is 1: the difference shows when inputs sit on a
bound (zero weights before a ``ReLU6``). The ``Clip`` nodes the export
lists as theirs (:data:`HARDTANH_METADATA_KEY`) become
``Where(x > low, Where(x < high, x, high), low)``; the other ``Clip`` nodes
keep onnxruntime's gradient, ``clamp``'s. Under ``fast_gradients``, a
``Hardtanh`` whose bounds are constants is instead a ``Clip`` by the floats
just inside them (``Relu`` then ``Clip(0, 6 - ulp)`` for ``ReLU6``):
``Clip``'s gradient mask, ``x >= low'`` and ``x <= high'``, is then exactly
torch's ``low < x < high``, and a saturated value is one unit in the last
place inside its bound (``5.9999995`` for 6 in float32). Both ``Where`` run
on one thread in 1.19.2, forward and backward, on tensors as large as the
network's widest activations: they took 60% of a training step of the zoo's
MobileNetV2 (``benchmarks/profiles/survey/kernels_side_by_side.py``).

``Softplus`` is computed as onnxruntime's own kernel computes it,
``log(1 + exp(-|x|))`` rather than torch's ``log1p``: far below 0 both are
within float32 rounding of 1 of each other (``softplus(-30)`` is ``9e-14``
in torch, 0 here), and the gradient, ``sigmoid(x)``, is exact.
"""

import json

import numpy as np
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import constant_node, copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_types
from ..graphs.graph_values import constant_value

#: Key of the model metadata listing the ``Clip`` nodes that are torch's ``hardtanh``
#: (``Hardtanh``, ``ReLU6``), written by
#: :func:`helpers.export_for_training`.
HARDTANH_METADATA_KEY = "helpers.hardtanh_clips"

#: Element types the rewrites handle.
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16)


class _Nodes:
    """Nodes of one rewrite: uniquely named after ``tag``, constants of ``elem_type``."""

    def __init__(self, tag, elem_type):
        self.tag, self.elem_type, self.nodes = tag, elem_type, []

    def const(self, value):
        name = f"{self.tag}__constant{len(self.nodes)}"
        self.nodes.append(constant_node(name, value, self.elem_type))
        return name

    def op(self, op_type, *inputs, output=None):
        name = f"{self.tag}__{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output or name], name=name))
        return output or name


def _exponential_linear(nodes, x, y, alpha, input_scale=1.0, scale=1.0):
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))``: Elu, Celu, Selu.

    ``Exp`` reads ``Where(x > 0, 0, x)``: never above 0.
    """
    positive = nodes.op("Greater", x, nodes.const(0.0))
    negative = nodes.op("Where", positive, nodes.const(0.0), x)
    if input_scale != 1.0:
        negative = nodes.op("Mul", negative, nodes.const(input_scale))
    exp_minus_one = nodes.op("Sub", nodes.op("Exp", negative), nodes.const(1.0))
    curve = nodes.op("Mul", exp_minus_one, nodes.const(alpha))
    if scale == 1.0:
        return nodes.op("Where", positive, x, curve, output=y)
    return nodes.op("Mul", nodes.op("Where", positive, x, curve), nodes.const(scale), output=y)


def _elu(nodes, node):
    alpha = node_attribute(node, "alpha", 1.0)
    return _exponential_linear(nodes, node.input[0], node.output[0], alpha)


def _celu(nodes, node):
    alpha = node_attribute(node, "alpha", 1.0)
    return _exponential_linear(nodes, node.input[0], node.output[0], alpha, input_scale=1.0 / alpha)


def _selu(nodes, node):
    alpha = node_attribute(node, "alpha", 1.67326319217681884765625)
    gamma = node_attribute(node, "gamma", 1.05070102214813232421875)
    return _exponential_linear(nodes, node.input[0], node.output[0], alpha, scale=gamma)


def _softplus(nodes, node):
    x = node.input[0]
    positive = nodes.op("Greater", x, nodes.const(0.0))
    linear = nodes.op("Where", positive, x, nodes.const(0.0))
    minus_abs = nodes.op("Where", positive, nodes.op("Neg", x), x)
    log_term = nodes.op("Log", nodes.op("Add", nodes.op("Exp", minus_abs), nodes.const(1.0)))
    return nodes.op("Add", linear, log_term, output=node.output[0])


def _hard_sigmoid(nodes, node):
    alpha, beta = node_attribute(node, "alpha", 0.2), node_attribute(node, "beta", 0.5)
    ramp = nodes.op("Add", nodes.op("Mul", node.input[0], nodes.const(alpha)), nodes.const(beta))
    below_one = nodes.op("Less", ramp, nodes.const(1.0))
    inside = nodes.op("And", nodes.op("Greater", ramp, nodes.const(0.0)), below_one)
    ends = nodes.op("Where", below_one, nodes.const(0.0), nodes.const(1.0))
    return nodes.op("Where", inside, ramp, ends, output=node.output[0])


def _hard_swish(nodes, node):
    x, three = node.input[0], nodes.const(3.0)
    quadratic = nodes.op("Div", nodes.op("Mul", x, nodes.op("Add", x, three)), nodes.const(6.0))
    lower = nodes.op("Where", nodes.op("Less", x, three), quadratic, x)
    above = nodes.op("Greater", x, nodes.const(-3.0))
    return nodes.op("Where", above, lower, nodes.const(0.0), output=node.output[0])


def _prelu(nodes, node):
    x, slope = node.input[:2]
    positive = nodes.op("Greater", x, nodes.const(0.0))
    return nodes.op("Where", positive, x, nodes.op("Mul", x, slope), output=node.output[0])


def _hardtanh(nodes, node):
    x, low, high = (list(node.input) + ["", ""])[:3]
    bounds = [(compare, bound) for compare, bound in (("Less", high), ("Greater", low)) if bound]
    y = x
    for count, (comparison, bound) in enumerate(bounds, 1):
        output = node.output[0] if count == len(bounds) else None
        y = nodes.op("Where", nodes.op(comparison, x, bound), y, bound, output=output)
    return y if bounds else nodes.op("Identity", x, output=node.output[0])


def _just_inside(bound, elem_type, direction):
    """The value of ``elem_type`` next to ``bound`` towards ``direction`` (one unit in the last
    place)."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return np.nextafter(np.asarray(bound, dtype=dtype), np.asarray(direction, dtype=dtype))


def _fast_hardtanh(nodes, node, low, high):
    """``Hardtanh(low, high)`` as a ``Clip`` by the floats just inside its bounds (``fast``).

    ``Clip``'s gradient mask, ``low' <= x <= high'``, is then torch's
    ``low < x < high``; a saturated value is one unit in the last place
    inside its bound. A lower bound of 0 (``ReLU6``) is a ``Relu`` first
    (the float just above 0 is a denormal, slow to compute with).
    """
    x = node.input[0]
    upper = nodes.const(_just_inside(high, nodes.elem_type, -np.inf))
    if low == 0:
        return nodes.op("Clip", nodes.op("Relu", x), nodes.const(0.0), upper, output=node.output[0])
    lower = nodes.const(_just_inside(low, nodes.elem_type, np.inf))
    return nodes.op("Clip", x, lower, upper, output=node.output[0])


def _scalar_bounds(model, node):
    """The two bounds of the ``Clip`` ``node`` as floats, or None when one is missing or not
    constant."""
    bounds = [constant_value(model, name) if name else None for name in list(node.input[1:3])]
    if len(bounds) != 2 or any(b is None or np.size(b) != 1 for b in bounds):
        return None
    return [float(np.ravel(b)[0]) for b in bounds]


#: The operators rewritten, and the function writing each one's nodes.
_REWRITES = {
    "Elu": _elu,
    "Celu": _celu,
    "Selu": _selu,
    "Softplus": _softplus,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "PRelu": _prelu,
}


def _rewrite_of(node, hardtanh):
    """The function writing the nodes that replace ``node``, or None to keep it."""
    if is_onnx_op(node, "Clip") and node.name in hardtanh:
        return _hardtanh
    return _REWRITES.get(node.op_type) if is_onnx_op(node) else None


def hardtanh_clips(model):
    """The names of the ``Clip`` nodes of ``model`` that torch's ``hardtanh`` exported.

    Empty for a model whose metadata does not list them.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Hardtanh(-0.5, 2.0))
    >>> hardtanh_clips(export_for_training(net, torch.zeros(1, 2)))
    {'/1/Clip'}
    """
    for prop in model.metadata_props:
        if prop.key == HARDTANH_METADATA_KEY:
            return set(json.loads(prop.value))
    return set()


def activations_with_gradients(model, prefix="", fast=False):
    """Return a copy of ``model`` whose activations are written with operators that have a gradient.

    ``Elu``, ``Celu``, ``Selu``, ``Softplus``, ``HardSigmoid``, ``HardSwish``
    and ``PRelu`` nodes of a float type become the same function (see the
    module's documentation), with torch's gradients.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.
    prefix : str
        Start of the names of the nodes and values added.
    fast : bool
        Write ``Hardtanh`` and ``ReLU6`` with constant bounds as one
        ``Clip`` by the floats just inside the bounds (see the module's
        documentation) instead of two ``Where``: the training graph's
        form under ``fast_gradients``.

    Returns
    -------
    onnx.ModelProto
        The copy (the same object when there is nothing to rewrite).

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ELU(alpha=0.5))
    >>> model = activations_with_gradients(export_for_training(net, torch.zeros(2, 3)))
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Gemm', 'Greater', 'Where', 'Exp', 'Sub', 'Mul', 'Where']
    """
    hardtanh = hardtanh_clips(model)
    if not any(_rewrite_of(n, hardtanh) for n in model.graph.node):
        return model
    types = value_types(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        rewrite_of = _rewrite_of(node, hardtanh)
        elem_type = types.get(node.input[0]) if node.input else None
        if rewrite_of is None or elem_type not in _FLOAT_TYPES:
            nodes.append(node)
            continue
        tag = f"{prefix}{node.op_type.lower()}__{index}__{node.name or node.output[0]}"
        rewrite = _Nodes(tag, elem_type)
        bounds = _scalar_bounds(model, node) if fast and rewrite_of is _hardtanh else None
        if bounds is None:
            rewrite_of(rewrite, node)
        else:
            _fast_hardtanh(rewrite, node, *bounds)
        nodes.extend(rewrite.nodes)
    return copy_with_nodes(model, nodes)
