"""The answer of a sweep: each onnxruntime API's time over its peer's, as ratios, sentences, tables.

The torch benchmark's step against torch eager and ``torch.compile``, the scikit-learn
benchmark's whole fit against scikit-learn, per machine, threads and model size
(:func:`answer_ratios`); the summary says them in sentences (:func:`answer_sentences`), the
details in a table per machine and threads (:func:`answer_details`). Each ratio carries the
caveats of its two timings (:mod:`benchmarks.report.caveats`); the runs that shared their
cores are kept apart. :mod:`benchmarks.report.aggregate` writes them into the pages.
"""

import pandas as pd

from benchmarks.report.caveats import with_caveat
from benchmarks.report.details import size_label
from benchmarks.report.ratios import framework_ratios, speed_phrase, value_range, verdict

#: The two onnxruntime APIs and their peers, as in the records.
APIS = {
    "ort whole-training": "whole-training",
    "ort forward-backward": "forward/backward",
    "ort torch module": "OrtTorchModule",
}
PEERS = {
    "torch eager": "torch eager",
    "torch.compile": "torch.compile",
    "scikit-learn": "scikit-learn",
}


def answer_ratios(df):
    """Time of each onnxruntime API over its peer's, per machine, threads and model size.

    The torch benchmark compares steps, with torch eager and with
    ``torch.compile`` (plain SGD only: AdamW has no forward/backward row);
    the scikit-learn benchmark compares whole fits (same epochs, same
    update rule). Each ratio carries the caveats of its two timings
    (:mod:`benchmarks.report.caveats`) and whether its runs shared their cores.

    Returns
    -------
    pandas.DataFrame
        Columns ``machine``, ``threads``, ``size``, ``api``, ``peer``,
        ``ratio``, ``caveat``, ``shared``.

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "torch", "n_features": 10, "hidden": 50,
    ...                    "batch_size": 100, "machine": "m", "threads": 2, "caveat": "",
    ...                    "framework": ["torch eager", "ort whole-training"],
    ...                    "time_per_update_s": [1.0, 0.5]})
    >>> answer_ratios(df)[["size", "api", "peer", "ratio"]].to_dict("records")
    [{'size': 'MLP 10-50-1, batch 100', 'api': 'ort whole-training', 'peer': 'torch eager', \
'ratio': 0.5}]
    """
    columns = ["machine", "threads", "size", "api", "peer", "ratio", "caveat", "shared"]
    out = []
    sources = (
        ("torch", "time_per_update_s", ("torch eager", "torch.compile")),
        ("sklearn", "fit_time_s", ("scikit-learn",)),
    )
    for benchmark, measure, peers in sources:
        rows = df[(df.get("benchmark") == benchmark)] if "benchmark" in df else df.iloc[0:0]
        if "optimizer" in rows:
            rows = rows[rows.optimizer.isna() | (rows.optimizer == "sgd")]
        if rows.empty or measure not in rows:
            continue
        rows = rows.dropna(subset=[measure]).copy()
        rows["size"] = [  # a whole fit: each sample count is a configuration of its own
            size_label(r) + (f", {int(r['n_samples'])} samples" if benchmark == "sklearn" else "")
            for r in rows.to_dict("records")
        ]
        rows["is_shared"] = rows["shared"].astype(bool) if "shared" in rows else False
        pairs = [(api, peer) for peer in peers for api in APIS]
        for (machine, threads, size, shared), group in rows.groupby(
            ["machine", "threads", "size", "is_shared"], sort=False
        ):
            for api, peer, ratio, caveat in framework_ratios(group, measure, pairs):
                out.append(
                    {
                        "machine": machine,
                        "threads": int(threads),
                        "size": size,
                        "api": api,
                        "peer": peer,
                        "ratio": ratio,
                        "caveat": caveat,
                        "shared": bool(shared),
                    }
                )
    return pd.DataFrame(out, columns=columns)


