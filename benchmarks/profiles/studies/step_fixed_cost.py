"""The time of a large training step beyond its matrix products; exact BatchNorm formulas.

Run from the repository root::

    .venv/bin/python benchmarks/profiles/studies/step_fixed_cost.py [--threads 1 2] [--rounds 3]

Two steps are profiled with onnxruntime's profiler (each kernel's best time
over ``--repeats`` profiled epochs,
:func:`benchmarks.profiles.survey.kernel_survey.profile_best_of`),
both APIs, plain SGD: the ReLU network 500-500-1 on batches of 1000 (the
step of ``perf_large.py``, whose whole-training step should take at most
1.15 times its five matrix products run alone) and the zoo's
``batchnorm_mlp_large`` on batches of 64. The table splits each step into
its matrix products, the other kernels (the five largest named) and the
sessions' own time (``overhead``: the time of a run no kernel accounts for,
most of it the executor's fixed cost per kernel).

Then ``batchnorm_mlp_large`` trains with three exact formulas of its
batch normalization (:mod:`helpers.core.layers.batch_norm`), interleaved
(:mod:`benchmarks.profiles.ab_timing`):

* ``divide``: the library's, ``(x - mean) / std * scale + bias``;
* ``folded``: ``(x - mean) * (scale / std) + bias``: the division on one
  value per channel, one full-size kernel less forward and in the gradient;
* ``affine``: torch's CPU kernel's, ``x * a + (bias - mean * a)`` with
  ``a = scale / std``.

They differ from each other by rounding only (about 3e-7 on outputs near
one). It writes its section of ``results/kernel_survey.md``.

What the profiles showed (``results/kernel_survey.md``): beyond the products,
the 500-500-1 step spends most in the ReLU mask of ``fast_gradients``
(``Where`` on one thread, the two products by the mask, ``Greater``): ``Where``
alone is 3 to 5% of the step at one thread, 6 to 9% at two, where the products
take about half their one-thread time and ``Where`` does not
(:mod:`helpers.core.rewrites.gradient_rewrites` on the
masks tried); then the bias gradients (``ReduceSum``), the accumulators and
the update, about 1% each. The BatchNorm network runs about 190 kernels of a
few microseconds a step: the sessions' fixed cost per kernel is 30% of it
(:mod:`helpers.core.layers.batch_norm` on the formulas).
"""

import os
import sys
from unittest import mock

from onnx import helper

from benchmarks.profiles.ab_timing import (
    BUSY_NOTE,
    FORWARD_BACKWARD,
    WHOLE,
    ab_rounds,
    ab_rows,
    busy_note,
    conditions,
    parse_arguments,
    step_fits,
    wait_until_quiet,
)
from benchmarks.profiles.report import markdown, write_section
from benchmarks.profiles.survey.kernel_survey import MATRIX_PRODUCTS, profile_best_of
from benchmarks.profiles.survey.profiled_models import (
    SIZES,
    ZOO_BATCH,
    make_models,
    make_optimizer,
    zoo_model,
)
from helpers.core.layers import batch_norm

#: Profiled steps: label to (model, X, y, loss, batch, learning rate) builders.
PROFILED = {
    "MLP 500-500-1 relu, batch 1000": lambda: (
        *make_models(SIZES["large"])["relu"],
        "squared_error",
        1e-4,
    ),
    "zoo batchnorm_mlp_large, batch 64": lambda: (*_zoo("batchnorm_mlp_large", 10), 1e-3),
}
#: Formulas of batch normalization the A/B part compares (see the module's documentation).
FORMULAS = ("divide", "folded", "affine")


def _zoo(name, steps):
    """``(model, X, y, batch, loss)`` of a zoo model, ``steps`` batches of :data:`ZOO_BATCH`."""
    onx, X, y, loss = zoo_model(name, ZOO_BATCH * steps)
    return onx, X, y, ZOO_BATCH, loss


