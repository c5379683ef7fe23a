"""Convolutions written as windows and one matrix product, whose gradients run on fast kernels.

onnxruntime-training 1.19.2 computes the gradient of ``Conv`` with the CPU
kernel ``ConvGrad``, which loops over the images of the batch and over the
groups: for each image, an ``im2col`` and one small matrix product for the
weights, another small product and a ``col2im`` for the input, a
matrix-vector product for the bias. Products of one image's size (a
sequence of 32 steps: 32 columns) use the thread pool badly.

The same convolution can be written with operators whose gradients are
copies or large products: the input in channels-last order
(``Transpose``), padded (``Pad``), one strided ``Slice`` per position of
the kernel (the window of every output position at that kernel offset),
``Concat`` along the channels, and one ``MatMul`` of all the batch's
windows, ``(batch x positions, offsets x channels)``, by the reshaped
weights, ``(offsets x channels, out channels)``; then the bias and a
``Transpose`` back. The gradient builder differentiates that into
``SliceGrad``, ``Split``, a ``Pad`` of the gradient and two large products,
and skips the windows' gradient where the input needs none (the first
convolution of a network). A depthwise convolution (``group`` equal to the
number of input and output channels) is the sum of the windows, each
multiplied by its kernel tap (a chain of ``Add``: the builder has no
gradient for ``Sum``). The values are those of ``Conv`` up to the order of
the sums: 1e-7 of the largest value, as ``Conv``'s own, against torch in
float64.

Measured (``benchmarks/profiles/studies/conv_gradients.py --rounds 2``, the reference
machine: a 2-core AMD EPYC with AVX-512), the ratio of a
training step with every convolution rewritten to the step with
``ConvGrad``, whole-training / forward-backward API, batches of 64:

* 1-D, the zoo's ``sequence_conv_small`` and ``sequence_conv_large``: one
  thread 0.60 / 0.64 and 0.76 / 0.77; two threads 0.88 / 0.93 and
  1.00 (0.53 to 1.46 over the rounds) / 0.56;
* 2-D, ``image_cnn_small``, ``image_cnn_large`` and a ResNet-style block
  (3 x 32 x 32): one thread 1.28 / 1.47, 1.25 / 1.30, 1.68 / 1.64; two
  threads 2.10 / 1.14, 1.36 / 1.30, 1.20 / 1.24;
* a MobileNetV2-style block (1x1 and 3x3 depthwise convolutions): one
  thread 0.35 / 1.93, two threads 1.55 / 2.37; its depthwise convolutions
  alone rewritten (``conv_gradients.py --rounds 2 depthwise_block``): one
  thread 2.04 / 2.04, two threads 1.22 / 1.89.

The products are faster than ``ConvGrad`` (onnxruntime's profiler,
``sequence_conv_large``, one thread: about 4.5 ms of products for the
gradient where ``ConvGrad`` took 7.4 ms); the copies are what the rewrite adds: the
windows (``Slice``, ``Concat``, their gradients ``SliceGrad``, ``Split``
and the sum of the windows' gradients) and the ``Transpose`` to and from
channels-last, about 3 ms of that step. A sequence of 32 steps has few
positions per channel and few windows (5 taps); an image of 28 x 28 has
many positions, 9 windows, and maps that are copied 9 times over, which
costs more than ``ConvGrad``'s loops; a depthwise convolution's windows
are multiplied and their products' gradients reduced one tap at a time,
nine passes over the maps. Windows in channels-first order,
multiplied image by image (a batched ``MatMul``), are slower still (6.1 ms
for the products of that step). Hence :func:`measured_faster`: the rewrite
is kept for 1-D convolutions with ``group=1`` only; the others keep
``ConvGrad``, and the study rewrites them with :func:`everywhere`.

The rewrite is a training detail, under ``fast_gradients``, applied by
:func:`helpers.core.rewrites.gradient_rewrites.rewrite_for_training` where the
channels and the spatial sizes of a convolution's input are known; other
grouped convolutions are left as they are.
"""

import itertools

from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute
from ..graphs.graph_nodes import constant_node, copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_shapes, value_types
from ..layers.padding import window_attributes
from ..machine.runtime import main_opset

#: Prefix of the names of the nodes the rewrite adds.
CONV_PREFIX = "fast_conv__"

#: Element types the rewrite handles.
_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE)

#: Spatial ranks of the convolutions (``group=1``) the rewrite made faster; none depthwise.
_FASTER_RANKS = (1,)

#: ``'last'``: windows in channels-last order, one product of ``(rows, offsets x channels)``;
#: ``'first'``: windows in channels-first order, products batched over the images.
LAYOUTS = ("last", "first")


