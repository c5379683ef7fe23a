"""Variants of the library timed on training steps of the model zoo, interleaved.

The study scripts that switch one rewrite of ``fast_gradients`` off
(``gather_rewrite.py``, ``hardtanh_clip.py``, ``embedding_gradients.py``) time both variants of the
same zoo model's fit in turn (:mod:`benchmarks.profiles.ab_timing`), with
each variant's own copy of the model: the training caches key on a model's
content, so the variants never share a session.
"""

import os
import sys

import onnx

import benchmarks
from benchmarks.profiles.ab_timing import (
    BUSY_NOTE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.profiled_models import ZOO_BATCH, zoo_model


def zoo_variant_rows(models, variants, baseline, threads, rounds, repeats, lr=1e-3, verbose=True):
    """Rows of :func:`~benchmarks.profiles.ab_timing.ab_rows` for every zoo model, both APIs.

    Parameters
    ----------
    models : dict
        Zoo builder name to ``(steps per epoch, epochs of the long fit)``.
    variants : dict
        Variant name to a function returning the context manager its fits
        run in (``contextlib.nullcontext`` for the library as it is).
    baseline : str
        The variant the ratios divide by.
    threads, rounds, repeats : int
        Intra-op threads; :func:`~benchmarks.profiles.ab_timing.ab_rounds`' rounds and repeats.
    lr : float
        Learning rate of plain SGD.
    verbose : bool
        Print each model's rows as they come.

    Returns
    -------
    list of dict

    Examples
    --------
    >>> import contextlib
    >>> same = {"a": contextlib.nullcontext, "b": contextlib.nullcontext}
    >>> rows = zoo_variant_rows({"token_classifier_small": (2, 2)}, same, "a", threads=1, rounds=1,
    ...                         repeats=1, verbose=False)
    >>> [(row["API"], row["variant"]) for row in rows][:2], rows[0]["ratio"]
    ([('whole-training', 'a'), ('whole-training', 'b')], '1.00')
    """
    rows = []
    for name, (steps, e2) in models.items():
        onx, X, y, loss = zoo_model(name, ZOO_BATCH * steps)
        fits = {}
        for variant, context in variants.items():
            model = onnx.ModelProto()
            model.CopyFrom(onx)
            model.doc_string = f"{onx.doc_string} (variant {variant})"
            fitted = step_fits(model, X, y, ZOO_BATCH, threads, loss=loss, lr=lr, context=context)
            fits.update({(api, variant): fit for api, fit in fitted.items()})
        estimates, busy = ab_rounds(fits, steps, rounds=rounds, repeats=repeats, e2=e2)
        for api in dict.fromkeys(api for api, _ in fits):
            per_variant = {
                variant: values for (a, variant), values in estimates.items() if a == api
            }
            rows += ab_rows(
                per_variant, baseline, model=name, threads=threads, API=api, busy=busy_note(busy)
            )
            if verbose:
                print(markdown(rows[-len(variants) :], list(rows[-1])), flush=True)
    return rows


def write_zoo_variant_section(script, argv, models, variants, baseline, words):
    """Time the variants on the zoo's ``models``; write their section of the kernel survey.

    The ``main`` of a study script that switches one rewrite off.

    Parameters
    ----------
    script : module
        The study script: its docstring's first line is the command's description, its path
        the command the section names.
    argv : list of str or None
        The command's arguments (``sys.argv[1:]`` when None).
    models, variants, baseline
        As :func:`zoo_variant_rows` takes them.
    words : dict
        ``title`` and ``anchor`` of the section of ``results/kernel_survey.md``,
        ``subject`` (the models, in words) and ``baseline`` (the baseline variant, in words).
    """
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(script.__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    rows = [
        row
        for threads in args.threads
        for row in zoo_variant_rows(models, variants, baseline, threads, args.rounds, args.repeats)
    ]
    root = os.path.dirname(os.path.dirname(os.path.abspath(benchmarks.__file__)))
    path = os.path.relpath(os.path.abspath(script.__file__), root)
    text = (
        f"## {words['title']}\n\n{conditions(path, argv, load)} Marginal cost of a training step "
        f"of {words['subject']} (batches of 64), median over the rounds of the best of the "
        f"repeats, with the range over the rounds; the ratio to `{baseline}` "
        f"({words['baseline']}) is taken within each round; {BUSY_NOTE}.\n\n"
        f"{markdown(rows, list(rows[0]))}"
    )
    write_section(args.output, words["anchor"], text)