def split_step(table):
    """One row: a profiled step split into matrix products, other kernels, sessions' overhead.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`benchmarks.profiles.survey.kernel_survey.profile_best_of`'s.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({
    ...     "session": ["model"] * 4, "op_type": ["Gemm", "Where", "Mul", "(overhead)"],
    ...     "calls per step": [5.0, 1.0, 2.0, 1.0], "µs per step": [80.0, 9.0, 6.0, 5.0]})
    >>> row = split_step(table)
    >>> row["products (%)"], row["others (%)"], row["overhead (%)"], row["largest others"]
    ('80.0', '15.0', '5.0', 'Where 9.0% (1 × 9 µs), Mul 6.0% (2 × 3 µs)')
    """
    total = table["µs per step"].sum()
    overhead = table["op_type"] == "(overhead)"
    products = table["op_type"].isin(MATRIX_PRODUCTS)
    others = table[~overhead & ~products].groupby("op_type", as_index=False).sum(numeric_only=True)
    others = others.sort_values("µs per step", ascending=False).head(5)
    share = 100 / total
    return {
        "profiled µs/step": f"{total:.0f}",
        "products (%)": f"{table.loc[products, 'µs per step'].sum() * share:.1f}",
        "others (%)": f"{table.loc[~overhead & ~products, 'µs per step'].sum() * share:.1f}",
        "overhead (%)": f"{table.loc[overhead, 'µs per step'].sum() * share:.1f}",
        "largest others": ", ".join(
            f"{r['op_type']} {r['µs per step'] * share:.1f}% "
            f"({r['calls per step']:g} × {r['µs per step'] / r['calls per step']:.0f} µs)"
            for _, r in others.iterrows()
        ),
    }


def profile_rows(threads, repeats=3):
    """Rows of :func:`split_step` for every step of :data:`PROFILED`, both APIs, at ``threads``."""
    rows = []
    for label, build in PROFILED.items():
        onx, X, y, batch, loss, lr = build()
        for api in (WHOLE, FORWARD_BACKWARD):
            busy = wait_until_quiet(max_busy=0.1, timeout_s=60)
            optimizer = make_optimizer(api, onx, loss, "sgd", True, batch, lr, threads)
            row = {
                "step": label,
                "threads": threads,
                "API": api,
                "busy": busy_note([busy]),
                **split_step(profile_best_of(optimizer, X, y, repeats)),
            }
            print(markdown([row], list(row)), flush=True)
            rows.append(row)
    return rows


def refold(nodes, formula):
    """The nodes of one decomposed batch normalization, its output written with ``formula``.

    ``nodes`` end with the library's ``Div``, ``Mul``, ``Add`` (the
    ``divide`` formula); the others replace them.

    Examples
    --------
    >>> from helpers.core.layers.batch_norm import decompose_batch_norm_node
    >>> node = helper.make_node("BatchNormalization", list("xsbmv"), ["y"], training_mode=1)
    >>> nodes, _ = decompose_batch_norm_node(node, 2, 15, 0, None)
    >>> [n.op_type for n in refold(nodes, "folded")[-3:]]
    ['Div', 'Mul', 'Add']
    >>> [n.op_type for n in refold(nodes, "affine")[-5:]]
    ['Div', 'Mul', 'Sub', 'Mul', 'Add']
    """
    if formula == "divide":
        return nodes
    divide, _, add = nodes[-3:]
    centered, std = divide.input
    scale, bias = centered.replace("__centered", "__scale"), add.input[1]
    tag, y = divide.name.replace("__normalized", ""), add.output[0]
    factor = helper.make_node("Div", [scale, std], [f"{tag}__factor"], name=f"{tag}__factor")
    if formula == "folded":
        return [
            *nodes[:-3],
            factor,
            helper.make_node(
                "Mul", [centered, f"{tag}__factor"], [f"{tag}__scaled"], name=f"{tag}__scaled"
            ),
            helper.make_node("Add", [f"{tag}__scaled", bias], [y], name=f"{tag}__output"),
        ]
    x, mean = next(n.input for n in nodes if n.output[0] == centered)
    return [
        *nodes[:-3],
        factor,
        helper.make_node("Mul", [mean, f"{tag}__factor"], [f"{tag}__moved"], name=f"{tag}__moved"),
        helper.make_node("Sub", [bias, f"{tag}__moved"], [f"{tag}__shift"], name=f"{tag}__shift"),
        helper.make_node("Mul", [x, f"{tag}__factor"], [f"{tag}__scaled"], name=f"{tag}__scaled"),
        helper.make_node("Add", [f"{tag}__scaled", f"{tag}__shift"], [y], name=f"{tag}__output"),
    ]