class _Conv:
    """What the rewrite reads of one ``Conv`` node (sizes, attributes) and the nodes it adds."""

    def __init__(self, node, x_shape, w_shape, index, layout):
        self.node, self.layout, self.rank = node, layout, len(w_shape) - 2
        self.channels, self.out_channels, self.sizes = x_shape[1], w_shape[0], x_shape[2:]
        self.kernel, self.strides, self.dilations, self.pads = window_attributes(
            node, self.rank, w_shape[2:]
        )
        self.outputs = [
            (size + before + after - dilation * (k - 1) - 1) // stride + 1
            for size, before, after, k, stride, dilation in zip(
                self.sizes,
                self.pads[: self.rank],
                self.pads[self.rank :],
                self.kernel,
                self.strides,
                self.dilations,
            )
        ]
        self.tag = f"{CONV_PREFIX}{index}__{node.name or node.output[0]}"
        self.nodes = []

    @property
    def spatial_axes(self):
        """The spatial axes of the input in the layout of the windows."""
        first = 2 if self.layout == "first" else 1
        return list(range(first, first + self.rank))

    def add(self, op_type, inputs, suffix, **attributes):
        """Append a node; return the name of its output (``tag__suffix``)."""
        output = f"{self.tag}__{suffix}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def constant(self, suffix, values):
        """Append an int64 constant; return its name."""
        name = f"{self.tag}__{suffix}"
        self.nodes.append(constant_node(name, values, TensorProto.INT64))
        return name


def _windows(conv):
    """The input's windows, one per kernel offset: ``[N, *outputs, C]`` or ``[N, C, *outputs]``."""
    x = conv.node.input[0]
    if conv.layout == "last":
        x = conv.add("Transpose", [x], "x_last", perm=[0, *range(2, conv.rank + 2), 1])
    if any(conv.pads):
        rank, axes = conv.rank, conv.spatial_axes
        pads = [0] * (2 * rank + 4)
        for i, axis in enumerate(axes):
            pads[axis], pads[axis + rank + 2] = conv.pads[i], conv.pads[i + rank]
        x = conv.add("Pad", [x, conv.constant("pads", pads)], "padded")
    windows = []
    for offset in itertools.product(*(range(k) for k in conv.kernel)):
        starts = [o * d for o, d in zip(offset, conv.dilations)]
        ends = [s + (n - 1) * t + 1 for s, n, t in zip(starts, conv.outputs, conv.strides)]
        padded = [n + b + a for n, b, a in zip(conv.sizes, conv.pads, conv.pads[conv.rank :])]
        if starts == [0] * conv.rank and ends == padded and conv.strides == [1] * conv.rank:
            windows.append(x)
            continue
        name = "_".join(map(str, offset))
        inputs = [
            x,
            conv.constant(f"starts_{name}", starts),
            conv.constant(f"ends_{name}", ends),
            conv.constant(f"axes_{name}", conv.spatial_axes),
            conv.constant(f"steps_{name}", conv.strides),
        ]
        windows.append(conv.add("Slice", inputs, f"window_{name}"))
    return windows


def _dense(conv, windows):
    """``group=1``: the windows side by side times the weights as ``(offsets x channels, out)``."""
    w, taps = conv.node.input[1], len(windows) * conv.channels
    spatial = list(range(2, conv.rank + 2))
    if conv.layout == "last":
        cols = windows[0] if len(windows) == 1 else conv.add("Concat", windows, "cols", axis=-1)
        w = conv.add("Transpose", [w], "w_t", perm=[*spatial, 1, 0])
        w = conv.add("Reshape", [w, conv.constant("w_shape", [taps, conv.out_channels])], "w_cols")
        return conv.add("MatMul", [cols, w], "product")
    cols = windows[0] if len(windows) == 1 else conv.add("Concat", windows, "cols", axis=1)
    cols = conv.add("Reshape", [cols, conv.constant("cols_shape", [0, taps, -1])], "cols_flat")
    w = conv.add("Transpose", [w], "w_t", perm=[0, *spatial, 1])
    w = conv.add("Reshape", [w, conv.constant("w_shape", [conv.out_channels, taps])], "w_rows")
    product = conv.add("MatMul", [w, cols], "product_flat")
    return conv.add(
        "Reshape",
        [product, conv.constant("y_shape", [0, conv.out_channels, *conv.outputs])],
        "product",
    )


