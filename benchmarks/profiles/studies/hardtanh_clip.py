"""ReLU6 and Hardtanh under ``fast_gradients``, side by side: training steps of the zoo's
MobileNetV2.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/hardtanh_clip.py [--threads 1 2] [--rounds 3]

The training graph writes torch's ``hardtanh`` (``ReLU6``, ``Hardtanh``),
whose gradient is 0 on its bounds, either as two ``Where`` on comparisons
(``where``, the form kept with ``fast_gradients=False``) or, under
``fast_gradients``, as one ``Clip`` by the floats just inside the bounds
(``clip``, :mod:`helpers.core.layers.activations`). Two variants of the same fit,
timed in turn (:mod:`benchmarks.profiles.ab_timing`): the library as it
is, and the same with that one choice switched back to ``where`` (the other
rewrites stay on). The zoo's MobileNetV2-style networks
(``benchmarks/example_models.py``), batches of 64, plain SGD, softmax
cross-entropy, both APIs. It writes its section of ``results/kernel_survey.md``.
"""

import contextlib
import sys
from unittest import mock

from benchmarks.profiles.studies.zoo_variants import write_zoo_variant_section
from helpers.core.layers import activations

#: Zoo model to (steps per epoch, epochs of the long fit).
MODELS = {"mobilenet_small": (8, 3), "mobilenet_large": (2, 3)}


def with_where_hardtanh():
    """A context in which ``fast_gradients`` writes ``hardtanh`` with two ``Where``.

    Examples
    --------
    >>> from helpers.core.model_graphs.training_graph import training_graph
    >>> from benchmarks.profiles.survey.profiled_models import zoo_model
    >>> onx = zoo_model("mobilenet_small", 4)[0]
    >>> with with_where_hardtanh():
    ...     ops = [n.op_type for n in training_graph(onx).model.graph.node]
    >>> "Clip" in ops, "Clip" in [n.op_type for n in training_graph(onx).model.graph.node]
    (False, True)
    """
    return mock.patch.object(activations, "_scalar_bounds", lambda model, node: None)


def main(argv=None):
    """Time both variants; write their section of ``results/kernel_survey.md``."""
    words = {
        "title": "ReLU6 as a Clip",
        "anchor": "hardtanh-clip",
        "subject": "the zoo's MobileNetV2-style networks",
        "baseline": "two `Where` per ReLU6",
    }
    variants = {"clip": contextlib.nullcontext, "where": with_where_hardtanh}
    write_zoo_variant_section(sys.modules[__name__], argv, MODELS, variants, "where", words)


if __name__ == "__main__":
    main()
