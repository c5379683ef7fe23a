"""Transposed convolutions and upsampling, written for the training graph with operators that have gradients.

onnxruntime-training 1.19.2 has no gradient for ``ConvTranspose``
(``nn.ConvTranspose1d/2d/3d``) nor for ``Resize`` (``nn.Upsample``,
``F.interpolate``). The training graph
(:func:`helpers.core.training_graph.training_graph`) computes both from
operators that have one; the model a user exports keeps the original node.

* ``ConvTranspose`` is the ``Conv`` of its input spread by the stride (each
  element followed by ``stride - 1`` zeros: ``Unsqueeze``, ``Pad``,
  ``Reshape``), padded by ``dilation * (kernel - 1) - padding`` (plus
  ``output_padding`` at the end; a negative amount is a ``Slice``), with
  the kernel flipped in space and its two channel axes swapped within each
  group (``Reshape``, ``Transpose``, ``Reshape``, ``Slice`` with step -1 on
  the weight initializer, which stays the one torch has). The same
  products, so the same values and gradients.
* ``Resize`` by an integer factor: ``nearest`` (torch's
  ``asymmetric``/``floor``) repeats every element (``Unsqueeze``,
  ``Expand``, ``Reshape``); ``linear`` (torch's ``linear``, ``bilinear``,
  ``trilinear``, ``align_corners`` either way) is a ``MatMul`` along each
  resized axis with a constant matrix holding torch's interpolation
  coefficients (two per row), built from the static size of the input.
  Other modes (``cubic``), other coordinate modes and factors that are not
  integers are refused by name.
"""
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from .graph_nodes import constant_node, copy_with_nodes, is_onnx_op, node_attribute
from .graph_shapes import value_shapes
from .runtime import _REPLACEMENTS, UntrainableModelError, main_opset
from .training_graph import TRAINING_PREFIX, _depends_on_weights

_INT64 = np.iinfo(np.int64)


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _spread_axes(data, reference, factors, output, tag, fill):
    """``data`` of shape ``[N, C, D1, ..., Dk]`` spread to ``[N, C, D1 * f1, ..., Dk * fk]``.

    Each element is followed along each spatial axis by ``f - 1`` values
    that ``fill`` (``'zeros'`` or ``'repeat'``) gives. ``reference`` has
    the shape of ``data`` (it may be ``data`` itself).
    """
    count = len(factors)
    split_shape = [1] * (2 + 2 * count)
    split_shape[3::2] = factors
    nodes = [
        constant_node(f"{tag}__axes", [3 + 2 * i for i in range(count)], TensorProto.INT64),
        helper.make_node("Unsqueeze", [data, f"{tag}__axes"], [f"{tag}__split"], name=f"{tag}__unsqueeze"),
    ]
    if fill == "zeros":
        ends = [factor - 1 for factor in split_shape]
        nodes += [
            constant_node(f"{tag}__pads", [0] * len(ends) + ends, TensorProto.INT64),
            helper.make_node("Pad", [f"{tag}__split", f"{tag}__pads"], [f"{tag}__filled"], name=f"{tag}__pad"),
        ]
    else:
        nodes += [
            constant_node(f"{tag}__repeats", split_shape, TensorProto.INT64),
            helper.make_node("Expand", [f"{tag}__split", f"{tag}__repeats"], [f"{tag}__filled"], name=f"{tag}__expand"),
        ]
    return nodes + [
        helper.make_node("Shape", [reference], [f"{tag}__shape"], name=f"{tag}__shape"),
        constant_node(f"{tag}__factors", [1, 1, *factors], TensorProto.INT64),
        helper.make_node("Mul", [f"{tag}__shape", f"{tag}__factors"], [f"{tag}__spread_shape"], name=f"{tag}__mul"),
        helper.make_node("Reshape", [f"{tag}__filled", f"{tag}__spread_shape"], [output], name=f"{tag}__reshape"),
    ]


def _slice(data, output, starts, ends, axes, tag):
    inputs = [(f"{tag}__starts", starts), (f"{tag}__ends", ends), (f"{tag}__slice_axes", axes)]
    return [
        *(constant_node(name, values, TensorProto.INT64) for name, values in inputs),
        helper.make_node("Slice", [data, *(name for name, _ in inputs)], [output], name=f"{tag}__slice"),
    ]


