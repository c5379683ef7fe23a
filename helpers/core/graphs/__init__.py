"""What every graph edit shares: nodes, shapes, values fixed before a run, small graphs.

The pieces the layer rewrites are written with, a small ONNX graph run on the training
device, and the per-sample losses as ONNX nodes. It may import
:mod:`helpers.core.machine`.
"""
