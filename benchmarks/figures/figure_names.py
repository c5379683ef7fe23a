"""The name of each figure the documents quote, and how it is computed from the results.

:data:`FIGURES` maps a name, as a document marks it (``<!-- fig: NAME -->``),
to a function of :class:`benchmarks.figures.figure_sources.Results` that returns the
text to quote. :mod:`benchmarks.figures.quoted_figures` finds the marks and rewrites
them.

Examples
--------
>>> from benchmarks.figures.figure_sources import Results
>>> FIGURES["target.zoo.resnet_large.verdict"](Results(".")).startswith(("met", "missed"))
True
"""

import re
from functools import partial as fig

from benchmarks.figures import figure_profiles as profiles
from benchmarks.figures import figure_sources as src

_S16 = "thread_scaling_16_cores.csv"
_S2 = "thread_scaling.csv"
_BIG, _SMALL = "500-500-1@1000", "100-50-1@100"
_TARGETS = {
    "small.whole_torch": "small MLP, whole-training vs torch",
    "small.fb_torch": "small MLP, forward/backward vs torch",
    "small.whole_sklearn": "small MLP, whole-training vs scikit-learn",
    "large.whole_bound": "large MLP, whole-training vs runtime bound",
    "large.fb_bound": "large MLP, forward/backward vs runtime bound",
    "refit.whole": "refit set-up, ort whole-training",
    "refit.fb": "refit set-up, ort forward-backward",
}
_ZOO_TARGETS = (
    "image_cnn_large",
    "layernorm_mlp_large",
    "batchnorm_mlp_large",
    "sequence_conv_large",
    "token_classifier_large",
    "resnet_large",
    "mobilenet_large",
)
_BN_MODELS = ("batchnorm_mlp_large", "resnet_large", "mobilenet_large")
_CONV = "conv gradients (input+weight)"
_POOL, _CONV1D = "Max pooling in CNN training steps", "Convolution gradients"

