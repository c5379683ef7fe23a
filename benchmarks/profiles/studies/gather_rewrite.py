"""The ``Gather`` rewrite of ``fast_gradients``, side by side: training steps of the zoo's token
classifiers.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/gather_rewrite.py [--threads 1 2] [--rounds 3]

``fast_gradients`` trains an embedding's ``Gather`` as ``GatherND``, whose
gradient kernel adds the rows in one loop instead of taking a mutex for
each element (:mod:`helpers.core.rewrites.gradient_rewrites`). Two variants of the
same fit, timed in turn (:mod:`benchmarks.profiles.ab_timing`):
``gather_nd``, the library as it is, and ``gather``, the same with that one
rewrite switched off (the other rewrites stay on). The zoo's token
classifiers (``benchmarks/example_models.py``), batches of 64, plain SGD,
softmax cross-entropy, both APIs. It writes its section of
``results/kernel_survey.md``.
"""

import contextlib
import sys
from unittest import mock

from benchmarks.profiles.studies.zoo_variants import write_zoo_variant_section
from helpers.core.rewrites import gradient_rewrites

#: Zoo model to (steps per epoch, epochs of the long fit).
MODELS = {"token_classifier_small": (20, 11), "token_classifier_large": (20, 4)}


def without_gather_rewrite():
    """A context in which ``fast_gradients`` keeps ``Gather`` as it is.

    Examples
    --------
    >>> from helpers.core.rewrites.gradient_rewrites import rewrite_for_training
    >>> from benchmarks.profiles.survey.profiled_models import zoo_model
    >>> onx = zoo_model("token_classifier_small", 4)[0]
    >>> with without_gather_rewrite():
    ...     "Gather" in [n.op_type for n in rewrite_for_training(onx).graph.node]
    True
    """
    return mock.patch.object(gradient_rewrites, "_gather_as_gather_nd", lambda node, index: None)


def main(argv=None):
    """Time both variants; write their section of ``results/kernel_survey.md``."""
    words = {
        "title": "The Gather rewrite",
        "anchor": "gather-rewrite",
        "subject": "the zoo's token classifiers",
        "baseline": "the rewrite off",
    }
    variants = {"gather_nd": contextlib.nullcontext, "gather": without_gather_rewrite}
    write_zoo_variant_section(sys.modules[__name__], argv, MODELS, variants, "gather", words)


if __name__ == "__main__":
    main()
