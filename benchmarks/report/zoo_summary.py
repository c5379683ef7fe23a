"""The model zoo in a sweep's summary: for which families onnxruntime trains a step faster, and
where not.

The ``your_model`` rows (``bench_your_model.ipynb``, run by the ``zoo_*``
tables of ``grids/full.toml`` on :data:`benchmarks.example_models.ZOO`) give
each model's step time in torch eager, ``torch.compile`` and both
onnxruntime APIs. :func:`zoo_section` turns them into sentences that
answer first and a short table of ratios, one per machine.
"""

import pandas as pd

from benchmarks.report.caveats import with_caveat
from benchmarks.report.ratios import framework_ratios, speed_phrase, verdict

#: The onnxruntime APIs and the torch runs they are compared with, as in the records.
APIS = {"ort whole-training": "whole-training", "ort forward-backward": "forward/backward"}
PEERS = ("torch eager", "torch.compile")
_COLUMNS = ["machine", "family", "label", "n_weights", "threads", "api", "peer", "ratio", "caveat"]


def model_label(family, model):
    """``'CNN on images (small)'``: the family and the size its builder's name ends with.

    Examples
    --------
    >>> model_label("CNN on images", "benchmarks.example_models:image_cnn_large")
    'CNN on images (large)'
    >>> model_label("Linear", "mine:digits_mlp")
    'Linear (digits_mlp)'
    """
    builder = str(model).split(":")[-1]
    size = builder.rsplit("_", 1)[-1] if builder.endswith(("_small", "_large")) else builder
    return f"{family} ({size})"


def _zoo_rows(df):
    """The ``your_model`` rows with plain SGD."""
    if "benchmark" not in df or "family" not in df:
        return df.iloc[0:0]
    return df[
        (df.benchmark == "your_model")
        & df.family.notna()
        & (df.optimizer.isna() | (df.optimizer == "sgd"))
    ]


def zoo_ratios(df):
    """Step time of each onnxruntime API over torch eager's and ``torch.compile``'s, per machine,
    model and threads.

    Only the ``your_model`` rows with plain SGD and a step time count.

    Returns
    -------
    pandas.DataFrame
        Columns ``machine``, ``family``, ``label``, ``n_weights``, ``threads``, ``api``, ``peer``,
        ``ratio`` and ``caveat`` (why the ratio is no finding, or ``''``:
        :mod:`benchmarks.report.caveats`).

    Examples
    --------
    >>> df = pd.DataFrame(
    ...     {
    ...         "benchmark": "your_model",
    ...         "machine": "m",
    ...         "model": "x:cnn_small",
    ...         "family": "CNN",
    ...         "optimizer": "sgd",
    ...         "n_weights": 900,
    ...         "threads": 2,
    ...         "framework": ["torch eager", "torch.compile", "ort whole-training"],
    ...         "time_per_update_s": [2.0, 1.0, 1.0],
    ...     }
    ... )
    >>> zoo_ratios(df)[["label", "peer", "ratio"]].to_numpy().tolist()
    [['CNN (small)', 'torch eager', 0.5], ['CNN (small)', 'torch.compile', 1.0]]
    """
    rows = _zoo_rows(df)
    if rows.empty:
        return pd.DataFrame(columns=_COLUMNS)
    rows = rows.dropna(subset=["time_per_update_s"])
    if "caveat" not in rows:
        rows = rows.assign(caveat="")
    out = []
    pairs = [(api, peer) for api in APIS for peer in PEERS]
    for (machine, model, threads), group in rows.groupby(
        ["machine", "model", "threads"], sort=False
    ):
        first = group.iloc[0]
        for api, peer, ratio, caveat in framework_ratios(group, "time_per_update_s", pairs):
            out.append(
                {
                    "machine": machine,
                    "family": first.family,
                    "label": model_label(first.family, model),
                    "n_weights": first.get("n_weights"),
                    "threads": int(threads),
                    "api": api,
                    "peer": peer,
                    "ratio": ratio,
                    "caveat": caveat,
                }
            )
    return pd.DataFrame(out, columns=_COLUMNS)


def _verdicts(ratios, peer):
    """Model label to 'faster', 'slower' or 'mixed': the faster API against ``peer``, at every
    thread count.

    Only ratios without a caveat count (:mod:`benchmarks.report.caveats`).
    """
    clean = ratios if "caveat" not in ratios else ratios[ratios.caveat.fillna("") == ""]
    best = clean[clean.peer == peer].groupby(["label", "threads"]).ratio.min()
    verdicts = {}
    for label, values in best.groupby(level="label"):
        words = set(values.map(verdict))
        verdicts[label] = words.pop() if words in ({"faster"}, {"slower"}) else "mixed"
    return verdicts


