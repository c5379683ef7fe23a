"""Kernel families of a training step, the same for onnxruntime and torch, and their tables.

One mapping per framework, in one place: :func:`ort_family` names the family
of an onnxruntime operator type, :func:`torch_family` that of a
``torch.profiler`` event (an ``aten::`` operator, or the outermost mapped
operator around it). Both sides fuse the two gradients of a convolution:
onnxruntime's ``ConvGrad`` computes the input's and the weight's gradients
in one kernel, as torch's ``aten::convolution_backward`` does, so both count
them as one family, ``conv gradients (input+weight)``. Normalization
counts its forward and its gradient together; so do elementwise work,
activations and the loss. The *fixed cost around kernels* is what a step
costs that no kernel accounts for: the step's wall time minus the sum of
its kernels (the runtime's scheduling, dispatch, Python).

:func:`family_table` sums the kernels of a step per family, time and work
(their FLOPs, :mod:`benchmarks.profiles.survey.kernel_flops`);
:func:`side_by_side` puts both frameworks in one table with their GFLOP/s
against the machine's peak.
"""

import statistics

from helpers.core.layers.batch_norm import BATCH_NORM_PREFIX

#: The families, in the order of the tables.
FAMILIES = (
    "forward convolution",
    "conv gradients (input+weight)",
    "pooling forward",
    "pooling gradient",
    "embedding lookup",
    "embedding gradient",
    "matrix products",
    "normalization",
    "elementwise, activations, loss",
    "optimizer update",
    "other kernels",
    "fixed cost around kernels",
)
(
    CONV,
    CONV_GRAD,
    POOL,
    POOL_GRAD,
    LOOKUP,
    EMBED_GRAD,
    PRODUCTS,
    NORM,
    ELEMENTWISE,
    OPTIMIZER,
    OTHER,
    FIXED,
) = FAMILIES

#: onnxruntime operator type -> family; other types are elementwise work, or in :data:`ORT_OTHER`.
ORT_FAMILIES = {
    **dict.fromkeys(("Conv", "FusedConv"), CONV),
    "ConvGrad": CONV_GRAD,
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"), POOL),
    **dict.fromkeys(("MaxPoolGrad", "AveragePoolGrad", "GlobalAveragePoolGrad"), POOL_GRAD),
    **dict.fromkeys(("Gather", "GatherND"), LOOKUP),
    **dict.fromkeys(("GatherGrad", "GatherNDGrad", "GatherElementsGrad"), EMBED_GRAD),
    **dict.fromkeys(("Gemm", "FusedGemm", "MatMul", "FusedMatMul"), PRODUCTS),
    **dict.fromkeys(
        (
            "BatchNormalization",
            "BatchNormInternal",
            "BatchNormalizationGrad",
            "LayerNormalization",
            "LayerNormalizationGrad",
            "SimplifiedLayerNormalization",
            "InvertibleLayerNormalizationGrad",
            "SkipLayerNormalization",
        ),
        NORM,
    ),
    **dict.fromkeys(
        (
            "SGDOptimizerV2",
            "SGDOptimizer",
            "AdamWOptimizer",
            "InPlaceAccumulatorV2",
            "InPlaceAccumulator",
            "ZeroGradient",
        ),
        OPTIMIZER,
    ),
}
#: Parts of node names -> family: the project writes batch normalization with elementwise operators
#: (:mod:`helpers.core.layers.batch_norm`), and their gradients' nodes keep the forward node's name.
ORT_NODE_FAMILIES = {BATCH_NORM_PREFIX: NORM}
#: onnxruntime operator types that move or describe data without computing.
ORT_OTHER = frozenset(
    (
        "Shape",
        "Size",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Expand",
        "Identity",
        "Transpose",
        "Concat",
        "Slice",
        "ReorderInput",
        "ReorderOutput",
        "YieldOp",
        "ConstantOfShape",
    )
)
#: torch operator -> family. An event inside a mapped operator takes the outermost one's family.
TORCH_FAMILIES = {
    **dict.fromkeys(
        (
            "aten::conv1d",
            "aten::conv2d",
            "aten::convolution",
            "aten::_convolution",
            "aten::mkldnn_convolution",
            "aten::_nnpack_spatial_convolution",
            "aten::_slow_conv2d_forward",
            "aten::thnn_conv2d",
        ),
        CONV,
    ),
    **dict.fromkeys(("aten::convolution_backward", "aten::mkldnn_convolution_backward"), CONV_GRAD),
    **dict.fromkeys(
        (
            "aten::max_pool1d",
            "aten::max_pool2d",
            "aten::max_pool2d_with_indices",
            "aten::adaptive_avg_pool1d",
            "aten::adaptive_avg_pool2d",
            "aten::_adaptive_avg_pool2d",
            "aten::avg_pool2d",
        ),
        POOL,
    ),
    **dict.fromkeys(
        (
            "aten::max_pool2d_with_indices_backward",
            "aten::avg_pool2d_backward",
            "aten::_adaptive_avg_pool2d_backward",
        ),
        POOL_GRAD,
    ),
    **dict.fromkeys(("aten::embedding", "aten::index_select"), LOOKUP),
    **dict.fromkeys(("aten::embedding_backward", "aten::embedding_dense_backward"), EMBED_GRAD),
    **dict.fromkeys(
        ("aten::linear", "aten::mm", "aten::addmm", "aten::bmm", "aten::matmul"), PRODUCTS
    ),
    **dict.fromkeys(
        (
            "aten::batch_norm",
            "aten::_batch_norm_impl_index",
            "aten::native_batch_norm",
            "aten::native_batch_norm_backward",
            "aten::layer_norm",
            "aten::native_layer_norm",
            "aten::native_layer_norm_backward",
        ),
        NORM,
    ),
}
#: Substrings of torch's record functions of the update: the optimizer, the gradients' accumulation.
TORCH_OPTIMIZER = ("Optimizer.", "AccumulateGrad")
#: torch operators that allocate, view or describe tensors without computing.
TORCH_OTHER = frozenset(
    (
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::t",
        "aten::transpose",
        "aten::as_strided",
        "aten::detach",
        "aten::expand",
        "aten::flatten",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::permute",
        "aten::select",
        "aten::slice",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::set_",
        "aten::lift_fresh",
        "aten::alias",
    )
)


