"""Rules of torch's ONNX exporter that write some activations as torch computes them.

torch 2.13's TorchScript exporter drops ``Softplus``'s ``threshold``, writes
``LogSigmoid`` in a form that overflows, and gives ``Hardtanh``/``ReLU6`` the
same ``Clip`` as ``clamp``, whose gradient differs at the bounds.
:func:`exact_activation_exports` puts exact rules in place while
:func:`helpers.export_for_training` runs.
"""

import contextlib
import json
import threading

import torch
from torch.onnx import symbolic_helper, symbolic_opset11

from ..layers.activations import HARDTANH_METADATA_KEY

#: At and above this ``threshold``, torch's ``Softplus`` (linear where ``beta * x > threshold``)
#: and the plain function agree to float32 rounding: ``exp(-17) < 2**-24``.
SOFTPLUS_NEGLIGIBLE_THRESHOLD = 17.0


def _softplus(g, x, beta, threshold):
    """``aten::softplus`` with its ``threshold``, which torch's exporter leaves out."""
    scaled = x if symbolic_helper._maybe_get_const(beta, "f") == 1 else g.op("Mul", x, beta)
    value = g.op("Softplus", scaled)
    if scaled is not x:
        value = g.op("Div", value, beta)
    if symbolic_helper._maybe_get_const(threshold, "f") >= SOFTPLUS_NEGLIGIBLE_THRESHOLD:
        return value
    return g.op("Where", g.op("Greater", scaled, threshold), x, value)


def _log_sigmoid(g, x):
    """``aten::log_sigmoid`` as ``-softplus(-x)``.

    ``Log(Sigmoid(x))``, torch's export, is ``-inf`` below about -88 in float32.
    """
    return g.op("Neg", g.op("Softplus", g.op("Neg", x)))


#: The attribute the export gives the ``Clip`` nodes of torch's ``hardtanh`` and ``relu6``,
#: until :func:`hardtanh_marks_to_metadata` removes it.
_HARDTANH_MARK = "helpers_hardtanh"


def _marked(symbolic):
    """torch's ``symbolic`` of ``hardtanh`` or ``relu6``, its ``Clip`` node marked."""

    def marked(g, *args):
        value = symbolic(g, *args)
        if value.node().kind() == "onnx::Clip":
            value.node().s_(_HARDTANH_MARK, "1")
        return value

    return marked


def hardtanh_marks_to_metadata(model):
    """Move the marks of the ``Clip`` nodes of ``Hardtanh`` and ``ReLU6`` to the metadata, in place.

    torch's ``hardtanh`` (``Hardtanh``, ``ReLU6``, ``relu6``) and ``clamp``
    both export to ``Clip``, but their gradients differ at the bounds: 0 for
    the first, 1 for ``clamp`` and for onnxruntime's ``Clip``. The export
    marks the nodes of the first; their names are listed under
    :data:`helpers.core.layers.activations.HARDTANH_METADATA_KEY`, which the
    training graph reads (:mod:`helpers.core.layers.activations`), and the marks,
    which no runtime knows, are removed.

    Examples
    --------
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU6())
    >>> model = export_for_training(net, torch.zeros(1, 2))  # calls it
    >>> [(p.key, p.value) for p in model.metadata_props]
    [('helpers.hardtanh_clips', '["/1/Clip"]')]
    """
    names = []
    for node in model.graph.node:
        marks = [a for a in node.attribute if a.name == _HARDTANH_MARK]
        if marks:
            node.attribute.remove(marks[0])
            names.append(node.name)
    if names:
        model.metadata_props.add(key=HARDTANH_METADATA_KEY, value=json.dumps(names))


def _exact_symbolics(opset_version):
    """The symbolics :func:`exact_activation_exports` puts in place of torch's, by name."""
    symbolics = {"aten::softplus": _softplus, "aten::log_sigmoid": _log_sigmoid}
    if opset_version >= 11:  # Clip takes its bounds as inputs
        symbolics["aten::hardtanh"] = _marked(symbolic_opset11.hardtanh)
        symbolics["aten::relu6"] = _marked(symbolic_opset11.relu6)
    return symbolics


#: Held while the rules are registered: another thread's export would unregister them.
_REGISTRY_LOCK = threading.RLock()


@contextlib.contextmanager
def exact_activation_exports(opset_version):
    """Export ``Softplus`` and ``LogSigmoid`` as torch computes them, for the duration of the block.

    torch 2.13's TorchScript exporter writes ``Softplus(beta=b, threshold=t)``
    as ``Softplus(b * x) / b``, without the threshold above which torch
    returns ``x``: a threshold below :data:`SOFTPLUS_NEGLIGIBLE_THRESHOLD`
    changes the values and the gradients (``threshold=5``: 0.0067 at
    ``x = 5``). It is written with a ``Where`` (the default, 20, is left
    out as before). It writes ``LogSigmoid`` as ``Log(Sigmoid(x))``, which
    is ``-inf`` (and its gradient NaN) where the sigmoid underflows, below
    about -88 in float32; it is written ``-Softplus(-x)``, exact everywhere.
    The ``Clip`` nodes of ``hardtanh`` and ``relu6`` are marked
    (:func:`hardtanh_marks_to_metadata`).

    The rules are process-wide in torch, so exports that use them run one
    at a time.

    Examples
    --------
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Softplus(beta=2.0, threshold=5.0))
    >>> model = export_for_training(net, torch.zeros(1, 2))  # within exact_activation_exports
    >>> [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    ['Gemm', 'Mul', 'Softplus', 'Div', 'Greater', 'Where']
    """
    symbolics = _exact_symbolics(opset_version)
    with _REGISTRY_LOCK:
        for name, symbolic in symbolics.items():
            torch.onnx.register_custom_op_symbolic(name, symbolic, opset_version)
        try:
            yield
        finally:
            for name in symbolics:
                torch.onnx.unregister_custom_op_symbolic(name, opset_version)
