"""Layer, group and instance normalization written out where onnxruntime cannot train them.

onnxruntime-training 1.19.2 trains two normalizations of torch's exports
wrong or not at all:

* ``LayerNormalization`` over a normalized size of one (torch's
  ``LayerNorm([1])``, a feature of its own): the CPU kernel of its gradient
  stops on ``layer_norm.cc:56 M != 1 was false``.
* ``InstanceNormalization``, which torch's ``InstanceNorm1d/2d/3d`` and
  ``GroupNorm`` export to (``GroupNorm``: ``Reshape`` to ``(N, groups, -1)``,
  ``InstanceNormalization`` with a scale of ones and a bias of zeros,
  ``Reshape`` back, ``Mul`` by the weight, ``Add`` of the bias), has no
  gradient at all.

The training graph computes them instead as torch does, from operators
whose gradients onnxruntime has: the mean and the biased variance over the
normalized axes (``ReduceMean``, ``Sub``, ``Mul``), ``(x - mean) /
sqrt(var + epsilon)`` (``Add``, ``Sqrt``, ``Div``), then the scale and the
bias (``Mul``, ``Add``). The same values to float32 rounding, and the same
gradients. A ``LayerNormalization`` over more than one value keeps its
node: its kernel is right there, and faster.

torch's ``InstanceNorm`` with ``track_running_stats=True`` never gets
here: with a free batch size torch refuses to export it ("ONNX export of
instance_norm training for unknown batch size"), and with a fixed one it
writes a ``BatchNormalization`` with five outputs, which the ONNX checker
refuses.
"""

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import (
    constant_node,
    copy_with_nodes,
    is_onnx_op,
    reduce_mean,
)
from ..graphs.graph_shapes import value_shapes
from ..graphs.graph_values import shapes_with_a_run
from ..machine.runtime import UntrainableModelError, main_opset

#: Prefix of the names of the nodes and values these rewrites add.
NORMALIZATION_PREFIX = "normalization__"


def _normalized(x, output, axes, epsilon, opset, tag):
    """Nodes writing ``(x - mean) / sqrt(var + epsilon)`` over ``axes`` into ``output``.

    The variance is the biased one, as torch's normalizations use.
    """
    names = ("mean", "centered", "squares", "var", "epsilon", "var_eps", "std")
    mean, centered, squares, var, epsilon_value, var_eps, std = (f"{tag}__{name}" for name in names)
    return [
        *reduce_mean(x, mean, axes, opset, f"{tag}__reduce_mean"),
        helper.make_node("Sub", [x, mean], [centered], name=centered),
        helper.make_node("Mul", [centered, centered], [squares], name=squares),
        *reduce_mean(squares, var, axes, opset, f"{tag}__reduce_var"),
        constant_node(epsilon_value, epsilon),
        helper.make_node("Add", [var, epsilon_value], [var_eps], name=var_eps),
        helper.make_node("Sqrt", [var_eps], [std], name=std),
        helper.make_node("Div", [centered, std], [output], name=output),
    ]


def _affine(normalized, scale, bias, output, tag):
    """Nodes writing ``normalized * scale + bias`` into ``output`` (no ``Add`` without ``bias``)."""
    if not bias:
        return [helper.make_node("Mul", [normalized, scale], [output], name=output)]
    return [
        helper.make_node("Mul", [normalized, scale], [f"{tag}__scaled"], name=f"{tag}__scaled"),
        helper.make_node("Add", [f"{tag}__scaled", bias], [output], name=output),
    ]