def ort_family(op_type, node=""):
    """The family of an onnxruntime kernel: its operator type, or the name of its ``node``.

    Examples
    --------
    >>> ort_family("Sub", "batch_norm__1__centered_Grad/Neg_0")
    'normalization'
    >>> ort_family("ConvGrad"), ort_family("Where")
    ('conv gradients (input+weight)', 'elementwise, activations, loss')
    >>> ort_family("Reshape"), ort_family("SGDOptimizerV2")
    ('other kernels', 'optimizer update')
    """
    named = [family for part, family in ORT_NODE_FAMILIES.items() if part in node]
    if named:
        return named[0]
    return ORT_FAMILIES.get(op_type, OTHER if op_type in ORT_OTHER else ELEMENTWISE)


def _own_torch_family(name):
    if name in TORCH_FAMILIES:
        return TORCH_FAMILIES[name]
    return OPTIMIZER if any(part in name for part in TORCH_OPTIMIZER) else None


def torch_family(names):
    """The family of a torch event, from its name and those of the events around it.

    Parameters
    ----------
    names : sequence of str
        The event's name, then its parent's, and so on up to the outermost.

    Returns
    -------
    str or None
        The family of the outermost mapped name; for an unmapped ``aten::``
        operator, :data:`OTHER` or elementwise work; None for an event that
        is no kernel (autograd's nodes, record functions): its time is part
        of the fixed cost.

    Examples
    --------
    >>> torch_family(["aten::fill_", "aten::zero_", "aten::zeros", "aten::embedding_dense_backward",
    ...               "aten::embedding_backward", "EmbeddingBackward0"])
    'embedding gradient'
    >>> torch_family(["aten::_foreach_add_", "Optimizer.step#SGD.step"])
    'optimizer update'
    >>> torch_family(["aten::threshold_backward"]), torch_family(["aten::t", "aten::linear"])
    ('elementwise, activations, loss', 'matrix products')
    >>> torch_family(["aten::view"]), torch_family(["ConvolutionBackward0"])
    ('other kernels', None)
    """
    if not names[0].startswith("aten::"):
        return None
    mapped = [family for family in map(_own_torch_family, names) if family is not None]
    if mapped:
        return mapped[-1]
    return OTHER if names[0] in TORCH_OTHER else ELEMENTWISE