def _depthwise(conv, windows):
    """``group`` = channels: each window times its kernel tap, summed."""
    channels, taps = conv.channels, len(windows)
    flat = conv.constant("w_flat_shape", [channels, taps])
    w = conv.add("Reshape", [conv.node.input[1], flat], "w_flat")
    w = conv.add("Transpose", [w], "w_taps", perm=[1, 0])
    ones = [1] * conv.rank
    shape = [taps, channels] if conv.layout == "last" else [taps, channels, *ones]
    w = conv.add("Reshape", [w, conv.constant("w_shape", shape)], "w_shaped")
    tap_names = [f"{conv.tag}__tap_{i}" for i in range(taps)]
    if taps == 1:
        tap_names = [conv.add("Reshape", [w, conv.constant("tap_shape", shape[1:])], "tap_0")]
    else:
        split = helper.make_node("Split", [w], tap_names, name=f"{conv.tag}__split", axis=0)
        conv.nodes.append(split)
        squeeze = conv.constant("tap_shape", shape[1:])
        tap_names = [
            conv.add("Reshape", [t, squeeze], f"tap_shaped_{i}") for i, t in enumerate(tap_names)
        ]
    products = [
        conv.add("Mul", [x, t], f"tap_product_{i}")
        for i, (x, t) in enumerate(zip(windows, tap_names))
    ]
    total = products[0]  # a chain of Add: the gradient builder has none for Sum
    for i, product in enumerate(products[1:], 1):
        total = conv.add("Add", [total, product], f"partial_{i}")
    return total


def _rewritten(conv, depthwise):
    """All the nodes computing ``conv``'s output."""
    y = (_depthwise if depthwise else _dense)(conv, _windows(conv))
    if len(conv.node.input) > 2 and conv.node.input[2]:
        bias = conv.node.input[2]
        if conv.layout == "first":
            shape = [conv.out_channels, *[1] * conv.rank]
            bias = conv.add("Reshape", [bias, conv.constant("bias_shape", shape)], "bias")
        y = conv.add("Add", [y, bias], "biased")
    perm = [0, conv.rank + 1, *range(1, conv.rank + 1)] if conv.layout == "last" else None
    op, attributes = ("Transpose", {"perm": perm}) if perm else ("Identity", {})
    output = conv.node.output[0]
    conv.nodes.append(helper.make_node(op, [y], [output], name=f"{conv.tag}__y", **attributes))
    return conv.nodes


def _known(shape, rank):
    """Whether ``shape`` has ``rank`` axes, all but the first fixed."""
    return shape is not None and len(shape) == rank and all(d is not None for d in shape[1:])


def measured_faster(rank, depthwise):
    """Whether the rewrite made training steps faster, by the study's figures (see the module).

    Examples
    --------
    >>> measured_faster(1, False), measured_faster(2, False)
    (True, False)
    """
    return rank in _FASTER_RANKS and not depthwise


def everywhere(rank, depthwise):
    """Rewrite every convolution the rewrite handles (the study's variants, the tests).

    Examples
    --------
    >>> everywhere(2, False)
    True
    """
    return True


def _replacement(node, shapes, types, index, layout, where):
    """The nodes replacing the ``Conv`` ``node``, or None to keep it."""
    x_shape, w_shape = shapes.get(node.input[0]), shapes.get(node.input[1])
    if w_shape is None or len(w_shape) < 3 or not _known(x_shape, len(w_shape)):
        return None
    if types.get(node.input[0]) not in _TYPES or None in w_shape:
        return None
    if node_attribute(node, "auto_pad", "NOTSET") != "NOTSET":
        return None
    group, channels = node_attribute(node, "group", 1), x_shape[1]
    depthwise = group > 1 and group == channels == w_shape[0] and w_shape[1] == 1
    if (group != 1 and not depthwise) or not where(len(w_shape) - 2, depthwise):
        return None
    return _rewritten(_Conv(node, x_shape, w_shape, index, layout), depthwise)


def convolutions_as_products(model, layout="last", where=measured_faster):
    """Return a copy of ``model`` whose convolutions are windows and products (see the module).

    A ``Conv`` is rewritten when its input is float with known channels and
    spatial sizes, its weights' shape is known, its pads are explicit, and
    its ``group`` is 1 or the number of its input and output channels, and
    ``where`` says so; the others are kept.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.
    layout : str
        One of :data:`LAYOUTS`.
    where : callable
        ``where(rank, depthwise)``: whether to rewrite a convolution of
        ``rank`` spatial axes, depthwise or not (:func:`measured_faster`,
        :func:`everywhere`).

    Returns
    -------
    onnx.ModelProto

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Conv1d(2, 3, 3, padding=1)
    >>> model = convolutions_as_products(export_for_training(net, torch.zeros(1, 2, 8)))
    >>> sorted({n.op_type for n in model.graph.node} - {"Constant"})
    ['Add', 'Concat', 'MatMul', 'Pad', 'Reshape', 'Slice', 'Transpose']
    """
    if not any(is_onnx_op(node, "Conv") for node in model.graph.node) or main_opset(model) < 13:
        return model
    shapes, types = value_shapes(model), value_types(model)
    nodes = []
    for index, node in enumerate(model.graph.node):
        replacement = None
        if is_onnx_op(node, "Conv"):
            replacement = _replacement(node, shapes, types, index, layout, where)
        nodes.extend([node] if replacement is None else replacement)
    return copy_with_nodes(model, nodes)