def _names(labels, families):
    """The labels, a family of several sizes named once when all its sizes are there."""
    names = []
    for family, sizes in families.items():
        inside = [label for label in sizes if label in labels]
        if len(sizes) > 1 and len(inside) == len(sizes):
            names.append(family)
        else:
            names += inside
    return ", ".join(names)


#: How each verdict of :func:`_verdicts` reads in the sentences.
_VERDICT_WORDS = {
    "faster": "faster for",
    "slower": "slower for",
    "mixed": "within 5%, or faster at one thread count only, for",
}


def zoo_sentence(ratios, peer, families=None):
    """The answer against ``peer``: the models where onnxruntime's faster API trains a step faster,
    and where slower.

    ``families`` (family to its model labels) names a family once when all
    its models share a verdict (default: the models of ``ratios``). ``''``
    when no ratio against ``peer`` is a finding.

    Examples
    --------
    >>> ratios = pd.DataFrame(
    ...     {
    ...         "family": ["CNN"] * 4 + ["MLP"] * 2,
    ...         "label": ["CNN (small)"] * 2 + ["CNN (large)"] * 2 + ["MLP (small)"] * 2,
    ...         "threads": [2] * 6,
    ...         "api": ["ort whole-training"] * 6,
    ...         "peer": ["torch eager", "torch.compile"] * 3,
    ...         "ratio": [1.5, 1.0, 1.2, 1.3, 0.5, 0.9],
    ...     }
    ... )
    >>> print(zoo_sentence(ratios, "torch eager"))  # doctest: +NORMALIZE_WHITESPACE
    Against torch eager, onnxruntime's faster API trains a step faster for: MLP (small); slower for:
    CNN.
    >>> print(zoo_sentence(ratios, "torch.compile"))  # doctest: +NORMALIZE_WHITESPACE
    Against torch.compile, onnxruntime's faster API trains a step faster for: MLP (small); slower
    for: CNN (large); within 5%, or faster at one thread count only, for: CNN (small).
    """
    if families is None:
        families = {
            family: list(dict.fromkeys(group.label))
            for family, group in ratios.groupby("family", sort=False)
        }
    verdicts = _verdicts(ratios, peer)
    clauses = [
        f"{words}: {_names([k for k, v in verdicts.items() if v == verdict], families)}"
        for verdict, words in _VERDICT_WORDS.items()
        if verdict in verdicts.values()
    ]
    if not clauses:
        return ""
    return f"Against {peer}, onnxruntime's faster API trains a step " + "; ".join(clauses) + "."


def _weights(n):
    if n is None or pd.isna(n):
        return "-"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else str(int(n))


def zoo_table(ratios, peer):
    """Lines of a markdown table against ``peer``: a row per model and thread count, a column per
    API.

    Examples
    --------
    >>> ratios = pd.DataFrame(
    ...     {
    ...         "family": "CNN",
    ...         "label": "CNN (small)",
    ...         "n_weights": 900,
    ...         "threads": 2,
    ...         "api": "ort whole-training",
    ...         "peer": ["torch eager", "torch.compile"],
    ...         "ratio": [0.5, 1.0],
    ...     }
    ... )
    >>> print("\\n".join(zoo_table(ratios, "torch eager")))
    | model | weights | threads | whole-training |
    | --- | --- | --- | --- |
    | CNN (small) | 900 | 2 | 2.0x faster |
    """
    ratios = ratios[ratios.peer == peer]
    caveats = (
        ratios["caveat"].fillna("") if "caveat" in ratios else pd.Series("", index=ratios.index)
    )
    ratios = ratios.assign(
        cell=[with_caveat(speed_phrase(r), c) for r, c in zip(ratios.ratio, caveats)]
    )
    table = ratios.pivot_table(
        index=["family", "n_weights", "label", "threads"],
        columns="api",
        values="cell",
        aggfunc="first",
    ).sort_index()
    present = [api for api in APIS if api in table.columns]
    lines = [
        "| model | weights | threads | " + " | ".join(APIS[a] for a in present) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in present) + " |",
    ]
    for (_, n_weights, label, threads), row in table.iterrows():
        cells = [row[c] if isinstance(row[c], str) else "-" for c in present]
        lines.append(f"| {label} | {_weights(n_weights)} | {threads} | " + " | ".join(cells) + " |")
    return lines


def _models(rows):
    """``families`` (family to its model labels) and the labels no onnxruntime API has a step time
    for."""
    rows = rows.assign(label=[model_label(f, m) for f, m in zip(rows.family, rows.model)])
    families = {
        family: list(dict.fromkeys(group.label))
        for family, group in rows.groupby("family", sort=False)
    }
    timed = rows[rows.framework.isin(list(APIS)) & rows.time_per_update_s.notna()]
    return families, [label for label in dict.fromkeys(rows.label) if label not in set(timed.label)]


