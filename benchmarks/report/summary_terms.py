"""The words of ``summary.md``: its glossary, and the targets' ratios in its one convention.

``step_targets.csv`` keeps time ratios (``0.16x``: onnxruntime's time over
its peer's, goals ``<= 0.3x``); the summary reads every ratio as
``'6.2x faster'`` or ``'1.6x slower'`` (:func:`benchmarks.report.ratios.speed_phrase`),
so :func:`targets_in_words` rewrites those cells before the table is shown.
"""

import re

from benchmarks.report.ratios import speed_phrase

#: Each term the summary uses, and what it means (the glossary at its end).
GLOSSARY = {
    "clean configuration": "one whose timings carry no caveat; only those make an answer.",
    "noisy": (
        "a timing's slowest repeat took over twice its fastest. Other caveats: a busy machine, "
        "shared cores, set-up not measurable."
    ),
    "set-up not measurable": (
        "a fit's fixed cost, estimated from fits of two lengths, came out negative."
    ),
    "faster API": "whichever of onnxruntime's two APIs took less time in that configuration.",
    "whole-training vs forward/backward API": (
        "whole-training runs loss and update inside onnxruntime; forward/backward returns "
        "gradients, the caller updates."
    ),
    "OrtTorchModule": (
        "`helpers.OrtTorchModule`: forward and backward passes in onnxruntime, loss and optimizer "
        "in torch."
    ),
    "torch eager vs torch.compile": (
        "eager runs each operator as called; `torch.compile` compiles the step first, untimed."
    ),
    "runtime bound": (
        "the step's matrix products alone, in onnxruntime's kernels: the time a step should "
        "approach."
    ),
    "`100-50-1@100`": "an MLP of 100 inputs, 50 hidden units, 1 output, on batches of 100 rows.",
    "refit set-up": "the time to make a model trainable again from its cached training artifacts.",
    "first fit set-up": (
        "a one-step fit on two samples, minus such a step, with the training caches empty: "
        "export, training graph, sessions (torch: building the module and optimizer)."
    ),
    "peak memory": (
        "the peak resident memory of a fresh process that imports its framework, prepares the "
        "model and trains it on batches of 64."
    ),
}


def glossary_lines():
    """The summary's last section: a ``## Glossary`` heading, then a term a line.

    Examples
    --------
    >>> glossary_lines()[0], glossary_lines()[2].startswith("- **clean configuration**: ")
    ('## Glossary', True)
    """
    return (
        ["## Glossary", ""]
        + [f"- **{term}**: {meaning}" for term, meaning in GLOSSARY.items()]
        + [""]
    )


_RATIO = re.compile(r"^(?P<op><=|<)?\s*(?P<low>[\d.]+)(?:-(?P<high>[\d.]+))?x$")


def ratio_in_words(cell):
    """A target's cell in the summary's convention; a cell that is no ratio stays as it is.

    Examples
    --------
    >>> cells = ("0.16x", "0.72-1.37x", "1.36-1.85x", "<= 0.3x", "<= 1.0x", "<= 1.15x")
    >>> [ratio_in_words(c) for c in cells]
    ['6.2x faster', '1.4x faster to 1.4x slower', '1.4x to 1.9x slower', 'at least 3.3x faster', \
'no slower', 'at most 1.15x slower']
    >>> ratio_in_words("5.8 ms")
    '5.8 ms'
    """
    match = _RATIO.match(str(cell).strip())
    if not match:
        return cell
    low = float(match["low"])
    if match["op"]:
        if low < 1:
            return f"at least {1 / low:.1f}x faster"
        return "no slower" if low == 1 else f"at most {low:g}x slower"
    if not match["high"]:
        return speed_phrase(low)
    first, last = speed_phrase(low), speed_phrase(float(match["high"]))
    if first.endswith("slower") and last.endswith("slower"):
        return f"{first.split()[0]} to {last}"
    if first.endswith("faster") and last.endswith("faster"):
        return f"{last.split()[0]} to {first}"
    return f"{first} to {last}"


def targets_in_words(targets):
    """``step_targets.csv``'s table, short, its ratios in words, and a sentence on the zoo's.

    The zoo's targets (``'zoo <model>, ...'``) are said in one sentence that
    names each model's verdict (their rows are in ``step_targets.csv``); the
    spread of the repeats is left to that file.

    Returns
    -------
    (pandas.DataFrame, str)

    Examples
    --------
    >>> import pandas as pd
    >>> targets = pd.DataFrame({"target": ["small MLP", "zoo cnn_large, faster API vs torch",
    ...                                    "zoo mlp_large, faster API vs torch"],
    ...                         "configuration": ["100-50-1@100", "cnn_large@64", "mlp_large@64"],
    ...                         "measured": ["0.16x", "1.11x", "0.72x"], "spread": "-",
    ...                         "goal": ["<= 0.3x", "<= 1.0x", "<= 1.0x"],
    ...                         "verdict": ["met", "missed by 1.11x", "met"]})
    >>> table, zoo = targets_in_words(targets)
    >>> table.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'target': 'small MLP', 'configuration': '100-50-1@100', 'measured': '6.2x faster',
      'goal': 'at least 3.3x faster', 'verdict': 'met'}]
    >>> print(zoo)  # doctest: +NORMALIZE_WHITESPACE
    The zoo's large models, onnxruntime's faster API against torch eager (goal: no slower):
    met for mlp_large (1.4x faster); missed for cnn_large (1.1x slower).
    """
    targets = targets.drop(columns=[c for c in ("spread",) if c in targets])
    for column in ("measured", "goal"):
        if column in targets:
            targets[column] = targets[column].map(ratio_in_words)
    is_zoo = targets["target"].astype(str).str.startswith("zoo ")
    zoo, table = targets[is_zoo], targets[~is_zoo].reset_index(drop=True)
    if zoo.empty:
        return table, ""
    names = zoo["target"].str.split().str[1].str.rstrip(",")
    said = {
        verdict: ", ".join(
            f"{n} ({m})"
            for n, m, v in zip(names, zoo.measured, zoo.verdict)
            if v.startswith(verdict)
        )
        for verdict in ("met", "missed")
    }
    goal = "; ".join(dict.fromkeys(zoo.goal))
    return table, (
        f"The zoo's large models, onnxruntime's faster API against torch eager (goal: {goal}): "
        + "; ".join(f"{v} for {names}" for v, names in said.items() if names)
        + "."
    )
