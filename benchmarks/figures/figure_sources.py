"""The committed results a quoted figure is read from, and the kinds of figure read from them.

Each function below takes a :class:`Results` (the committed files of a
checkout, read once) and returns the text a document quotes: a ratio
phrase (``'1.8x slower'``), a range (``'1.7x to 4.6x faster'``), a value
with its unit. :data:`benchmarks.figures.quoted_figures.FIGURES` names each figure
the documents quote with one of them.
"""

import functools
import glob
import json
import os

import pandas as pd

from benchmarks.report import portable_section as portable
from benchmarks.report.answer import answer_ratios
from benchmarks.report.ratios import span_phrase, speed_phrase, value_range, verdict
from benchmarks.report.study_sections import ORT_APIS, compared, target_table
from benchmarks.report.suite_ratios import suite_ratios, suite_table
from benchmarks.workloads import frameworks as fw

#: The section of ``results/kernel_survey.md`` with one side-by-side profile per model.
KERNEL_SECTION = "onnxruntime against torch, kernel by kernel"


def _read_csv(path):
    frame = pd.read_csv(path)
    for column in ("caveat", "shared", "busy"):
        if column in frame:
            frame[column] = frame[column].astype(object).where(frame[column].notna(), "")
    return frame


def _table(lines):
    """A markdown table's lines as a DataFrame of strings."""
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return pd.DataFrame(cells[2:], columns=cells[0])


class Results:
    """The committed results under ``root`` (a checkout), each file read at its first use.

    Examples
    --------
    >>> results = Results(".")
    >>> sorted(results.kernels)[:2]
    ['batchnorm_mlp_large', 'image_cnn_large']
    """

    def __init__(self, root):
        self.root = root

    def path(self, name):
        """The path of ``name``, relative to ``results/``."""
        return os.path.join(self.root, "results", name)

    @functools.cached_property
    def summary(self):
        """Every row of the reference sweep, ``results/reference/summary.csv``."""
        return _read_csv(self.path("reference/summary.csv"))

    @functools.cached_property
    def answer(self):
        """Each API's ratios to its peers (:func:`benchmarks.report.answer.answer_ratios`)."""
        return answer_ratios(self.summary)

    @functools.cached_property
    def targets(self):
        """``results/step_targets.csv``, indexed by target."""
        return pd.read_csv(self.path("step_targets.csv")).set_index("target")

    @functools.cached_property
    def sections(self):
        """Title of each ``## `` section of ``results/kernel_survey.md`` to its tables (strings).

        Each table is ``(heading, DataFrame)``: the last ``####`` heading above it, or ``''``.
        """
        with open(self.path("kernel_survey.md"), encoding="utf-8") as f:
            lines = f.read().splitlines() + [""]
        sections, title, heading = {}, None, ""
        for i, line in enumerate(lines):
            if line.startswith("## "):
                title, heading = line[3:].strip(), ""
                sections[title] = []
            elif line.startswith("#### "):
                heading = line[5:].strip()
            elif title and line.startswith("|") and not lines[i - 1].startswith("|"):
                end = next(j for j in range(i, len(lines)) if not lines[j].startswith("|"))
                sections[title].append((heading, _table(lines[i:end])))
        return sections

    @functools.cached_property
    def kernels(self):
        """Model name to its side-by-side kernel table of ``results/kernel_survey.md`` (strings)."""
        tables = self.sections[KERNEL_SECTION]
        return {h.split(",")[0]: t.set_index("family") for h, t in tables if "family" in t}

    def csv(self, name):
        """A CSV of ``results/`` (``'thread_scaling_16_cores.csv'``...)."""
        return _read_csv(self.path(name))


def api_span(results, api, peer, threads):
    """The range of ``api``'s clean step-time ratios to ``peer`` over the summary's MLPs.

    Examples
    --------
    >>> phrase = api_span(Results("."), "ort whole-training", "torch eager", 2)
    >>> phrase.endswith(("faster", "slower", "same"))
    True
    """
    query = "api == @api and peer == @peer and threads == @threads and caveat == '' and not shared"
    rows = results.answer.query(query)
    return span_phrase(rows.ratio)


def ortmodule_shares(results):
    """``'6% to 69%'``: the share of ``OrtTorchModule``'s step in onnxruntime's passes, its rows.

    Examples
    --------
    >>> ortmodule_shares(Results(".")).endswith("%")
    True
    """
    rows = results.summary[results.summary.framework == "ort torch module"]
    shares = rows.note.str.extract(r"passes (\d+)% of the step")[0].dropna().astype(int)
    return value_range(shares, "{}%")


