"""What a user reads first: a README short enough to read in five minutes that leads to the user
guide, and documents that speak of the software and the machines its figures come from, never of
how the project is made."""

import glob
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
GUIDE = sorted(glob.glob(os.path.join(ROOT, "docs", "guide", "*.md")))
#: The README's limit, in words, HTML comments excluded.
MAX_README_WORDS = 1500

#: Words that speak of how the project is made rather than of the software: which machines it is
#: developed on and for how long, what a call to one may carry, notes to the next developer,
#: audit dates. Each with what to write instead.
OFF_VOICE = {
    r"\blent\b": "name the machine as a reader would: 'a 16-core Intel Xeon'",
    r"\bproject(?:'s)? (?:own )?machines?\b": "'the reference machine: a 2-core AMD EPYC'",
    r"\bsessions? (?:borrow|are lent)": "say what was and was not run, not who ran it",
    r"\b\d+ MiB (?:a|per) call\b": "an upload limit is not the software's",
    r"\bunder load\b": "say the figure is noisy",
    r"\ban earlier README\b": "'the former import path'",
    r"\bno such run is kept\b": "keep the run, or do not mention it",
    r"\bplease report\b": "say where bug reports go, or nothing",
    r"\b(?:checked|measured|read) on 20\d\d-\d\d-\d\d": "no audit dates",
    r"\(20\d\d-\d\d-\d\d\)": "no audit dates",
    r"\bmaintainers refresh\b": "say how to refresh it",
}


def _words(text):
    return len(re.sub(r"<!--.*?-->", " ", text, flags=re.S).split())


def _read(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".ipynb"):
        cells = json.loads(text)["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return text


def _user_documents():
    patterns = [
        "README.md",
        "docs/*.md",
        "docs/guide/*.md",
        "notebooks/*.ipynb",
        "benchmarks/README.md",
        "results/README.md",
        "results/*.md",
        "results/reference/*.md",
    ]
    found = sorted({p for pattern in patterns for p in glob.glob(os.path.join(ROOT, pattern))})
    assert len(found) > 30, "the documents were not found"
    return found


def test_the_readme_reads_in_five_minutes():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert _words(text) <= MAX_README_WORDS, (
        f"README.md has {_words(text)} words, more than {MAX_README_WORDS}: move a section to "
        "a page of docs/guide/ and link it"
    )
    first = "\n".join(text.splitlines()[:60])
    assert "make lab" in first and "01_linear_regression_whole_training" in first, (
        "the README's first 60 lines must show how to install and open the first notebook"
    )


def test_the_readme_links_every_guide_page_and_each_link_lands():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    linked = set(re.findall(r"\]\((docs/guide/[\w-]+\.md)\)", text))
    pages = {os.path.relpath(p, ROOT) for p in GUIDE}
    assert len(pages) >= 10, "the user guide has lost its pages"
    assert linked - pages == set(), "the README links guide pages that do not exist"
    assert pages - linked == set(), "the README does not link these guide pages"
    for target in re.findall(r"\]\(((?!https?://|#)[^)\s]+)\)", text):
        assert os.path.exists(os.path.join(ROOT, target.split("#")[0])), target


def test_every_guide_page_is_in_the_sites_sidebar():
    with open(os.path.join(ROOT, "docs", "index.md"), encoding="utf-8") as f:
        index = f.read()
    for page in GUIDE:
        name = os.path.splitext(os.path.basename(page))[0]
        assert f"<guide/{name}>" in index, f"docs/index.md's toctree lacks guide/{name}"


@pytest.mark.parametrize("pattern", sorted(OFF_VOICE))
def test_documents_speak_of_the_software_only(pattern):
    found = [
        f"{os.path.relpath(path, ROOT)}: {match.group(0)!r}"
        for path in _user_documents()
        for match in re.finditer(pattern, _read(path), re.I)
    ]
    assert found == [], f"{OFF_VOICE[pattern]}:\n" + "\n".join(found)


def test_an_off_voice_phrase_is_found():
    text = "Measured on a lent 16-core Xeon (2026-11-24); please report what it prints."
    hits = [p for p in OFF_VOICE if re.search(p, text, re.I)]
    assert len(hits) == 3, hits


def test_the_license_is_mit_and_named_in_the_readme():
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
        assert f.readline().strip() == "MIT License"
    with open(README, encoding="utf-8") as f:
        assert "](LICENSE)" in f.read()