#: Each quoted figure by name: a function of
#: :class:`benchmarks.figures.figure_sources.Results` to its text.
FIGURES = {
    "mlp.whole.t2": fig(src.api_span, api="ort whole-training", peer="torch eager", threads=2),
    "mlp.fb.t2": fig(src.api_span, api="ort forward-backward", peer="torch eager", threads=2),
    "mlp.ortmodule.t1": fig(src.api_span, api="ort torch module", peer="torch eager", threads=1),
    "mlp.ortmodule.t2": fig(src.api_span, api="ort torch module", peer="torch eager", threads=2),
    "mlp.ortmodule.shares": src.ortmodule_shares,
    **{
        f"target.{k}{suffix}": fig(src.target, name=v, column=column)
        for k, v in {
            **_TARGETS,
            **{f"zoo.{m}": f"zoo {m}, faster API vs torch" for m in _ZOO_TARGETS},
        }.items()
        for suffix, column in (("", "measured"), (".spread", "spread"), (".verdict", "verdict"))
        if not (k.startswith("refit") and suffix == ".spread")
    },
    "target.zoo.mobilenet_large.phrase": fig(
        src.target_phrase, name="zoo mobilenet_large, faster API vs torch"
    ),
    "kernel.matmul.ort_peak": fig(
        profiles.kernel_peak_max, family="matrix products", column="ORT GFLOP/s (% peak)"
    ),
    "kernel.matmul.torch_peak": fig(
        profiles.kernel_peak_max, family="matrix products", column="torch GFLOP/s (% peak)"
    ),
    "kernel.convgrad.ort_peak": fig(
        profiles.kernel_span, family=_CONV, column="ORT GFLOP/s (% peak)", fmt="{:.0f}%"
    ),
    "kernel.convgrad.torch_peak": fig(
        profiles.kernel_span, family=_CONV, column="torch GFLOP/s (% peak)", fmt="{:.0f}%"
    ),
    "kernel.batchnorm.ratio": fig(
        profiles.kernel_span, family="normalization", column="ORT/torch", models=_BN_MODELS
    ),
    "kernel.image_cnn.convgrad": fig(
        profiles.kernel_value, model="image_cnn_large", family=_CONV, column="ORT/torch"
    ),
    "kernel.image_cnn.poolgrad": fig(
        profiles.kernel_value,
        model="image_cnn_large",
        family="pooling gradient",
        column="ORT/torch",
    ),
    "kernel.resnet.convgrad.ort": fig(
        profiles.kernel_value, model="resnet_large", family=_CONV, column="ORT GFLOP/s (% peak)"
    ),
    "kernel.resnet.convgrad.torch": fig(
        profiles.kernel_value, model="resnet_large", family=_CONV, column="torch GFLOP/s (% peak)"
    ),
    "kernel.mobilenet.convgrad.ort": fig(
        profiles.kernel_value, model="mobilenet_large", family=_CONV, column="ORT GFLOP/s (% peak)"
    ),
    "kernel.mlp500.step_ratio": fig(
        profiles.kernel_value, model="mlp_500_500_1", family="step", column="ORT/torch"
    ),
    "s2.large.t2.torch": fig(
        src.scaling_value, csv_name=_S2, size=_BIG, threads=2, framework="torch eager"
    ),
    "s2.large.t2.whole": fig(
        src.scaling_value, csv_name=_S2, size=_BIG, threads=2, framework="ort whole-training"
    ),
    "s2.large.t2.bound": fig(
        src.scaling_value, csv_name=_S2, size=_BIG, threads=2, framework="onnxruntime matmul bound"
    ),
    "s16.small.whole": fig(
        src.scaling_span, csv_name=_S16, size=_SMALL, framework="ort whole-training"
    ),
    **{
        f"s16.small.t16.{k}": fig(
            src.scaling_value, csv_name=_S16, size=_SMALL, threads=16, framework=v, decimals=2
        )
        for k, v in {"whole": "ort whole-training", "torch": "torch eager"}.items()
    },
    "s16.large.torch_ahead": fig(
        src.torch_ahead, csv_name=_S16, size=_BIG, framework="ort whole-training"
    ),
    **{
        f"s16.large.t16.{k}": fig(
            src.scaling_value, csv_name=_S16, size=_BIG, threads=16, framework=v
        )
        for k, v in {
            "whole": "ort whole-training",
            "fb": "ort forward-backward",
            "torch": "torch eager",
            "bound": "onnxruntime matmul bound",
        }.items()
    },
    **{
        f"s16.large.speedup.{k}": fig(
            src.scaling_value,
            csv_name=_S16,
            size=_BIG,
            threads=16,
            framework=v,
            column="speedup_vs_1_thread",
        )
        for k, v in {"whole": "ort whole-training", "bound": "onnxruntime matmul bound"}.items()
    },
    "study.gather": fig(
        profiles.study_span, section="The Gather rewrite", variant="gather_nd", invert=True
    ),
    "study.maxpool": fig(profiles.study_span, section=_POOL, variant="pool_first"),
    "study.conv1d.t1": fig(
        profiles.study_span,
        section=_CONV1D,
        variant="last",
        models=("sequence_conv_large",),
        threads=1,
    ),
    "study.conv1d.t2": fig(
        profiles.study_span,
        section=_CONV1D,
        variant="last",
        models=("sequence_conv_large",),
        threads=2,
    ),
    "study.conv2d": fig(
        profiles.study_span,
        section=_CONV1D,
        variant="last",
        models=("image_cnn_small", "image_cnn_large", "resnet_block"),
    ),
    "study.depthwise": fig(
        profiles.study_span, section=_CONV1D + ": depthwise_block", variant="last"
    ),
    "survey.relugrad.large": fig(
        profiles.section_cells,
        section="Where the steps spend their time",
        column="*Grad share (%)",
        fmt="{:.0f}%",
        size="large",
        configuration="reference: MLP relu, SGD, fast_gradients=False",
    ),
    **{
        f"survey.where_mask.t{n}": fig(
            profiles.section_cells,
            section="Masks for Relu's gradient",
            column=f"µs, {n} thread{'s' * (n > 1)}",
            mask="where",
            kernel="Where",
        )
        for n in (1, 2)
    },
    **{f"reference.{k}": fig(src.sweep_fact, what=k) for k in ("runs", "minutes", "dates")},
    "bound.whole": fig(src.bound_span, framework="ort whole-training"),
    "bound.fb": fig(src.bound_span, framework="ort forward-backward"),
    **{
        f"suite.{key}.t{threads}": fig(src.suite_figure, peer=peer, threads=threads)
        for key, peer in (("eager", "torch eager"), ("compile", "torch.compile"))
        for threads in (1, 2)
    },
    "suite.sklearn.t2": fig(src.suite_figure, peer="scikit-learn", threads=2),
    "accuracy.cnn": fig(src.accuracy_figure, task="digits CNN"),
    "accuracy.mlp": fig(src.accuracy_figure, task="digits MLP"),
    "memory.zoo": src.memory_figure,
    "sklearn.fb.t2": fig(src.api_span, api="ort forward-backward", peer="scikit-learn", threads=2),
    "portable.mlp": src.portable_mlp,
}


