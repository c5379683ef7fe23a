"""The model zoo's speed targets: a step of each large model, onnxruntime against torch eager.

Each large model of the zoo (:data:`benchmarks.example_models.ZOO`) trains
on batches of :data:`~benchmarks.profiles.survey.profiled_models.ZOO_BATCH` random
samples of its input (:func:`benchmarks.profiles.survey.profiled_models.zoo_model`)
with plain SGD, in both onnxruntime APIs and in torch eager, from the same
weights on the same batches (the fits of ``bench_your_model``:
:func:`benchmarks.workloads.your_model.ort_fits`,
:func:`benchmarks.workloads.your_model.torch_fit`).
The target of :mod:`benchmarks.studies.step_targets` compares the faster of the two
APIs with torch, round by round.
"""

import numpy as np

from benchmarks import example_models
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, zoo_model
from benchmarks.workloads import frameworks as fw
from benchmarks.workloads.your_model import ort_fits, torch_fit

#: The faster of the two onnxruntime APIs, as a framework of the targets' tables.
FASTER_ORT = "faster onnxruntime API"
#: Steps of an epoch per large model: the three extra epochs of the longer fit
#: take 0.4 s or more in every framework (2 threads, 2-core AMD EPYC: steps of
#: 1-2 ms for the MLPs and the token classifier, 4-16 ms for the 1-D and image
#: CNNs, 30-50 ms for the ResNet, 100-320 ms for the MobileNet), so that
#: they stand above the noise of a fit's set-up.
STEPS_PER_EPOCH = {
    "image_cnn_large": 8,
    "layernorm_mlp_large": 128,
    "batchnorm_mlp_large": 128,
    "sequence_conv_large": 16,
    "token_classifier_large": 96,
    "resnet_large": 4,
    "mobilenet_large": 2,
}
#: Learning rate of every framework: small, so that no fit diverges.
LEARNING_RATE = 1e-3


def zoo_size(name):
    """The size column of a zoo model's rows: ``'resnet_large@64'``.

    Examples
    --------
    >>> zoo_size("resnet_large")
    'resnet_large@64'
    """
    return f"{name}@{ZOO_BATCH}"


def zoo_model_of(size):
    """The zoo builder a size names (see :func:`zoo_size`), or None for another size.

    Examples
    --------
    >>> zoo_model_of("resnet_large@64"), zoo_model_of("100-50-1@100")
    ('resnet_large', None)
    """
    name = size.split("@")[0]
    return name if name in example_models.ZOO else None


def zoo_fits(name, threads, random_state=0):
    """``fit(epochs)`` of both onnxruntime APIs and torch eager for one zoo model.

    Torch's threads are the caller's (``torch.set_num_threads``); the
    onnxruntime optimizers get ``n_threads=threads``.

    Returns
    -------
    fits : dict
        Framework name to ``fit(epochs)``.
    steps_per_epoch : int

    Examples
    --------
    >>> fits, steps = zoo_fits("layernorm_mlp_large", threads=1)
    >>> sorted(fits), steps
    (['ort forward-backward', 'ort whole-training', 'torch eager'], 128)
    """
    import torch

    steps = STEPS_PER_EPOCH[name]
    onx, X, y, _ = zoo_model(name, ZOO_BATCH * steps, random_state)
    task = example_models.ZOO[name][2]

    def make_module():
        torch.manual_seed(random_state)  # the weights zoo_model exported
        return getattr(example_models, name)()

    common = {"learning_rate": LEARNING_RATE, "batch_size": ZOO_BATCH, "random_state": random_state}
    fits = ort_fits(onx, X, y, task, n_threads=threads, **common)
    fits[fw.TORCH] = torch_fit(make_module, X, y, task, **common)
    return fits, steps


def with_faster_ort(costs):
    """Add the faster onnxruntime API to the costs of ``marginal_step_cost``: its smaller step.

    The step of each repeat is the smaller of the two APIs' in that repeat.

    Examples
    --------
    >>> costs = {fw.ORT_WHOLE: {"step_s": 2.0, "steps_s": [2.0, 3.0]},
    ...          fw.ORT_FORWARD_BACKWARD: {"step_s": 2.5, "steps_s": [2.5, 2.5]}}
    >>> with_faster_ort(costs)[FASTER_ORT]
    {'step_s': 2.0, 'steps_s': [2.0, 2.5]}
    """
    apis = [costs[fw.ORT_WHOLE], costs[fw.ORT_FORWARD_BACKWARD]]
    rounds = np.fmin(*(np.asarray(api["steps_s"], dtype=float) for api in apis))
    best = float(np.fmin(*(api["step_s"] for api in apis)))
    return {**costs, FASTER_ORT: {"step_s": best, "steps_s": rounds.tolist()}}