def zoo_compact_table(ratios):
    """Lines of the summary's zoo table: a row per model, the faster API per peer and threads.

    Examples
    --------
    >>> ratios = pd.DataFrame({"family": "CNN", "label": "CNN (small)", "n_weights": 900,
    ...                        "threads": 2, "api": ["ort whole-training", "ort forward-backward"],
    ...                        "peer": "torch eager", "ratio": [0.5, 0.8], "caveat": ""})
    >>> print("\\n".join(zoo_compact_table(ratios)))
    | model | torch eager, 2 threads |
    | --- | --- |
    | CNN (small) | 2.0x faster |
    """
    caveats = ratios["caveat"].fillna("") if "caveat" in ratios else ""
    keys = ["family", "n_weights", "label", "peer", "threads"]
    best = ratios.assign(caveat=caveats).sort_values("ratio").groupby(keys, sort=False).first()
    best["cell"] = [speed_phrase(r) + ("*" if c else "") for r, c in zip(best.ratio, best.caveat)]
    table = best["cell"].unstack(["peer", "threads"]).sort_index()
    columns = sorted(table.columns, key=lambda c: (PEERS.index(c[0]), c[1]))
    names = [f"{peer}, {threads} thread{'' if threads == 1 else 's'}" for peer, threads in columns]
    lines = [
        "| model | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for (_, _, label), row in table.iterrows():
        cells = [row[c] if isinstance(row[c], str) else "-" for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


#: How each verdict of :func:`_verdicts` reads in a count of models.
_COUNT_WORDS = {"faster": "faster for", "slower": "slower for", "mixed": "within 5% or mixed for"}


def zoo_counts(ratios):
    """One sentence: against each torch run, for how many models the faster API is faster, or not.

    Examples
    --------
    >>> ratios = pd.DataFrame({"label": ["a", "b", "c"], "threads": 2, "peer": "torch eager",
    ...                        "ratio": [0.5, 1.5, 0.6]})
    >>> print(zoo_counts(ratios))  # doctest: +NORMALIZE_WHITESPACE
    Against torch eager, onnxruntime's faster API trains a step faster for 2 of 3 models with a
    clean ratio, slower for 1.
    """
    parts = []
    for peer in PEERS:
        verdicts = list(_verdicts(ratios, peer).values())
        counts = [
            f"{words} {verdicts.count(v)}" for v, words in _COUNT_WORDS.items() if v in verdicts
        ]
        if counts:
            counts[0] += f" of {len(verdicts)} models" + ("" if parts else " with a clean ratio")
            subject = "" if parts else "onnxruntime's faster API trains a step "
            parts.append(f"against {peer}, {subject}" + ", ".join(counts))
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}." if parts else ""


def zoo_details(df):
    """The lines of ``details.md`` on the zoo: per machine and torch run, the answer, the ratios.

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "your_model", "machine": "m", "model": "x:cnn_small",
    ...                    "family": "CNN", "optimizer": "sgd", "n_weights": 900, "threads": 2,
    ...                    "framework": ["torch eager", "ort whole-training"],
    ...                    "time_per_update_s": [2.0, 1.0]})
    >>> print("\\n".join(zoo_details(df)[:3]))
    ### Model zoo against torch eager: m
    <BLANKLINE>
    Against torch eager, onnxruntime's faster API trains a step faster for: CNN (small).
    """
    lines, rows = [], _zoo_rows(df)
    for machine, part in zoo_ratios(df).groupby("machine", sort=False):
        families, _ = _models(rows[rows.machine == machine])
        for peer in PEERS:
            if (part.peer == peer).any():
                lines += [f"### Model zoo against {peer}: {machine}", ""]
                sentence = zoo_sentence(part, peer, families)
                lines += ([sentence, ""] if sentence else []) + zoo_table(part, peer) + [""]
    return lines


def zoo_section(df):
    """The lines of ``summary.md`` on the zoo: per machine, the answer, one table (or none)."""
    ratios, rows = zoo_ratios(df), _zoo_rows(df)
    lines = []
    for machine, part in ratios.groupby("machine", sort=False):
        families, untrained = _models(rows[rows.machine == machine])
        lines += [f"## Model zoo: {machine}", ""]
        counts = zoo_counts(part)
        if counts:
            lines += [f"{counts} Which ones, family by family: [details](details.md).", ""]
        lines += zoo_compact_table(part[part.peer == "torch eager"]) + [""]
        if untrained:
            names = _names(untrained, families)
            lines += [f"Not trained by onnxruntime: {names} (why: [details](details.md)).", ""]
    if lines:
        lines += [
            (
                "Each cell: the [faster API](#glossary)'s step against torch eager's "
                "(`torch.compile`'s: [details](details.md)); same model, "
                "weights, batches, loss and plain SGD in every framework. *: not "
                "[clean](#glossary), no finding ([details](details.md) say why)."
            ),
            "",
        ]
    return lines
