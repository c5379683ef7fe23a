"""Transposed convolutions and upsampling, written with operators that have a gradient.

onnxruntime-training 1.19.2 has no gradient for ``ConvTranspose``
(``nn.ConvTranspose1d/2d/3d``) nor for ``Resize`` (``nn.Upsample``,
``F.interpolate``). The training graph
(:func:`helpers.core.model_graphs.training_graph.training_graph`) computes both with
operators that have one; the model a user exports keeps the original node.

* ``ConvTranspose`` is the ``Conv`` of its input spread by the stride (each
  element followed by ``stride - 1`` zeros: ``Unsqueeze``, ``Pad``,
  ``Reshape``) and padded by ``dilation * (kernel - 1) - padding`` (plus
  ``output_padding`` at the end; a negative amount is a ``Slice``), with
  the kernel flipped in space (``Gather``: ``SliceGrad`` refuses negative
  steps) and its two channel axes swapped within each group (``Reshape``,
  ``Transpose``, ``Reshape``). The graph transforms the weight
  initializer, which stays the one torch has. The same products, so the
  same values and gradients.
* ``Resize`` by integer factors: ``nearest`` (torch writes
  ``coordinate_transformation_mode='asymmetric'``, ``nearest_mode='floor'``)
  repeats every element (``Unsqueeze``, ``Expand``, ``Reshape``); ``linear``
  (torch's ``linear``, ``bilinear`` and ``trilinear``: ``half_pixel``, or
  ``align_corners``) is a ``MatMul`` along each resized axis with a
  constant matrix of torch's coefficients, two a row
  (:func:`interpolation_matrix`), built from the static size of the input.
  Other modes (``cubic``), other coordinate modes, factors that are not
  integers and, for ``linear``, inputs of unknown size are refused by name.
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import (
    TRAINING_PREFIX,
    constant_node,
    copy_with_nodes,
    depends_on_weights,
    is_onnx_op,
)
from ..graphs.graph_shapes import value_shapes
from ..graphs.graph_values import constant_value, shapes_with_a_run
from ..machine.runtime import _REPLACEMENTS, UntrainableModelError, main_opset

#: The first opset whose ``Unsqueeze`` takes its axes as an input, as the rewrites write it.
_FIRST_OPSET = 13


def _refusal(node, problem):
    """The error for ``node`` (a ``ConvTranspose`` or a ``Resize``) that has no rewrite."""
    return UntrainableModelError(
        f"onnxruntime {onnxruntime.__version__} cannot train this model: no gradient for "
        f"{node.op_type}, and the training graph cannot rewrite {node.op_type} {node.name!r} "
        f"with {problem}. Replace it: {_REPLACEMENTS[node.op_type]}."
    )


def _node(op_type, inputs, output, **attributes):
    """One node named after its one output."""
    return helper.make_node(op_type, inputs, [output], name=output, **attributes)


def _ints(name, values):
    return constant_node(name, values, TensorProto.INT64)


def _spread(data, factors, output, tag, fill):
    """``data`` ``[N, C, D1, ..., Dk]`` spread to ``[N, C, D1 * f1, ..., Dk * fk]``.

    Each element is followed along spatial axis ``i`` by ``fi - 1`` zeros
    (``fill='zeros'``) or copies of itself (``fill='repeat'``).
    """
    split = [1] * (2 + 2 * len(factors))
    split[3::2] = factors
    if fill == "zeros":
        filling = [
            _ints(f"{tag}__pads", [0] * len(split) + [f - 1 for f in split]),
            _node("Pad", [f"{tag}__split", f"{tag}__pads"], f"{tag}__filled"),
        ]
    else:
        filling = [
            _ints(f"{tag}__repeats", split),
            _node("Expand", [f"{tag}__split", f"{tag}__repeats"], f"{tag}__filled"),
        ]
    return [
        _ints(f"{tag}__axes", list(range(3, len(split), 2))),
        _node("Unsqueeze", [data, f"{tag}__axes"], f"{tag}__split"),
        *filling,
        _node("Shape", [data], f"{tag}__shape"),
        _ints(f"{tag}__factors", [1, 1, *factors]),
        _node("Mul", [f"{tag}__shape", f"{tag}__factors"], f"{tag}__spread_shape"),
        _node("Reshape", [f"{tag}__filled", f"{tag}__spread_shape"], output),
    ]


def _convolution_weights(weights, shape, group, output, tag):
    """``ConvTranspose`` weights as ``Conv`` weights.

    ``[C_in, C_out / group, *kernel]`` becomes ``[C_out, C_in / group,
    *kernel]``: the channel axes are swapped within each group, and the
    kernel is reversed along every spatial axis.
    """
    c_in, c_out_group, *kernel = shape
    spatial = range(3, 3 + len(kernel))  # of the grouped weights
    nodes = [
        _ints(f"{tag}__grouped_shape", [group, c_in // group, c_out_group, *kernel]),
        _node("Reshape", [weights, f"{tag}__grouped_shape"], f"{tag}__grouped"),
        _node("Transpose", [f"{tag}__grouped"], f"{tag}__swapped", perm=[0, 2, 1, *spatial]),
        _ints(f"{tag}__conv_shape", [group * c_out_group, c_in // group, *kernel]),
        _node("Reshape", [f"{tag}__swapped", f"{tag}__conv_shape"], f"{tag}__flip0"),
    ]
    for axis, size in enumerate(kernel, start=2):
        flipped = output if axis == len(shape) - 1 else f"{tag}__flip{axis - 1}"
        nodes += [
            _ints(f"{tag}__reversed{axis}", list(range(size - 1, -1, -1))),
            _node(
                "Gather", [f"{tag}__flip{axis - 2}", f"{tag}__reversed{axis}"], flipped, axis=axis
            ),
        ]
    return nodes


def _transposed_convolution_problem(node, weight_shape, opset):
    """Why ``ConvTranspose`` ``node`` cannot be written as a ``Conv``, or None."""
    if opset < _FIRST_OPSET:
        return f"opset {opset} (export with opset_version={_FIRST_OPSET} or later)"
    if node_attribute(node, "output_shape", None):
        return "an output_shape attribute"
    if node_attribute(node, "auto_pad", "NOTSET") != "NOTSET":
        return f"auto_pad={node_attribute(node, 'auto_pad')}"
    if weight_shape is None or None in weight_shape:
        return "weights whose shape shape inference cannot tell"
    return None


def _transposed_convolution(node, weight_shape, index):
    """``ConvTranspose`` ``node`` as a ``Conv`` of its spread input with transposed weights."""
    tag = f"{TRAINING_PREFIX}conv_transpose__{index}__{node.name or node.output[0]}"
    kernel = weight_shape[2:]
    rank = len(kernel)
    strides = list(node_attribute(node, "strides", [1] * rank))
    dilations = list(node_attribute(node, "dilations", [1] * rank))
    pads = list(node_attribute(node, "pads", [0] * 2 * rank))
    extra = list(node_attribute(node, "output_padding", [0] * rank))
    reach = [d * (k - 1) for d, k in zip(dilations, kernel)]
    begins = [r - p for r, p in zip(reach, pads[:rank])]
    # the spread input ends with stride - 1 zeros, which are not the transposed convolution's
    ends = [r - p + e - (s - 1) for r, p, e, s in zip(reach, pads[rank:], extra, strides)]
    group = node_attribute(node, "group", 1)
    nodes = _convolution_weights(node.input[1], weight_shape, group, f"{tag}__weights", tag)
    x = node.input[0]
    if any(s > 1 for s in strides):
        nodes += _spread(x, strides, f"{tag}__spread", f"{tag}__stride", "zeros")
        x = f"{tag}__spread"
    if min(begins + ends) < 0:  # a padding wider than the kernel's reach crops
        nodes += [
            _ints(f"{tag}__crop_starts", [max(0, -b) for b in begins]),
            _ints(f"{tag}__crop_ends", [e if e < 0 else np.iinfo(np.int64).max for e in ends]),
            _ints(f"{tag}__crop_axes", list(range(2, 2 + rank))),
            _node(
                "Slice",
                [x, *(f"{tag}__crop_{part}" for part in ("starts", "ends", "axes"))],
                f"{tag}__cropped",
            ),
        ]
        x = f"{tag}__cropped"
    conv_pads = [max(0, b) for b in begins] + [max(0, e) for e in ends]
    return nodes + [
        helper.make_node(
            "Conv",
            [x, f"{tag}__weights", *node.input[2:]],
            [node.output[0]],
            name=node.name or tag,
            group=group,
            kernel_shape=kernel,
            dilations=dilations,
            pads=conv_pads,
        ),
    ]


def transposed_convolutions_as_convolutions(model):
    """Return a copy of ``model`` whose ``ConvTranspose`` nodes are ``Conv`` nodes.

    onnxruntime 1.19.2 has no gradient for ``ConvTranspose``; the
    convolution it computes is written with operators that have one (see
    the module's documentation). The weights stay the initializer torch
    exported, with its layout: the graph transposes and flips them.

    Raises
    ------
    UntrainableModelError
        For a ``ConvTranspose`` written with ``output_shape`` or
        ``auto_pad`` (torch writes neither), with weights of unknown shape,
        or in a model of opset 12 or older.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
    >>> model = export_for_training(net, torch.zeros(1, 2, 4, 4))
    >>> rewritten = transposed_convolutions_as_convolutions(model)
    >>> [n.op_type for n in rewritten.graph.node if n.op_type in ("ConvTranspose", "Pad", "Conv")]
    ['Pad', 'Conv']
    """
    if not any(is_onnx_op(n, "ConvTranspose") for n in model.graph.node):
        return model
    shapes, opset = value_shapes(model), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "ConvTranspose"):
            nodes.append(node)
            continue
        weight_shape = shapes.get(node.input[1])
        problem = _transposed_convolution_problem(node, weight_shape, opset)
        if problem is not None:
            raise _refusal(node, problem)
        nodes.extend(_transposed_convolution(node, weight_shape, index))
    return copy_with_nodes(model, nodes)


def interpolation_matrix(size, factor, align_corners):
    """The ``[size * factor, size]`` matrix of torch's linear interpolation along one axis.

    Row ``i`` holds the two coefficients torch gives output ``i``, computed
    as torch computes them, in float32: the source coordinate is
    ``(i + 0.5) / factor - 0.5`` (0 below 0), or
    ``i * (size - 1) / (size * factor - 1)`` with ``align_corners``.

    Examples
    --------
    >>> interpolation_matrix(2, 2, align_corners=False)
    array([[1.  , 0.  ],
           [0.75, 0.25],
           [0.25, 0.75],
           [0.  , 1.  ]], dtype=float32)
    >>> (3 * interpolation_matrix(2, 2, align_corners=True)).round(6).tolist()
    [[3.0, 0.0], [2.0, 1.0], [1.0, 2.0], [0.0, 3.0]]
    """
    out = size * factor
    rows = np.arange(out)
    index = rows.astype(np.float32)
    if align_corners:
        source = (np.float32(size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)) * index
    else:
        half = np.float32(0.5)
        source = np.maximum(np.float32(1.0 / factor) * (index + half) - half, np.float32(0))
    low = np.minimum(source.astype(np.int64), size - 1)
    weight = np.clip(source - low.astype(np.float32), 0, 1).astype(np.float32)
    matrix = np.zeros((out, size), dtype=np.float32)
    np.add.at(matrix, (rows, low), np.float32(1) - weight)
    np.add.at(matrix, (rows, np.minimum(low + 1, size - 1)), weight)
    return matrix


def _interpolation(x, output, sizes, factors, align_corners, tag):
    """``MatMul`` nodes interpolating ``x`` along each spatial axis, the last first (as torch)."""
    rank, nodes = 2 + len(sizes), []
    for axis in reversed(range(2, rank)):
        step = f"{tag}__axis{axis}"
        matrix = interpolation_matrix(sizes[axis - 2], factors[axis - 2], align_corners)
        result = output if axis == 2 else f"{step}__result"
        if axis == rank - 1:
            nodes += [
                constant_node(f"{step}__matrix", matrix.T),
                _node("MatMul", [x, f"{step}__matrix"], result),
            ]
        elif axis == rank - 2:
            nodes += [
                constant_node(f"{step}__matrix", matrix),
                _node("MatMul", [f"{step}__matrix", x], result),
            ]
        else:  # moved next to the last axis, and back
            perm = list(range(rank))
            perm[axis], perm[rank - 2] = rank - 2, axis
            nodes += [
                _node("Transpose", [x], f"{step}__moved", perm=perm),
                constant_node(f"{step}__matrix", matrix),
                _node("MatMul", [f"{step}__matrix", f"{step}__moved"], f"{step}__product"),
                _node("Transpose", [f"{step}__product"], result, perm=perm),
            ]
        x = result
    return nodes


#: The coordinate modes of a linear ``Resize`` that :func:`interpolation_matrix` reproduces.
_LINEAR_COORDINATES = ("half_pixel", "pytorch_half_pixel", "align_corners")


def _resize_mode_problem(node, opset):
    """Why the mode or the attributes of ``Resize`` ``node`` are not the ones rewritten, or None."""
    mode = node_attribute(node, "mode", "nearest")
    coordinates = node_attribute(node, "coordinate_transformation_mode", "half_pixel")
    rounding = node_attribute(node, "nearest_mode", "round_prefer_floor")
    if opset < _FIRST_OPSET:
        return f"opset {opset} (export with opset_version={_FIRST_OPSET} or later)"
    if mode == "cubic":
        return "mode='cubic' (torch: mode='bicubic')"
    if mode == "nearest" and (coordinates, rounding) != ("asymmetric", "floor"):
        return (
            f"mode='nearest', coordinate_transformation_mode={coordinates!r} and "
            f"nearest_mode={rounding!r}"
        )
    if mode == "linear" and coordinates not in _LINEAR_COORDINATES:
        return f"mode='linear' and coordinate_transformation_mode={coordinates!r}"
    if node_attribute(node, "axes", None) is not None:
        return "an axes attribute"
    return None


def _resize_factors(node, model, in_shape, out_shape):
    """``(factors, None)``, the integer factor of each spatial axis, or ``(None, problem)``."""
    scales = node.input[2] if len(node.input) > 2 else ""
    if scales:
        value = constant_value(model, scales)
        if value is None:
            return None, "scales computed at run time"
        ratios = [float(s) for s in value]
    elif in_shape is None or out_shape is None or None in in_shape[1:] + out_shape[1:]:
        return None, f"sizes, and sizes that are not fixed (input {in_shape}, output {out_shape})"
    else:
        ratios = [1.0] + [o / i for o, i in zip(out_shape[1:], in_shape[1:])]
    if ratios[:2] != [1.0, 1.0]:
        return None, f"scales {ratios} that resize the batch or the channel axis"
    if any(r < 1 or r != int(r) for r in ratios[2:]):
        return None, f"scale factors {ratios[2:]} that are not all integers"
    return [int(r) for r in ratios[2:]], None


def resizes_as_repeats_and_products(model):
    """Return a copy of ``model`` whose ``Resize`` nodes by integer factors are repeats or products.

    onnxruntime 1.19.2 has no gradient for ``Resize``. A nearest-neighbour
    upsampling repeats each element (``Expand``); a linear one is a product
    with a constant matrix of torch's coefficients along each axis (see the
    module's documentation). A ``Resize`` that has no such rewrite is left
    as it is when nothing before it is trained.

    Raises
    ------
    UntrainableModelError
        For a ``Resize`` computed from the weights that has no such rewrite:
        ``cubic`` mode, factors that are not integers, a linear
        interpolation of an input whose size is not fixed (neither shape
        inference nor a run on zeros of the nodes before it tells it).

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.Upsample(scale_factor=2))
    >>> model = resizes_as_repeats_and_products(export_for_training(net, torch.zeros(1, 1, 3, 3)))
    >>> [n.op_type for n in model.graph.node if n.op_type in ("Resize", "Expand", "Reshape")]
    ['Expand', 'Reshape']
    """
    if not any(is_onnx_op(n, "Resize") for n in model.graph.node):
        return model
    resizes = [n for n in model.graph.node if is_onnx_op(n, "Resize")]
    shapes = shapes_with_a_run(model, [name for n in resizes for name in (n.input[0], n.output[0])])
    trained, opset = depends_on_weights(model), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "Resize"):
            nodes.append(node)
            continue
        in_shape = shapes.get(node.input[0])
        linear = node_attribute(node, "mode", "nearest") == "linear"
        factors, problem = None, _resize_mode_problem(node, opset)
        if problem is None:
            factors, problem = _resize_factors(node, model, in_shape, shapes.get(node.output[0]))
        if problem is None and linear and (in_shape is None or None in in_shape[2:]):
            problem = f"mode='linear', and an input size that is not fixed ({in_shape})"
        if problem is not None and node.input[0] in trained:
            raise _refusal(node, problem)
        x, y = node.input[0], node.output[0]
        tag = f"{TRAINING_PREFIX}resize__{index}__{node.name or y}"
        if problem is not None:
            nodes.append(node)
        elif linear:
            align = node_attribute(node, "coordinate_transformation_mode") == "align_corners"
            nodes.extend(_interpolation(x, y, in_shape[2:], factors, align, tag))
        else:
            nodes.extend(_spread(x, factors, y, tag, "repeat"))
    return copy_with_nodes(model, nodes)
