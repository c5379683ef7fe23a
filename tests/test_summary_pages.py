"""The pages of a sweep's summary: the runs of the grid only, an empty folder said, the targets
with their configuration, every file linked, a short committed summary, a caveat column only when a
row needs it."""

import os
import re

import pytest
from bench_records import timed_rows, torch_rows, write_record

from benchmarks.report import aggregate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_summary_of_selected_runs_only(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    write_record(
        tmp_path, "torch-b", "m", torch_rows(500, {"torch eager": 1.0, "ort whole-training": 3.0})
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
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
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
    write_record(
        results, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
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
    """At most 1,700 words, short paragraphs, the machine and the peers first, one convention.

    1,500 words before the section on the backend onnx beside the training package, which takes
    about 170."""
    from benchmarks.report.summary_terms import GLOSSARY

    with open(os.path.join(ROOT, "results", "reference", "summary.md"), encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    words = [token for token in text.split() if re.search(r"\w", token)]  # not a table's pipes
    assert len(words) <= 1700
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


def test_details_drop_a_caveat_column_no_row_needs(tmp_path):
    write_record(
        tmp_path, "torch-a", "m", torch_rows(50, {"torch eager": 1.0, "ort whole-training": 0.5})
    )
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "no caveat." in details and "caveat, or why not run" not in details
    write_record(
        tmp_path,
        "torch-b",
        "m",
        timed_rows(
            500, {"torch eager": 1.0, "ort whole-training": 0.5}, spreads={"torch eager": 3.1}
        ),
    )
    aggregate.summarize(str(tmp_path))
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    assert "caveat, or why not run" in details and "noisy: repeats spread 3.1x" in details