def _layer_norm_axes(node, shapes):
    """The normalized axes of ``LayerNormalization`` ``node`` (negative) and their size.

    Either is None where shape inference cannot tell. The scale has the
    normalized shape; the input's shape tells it too.
    """
    x_shape, scale_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    axis = node_attribute(node, "axis", -1)
    if x_shape is not None:
        count = len(x_shape) - axis % len(x_shape)
    elif axis < 0:
        count = -axis
    else:
        count = len(scale_shape) if scale_shape is not None else None
    if count is None:
        return None, None
    for dims in (scale_shape, x_shape[-count:] if x_shape is not None else None):
        if dims is not None and None not in dims:
            return list(range(-count, 0)), int(np.prod(dims))
    return list(range(-count, 0)), None


def _layer_norm_written_out(node, axes, opset, index):
    """``LayerNormalization`` ``node`` from primitives, and its optional outputs (mean, 1 / std)."""
    tag = f"{NORMALIZATION_PREFIX}layer_norm__{index}__{node.name or node.output[0]}"
    outputs = list(node.output) + [""] * (3 - len(node.output))
    epsilon = node_attribute(node, "epsilon", 1e-5)
    bias = node.input[2] if len(node.input) > 2 else ""
    nodes = _normalized(node.input[0], f"{tag}__normalized", axes, epsilon, opset, tag)
    nodes += _affine(f"{tag}__normalized", node.input[1], bias, outputs[0], tag)
    if outputs[1]:
        nodes.append(helper.make_node("Identity", [f"{tag}__mean"], [outputs[1]], name=outputs[1]))
    if outputs[2]:
        nodes.append(helper.make_node("Reciprocal", [f"{tag}__std"], [outputs[2]], name=outputs[2]))
    return nodes


def layer_norms_of_one_value_written_out(model):
    """Return a copy of ``model`` whose ``LayerNormalization`` nodes over one value are written out.

    A node normalizing a single value (or a number of values shape
    inference cannot tell) becomes the same normalization from primitives
    (see the module's documentation): its output is its bias, and the
    gradient of its input zero, as in torch, where the kernel of
    onnxruntime 1.19.2 stops. The other nodes are left as they are.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> model = export_for_training(torch.nn.LayerNorm([1]), torch.zeros(2, 3, 1))
    >>> written = layer_norms_of_one_value_written_out(model)
    >>> [n.op_type for n in written.graph.node if n.op_type != "Constant"]
    ['ReduceMean', 'Sub', 'Mul', 'ReduceMean', 'Add', 'Sqrt', 'Div', 'Mul', 'Add']
    >>> wide = export_for_training(torch.nn.LayerNorm([4]), torch.zeros(2, 4))
    >>> layer_norms_of_one_value_written_out(wide) is wide
    True
    """
    if not any(is_onnx_op(n, "LayerNormalization") for n in model.graph.node):
        return model
    shapes, opset = value_shapes(model), main_opset(model)
    nodes, changed = [], False
    for index, node in enumerate(model.graph.node):
        axes, size = (None, None)
        if is_onnx_op(node, "LayerNormalization"):
            axes, size = _layer_norm_axes(node, shapes)
        if axes is None or size not in (None, 1):
            nodes.append(node)
            continue
        nodes.extend(_layer_norm_written_out(node, axes, opset, index))
        changed = True
    return copy_with_nodes(model, nodes) if changed else model


def _layer_norm_of_centered_input(node, axes, opset, index):
    """``LayerNormalization`` ``node`` applied to its input minus the input's mean over ``axes``."""
    tag = f"{NORMALIZATION_PREFIX}layer_norm_centered__{index}__{node.name or node.output[0]}"
    x, mean, centered = node.input[0], f"{tag}__mean", f"{tag}__centered"
    normalization = onnx.NodeProto()
    normalization.CopyFrom(node)
    normalization.input[0] = centered
    return [
        *reduce_mean(x, mean, axes, opset, f"{tag}__reduce_mean"),
        helper.make_node("Sub", [x, mean], [centered], name=centered),
        normalization,
    ]