def target(results, name, column="measured"):
    """A column of ``results/step_targets.csv`` for one target (``'0.16x'``, ``'5.8 ms'``).

    Examples
    --------
    >>> target(Results("."), "refit set-up, ort forward-backward").endswith(" ms")
    True
    """
    return str(results.targets.loc[name, column])


def target_phrase(results, name):
    """``'1.8x slower'``: a zoo target's measured ratio to torch eager, as a phrase.

    Examples
    --------
    >>> phrase = target_phrase(Results("."), "zoo resnet_large, faster API vs torch")
    >>> phrase.endswith(("faster", "slower", "same"))
    True
    """
    return speed_phrase(float(target(results, name).rstrip("x")))


def scaling_value(results, csv_name, size, threads, framework, column="ms_per_step", decimals=1):
    """One value of a thread-scaling CSV, with ``decimals`` decimals.

    Examples
    --------
    >>> value = scaling_value(Results("."), "thread_scaling.csv", "500-500-1@1000", 2,
    ...                       "torch eager")
    >>> float(value) > 0
    True
    """
    frame = results.csv(csv_name)
    row = frame[
        (frame["size"] == size) & (frame.threads == threads) & (frame.framework == framework)
    ]
    return f"{float(row[column].iloc[0]):.{decimals}f}"


def scaling_span(results, csv_name, size, framework):
    """The range of ``framework``'s ratio to torch eager over the thread counts of a scaling CSV.

    Examples
    --------
    >>> scaling_span(Results("."), "thread_scaling.csv", "100-50-1@100", "ort whole-training")[-6:]
    'faster'
    """
    frame = results.csv(csv_name)
    return span_phrase(
        frame[(frame["size"] == size) & (frame.framework == framework)].ratio_to_torch
    )


def torch_ahead(results, csv_name, size, framework):
    """``'at 1, 2, 4, 8 and 16 threads'``: where torch eager's step is faster than ``framework``'s.

    Examples
    --------
    >>> where = torch_ahead(Results("."), "thread_scaling_16_cores.csv", "500-500-1@1000",
    ...                     "ort whole-training")
    >>> where[:3]
    'at '
    """
    frame = results.csv(csv_name)
    rows = frame[(frame["size"] == size) & (frame.framework == framework)]
    counts = [str(t) for t, r in zip(rows.threads, rows.ratio_to_torch) if verdict(r) == "slower"]
    if not counts:
        return "at no thread count"
    if len(counts) == len(rows):
        return f"at every thread count, {counts[0]} to {counts[-1]}"
    listed = counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " and " + counts[-1]
    return f"at {listed} thread" + ("s" if counts != ["1"] else "")


def bound_span(results, framework):
    """The range of ``framework``'s ``ratio_to_ort_bound`` in ``reference/details_scaling.csv``.

    Examples
    --------
    >>> bound_span(Results("."), "ort whole-training").count("x")
    2
    """
    frame = results.csv("reference/details_scaling.csv")
    ratios = frame[frame.framework == framework].ratio_to_ort_bound
    return value_range(ratios, "{:.2f}x")


def sweep_fact(results, what):
    """A fact of the reference sweep's records: ``'runs'`` (55), ``'minutes'`` or ``'dates'``.

    ``minutes`` sums the records' ``duration_s``; ``dates`` spans the days they finished.

    Examples
    --------
    >>> int(sweep_fact(Results("."), "runs")) > 0
    True
    """
    records = []
    for path in sorted(glob.glob(results.path("reference/records/*.json"))):
        with open(path, encoding="utf-8") as f:
            records.append(json.load(f))
    days = sorted({r["finished"][:10] for r in records})
    facts = {
        "runs": str(len(records)),
        "minutes": f"{sum(r['duration_s'] for r in records) / 60:.0f}",
        "dates": value_range(days, "{}"),
    }
    return facts[what]


def suite_figure(results, peer, threads):
    """The summary's suite line for ``peer``: geometric mean, and how many configurations won.

    Examples
    --------
    >>> suite_figure(Results("."), "torch eager", 2).split(" (")[0].endswith(("faster", "slower"))
    True
    """
    table = suite_table(suite_ratios(results.summary))
    row = table[(table.peer == peer) & (table.threads == threads)].iloc[0]
    return (
        f"{row['geometric mean']} (geometric mean; it wins {row['onnxruntime wins']} of "
        f"{row['configurations']} configurations)"
    )