def _convolution_weights(weights, shape, group, tag):
    """The ``Conv`` weights ``[C_out, C_in / group, *kernel]`` of ``ConvTranspose`` weights of ``shape``.

    The weights ``[C_in, C_out / group, *kernel]`` with their channel axes
    swapped within each group and the kernel flipped along every spatial axis.
    """
    c_in, c_out_group, *kernel = shape
    spatial = list(range(2, 2 + len(kernel)))
    return [
        constant_node(f"{tag}__grouped_shape", [group, c_in // group, c_out_group, *kernel], TensorProto.INT64),
        helper.make_node("Reshape", [weights, f"{tag}__grouped_shape"], [f"{tag}__grouped"], name=f"{tag}__group"),
        helper.make_node(
            "Transpose", [f"{tag}__grouped"], [f"{tag}__swapped"], name=f"{tag}__swap", perm=[0, 2, 1, *range(3, 3 + len(kernel))]
        ),
        constant_node(f"{tag}__conv_shape", [group * c_out_group, c_in // group, *kernel], TensorProto.INT64),
        helper.make_node("Reshape", [f"{tag}__swapped", f"{tag}__conv_shape"], [f"{tag}__unflipped"], name=f"{tag}__ungroup"),
    ] + _flipped(f"{tag}__unflipped", f"{tag}__weights", kernel, f"{tag}__flip")


def _flipped(data, output, kernel, tag):
    """``data`` ``[C_out, C_in, *kernel]`` reversed along every spatial axis (``Gather``: ``SliceGrad`` takes no negative step)."""
    nodes, rank = [], len(kernel)
    for axis, size in enumerate(kernel, start=2):
        result = output if axis == rank + 1 else f"{tag}__{axis}"
        nodes += [
            constant_node(f"{tag}__{axis}__indices", list(range(size - 1, -1, -1)), TensorProto.INT64),
            helper.make_node("Gather", [data, f"{tag}__{axis}__indices"], [result], name=f"{tag}__{axis}__gather", axis=axis),
        ]
        data = result
    return nodes


def _transposed_convolution_problem(node, weight_shape, opset):
    """Why ``node`` cannot be written as a ``Conv``, or None."""
    if opset < 13:
        return f"opset {opset} (the rewrite writes the operators of opset 13 and later)"
    if node_attribute(node, "output_shape", None):
        return "an output_shape attribute"
    if _text(node_attribute(node, "auto_pad", "NOTSET")) != "NOTSET":
        return f"auto_pad={_text(node_attribute(node, 'auto_pad'))}"
    if weight_shape is None or None in weight_shape:
        return "weights whose shape shape inference cannot tell"
    return None


def _transposed_convolution(node, weight_shape, index):
    """``ConvTranspose`` ``node`` as a ``Conv`` of its spread, padded input with transposed weights."""
    tag = f"{TRAINING_PREFIX}conv_transpose__{index}__{node.name or node.output[0]}"
    kernel = weight_shape[2:]
    rank = len(kernel)
    strides = list(node_attribute(node, "strides", [1] * rank))
    dilations = list(node_attribute(node, "dilations", [1] * rank))
    pads = list(node_attribute(node, "pads", [0] * 2 * rank))
    extra = list(node_attribute(node, "output_padding", [0] * rank))
    reach = [d * (k - 1) for d, k in zip(dilations, kernel)]
    begins = [r - p for r, p in zip(reach, pads[:rank])]
    # the spread input ends with stride - 1 zeros that the transposed convolution does not see
    ends = [r - p + e - (s - 1) for r, p, e, s in zip(reach, pads[rank:], extra, strides)]
    group = node_attribute(node, "group", 1)
    nodes = _convolution_weights(node.input[1], weight_shape, group, tag)
    x = node.input[0]
    if any(s > 1 for s in strides):
        nodes += _spread_axes(x, x, strides, f"{tag}__spread", f"{tag}__stride", "zeros")
        x = f"{tag}__spread"
    if min(begins + ends) < 0:
        crop_ends = [e if e < 0 else _INT64.max for e in ends]
        nodes += _slice(x, f"{tag}__cropped", [max(0, -b) for b in begins], crop_ends, list(range(2, 2 + rank)), f"{tag}__crop")
        x = f"{tag}__cropped"
    conv_pads = [max(0, b) for b in begins] + [max(0, e) for e in ends]
    inputs = [x, f"{tag}__weights", *node.input[2:]]
    nodes.append(
        helper.make_node(
            "Conv", inputs, [node.output[0]], name=f"{tag}__conv", group=group, kernel_shape=kernel,
            dilations=dilations, pads=conv_pads,
        )
    )
    return nodes


def transposed_convolutions_as_convolutions(model):
    """Return a copy of ``model`` whose ``ConvTranspose`` nodes are ``Conv`` nodes of a spread, padded input.

    onnxruntime 1.19.2 has no gradient for ``ConvTranspose``; the
    convolution it computes is written with operators that have one (see
    the module's documentation). The weights stay the initializer torch
    exported, with the same layout: the graph transposes and flips them.

    Raises
    ------
    UntrainableModelError
        For a ``ConvTranspose`` written with ``output_shape`` or
        ``auto_pad`` (torch writes neither), with weights of unknown shape,
        or in a model of opset 12 or older.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
    >>> model = transposed_convolutions_as_convolutions(export_for_training(net, torch.zeros(1, 2, 4, 4)))
    >>> [n.op_type for n in model.graph.node if n.op_type in ("Conv", "ConvTranspose", "Pad")]
    ['Pad', 'Conv']
    """
    if not any(is_onnx_op(n, "ConvTranspose") for n in model.graph.node):
        return model
    shapes, opset = _static_shapes(model), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "ConvTranspose"):
            nodes.append(node)
            continue
        weight_shape = shapes.get(node.input[1])
        problem = _transposed_convolution_problem(node, weight_shape, opset)
        if problem is not None:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} has no gradient for ConvTranspose, and the training graph "
                f"cannot write ConvTranspose {node.name!r} with {problem} as a Conv. Replace it: "
                f"{_REPLACEMENTS['ConvTranspose']}."
            )
        nodes.extend(_transposed_convolution(node, weight_shape, index))
    return copy_with_nodes(model, nodes)


def _static_shapes(model):
    """The shapes of the values, with what shape inference can tell from the values of shapes too."""
    return value_shapes(model, data_prop=True)


def _constant_value(model, name):
    """The value of ``name`` when constants and initializers alone compute it, else None."""
    producers = {output: node for node in model.graph.node for output in node.output}
    initializers = {i.name for i in model.graph.initializer}
    needed, pending = set(), [name]
    while pending:
        value = pending.pop()
        if not value or value in initializers:
            continue
        if value not in producers:
            return None  # a graph input
        if id(producers[value]) not in needed:
            needed.add(id(producers[value]))
            pending.extend(producers[value].input)
    nodes = [node for node in model.graph.node if id(node) in needed]
    graph = helper.make_graph(
        nodes, "constant", [], [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None)],
        initializer=model.graph.initializer,
    )
    return ReferenceEvaluator(helper.make_model(graph, opset_imports=model.opset_import)).run(None, {})[0]