def layer_norms_of_centered_inputs(model):
    """Return a copy of ``model`` whose ``LayerNormalization`` nodes normalize a centered input.

    onnxruntime's kernel computes the variance in one pass, ``E[x**2] -
    E[x]**2``, which loses the digits of a variance small against the
    square of the mean (values close to each other far from 0: a
    normalization after a pooling or a ReLU of near-equal values); torch
    subtracts the mean first. Normalizing ``x - mean(x)`` gives the same
    values and gradients (a normalization does not depend on the mean of
    its input), and the kernel's mean is then close to 0, where its one
    pass is as exact as torch's two. Nodes whose axes shape inference
    cannot tell are left as they are.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> model = export_for_training(torch.nn.LayerNorm([2, 4]), torch.zeros(3, 2, 4))
    >>> [
    ...     n.op_type
    ...     for n in layer_norms_of_centered_inputs(model).graph.node
    ...     if n.op_type != "Constant"
    ... ]
    ['ReduceMean', 'Sub', 'LayerNormalization']
    """
    if not any(is_onnx_op(n, "LayerNormalization") for n in model.graph.node):
        return model
    shapes, opset = value_shapes(model), main_opset(model)
    nodes, changed = [], False
    for index, node in enumerate(model.graph.node):
        axes = _layer_norm_axes(node, shapes)[0] if is_onnx_op(node, "LayerNormalization") else None
        if axes is None:
            nodes.append(node)
            continue
        nodes.extend(_layer_norm_of_centered_input(node, axes, opset, index))
        changed = True
    return copy_with_nodes(model, nodes) if changed else model


def _instance_norm_written_out(node, rank, opset, index):
    """``InstanceNormalization`` ``node`` of an input of rank ``rank`` from primitives."""
    x, scale, bias = node.input[:3]
    tag = f"{NORMALIZATION_PREFIX}instance_norm__{index}__{node.name or node.output[0]}"
    channel_shape = [-1] + [1] * (rank - 2)  # (C,) -> (C, 1, ..., 1) against (N, C, ...)
    epsilon = node_attribute(node, "epsilon", 1e-5)
    return [
        *_normalized(x, f"{tag}__normalized", list(range(2, rank)), epsilon, opset, tag),
        constant_node(f"{tag}__channel_shape", channel_shape, TensorProto.INT64),
        *(
            helper.make_node("Reshape", [value, f"{tag}__channel_shape"], [reshaped], name=reshaped)
            for value, reshaped in ((scale, f"{tag}__scale"), (bias, f"{tag}__bias"))
        ),
        *_affine(f"{tag}__normalized", f"{tag}__scale", f"{tag}__bias", node.output[0], tag),
    ]


def instance_norms_written_out(model):
    """Return a copy of ``model`` whose ``InstanceNormalization`` nodes are written out.

    Each node becomes the normalization of every sample and channel over
    the other axes, with torch's biased variance and epsilon, from
    primitives that have gradients (see the module's documentation).

    Raises
    ------
    UntrainableModelError
        When the rank of a node's input cannot be inferred.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> model = export_for_training(torch.nn.GroupNorm(2, 4), torch.zeros(2, 4, 3))
    >>> ops = [n.op_type for n in instance_norms_written_out(model).graph.node]
    >>> "InstanceNormalization" in ops, ops.count("ReduceMean")
    (False, 2)
    """
    if not any(is_onnx_op(n, "InstanceNormalization") for n in model.graph.node):
        return model
    inputs = [n.input[0] for n in model.graph.node if is_onnx_op(n, "InstanceNormalization")]
    shapes, opset = shapes_with_a_run(model, inputs), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "InstanceNormalization"):
            nodes.append(node)
            continue
        shape = shapes.get(node.input[0])
        if shape is None:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} has no gradient for InstanceNormalization "
                f"{node.name!r}, and the rank of its input cannot be inferred to write it out: "
                "give the model's inputs a shape (torch exports do)."
            )
        nodes.extend(_instance_norm_written_out(node, len(shape), opset, index))
    return copy_with_nodes(model, nodes)
