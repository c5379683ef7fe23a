"""Which operators outside the standard ONNX domain the training graphs hold, and where.

The operators a portable step model must lower (:mod:`helpers.portable.lowering`): for every
small model of the zoo (:data:`benchmarks.example_models.ZOO`), a small model of each layer
family the project trains (:data:`FAMILIES`, the rows of the README's "Which layers train") and
the project's ONNX perceptrons (:data:`ONNX_MLPS`),
the whole-training artifacts (training and optimizer models, written by
``OrtGradientOptimizer(artifact_dir=...)``) with solvers sgd and adamw, and the gradient graph
of the forward/backward API (``OrtModuleGraphBuilder``), ``fast_gradients`` on and off::

    python -m benchmarks.studies.contrib_operators [--out results/reference] [--models NAME ...]

writes ``contrib_operators.csv``: one row per operator, domain and graph (``training``,
``optimizer``, ``gradient``), the models it appears in, its node count, and whether
:mod:`helpers.portable.lowering` lowers it.
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import warnings

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: The file this study writes, under ``--out``.
CSV_NAME = "contrib_operators.csv"
#: Operators with no lowering on purpose: the step exporter writes the update itself
#: (``helpers.core.updates.update_rules``), and ``YieldOp`` is the forward/backward boundary.
NOT_LOWERED = {
    "SGDOptimizerV2": "update written by the step exporter",
    "AdamWOptimizer": "update written by the step exporter",
    "YieldOp": "forward/backward boundary, not in a step model",
}

#: One small torch model per row of the README's layer table: name -> (constructor source,
#: shape of one sample, task). Sources keep the module importable without torch.
FAMILIES = {
    "linear_relu": (
        "nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))",
        [6],
        "regression",
    ),
    "linear_classifier": (
        "nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))",
        [6],
        "classification",
    ),
    "smooth_activations": (
        "nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Sigmoid(), nn.SiLU(), nn.GELU(), "
        "nn.GELU(approximate='tanh'), nn.LeakyReLU(0.1), nn.Softsign(), nn.Tanhshrink(), "
        "nn.Softmax(dim=1), nn.Linear(6, 6), nn.LogSoftmax(dim=1), nn.Linear(6, 1))",
        [6],
        "regression",
    ),
    "elu_softplus_hard_prelu_clip": (
        "nn.Sequential(nn.Linear(6, 6), nn.ELU(), nn.CELU(0.5), nn.SELU(), "
        "nn.Softplus(beta=2, threshold=5), nn.Mish(), nn.LogSigmoid(), nn.Hardswish(), "
        "nn.Hardsigmoid(), nn.PReLU(6), nn.ReLU6(), nn.Hardtanh(), nn.Linear(6, 1))",
        [6],
        "regression",
    ),
    "conv2d_pools": (
        "nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding='valid', dilation=1), nn.ReLU(), "
        "nn.Conv2d(4, 4, 3, padding='same', groups=2, bias=False), "
        "nn.MaxPool2d(2, ceil_mode=True), nn.AvgPool2d(2, padding=1, count_include_pad=False), "
        "nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 1))",
        [2, 12, 12],
        "regression",
    ),
    "conv1d_depthwise_paddings": (
        "nn.Sequential(nn.Conv1d(3, 6, 3, padding=1, padding_mode='reflect'), "
        "nn.Conv1d(6, 6, 3, padding=1, groups=6, padding_mode='replicate'), "
        "nn.Conv1d(6, 6, 3, padding=1, padding_mode='circular'), nn.MaxPool1d(2), "
        "nn.Flatten(), nn.Linear(48, 1))",
        [3, 16],
        "regression",
    ),
    "conv3d": (
        "nn.Sequential(nn.Conv3d(1, 2, 3, dilation=1), nn.Tanh(), nn.Flatten(), nn.Linear(16, 1))",
        [1, 4, 4, 4],
        "regression",
    ),
    "conv_transpose": (
        "nn.Sequential(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), "
        "nn.Flatten(), nn.Linear(3 * 8 * 8, 1))",
        [2, 4, 4],
        "regression",
    ),
    "upsampling": (
        "nn.Sequential(nn.Upsample(scale_factor=2, mode='nearest'), nn.Conv2d(1, 2, 3), "
        "nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False), nn.Flatten(), "
        "nn.Linear(2 * 12 * 12, 1))",
        [1, 4, 4],
        "regression",
    ),
    "batch_norms": (
        "nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3, momentum=None), nn.Flatten(), "
        "nn.Linear(48, 8), nn.BatchNorm1d(8, track_running_stats=False), nn.Linear(8, 1))",
        [1, 6, 6],
        "regression",
    ),
    "layer_group_instance_norms": (
        "nn.Sequential(nn.Conv1d(4, 4, 3, padding=1), nn.GroupNorm(2, 4), "
        "nn.InstanceNorm1d(4, affine=True), nn.LayerNorm([4, 8]), nn.Flatten(), "
        "nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 1))",
        [4, 8],
        "regression",
    ),
    "embedding_padding_idx": (
        "nn.Sequential(nn.Embedding(20, 4, padding_idx=0), nn.Flatten(), nn.Linear(20, 5))",
        [5],
        "classification",
    ),
    "embedding_dropout": (
        "nn.Sequential(nn.Embedding(20, 4), nn.Flatten(), nn.Dropout(0.3), nn.Linear(20, 5))",
        [5],
        "classification",
    ),
}


#: The project's own ONNX multi-layer perceptrons (``MatMul`` and ``Add``, not torch's ``Gemm``):
#: name -> (``mlp_onnx`` hidden activation, task).
ONNX_MLPS = {
    "onnx_mlp_relu": ("relu", "regression"),
    "onnx_mlp_logistic_classifier": ("logistic", "classification"),
}


def _training_input(name):
    """The forward model of ``name``, a batch of its samples and their targets, and its task."""
    import torch  # noqa: PLC0415

    from benchmarks.workloads.model_inputs import (  # noqa: PLC0415
        InputSpec,
        input_spec,
        output_width,
        random_inputs,
        random_targets,
    )
    from helpers.core.model_graphs.torch_export import export_for_training  # noqa: PLC0415
    from helpers.teaching.model_factories import mlp_onnx  # noqa: PLC0415

    if name in ONNX_MLPS:
        activation, task = ONNX_MLPS[name]
        X = random_inputs(16, InputSpec((6,), "float32"))
        onx = mlp_onnx(6, hidden=(8, 8), n_outputs=4, activation=activation)
        return onx, X, random_targets(X, task, 4), task
    module, shape, task = _module(name)
    spec = input_spec(module, shape)
    X = random_inputs(16, spec)
    y = random_targets(X, task, output_width(module, spec))
    return export_for_training(module, torch.from_numpy(X[:2])), X, y, task


def _module(name):
    """The torch module of a family or a zoo builder, seeded, and its sample shape and task."""
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: F401, PLC0415

    from benchmarks import example_models  # noqa: PLC0415

    torch.manual_seed(0)
    if name in FAMILIES:
        source, shape, task = FAMILIES[name]
        return eval(source), shape, task  # noqa: S307 (a constant of this module)
    _, shape, task = example_models.ZOO[name]
    return getattr(example_models, name)(), shape, task


def _count(counter, model, graph, where):
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            counter[node.op_type, node.domain, graph][where] += 1


def survey(names, log=print):
    """Count the nodes outside the standard domain of each model's training graphs.

    A model the export or the APIs refuse is logged and left out.

    Returns
    -------
    collections.defaultdict
        ``(op_type, domain, graph)`` to a Counter: model name to its number of such nodes,
        summed over the solvers and both ``fast_gradients``.
    """
    found = collections.defaultdict(collections.Counter)
    for name in names:
        try:
            _survey_one(found, name)
        except Exception as exc:  # noqa: BLE001 (a refused model is reported, not fatal)
            log(f"{name}: refused: {type(exc).__name__}: {str(exc)[:300]}")
        else:
            log(f"{name}: done")
    return found


def _survey_one(found, name):
    import onnx  # noqa: PLC0415

    from benchmarks.workloads import frameworks as fw  # noqa: PLC0415
    from helpers.forward_backward.function import OrtGradientForwardBackward  # noqa: PLC0415

    onx, X, y, task = _training_input(name)
    for fast in (True, False):
        gradient = OrtGradientForwardBackward(onx, fast_gradients=fast).gradient_model_
        _count(found, gradient, "gradient", name)
        for solver in ("sgd", "adamw"):
            with tempfile.TemporaryDirectory() as folder:
                make = fw.ort_makers(
                    onx, fw.LOSSES[task][0], solver, 0.01, 8, 1, 0, validation_every=0,
                    max_iter=1, artifact_dir=folder, fast_gradients=fast,
                )[fw.ORT_WHOLE]  # fmt: skip
                make().fit(X, y)
                for path in glob.glob(os.path.join(folder, "**", "*.onnx"), recursive=True):
                    base = os.path.basename(path)
                    if "eval" not in base:
                        graph = "optimizer" if "optimizer" in base else "training"
                        _count(found, onnx.load(path), graph, name)


def lowering_of(op_type, domain):
    """How a step model gets rid of the operator: the lowering's module, or why none.

    Examples
    --------
    >>> lowering_of("Scale", "com.microsoft")
    'helpers.portable.lowering.gradient_plumbing'
    >>> lowering_of("SGDOptimizerV2", "com.microsoft")
    'none: update written by the step exporter'
    """
    from helpers.portable.lowering import LOWERINGS  # noqa: PLC0415

    if op_type in NOT_LOWERED:
        return f"none: {NOT_LOWERED[op_type]}"
    function = LOWERINGS.get((domain, op_type))
    return function.__module__ if function else "MISSING"


def table(found):
    """The rows of :data:`CSV_NAME`, sorted by graph and operator.

    Examples
    --------
    >>> import collections
    >>> found = {("Scale", "com.microsoft", "training"): collections.Counter(mlp=2)}
    >>> table(found)[0][:4]
    ['Scale', 'com.microsoft', 'training', 'mlp']
    """
    rows = []
    for (op_type, domain, graph), where in sorted(found.items(), key=lambda kv: kv[0][::-1]):
        rows.append(
            [
                op_type,
                domain,
                graph,
                " ".join(sorted(where)),
                sum(where.values()),
                lowering_of(op_type, domain),
            ]
        )
    return rows


def main(argv=None):
    """Command line: survey the models, write the CSV atomically."""
    import csv  # noqa: PLC0415

    from benchmarks.example_models import ZOO  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join("results", "reference"))
    default = [n for n in ZOO if n.endswith("_small")] + list(FAMILIES) + list(ONNX_MLPS)
    parser.add_argument("--models", nargs="*", default=default)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    rows = table(survey(args.models))
    path = os.path.join(args.out, CSV_NAME)
    temporary = path + ".tmp"
    with open(temporary, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["operator", "domain", "graph", "models", "nodes", "lowering"])
        writer.writerows(rows)
    os.replace(temporary, path)
    for row in rows:
        print(*row, sep=" | ")


if __name__ == "__main__":
    main()
