"""What the convolution, pooling and normalization lowering tests add to :mod:`lowering_cases`:
models of a few nodes with free shapes, and a comparison relative to each output's magnitude."""

import numpy as np
from lowering_cases import lowered_and_checked, run, with_output_ranks
from onnx import TensorProto, helper

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


def run_outputs(model, feeds):
    """``model``'s outputs on 1.19.2's InferenceSession, in the graph's order."""
    results = run(model, feeds)
    return [results[o.name] for o in model.graph.output]


def assert_lowered_equal(model, feeds, rtol=RTOL):
    """The lowered model holds standard nodes only, passes the checker and gives ``model``'s
    outputs; returns them."""
    expected = run(model, feeds)
    ranked = with_output_ranks(model, expected)
    for value in ranked.graph.input:  # the checker wants a shape on every graph input too
        if not value.type.tensor_type.HasField("shape"):
            rank = np.ndim(feeds[value.name])
            value.CopyFrom(
                helper.make_tensor_value_info(value.name, TensorProto.FLOAT, [None] * rank)
            )
    lowered = lowered_and_checked(ranked)
    actual = run(lowered, feeds)
    for name, e in expected.items():
        a = actual[name]
        assert a.shape == e.shape, name
        scale = max(float(np.abs(e).max()), 1e-30)
        assert float(np.abs(a - e).max()) <= rtol * scale, (name, np.abs(a - e).max(), scale)
    return [actual[o.name] for o in model.graph.output]
