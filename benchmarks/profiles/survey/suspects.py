"""What is known of the kernels the kernel survey finds slow (its *suspects*), and why.

From onnxruntime 1.19.2's CPU kernels (their source) and this project's
measurements (``benchmarks/profiles``); :func:`known_causes` lists the
suspects of a survey with what is known of each.
"""

#: What is known of the kernels found slow, from onnxruntime 1.19.2's CPU kernels and this project's
#: measurements: by operator type, or by ``(session, operator type)`` where the session tells more.
KNOWN_CAUSES = {
    "ReluGrad": (
        "single-threaded and slow; `fast_gradients` rewrites Relu as a mask "
        "(helpers.core.rewrites.gradient_rewrites)"
    ),
    "Where": (
        "the ReLU mask of `fast_gradients`; `Where` runs on one thread and no exact mask avoids a "
        "single-threaded kernel; `Cast` takes about 40% of its time here but showed no gain in "
        "whole steps (helpers.core.rewrites.gradient_rewrites, "
        "benchmarks/profiles/studies/relu_masks.py)"
    ),
    "GatherGrad": (
        "takes a mutex for every element it adds, on every thread; `fast_gradients` rewrites "
        "Gather as GatherND, whose gradient is one loop (helpers.core.rewrites.gradient_rewrites)"
    ),
    "GatherNDGrad": (
        "the embedding's gradient after the Gather rewrite: clears the table's gradient, then one "
        "loop on one thread; 3 to 5 times faster than GatherGrad, still the largest kernel of a "
        "token classifier (a one-hot product instead would cost more)"
    ),
    "GatherND": (
        "the forward of the Gather rewrite: about 1.5 times Gather's time on a 20000 x 128 table, "
        "paid back many times by its gradient"
    ),
    "GeluGrad": (
        "one thread (the same time at 1 and 2 threads), 4 times Gelu's: erf and exp of every "
        "element; the builder fuses the exported erf formula into Gelu; no rewrite tried (another "
        "formula would round otherwise): left alone"
    ),
    "MaxPool": (
        "the training graph asks MaxPool for its indices (MaxPoolGrad reads them): a generic "
        "kernel, about 15 times the inference one on 64x8x26x26 here; no exact rewrite (a max over "
        "strided slices gives ties another gradient): left alone"
    ),
    "MaxPoolGrad": "scatters the output gradient through the indices; no exact rewrite: left alone",
    "InPlaceAccumulatorV2": (
        "copies or adds every gradient into its buffer: large for a large embedding table, whose "
        "gradient is dense (as in torch without sparse=True)"
    ),
    "SGDOptimizerV2": "updates every weight, the whole embedding table included",
    (
        "weight update",
        "Mul",
    ): "the update of the forward/backward API (learning rate times gradient), proportional "
    "to the weights: a large embedding table makes it large",
    ("weight update", "Sub"): "the update of the forward/backward API, proportional to the weights",
    (
        "model (forward + backward)",
        "Mul",
    ): "elementwise products of the loss or the penalty: microseconds a call, "
    "the fixed cost of calling a kernel",
}


def known_causes(rows):
    """A markdown list of the suspects of ``rows`` with what :data:`KNOWN_CAUSES` says of them.

    Examples
    --------
    >>> rows = [{"configuration": "zoo, x", "suspects": [("weight update", "Sub")]}]
    >>> print(known_causes(rows))  # doctest: +NORMALIZE_WHITESPACE
    - `Sub` (weight update) in zoo, x: the update of the forward/backward API, proportional to the
      weights
    """
    seen = {}
    for row in rows:
        for suspect in row.get("suspects", []):
            seen.setdefault(suspect, []).append(row["configuration"])
    lines = []
    for (session, op), labels in seen.items():
        cause = KNOWN_CAUSES.get((session, op), KNOWN_CAUSES.get(op, "not explained yet"))
        lines.append(f"- `{op}` ({session}) in {' | '.join(dict.fromkeys(labels))}: {cause}")
    return "\n".join(lines)
