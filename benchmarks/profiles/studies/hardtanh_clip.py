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
import os
import sys
from unittest import mock

from benchmarks.profiles.ab_timing import BUSY_NOTE, conditions, parse_arguments
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.studies.zoo_variants import zoo_variant_rows
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
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    variants = {"clip": contextlib.nullcontext, "where": with_where_hardtanh}
    rows = [
        row
        for threads in args.threads
        for row in zoo_variant_rows(MODELS, variants, "where", threads, args.rounds, args.repeats)
    ]
    text = (
        "## ReLU6 as a Clip\n\n"
        f"{conditions('benchmarks/profiles/studies/hardtanh_clip.py', argv, load)} "
        "Marginal cost of a training step of the zoo's MobileNetV2-style networks (batches of "
        "64), median over the rounds of the best of the repeats, with the range over the rounds; "
        "the ratio to `where` (two `Where` per ReLU6) is taken within each round; "
        f"{BUSY_NOTE}.\n\n{markdown(rows, list(rows[0]))}"
    )
    write_section(args.output, "hardtanh-clip", text)


if __name__ == "__main__":
    main()