def accuracy_figure(results, task):
    """The faster onnxruntime API's time to ``task``'s held-out target against torch eager's.

    Examples
    --------
    >>> accuracy_figure(Results("."), "digits CNN").endswith(("faster", "slower", "same"))
    True
    """
    table = target_table(results.csv("time_to_accuracy.csv"))
    rows = table[(table.task == task) & table.framework.isin(ORT_APIS)]
    return speed_phrase(rows.ratio_to_torch.min())


def memory_figure(results):
    """The range over the zoo of onnxruntime's peak memory over torch eager's (zoo_costs.csv), in
    words: ``'1.4x to 2.1x more'``, ``'1.2x less'``, or ``'from 0.9x to 1.4x'`` of torch's when
    the zoo's models go both ways.

    Examples
    --------
    >>> memory_figure(Results(".")).endswith(("more", "less")) or "from" in memory_figure(
    ...     Results("."))
    True
    """
    ratios = compared(results.csv("zoo_costs.csv")).ratio
    if (ratios >= 1).all():
        return f"{value_range(ratios, '{:.1f}x')} more"
    if (ratios < 1).all():
        return f"{value_range(1 / ratios, '{:.1f}x')} less"
    return f"from {value_range(ratios, '{:.1f}x')} of torch's"


def lowering_ratio(results, op, case=None, column="ratio"):
    """The time of an operator's standard-ONNX lowering over its contrib kernel's, e.g. ``'1.15x'``.

    ``case`` picks a row of ``lowering_costs_conv.csv`` (convolution, pooling and normalization
    gradients, the lowering's own choice of formulation); without it the row of
    ``lowering_costs.csv`` whose operator is ``op``. ``column='ratio_131'``: the lowering run by
    onnxruntime 1.31.1, against 1.19.2's kernel.

    Examples
    --------
    >>> lowering_ratio(Results("."), "Scale").endswith("x")
    True
    """
    if case is None:
        frame = _read_csv(results.path("reference/lowering_costs.csv"))
        row = frame[frame.op == op].iloc[0]
    else:
        frame = _read_csv(results.path("reference/lowering_costs_conv.csv"))
        chosen = frame[(frame.op == op) & (frame.case == case) & frame.chosen]
        row = (
            chosen[chosen.formulation.str.startswith("all")].iloc[0]
            if len(chosen) > 1
            else (chosen.iloc[0])
        )
    return f"{float(row[column]):.2f}x"


def seeded_dropout_cost(results):
    """The step time with masks drawn from ``random_state`` over onnxruntime's own ``Dropout``,
    as a range over ``results/seeded_dropout.csv``'s cases whose timing is not noisy, e.g.
    ``'0.91x to 0.95x'``.

    Examples
    --------
    >>> seeded_dropout_cost(Results(".")).endswith("x")
    True
    """
    frame = _read_csv(results.path("seeded_dropout.csv"))
    ratios = frame[(frame.part == "cost") & (frame.caveat == "")].ratio
    return f"{ratios.min():.2f}x to {ratios.max():.2f}x"


def seeded_dropout_thread_difference(results):
    """The largest difference of a trained weight between thread counts (the fits of
    ``results/seeded_dropout.csv``), e.g. ``'1.5e-08'``.

    Examples
    --------
    >>> float(seeded_dropout_thread_difference(Results("."))) >= 0
    True
    """
    frame = _read_csv(results.path("seeded_dropout.csv"))
    threads = frame[(frame.part == "threads") & (frame.threads.astype(str) != "2 again")]
    return f"{threads.max_weight_difference.max():.2g}"


def portable_mlp(results):
    """The step model's epoch loop on the MLP 100-50-1 against the whole-training API's step,
    ``'1.7x slower (noisy)'`` (``portable_speed.csv``, the summary's maintained-runtime section).

    Examples
    --------
    >>> portable_mlp(Results(".")).split(" (")[0].endswith(("faster", "slower", "same"))
    True
    """
    speed = portable.section_rows(results.csv(portable.PORTABLE_SPEED_CSV))
    table = portable.ratios(speed)
    case = table[table.reference == fw.ORT_WHOLE].case.iloc[0]
    ratio, noisy = portable.ratio_of(table, case, fw.PORTABLE_EPOCH_LOOP)
    return speed_phrase(ratio) + (" (noisy)" if noisy else "")