def with_formula(formula):
    """A context in which ``decompose_batch_norm`` uses ``formula``.

    (:func:`helpers.core.layers.batch_norm.decompose_batch_norm`.)

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    >>> with with_formula("folded"):
    ...     model, _ = batch_norm.decompose_batch_norm(export_for_training(net, torch.zeros(2, 3)))
    >>> any(n.name.endswith("__factor") for n in model.graph.node)
    True
    """
    original = batch_norm.decompose_batch_norm_node

    def decompose(*args):
        nodes, layer = original(*args)
        return refold(nodes, formula), layer

    return mock.patch.object(batch_norm, "decompose_batch_norm_node", decompose)


def formula_rows(threads, rounds, repeats, steps=20, e2=4):
    """Rows of :func:`ab_rows`: steps of ``batchnorm_mlp_large`` with each of :data:`FORMULAS`."""
    onx, X, y, batch, loss = _zoo("batchnorm_mlp_large", steps)
    fits = {}
    for formula in FORMULAS:
        # another doc string: another entry of the training caches
        model = onx.__class__()
        model.CopyFrom(onx)
        model.doc_string = f"batch normalization: {formula}"
        fitted = step_fits(
            model,
            X,
            y,
            batch,
            threads,
            loss=loss,
            lr=1e-3,
            context=lambda formula=formula: with_formula(formula),
        )
        fits.update({(api, formula): fit for api, fit in fitted.items()})
    estimates, busy = ab_rounds(fits, steps, rounds=rounds, repeats=repeats, e2=e2)
    rows = []
    for api in (WHOLE, FORWARD_BACKWARD):
        per_formula = {formula: estimates[api, formula] for formula in FORMULAS}
        rows += ab_rows(per_formula, "divide", threads=threads, API=api, busy=busy_note(busy))
        print(markdown(rows[-3:], list(rows[-1])), flush=True)
    return rows


def main(argv=None):
    """Profile both steps, time the formulas; write their section of the survey."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_arguments(__doc__.split("\n", 1)[0], argv)
    load = os.getloadavg()[0]
    profiles = [row for threads in args.threads for row in profile_rows(threads, args.repeats + 1)]
    formulas = [
        row for threads in args.threads for row in formula_rows(threads, args.rounds, args.repeats)
    ]
    text = (
        f"## The fixed cost of large steps\n\n"
        f"{conditions('benchmarks/profiles/studies/step_fixed_cost.py', argv, load)}\n\n"
        "Profiled steps (each kernel's best time over the profiled epochs; `products`: "
        f"{', '.join(sorted(MATRIX_PRODUCTS))}; `overhead`: the sessions' time no kernel "
        f"accounts for):\n\n{markdown(profiles, list(profiles[0]))}\n\n"
        "Training steps of batchnorm_mlp_large (batches of 64, plain SGD) with each formula of "
        "batch normalization, median over the rounds of the best of the repeats, the ratio to "
        f"`divide` taken within each round; {BUSY_NOTE}.\n\n"
        f"{markdown(formulas, list(formulas[0]))}"
    )
    write_section(args.output, "step-fixed-cost", text)


if __name__ == "__main__":
    main()
