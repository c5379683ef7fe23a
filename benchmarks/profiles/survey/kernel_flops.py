"""The work of a kernel in floating-point operations, counted from the shapes the profilers record.

Two operations per multiply-add: :func:`conv_flops` for a convolution or one
of its gradients, :func:`product_flops` for a matrix product whatever its
transpositions; :func:`ort_flops` reads an onnxruntime kernel's shapes from
its trace, :func:`torch_flops` a torch operator's from ``torch.profiler``
(its shapes and concrete arguments). Only convolutions and matrix products
count; other kernels are 0.
"""

import math

from benchmarks.profiles.survey.kernel_families import ORT_FAMILIES, PRODUCTS


def conv_flops(output_shape, weight_shape):
    """Floating-point operations of a convolution, or of one of its gradients: 2 per multiply-add.

    Each output element adds ``weight[1]`` (input channels per group) times
    the kernel's size products; the input's gradient and the weight's each do
    that work again (bias left out).

    Examples
    --------
    >>> conv_flops([64, 32, 26, 26], [32, 1, 3, 3]) == 2 * 64 * 32 * 26 * 26 * 1 * 3 * 3
    True
    """
    return 2 * math.prod(output_shape) * math.prod(weight_shape[1:])


def product_flops(a_shape, b_shape, output_shape):
    """Floating-point operations of a matrix product (``Gemm``, ``MatMul``, ``mm``...), transposed.

    With ``a`` of ``M x K`` (or ``K x M``) and ``b`` of ``K x N`` (or
    ``N x K``), ``K`` is ``sqrt(|a| |b| / |output|)`` whatever the
    transpositions, divided by the batch both operands share.

    Examples
    --------
    >>> product_flops([64, 400], [128, 400], [64, 128]) == 2 * 64 * 400 * 128
    True
    >>> product_flops([8, 64, 10], [8, 10, 32], [8, 64, 32]) == 2 * 8 * 64 * 10 * 32
    True
    """
    shared = min(math.prod(a_shape[:-2]), math.prod(b_shape[:-2]))
    k = math.isqrt(math.prod(a_shape) * math.prod(b_shape) // (math.prod(output_shape) * shared))
    return 2 * math.prod(output_shape) * k


def ort_flops(op_type, inputs, outputs):
    """Floating-point work of one onnxruntime kernel from the shapes in its trace, or 0.

    ``ConvGrad`` (inputs: output gradient, input, weight) counts each
    gradient it returns, the input's and the weight's, known by their
    shapes (the trace lists only the outputs the graph uses).

    Examples
    --------
    >>> dy, x, w = [4, 8, 6, 6], [4, 3, 8, 8], [8, 3, 3, 3]
    >>> ort_flops("ConvGrad", [dy, x, w], [x, w, [8]]) == 2 * conv_flops(dy, w)
    True
    >>> ort_flops("ConvGrad", [dy, x, w], [w, [8]]) == conv_flops(dy, w)  # no input gradient
    True
    >>> ort_flops("Relu", [[4, 4]], [[4, 4]])
    0
    """
    if op_type in ("Conv", "FusedConv"):
        return conv_flops(outputs[0], inputs[1])
    if op_type == "ConvGrad":
        # the trace omits the outputs the graph does not use
        returned = [list(inputs[1]) in outputs, list(inputs[2]) in outputs]
        return sum(returned) * conv_flops(inputs[0], inputs[2])
    if ORT_FAMILIES.get(op_type) == PRODUCTS:
        return product_flops(inputs[0], inputs[1], outputs[0])
    return 0


def _conv_output(input_shape, weight_shape, padding, stride, dilation):
    spatial = [
        (size + 2 * pad - dil * (k - 1) - 1) // st + 1
        for size, k, pad, st, dil in zip(
            input_shape[2:], weight_shape[2:], padding, stride, dilation
        )
    ]
    return [input_shape[0], weight_shape[0], *spatial]


def torch_flops(name, shapes, arguments):
    """Floating-point work of one torch operator from its recorded shapes and arguments, or 0.

    Parameters
    ----------
    name : str
    shapes : list
        ``FunctionEvent.input_shapes``.
    arguments : list
        ``FunctionEvent.concrete_inputs`` (strides, paddings, the output mask).

    Examples
    --------
    >>> torch_flops("aten::mm", [[64, 10], [10, 32]], [None, None]) == 2 * 64 * 10 * 32
    True
    >>> x, w, y = [64, 1, 28, 28], [8, 1, 3, 3], [64, 8, 26, 26]
    >>> torch_flops("aten::mkldnn_convolution", [x, w, [8]],
    ...             [None, None, None, [0, 0], [1, 1], [1, 1], 1]) == conv_flops(y, w)
    True
    >>> torch_flops("aten::convolution_backward", [y, x, w],
    ...             [None] * 10 + [[False, True, True]]) == conv_flops(y, w)  # weight's gradient
    True
    """
    if name == "aten::mkldnn_convolution":
        padding, stride, dilation = arguments[3:6]
        return conv_flops(_conv_output(shapes[0], shapes[1], padding, stride, dilation), shapes[1])
    if name == "aten::convolution_backward":
        return sum(arguments[10][:2]) * conv_flops(shapes[0], shapes[2])
    if name in ("aten::mm", "aten::bmm", "aten::addmm"):
        a, b = shapes[-2:] if name != "aten::addmm" else shapes[1:3]
        return product_flops(a, b, [*a[:-1], b[-1]])
    return 0
