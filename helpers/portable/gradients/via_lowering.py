"""Gradients written as the contrib gradient node onnxruntime-training would use, rewritten at
once with standard operators by its lowering in :mod:`helpers.portable.lowering`.

One formulation serves both: a gradient here builds the ``com.microsoft`` node (``GatherGrad``,
``SoftmaxGrad_13``...) and hands it to the function that lowers it. The lowerings compute in
float32, the type of the training graphs they rewrite (the zeros a ``GatherGrad`` scatters
into, the ratio of ``DropoutGrad``): for a value of another float type, their float32
constants and casts take that type.
"""

from onnx import TensorProto, helper, numpy_helper

from ..lowering import LOWERINGS, LoweringContext


def _retyped(nodes, initializers, element_type):
    """Float32 initializers, tensor attributes and casts turned to ``element_type``."""
    dtype = helper.tensor_dtype_to_np_dtype(element_type)

    def convert(tensor):
        if tensor.data_type == TensorProto.FLOAT:
            value = numpy_helper.to_array(tensor).astype(dtype)
            tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))

    for tensor in initializers:
        convert(tensor)
    for node in nodes:
        for attr in node.attribute:
            if attr.type == attr.TENSOR:
                convert(attr.t)
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = element_type


def lowered(ctx, op_type, inputs, like=None, **attributes):
    """Add the standard nodes of ``com.microsoft:op_type(inputs)`` to ``ctx``; return the name
    of its (first) output.

    Parameters
    ----------
    ctx : helpers.portable.gradients.registry.GradientContext
    op_type : str
        A contrib operator with a lowering (``GatherGrad``, ``SliceGrad``...).
    inputs : list of str
    like : str, optional
        A value of the forward graph whose element type the lowering's float values take
        (float32 when not given).
    **attributes
        The node's attributes.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"y": ["N", 3]}, {"y": TensorProto.FLOAT}, set(), 17)
    >>> lowered(ctx, "SoftmaxGrad_13", ["dy", "y"], axis=-1)
    'grad_0_SoftmaxGrad_13'
    >>> [n.op_type for n in ctx.nodes]
    ['Mul', 'ReduceSum', 'Sub', 'Mul']
    """
    output = ctx.name(op_type)
    node = helper.make_node(op_type, list(inputs), [output], domain="com.microsoft", **attributes)
    ranks = {name: len(shape) for name, shape in ctx.shapes.items() if shape is not None}
    lowering_ctx = LoweringContext(
        ctx.opset, prefix=ctx.name("lower"), known=ctx.constants, ranks=ranks
    )
    nodes = LOWERINGS["com.microsoft", op_type](node, lowering_ctx)
    element_type = ctx.types.get(like, TensorProto.FLOAT) if like else TensorProto.FLOAT
    if element_type != TensorProto.FLOAT:
        _retyped(nodes, lowering_ctx.initializers, element_type)
    where = ctx.node.name if ctx.node is not None and ctx.node.name else "grad"
    for index, standard in enumerate(nodes):
        standard.name = standard.name or f"{where}_Grad/{op_type}/{index}"
        ctx.nodes.append(standard)
    ctx.initializers.extend(lowering_ctx.initializers)
    return output