def _answer_table(ratios):
    """Rows: model size and peer; columns: each API, as speed phrases with their caveats beside."""
    ratios = ratios.assign(
        cell=[with_caveat(speed_phrase(r), c) for r, c in zip(ratios.ratio, ratios.caveat)],
        peer_rank=ratios.peer.map({p: i for i, p in enumerate(PEERS)}),
    )
    sizes = list(dict.fromkeys(ratios["size"]))
    ratios = ratios.assign(size_rank=ratios["size"].map(sizes.index)).sort_values(
        ["size_rank", "peer_rank"]
    )
    table = ratios.pivot_table(
        index=["size", "peer"], columns="api", values="cell", aggfunc="first", sort=False
    )
    table = table[[a for a in APIS if a in table]]
    lines = [
        "| model, batch | against | " + " | ".join(APIS[a] for a in table.columns) + " |",
        "| --- | --- | " + " | ".join("---" for _ in table.columns) + " |",
    ]
    for (size, peer), row in table.iterrows():
        lines.append(
            f"| {size} | {PEERS[peer]} | "
            + " | ".join(v if isinstance(v, str) else "-" for v in row)
            + " |"
        )
    return lines


def answer_sentences(ratios):
    """One sentence per API and peer: how often onnxruntime is faster, and by how much.

    Only ratios without a caveat count; those left out are said, with the
    reason in the table.

    Examples
    --------
    >>> ratios = pd.DataFrame({"api": "ort whole-training", "peer": "torch eager",
    ...                        "size": ["a", "b"], "ratio": [0.5, 0.25], "caveat": ["", "noisy"]})
    >>> answer_sentences(ratios)
    ['The whole-training API against torch eager: faster in 1 of 1 configurations (2.0x); 1 more \
left out as not clean.']
    """
    sentences = []
    for (api, peer), group in ratios.groupby(["api", "peer"], sort=False):
        clean = group[group.caveat == ""]
        left_out = len(group) - len(clean)
        what = APIS[api] if api == "ort torch module" else f"The {APIS[api]} API"
        if clean.empty:
            sentences.append(
                f"{what} against {PEERS[peer]}: no finding, the {left_out} "
                "configurations are not clean (the details say why)."
            )
            continue
        words = clean.ratio.map(verdict)
        faster, slower = clean[words == "faster"], clean[words == "slower"]
        same = len(clean) - len(faster) - len(slower)
        text = f"{what} against {PEERS[peer]}: "
        if faster.empty and slower.empty:
            text += f"about the same in all {len(clean)} configurations"
        elif faster.empty:
            text += (
                f"slower in all {len(clean)} configurations"
                if not same
                else f"slower in {len(slower)} of {len(clean)} configurations"
            )
            text += f" ({value_range(slower.ratio)})"
        else:
            text += (
                f"faster in {len(faster)} of {len(clean)} configurations "
                f"({value_range(1 / faster.ratio)})"
            )
            if not slower.empty:
                where = "; ".join(sorted(set(slower["size"])))
                text += f", slower in {len(slower)} ({value_range(slower.ratio)}: {where})"
        if same and not (faster.empty and slower.empty):
            text += f", about the same in {same}"
        if left_out:
            text += f"; {left_out} more left out as not clean"
        sentences.append(text + ".")
    return sentences


def answer_details(df):
    """The lines of ``details.md`` with the answer's ratios: a table per machine and threads.

    Examples
    --------
    >>> df = pd.DataFrame({"benchmark": "torch", "model": "mlp", "n_features": 10, "hidden": 50,
    ...                    "batch_size": 100, "machine": "m", "threads": 2, "caveat": "",
    ...                    "shared": "",
    ...                    "framework": ["torch eager", "ort whole-training"],
    ...                    "time_per_update_s": [1.0, 0.5]})
    >>> print("\\n".join(answer_details(df)))
    ### m, 2 threads
    <BLANKLINE>
    | model, batch | against | whole-training |
    | --- | --- | --- |
    | MLP 10-50-1, batch 100 | torch eager | 2.0x faster |
    <BLANKLINE>
    """
    ratios, lines = answer_ratios(df), []
    ratios = ratios.sort_values(["shared", "threads"], kind="stable")  # runs one at a time first
    groups = ratios.groupby(["shared", "machine", "threads"], sort=False)
    for (is_shared, machine, threads), part in groups:
        apart = " (runs that shared the cores: not findings)" if is_shared else ""
        lines += [f"### {machine}, {threads} thread{'' if threads == 1 else 's'}{apart}", ""]
        lines += _answer_table(part) + [""]
    return lines