def family_table(kernels, step_us=None):
    """Time and work per step of each family, from the kernels of several profiled steps.

    Parameters
    ----------
    kernels : pandas.DataFrame
        One row per kernel call: ``step``, ``family``, ``us``, ``flops``.
    step_us : float, optional
        The step's wall time, measured without the profiler: the family
        :data:`FIXED` gets what the kernels leave of it (never below 0).

    Returns
    -------
    dict
        Family to ``(µs per step, flops per step)``: the median over the
        steps of each family's sum, for the families that ran.

    Examples
    --------
    >>> import pandas as pd
    >>> kernels = pd.DataFrame({"step": [0, 0, 1, 1, 2],
    ...                         "family": ["matrix products", "other kernels"] * 2
    ...                         + ["matrix products"],
    ...                         "us": [10.0, 1.0, 12.0, 3.0, 11.0], "flops": [5, 0, 5, 0, 5]})
    >>> family_table(kernels, step_us=20.0)  # doctest: +NORMALIZE_WHITESPACE
    {'matrix products': (11.0, 5.0), 'other kernels': (2.0, 0.0),
     'fixed cost around kernels': (7.0, 0.0)}
    """
    sums = kernels.groupby(["family", "step"])[["us", "flops"]].sum()
    table = {
        family: (
            float(statistics.median(sums.loc[family, "us"])),
            float(statistics.median(sums.loc[family, "flops"])),
        )
        for family in FAMILIES
        if family in sums.index.get_level_values(0)
    }
    if step_us is not None:
        table[FIXED] = (max(step_us - sum(us for us, _ in table.values()), 0.0), 0.0)
    return table


def _rate(us, flops, peak):
    if not flops or not us:
        return "-"
    gflops = flops / us / 1e3
    return f"{gflops:.1f} ({100 * gflops / peak:.0f}%)"


def side_by_side(ort, torch, peak_gflops):
    """Rows of the side-by-side table of one model: each family in both frameworks.

    Parameters
    ----------
    ort, torch : dict
        :func:`family_table` of each framework.
    peak_gflops : float
        The machine's peak (the faster framework's large matrix product).

    Returns
    -------
    list of dict
        One row per family either framework ran, then the total: time per
        step, share of the step, the ratio ORT/torch and GFLOP/s (% of the peak).

    Examples
    --------
    >>> ort = {"matrix products": (30.0, 3e5), "fixed cost around kernels": (10.0, 0)}
    >>> torch = {"matrix products": (15.0, 3e5), "fixed cost around kernels": (5.0, 0)}
    >>> rows = side_by_side(ort, torch, 40.0)
    >>> rows[0]["ORT/torch"], rows[0]["ORT GFLOP/s (% peak)"], rows[0]["torch GFLOP/s (% peak)"]
    ('2.00', '10.0 (25%)', '20.0 (50%)')
    >>> rows[-1]["family"], rows[-1]["ORT µs/step"], rows[-1]["torch share (%)"]
    ('step', '40', '100.0')
    """
    totals = {
        name: sum(us for us, _ in side.values()) for name, side in (("ORT", ort), ("torch", torch))
    }
    rows = []
    for family in [f for f in FAMILIES if f in ort or f in torch] + ["step"]:
        row = {"family": family}
        for name, side in (("ORT", ort), ("torch", torch)):
            us, flops = (totals[name], 0) if family == "step" else side.get(family, (0.0, 0))
            row[f"{name} µs/step"] = f"{us:.0f}"
            row[f"{name} share (%)"] = f"{100 * us / totals[name]:.1f}" if totals[name] else "-"
            row[f"{name} GFLOP/s (% peak)"] = _rate(us, flops, peak_gflops)
        ort_us = totals["ORT"] if family == "step" else ort.get(family, (0.0, 0))[0]
        torch_us = totals["torch"] if family == "step" else torch.get(family, (0.0, 0))[0]
        row["ORT/torch"] = f"{ort_us / torch_us:.2f}" if torch_us >= 1 and ort_us >= 1 else "-"
        rows.append(row)
    return rows


#: Columns of :func:`side_by_side`'s rows, in the order of the tables.
COLUMNS = [
    "family",
    "ORT µs/step",
    "ORT share (%)",
    "torch µs/step",
    "torch share (%)",
    "ORT/torch",
    "ORT GFLOP/s (% peak)",
    "torch GFLOP/s (% peak)",
]
