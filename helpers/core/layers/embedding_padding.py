"""The padding row of an embedding (torch's ``padding_idx``), kept out of training.

torch's ``nn.Embedding(..., padding_idx=p)`` gives row ``p`` of its table a
zero gradient: the row starts at zero and no gradient step moves it (AdamW's
weight decay shrinks it, which leaves zero at zero). The ONNX export is a
plain ``Gather`` that knows nothing of it, so onnxruntime would train the
row like any other. :func:`helpers.export_for_training`
records the padding rows in the model's metadata
(:data:`PADDING_METADATA_KEY`), and the training graph gathers from the
table multiplied by a constant mask, one for every row but the padding one
(:func:`masked_padding_rows`): the same rows forward (the padding row is
zero), and a gradient of zero for the padding row, exactly as torch's. The
inference model keeps its plain ``Gather``.
"""

import json

import numpy as np
from onnx import helper, numpy_helper

from ...portable.node_attributes import node_attributes
from ..graphs.graph_nodes import constant_node, copy_with_nodes, is_onnx_op
from ..machine.runtime import UntrainableModelError

#: Metadata key of the padding rows: JSON, table initializer name to its padding row.
PADDING_METADATA_KEY = "helpers.embedding.padding_rows"

#: Prefix of the names of the nodes and values the rewrite adds.
PADDING_PREFIX = "embedding_padding__"


def padding_rows(model):
    """The padding row of each embedding table of ``model``, as its metadata records them.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Embedding(10, 3, padding_idx=-1)
    >>> padding_rows(export_for_training(net, torch.zeros(2, 4, dtype=torch.long)))
    {'weight': 9}
    """
    for prop in model.metadata_props:
        if prop.key == PADDING_METADATA_KEY:
            return json.loads(prop.value)
    return {}


def _row_mask(table, row, tag):
    """A constant mask of ``table``'s shape broadcast: 1 for every row, 0 for ``row``."""
    mask = np.ones([table.dims[0]] + [1] * (len(table.dims) - 1), dtype=np.float32)
    mask[row] = 0
    return constant_node(f"{tag}__mask", mask)


def masked_padding_rows(model):
    """Return a copy of ``model`` whose embeddings gather from their table times a padding mask.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged; the tables named by its metadata
        (:func:`padding_rows`) are rewritten where a ``Gather`` reads them.

    Returns
    -------
    onnx.ModelProto
        The copy (the same object when no padding row is recorded).

    Raises
    ------
    UntrainableModelError
        When a padding row is not zero: the mask would change it forward.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Embedding(10, 3, padding_idx=0)
    >>> model = masked_padding_rows(export_for_training(net, torch.zeros(2, 4, dtype=torch.long)))
    >>> for node in model.graph.node[1:]:
    ...     print(node.op_type, *node.input)
    Mul weight embedding_padding__weight__mask
    Gather embedding_padding__weight x
    """
    rows = padding_rows(model)
    if not rows:
        return model
    tables = {i.name: i for i in model.graph.initializer if i.name in rows}
    masked = {name: f"{PADDING_PREFIX}{name}" for name in tables}
    nodes = []
    for name, table in tables.items():
        row = rows[name]
        if np.any(numpy_helper.to_array(table)[row]):
            raise UntrainableModelError(
                f"The padding row {row} of embedding table {name!r} (padding_idx={row}) is not "
                "zero: torch keeps it as it is, and the training graph can keep its gradient at "
                "zero only for a zero row. Set it to zero "
                "(embedding.weight.data[padding_idx] = 0), or drop padding_idx and mask the "
                "padded positions' outputs yourself."
            )
        mask = _row_mask(table, row, masked[name])
        multiply = helper.make_node("Mul", [name, *mask.output], [masked[name]], name=masked[name])
        nodes += [mask, multiply]
    for node in model.graph.node:
        if is_onnx_op(node, "Gather") and node.input[0] in masked:
            attributes = node_attributes(node)
            inputs = [masked[node.input[0]], *node.input[1:]]
            node = helper.make_node("Gather", inputs, node.output, name=node.name, **attributes)
        nodes.append(node)
    return copy_with_nodes(model, nodes)