def _slug(text):
    return re.sub(r"[^\w]+", "-", text).strip("-")


#: The lowering costs the README's table quotes: operator (and case) to its figure's name.
_LOWERING_OPS = (
    "Scale",
    "BroadcastGradientArgs",
    "InPlaceAccumulatorV2",
    "ReluGrad",
    "LeakyReluGrad",
    "SigmoidGrad",
    "TanhGrad",
    "Gelu",
    "GeluGrad",
    "QuickGelu",
    "QuickGeluGrad",
    "SoftmaxGrad_13",
    "LogSoftmaxGrad_13",
    "FusedMatMul (2-D: Gemm)",
    "FusedMatMul (ranks known: Transpose, MatMul)",
    "DivGrad",
    "GatherGrad",
    "GatherNDGrad",
    "SliceGrad",
    "ConcatTraining",
    "SplitTraining",
    "DropoutGrad",
)
_LOWERING_CASES = (
    ("ConvGrad", "3x3 32->32 16x16"),
    ("ConvGrad", "3x3 64->64 8x8"),
    ("ConvGrad", "3x3 32->64 16x16 stride 2"),
    ("ConvGrad", "stem 3x3 3->32 32x32"),
    ("ConvGrad", "depthwise 3x3 96 16x16"),
    ("ConvGrad", "depthwise 3x3 32 16x16 stride 2"),
    ("ConvGrad", "1x1 32->64 16x16"),
    ("ConvGrad", "1-D k5 32->32 L64"),
    ("MaxPoolGrad", "2x2 stride 2, 64x32x32x32"),
    ("MaxPoolGrad", "3x3 stride 2 pad 1, 64x32x32x32"),
    ("LayerNormalizationGrad", "64x32x128, last axis"),
    ("LayerNormalizationGrad", "64x512, last axis"),
)
FIGURES.update({f"lowering.{_slug(op)}": fig(src.lowering_ratio, op=op) for op in _LOWERING_OPS})
for _op, _case in _LOWERING_CASES:
    for _column, _suffix in (("ratio", ""), ("ratio_131", ".131")):
        FIGURES[f"lowering.{_slug(_op)}.{_slug(_case)}{_suffix}"] = fig(
            src.lowering_ratio, op=_op, case=_case, column=_column
        )
FIGURES["dropout.cost"] = fig(src.seeded_dropout_cost)
FIGURES["dropout.threads"] = fig(src.seeded_dropout_thread_difference)
