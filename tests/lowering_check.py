"""What the lowering tests share: a model of a few nodes, run as written (1.19.2's contrib
kernels) and lowered to standard operators, on 1.19.2's InferenceSession."""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from helpers.portable.lowering import lower_model
from helpers.portable.lowering.registry import is_standard

#: Largest difference allowed between the kernel and the lowering, relative to the largest
#: magnitude of the kernel's output: both sum the same float32 products in another order
#: (thousands of terms for a weight gradient of batch 3), about 1e-7 per rounding.
RTOL = 2e-6


def model_of(nodes, inputs, outputs, opset=17):
    """A model of ``nodes``; ``inputs`` and ``outputs`` map names to shapes (None: unknown)."""

    def values(shapes):
        return [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()]

    graph = helper.make_graph(nodes, "lowering_case", values(inputs), values(outputs))
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports, ir_version=9)


def run(model, feeds):
    """``model``'s outputs on the CPU, one thread."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def assert_lowered_equal(model, feeds, rtol=RTOL):
    """The lowered model holds standard nodes only and gives ``model``'s outputs."""
    lowered = lower_model(model)
    assert all(is_standard(n) for n in lowered.graph.node)
    expected, actual = run(model, feeds), run(lowered, feeds)
    for name, e, a in zip([o.name for o in model.graph.output], expected, actual):
        assert a.shape == e.shape, name
        scale = max(float(np.abs(e).max()), 1e-30)
        assert float(np.abs(a - e).max()) <= rtol * scale, (name, np.abs(a - e).max(), scale)
    return actual
