"""The sweep summary answers first, never mixes machines, and stays short."""

import json
import os
import re

import pytest

from benchmarks.report import aggregate
from benchmarks.report.ratios import speed_phrase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(folder, run, machine, rows, threads=2, shared="", busy=""):
    os.makedirs(os.path.join(folder, "records"), exist_ok=True)
    record = {
        "notebook": "bench_torch",
        "parameters": {},
        "rows": rows,
        "versions": {"onnxruntime-training-cpu": "1.19.2", "torch": "2.13.0"},
        "machine": {"cpu": machine, "logical_cores": 2, "torch_threads": threads},
        "shared": shared,
        "conditions": {"busy": busy},
    }
    with open(os.path.join(folder, "records", f"{run}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


def _texts(folder):
    """The summary's text and the details' answer tables (each configuration's ratios)."""
    df = aggregate.load_rows(str(folder))
    return aggregate.summary_text(df, str(folder), []), "\n".join(aggregate.answer_details(df))


def _torch_rows(hidden, times, threads=2):
    base = dict(
        benchmark="torch",
        model="mlp",
        optimizer="sgd",
        n_features=10,
        hidden=hidden,
        batch_size=100,
        threads=threads,
    )
    return [{**base, "framework": f, "time_per_update_s": t} for f, t in times.items()]


def test_speed_phrases():
    assert speed_phrase(0.25) == "4.0x faster"
    assert speed_phrase(2.0) == "2.0x slower"
    assert speed_phrase(0.98) == "same"


def test_answer_never_mixes_machines(tmp_path):
    times = {"torch eager": 1.0, "ort whole-training": 0.5, "ort forward-backward": 2.0}
    _record(tmp_path, "torch-a", "fast machine", _torch_rows(50, times))
    slow = {k: v * 3 for k, v in times.items()}
    slow["torch eager"] = 1.0
    _record(tmp_path, "torch-b", "slow machine", _torch_rows(50, slow))
    ratios = aggregate.answer_ratios(aggregate.load_rows(str(tmp_path))).set_index(
        ["machine", "api"]
    )
    assert ratios.loc[("fast machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(
        0.5
    )
    assert ratios.loc[("slow machine, 2 cores", "ort whole-training"), "ratio"] == pytest.approx(
        1.5
    )
    text, tables = _texts(tmp_path)
    assert text.index("## fast machine, 2 cores, 2 threads") < text.index(
        "## slow machine, 2 cores, 2 threads"
    )
    assert text.index("Measured on fast machine, 2 cores:") < text.index("Measured on slow machine")
    assert tables.index("### fast machine, 2 cores, 2 threads") < tables.index("### slow machine")
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.0x faster | 2.0x slower |" in tables
    assert "| MLP 10-50-1, batch 100 | torch eager | 1.5x slower | 6.0x slower |" in tables


def test_summary_of_selected_runs_only(tmp_path):
    _record(
        tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    _record(
        tmp_path, "torch-b", "m", _torch_rows(500, {"torch eager": 1.0, "ort whole-training": 3.0})
    )
    paths = aggregate.summarize(str(tmp_path), run_ids=["torch-a"])
    text = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "MLP 10-50-1" in text and "MLP 10-500-1" not in text
    assert {os.path.basename(p) for p in paths} >= {
        "summary.md",
        "details.md",
        "summary.csv",
        "torch.png",
    }


def test_empty_folder_says_so(tmp_path):
    aggregate.summarize(str(tmp_path))
    assert "No complete run" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_targets_come_from_step_targets_with_their_configuration(tmp_path):
    _record(
        tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    (tmp_path / "step_targets.csv").write_text(
        "target,configuration,measured,goal,verdict\nsmall MLP,100-50-1@100,0.25x,<= 0.3x,met\n",
        encoding="utf-8",
    )
    aggregate.summarize(str(tmp_path))
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    # in the summary's one convention: never "0.25x" for a time ratio
    assert "## Targets" in text
    assert "| small MLP | 100-50-1@100 | 4.0x faster | at least 3.3x faster | met |" in text


def test_every_file_the_pages_mention_is_a_link_to_a_file_that_exists(tmp_path):
    """summary.md and details.md link the files they name (the docs site turns them into pages or
    downloads)."""
    results = tmp_path / "reference"
    _record(
        results, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    (tmp_path / "step_targets.csv").write_text(
        "target,configuration,measured,goal,verdict\nsmall MLP,100-50-1@100,0.25x,<= 0.3x,met\n",
        encoding="utf-8",
    )
    aggregate.summarize(str(results))
    for page in ("summary.md", "details.md"):
        text = (results / page).read_text(encoding="utf-8")
        assert "beside this file" not in text
        links = re.findall(r"\]\(([^)]+)\)", text)
        assert links, f"{page} links nothing"
        for link in links:
            if link.startswith("#"):  # a section of the page itself
                assert f"## {link[1:].capitalize()}" in text, f"{page} links {link}: not there"
                continue
            assert (results / link).exists(), f"{page} links {link}, which is not there"
        assert not re.search(r"`[^`]*\.(md|csv)`", text), f"{page} names a file without linking it"


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "results", "reference", "records")),
    reason="the committed reference sweep is not in this checkout",
)
def test_committed_reference_summary_reads_in_five_minutes():
    """At most 1,500 words, short paragraphs, the machine and the peers first, one convention."""
    from benchmarks.report.summary_terms import GLOSSARY

    with open(os.path.join(ROOT, "results", "reference", "summary.md"), encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    words = [token for token in text.split() if re.search(r"\w", token)]  # not a table's pipes
    assert len(words) <= 1500
    prose = [line for line in lines if not line.startswith("|")]
    assert max(len(line) for line in prose) <= 400, "a paragraph is over about 400 characters"
    assert sum(line.startswith("|") for line in lines) <= 60
    assert text.startswith("# Is onnxruntime training faster")
    sections = text.split("\n## ")
    assert "- **Processor**: " in sections[0]
    assert "- **Versions**: onnxruntime-training 1.19.2" in sections[0]
    assert sections[1].startswith("The whole suite, one line per peer\n\nIs onnxruntime faster?")
    assert "| peer | threads | clean | wins | geometric mean | range | not clean |" in sections[1]
    # one convention: a ratio is "1.7x faster" or "2.2x slower", never a bare time ratio as 0.16x
    rows = [line.strip("|").split("|") for line in lines if line.startswith("|")]
    cells = [cell.strip() for row in rows for cell in row]
    assert not [c for c in cells if re.fullmatch(r"[<>=\s]*[\d.]+(-[\d.]+)?x", c)]
    assert not re.search(r"\b0\.\d+x\b", text)
    assert sections[-1].startswith("Glossary")
    assert all(f"- **{term}**: " in sections[-1] for term in GLOSSARY)
    assert "ORTModule" in text and "| ORTModule |" not in text
    assert "/home/" not in text and ".venv" not in text and "/tmp/" not in text


def test_torch_module_row_has_its_column_and_sentence(tmp_path):
    """OrtTorchModule, the row ORTModule had, is answered against torch like the two APIs."""
    times = {
        "torch eager": 1.0,
        "ort whole-training": 0.5,
        "ort forward-backward": 0.8,
        "ort torch module": 1.3,
    }
    _record(tmp_path, "torch-a", "m", _torch_rows(50, times))
    _record(tmp_path, "torch-b", "m", _torch_rows(500, {**times, "ort torch module": 1.6}))
    text, tables = _texts(tmp_path)
    assert "| model, batch | against | whole-training | forward/backward | OrtTorchModule |" in (
        tables
    )
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.0x faster | 1.2x faster | 1.3x slower |" in (
        tables
    )
    assert (
        "OrtTorchModule against torch eager: slower in all 2 configurations (1.3x to 1.6x)." in text
    )


def test_a_tie_is_said_as_a_tie_not_as_faster_in_none(tmp_path):
    _record(
        tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort torch module": 1.01})
    )
    _record(
        tmp_path, "torch-b", "m", _torch_rows(500, {"torch eager": 1.0, "ort torch module": 1.5})
    )
    _record(
        tmp_path, "torch-c", "m", _torch_rows(100, {"torch eager": 1.0, "ort torch module": 1.4})
    )
    text = aggregate.summary_text(aggregate.load_rows(str(tmp_path)), str(tmp_path), [])
    assert (
        "OrtTorchModule against torch eager: slower in 2 of 3 configurations (1.4x to 1.5x), "
        "about the same in 1."
    ) in text
    assert "faster in 0" not in text


def _zoo_rows(model, family, n_weights, times, threads):
    base = dict(
        benchmark="your_model",
        model=f"benchmarks.example_models:{model}",
        family=family,
        optimizer="sgd",
        input_shape=[1, 28, 28],
        input_dtype="float32",
        n_weights=n_weights,
        batch_size=64,
        threads=threads,
    )
    return [{**base, "framework": f, "time_per_update_s": t} for f, t in times.items()]


def test_the_zoo_has_its_answer_and_table(tmp_path):
    """onnxruntime wins on the MLP, loses on the CNN, does not train the sequence model (its rows
    are in the details)."""
    cnn = {
        "torch eager": 1.0,
        "torch.compile": 0.8,
        "ort whole-training": 2.0,
        "ort forward-backward": 4.0,
    }
    mlp = {
        "torch eager": 1.0,
        "torch.compile": 1.0,
        "ort whole-training": 0.5,
        "ort forward-backward": 0.8,
    }
    for threads in (1, 2):
        for size, n_weights in (("small", 26000), ("large", 225000)):
            _record(
                tmp_path,
                f"zoo-cnn-{size}-{threads}",
                "m",
                _zoo_rows(f"image_cnn_{size}", "CNN on images", n_weights, cnn, threads),
                threads,
            )
        _record(
            tmp_path,
            f"zoo-mlp-{threads}",
            "m",
            _zoo_rows("batchnorm_mlp_large", "BatchNorm MLP", 400000, mlp, threads),
            threads,
        )
        untrainable = _zoo_rows(
            "sequence_conv_small", "1-D CNN on sequences", 2000, {"torch eager": 1.0}, threads
        )
        untrainable += [
            {
                **untrainable[0],
                "framework": f,
                "time_per_update_s": None,
                "error": "UntrainableModelError: Round",
            }
            for f in ("ort whole-training", "ort forward-backward")
        ]
        _record(tmp_path, f"zoo-seq-{threads}", "m", untrainable, threads)
    aggregate.summarize(str(tmp_path))
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    # the summary: how many models each way, then one table, a row per model (the faster API)
    zoo = text.split("## Model zoo: m, 2 cores\n\n")[1].split("## Glossary")[0]
    assert zoo.startswith(
        "Against torch eager, onnxruntime's faster API trains a step faster for "
        "1 of 3 models with a clean ratio, slower for 2; against torch.compile, "
        "faster for 1 of 3 models, slower for 2."
    )
    assert "| model | torch eager, 1 thread | torch eager, 2 threads |\n" in zoo  # compile: details
    assert "| CNN on images (small) | 2.0x slower | 2.0x slower |\n" in zoo
    assert "| BatchNorm MLP (large) | 2.0x faster | 2.0x faster |\n" in zoo
    untrained = "1-D CNN on sequences (small) (why: [details](details.md))."
    assert f"Not trained by onnxruntime: {untrained}" in zoo
    # the details: a family of two sizes named once when both agree; per torch run, sentence, table
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    eager = details.split("### Model zoo against torch eager: m, 2 cores\n\n")[1]
    compiled = details.split("### Model zoo against torch.compile: m, 2 cores\n\n")[1]
    assert eager.startswith(
        "Against torch eager, onnxruntime's faster API trains a step faster for: "
        "BatchNorm MLP (large); slower for: CNN on images.\n\n| model |"
    )
    assert compiled.startswith(
        "Against torch.compile, onnxruntime's faster API trains a step "
        "faster for: BatchNorm MLP (large); slower for: CNN on images."
        "\n\n| model |"
    )
    for table in (eager, compiled):
        assert "| model | weights | threads | whole-training | forward/backward |" in table
    assert "| CNN on images (small) | 26k | 2 | 2.0x slower | 4.0x slower |" in eager
    assert "| CNN on images (small) | 26k | 2 | 2.5x slower | 5.0x slower |" in compiled
    assert "| CNN on images (large) | 225k | 1 | 2.0x slower |" in eager
    assert "| BatchNorm MLP (large) | 400k | 1 | 2.0x faster | 1.2x faster |" in eager
    assert "| model | threads | framework | ms per step |" in details
    assert (
        "Every row: input [1, 28, 28] float32, optimizer sgd." in details
    )  # said once, above the table
    assert "not run: UntrainableModelError: Round" in details
    assert (
        max(line.count(" | ") for line in details.splitlines()) + 1 <= 8
    )  # columns a reader can scan
    assert "family" in (tmp_path / "summary.csv").read_text(encoding="utf-8").splitlines()[0]


def test_details_drop_a_caveat_column_no_row_needs(tmp_path):
    _record(
        tmp_path, "torch-a", "m", _torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "no caveat." in details and "caveat, or why not run" not in details
    _record(
        tmp_path,
        "torch-b",
        "m",
        _timed_rows(
            500, {"torch eager": 1.0, "ort whole-training": 0.5}, spreads={"torch eager": 3.1}
        ),
    )
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "caveat, or why not run" in details and "noisy: repeats spread 3.1x" in details


def test_a_zoo_run_where_only_torch_ran_has_no_ratio():
    import pandas as pd

    from benchmarks.report.zoo_summary import zoo_section

    df = pd.DataFrame(
        _zoo_rows("image_cnn_small", "CNN on images", 26000, {"torch eager": 1.0}, 2)
    ).assign(machine="m")
    assert zoo_section(df) == []
    df = pd.DataFrame(
        _zoo_rows(
            "image_cnn_small",
            "CNN on images",
            26000,
            {"torch eager": 1.0, "ort whole-training": 0.5},
            2,
        )
    ).assign(machine="m")
    assert "| CNN on images (small) | 2.0x faster |" in "\n".join(zoo_section(df))


def _timed_rows(hidden, times, spreads=None, threads=2):
    """Torch rows whose repeats spread as ``spreads`` says (1.0: all repeats equal)."""
    rows = _torch_rows(hidden, times, threads)
    for row in rows:
        spread = (spreads or {}).get(row["framework"], 1.0)
        row.update(
            time_min_s=row["time_per_update_s"], time_max_s=row["time_per_update_s"] * spread
        )
    return rows


def test_a_quiet_sweep_answers_without_caveats(tmp_path):
    _record(
        tmp_path, "torch-a", "m", _timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.25})
    )
    text, tables = _texts(tmp_path)
    assert (
        "The whole-training API against torch eager: faster in 1 of 1 configurations (4.0x)."
        in text
    )
    assert "| MLP 10-50-1, batch 100 | torch eager | 4.0x faster |" in tables
    answer = text.split("Ratios of time")[0]
    assert "noisy" not in answer and "shared" not in answer and "more left out" not in answer


def test_a_noisy_ratio_is_said_beside_the_number_and_left_out_of_the_answer(tmp_path):
    _record(
        tmp_path,
        "torch-a",
        "m",
        _timed_rows(
            50, {"torch eager": 17.0, "ort whole-training": 0.1}, spreads={"torch eager": 3.1}
        ),
    )
    _record(
        tmp_path, "torch-b", "m", _timed_rows(500, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    text, tables = _texts(tmp_path)
    noisy = "| MLP 10-50-1, batch 100 | torch eager | 170.0x faster (noisy) |"
    assert noisy in tables
    # the answer rests on the clean ratio only, and says one was left out
    assert (
        "The whole-training API against torch eager: faster in 1 of 1 configurations (2.0x); "
        "1 more left out as not clean."
    ) in text
    assert "170" not in text


def test_runs_that_shared_the_cores_are_said_first_and_kept_apart(tmp_path):
    shared = "2 runs at once, 2 threads each, on 2 cores: the runs shared the cores"
    _record(
        tmp_path,
        "torch-a",
        "m",
        _timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.01}),
        shared=shared,
    )
    _record(
        tmp_path, "torch-b", "m", _timed_rows(500, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    text, tables = _texts(tmp_path)
    first_lines = text.split("\n## ")[0]
    assert "**1 of 2 runs shared the machine's cores with other runs**" in first_lines
    clean, apart = tables.split("(runs that shared the cores: not findings)")
    assert "MLP 10-500-1" in clean and "MLP 10-50-1, batch 100" not in clean
    assert "100.0x faster (shared cores)" in apart
    assert "faster in 1 of 1 configurations (2.0x)" in text.split("(runs that shared the cores")[0]
    assert "100.0x" not in text  # a shared run's ratio is no finding: out of the suite's line too


def test_a_busy_machine_and_an_unmeasurable_time_are_said_in_words(tmp_path):
    rows = _timed_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    rows[1]["timing_note"] = (
        "set-up not measurable: its estimate was negative (the machine's noise was larger)"
    )
    _record(
        tmp_path,
        "torch-a",
        "m",
        rows,
        busy="load average 3.2 on 2 cores, this run used 2 thread(s)",
    )
    text, tables = _texts(tmp_path)
    assert "(set-up not measurable; busy machine)" in tables  # in short beside the number
    assert "no finding" in text
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(
        encoding="utf-8"
    )  # and in whole words in the details
    assert (
        "its estimate was negative" in details
        and "busy machine: load average 3.2 on 2 cores" in details
    )


def test_the_summary_names_torch_compile_and_its_compilation_apart(tmp_path):
    rows = _timed_rows(50, {"torch eager": 1.0, "torch.compile": 0.8, "ort whole-training": 0.4})
    rows[1]["compile_time_s"] = 12.5
    _record(tmp_path, "torch-a", "m", rows)
    text, tables = _texts(tmp_path)
    assert "| MLP 10-50-1, batch 100 | torch eager | 2.5x faster |" in tables
    assert "| MLP 10-50-1, batch 100 | torch.compile | 2.0x faster |" in tables
    assert tables.index("| torch eager | 2.5x") < tables.index("| torch.compile | 2.0x")
    assert "compiled for 12.5 to 12.5 s, outside its steps" in text