def interpolation_matrix(size, factor, align_corners):
    """The ``[size * factor, size]`` matrix of torch's linear interpolation along one axis.

    Row ``i`` holds the two coefficients torch gives output ``i``, computed
    as torch computes them in float32: the source coordinate is
    ``(i + 0.5) / factor - 0.5`` (clipped at 0), or
    ``i * (size - 1) / (size * factor - 1)`` with ``align_corners``.

    Examples
    --------
    >>> interpolation_matrix(2, 2, align_corners=False)
    array([[1.  , 0.  ],
           [0.75, 0.25],
           [0.25, 0.75],
           [0.  , 1.  ]], dtype=float32)
    >>> interpolation_matrix(2, 2, align_corners=True)[1].tolist()
    [0.6666666269302368, 0.3333333432021332]
    """
    out = size * factor
    rows = np.arange(out)
    if align_corners:
        scale = np.float32(size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
        source = scale * rows.astype(np.float32)
    else:
        source = np.maximum(np.float32(1.0 / factor) * (rows.astype(np.float32) + np.float32(0.5)) - np.float32(0.5), 0)
    low = np.minimum(source.astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    weight = np.clip(source - low.astype(np.float32), 0, 1).astype(np.float32)
    matrix = np.zeros((out, size), dtype=np.float32)
    np.add.at(matrix, (rows, low), np.float32(1) - weight)
    np.add.at(matrix, (rows, high), weight)
    return matrix


def _linear_resize(x, output, sizes, factors, align_corners, tag):
    """``MatMul`` nodes interpolating ``x`` along each spatial axis, the last one first, as torch sums."""
    rank, nodes = 2 + len(sizes), []
    for axis in reversed(range(2, rank)):
        step = f"{tag}__axis{axis}"
        matrix = interpolation_matrix(sizes[axis - 2], factors[axis - 2], align_corners)
        result = output if axis == 2 else f"{step}__result"
        if axis == rank - 1:
            nodes += [
                constant_node(f"{step}__matrix", matrix.T),
                helper.make_node("MatMul", [x, f"{step}__matrix"], [result], name=f"{step}__matmul"),
            ]
        elif axis == rank - 2:
            nodes += [
                constant_node(f"{step}__matrix", matrix),
                helper.make_node("MatMul", [f"{step}__matrix", x], [result], name=f"{step}__matmul"),
            ]
        else:  # moved next to the last axis, and back
            perm = list(range(rank))
            perm[axis], perm[rank - 2] = rank - 2, axis
            nodes += [
                helper.make_node("Transpose", [x], [f"{step}__moved"], name=f"{step}__move", perm=perm),
                constant_node(f"{step}__matrix", matrix),
                helper.make_node("MatMul", [f"{step}__matrix", f"{step}__moved"], [f"{step}__product"], name=f"{step}__matmul"),
                helper.make_node("Transpose", [f"{step}__product"], [result], name=f"{step}__back", perm=perm),
            ]
        x = result
    return nodes


def _resize_mode_problem(node, opset):
    """Why the mode or the attributes of ``Resize`` ``node`` are not the ones rewritten, or None."""
    mode = _text(node_attribute(node, "mode", "nearest"))
    coordinates = _text(node_attribute(node, "coordinate_transformation_mode", "half_pixel"))
    rounding = _text(node_attribute(node, "nearest_mode", "round_prefer_floor"))
    if opset < 13:
        return f"opset {opset} (the rewrite writes the operators of opset 13 and later)"
    if mode == "cubic":
        return "mode='cubic' (torch: mode='bicubic')"
    if mode == "nearest" and (coordinates, rounding) != ("asymmetric", "floor"):
        return f"mode='nearest', coordinate_transformation_mode={coordinates!r} and nearest_mode={rounding!r}"
    if mode == "linear" and coordinates not in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        return f"mode='linear' and coordinate_transformation_mode={coordinates!r}"
    if node_attribute(node, "axes", None) is not None:
        return "an axes attribute"
    return None


def _resize_factors(node, model, in_shape, out_shape):
    """``(factors, None)``: the integer factor of each spatial axis; ``(None, problem)`` when there is none."""
    scales = node.input[2] if len(node.input) > 2 else ""
    if scales:
        value = _constant_value(model, scales)
        if value is None:
            return None, "scales computed at run time"
        ratios = [float(s) for s in value]
    elif in_shape is None or out_shape is None or None in in_shape[1:] + out_shape[1:]:
        return None, "sizes and an input size that shape inference cannot tell"
    else:
        ratios = [1.0] + [o / i for o, i in zip(out_shape[1:], in_shape[1:])]
    if in_shape is not None and len(ratios) != len(in_shape) or ratios[:2] != [1.0, 1.0]:
        return None, f"scales {ratios} that resize the batch or channel axis"
    if any(r < 1 or r != int(r) for r in ratios[2:]):
        return None, f"scale factors {ratios[2:]} that are not all integers (torch: scale_factor=2 or a size that is a multiple of the input's)"
    return [int(r) for r in ratios[2:]], None


def resizes_as_repeats_and_products(model):
    """Return a copy of ``model`` whose ``Resize`` nodes by integer factors are repeats or matrix products.

    onnxruntime 1.19.2 has no gradient for ``Resize``. A nearest-neighbour
    upsampling repeats each element (``Expand``); a linear one is a product
    with a constant matrix of torch's coefficients along each axis (see the
    module's documentation).

    Raises
    ------
    UntrainableModelError
        For a ``Resize`` that needs a gradient and has no such rewrite:
        ``cubic`` mode, a factor that is not an integer, a linear
        interpolation of an input whose size shape inference cannot tell.

    Examples
    --------
    >>> import torch
    >>> from helpers.core.torch_export import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.Upsample(scale_factor=2))
    >>> model = resizes_as_repeats_and_products(export_for_training(net, torch.zeros(1, 1, 3, 3)))
    >>> [n.op_type for n in model.graph.node if n.op_type in ("Resize", "Expand", "Reshape")]
    ['Expand', 'Reshape']
    """
    if not any(is_onnx_op(n, "Resize") for n in model.graph.node):
        return model
    shapes, trained, opset = _static_shapes(model), _depends_on_weights(model), main_opset(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        if not is_onnx_op(node, "Resize"):
            nodes.append(node)
            continue
        in_shape = shapes.get(node.input[0])
        factors, problem = None, _resize_mode_problem(node, opset)
        if problem is None:
            factors, problem = _resize_factors(node, model, in_shape, shapes.get(node.output[0]))
        linear = _text(node_attribute(node, "mode", "nearest")) == "linear"
        if problem is None and linear and (in_shape is None or None in in_shape[2:]):
            problem = "mode='linear' and an input whose size shape inference cannot tell"
        if problem is not None and node.input[0] in trained:
            raise UntrainableModelError(
                f"onnxruntime {onnxruntime.__version__} cannot train this model: no gradient for Resize, and the "
                f"training graph cannot rewrite Resize {node.name!r} with {problem}. Replace it: "
                f"{_REPLACEMENTS['Resize']}."
            )
        tag = f"{TRAINING_PREFIX}resize__{index}__{node.name or node.output[0]}"
        if problem is not None:
            nodes.append(node)
        elif linear:
            align_corners = _text(node_attribute(node, "coordinate_transformation_mode")) == "align_corners"
            nodes.extend(_linear_resize(node.input[0], node.output[0], in_shape[2:], factors, align_corners, tag))
        else:
            nodes.extend(_spread_axes(node.input[0], node.input[0], factors, node.output[0], tag, "repeat"))
    return copy_with_nodes(model, nodes)
