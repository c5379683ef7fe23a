"""Figures the READMEs and notebooks quote, computed from the committed results, never typed by
hand.

A document marks each figure it quotes with its name, invisibly (an HTML
comment renders as nothing on GitHub, in Jupyter and on the site)::

    the ResNet (<!-- fig: target.zoo.resnet_large -->1.75x<!-- /fig -->)

:data:`FIGURES` computes each name's text from a committed results file
(:mod:`benchmarks.figures.figure_sources`). ``python -m benchmarks.figures.quoted_figures``
rewrites every marked figure of :data:`DOCUMENTS` after the results change;
``--check`` rewrites nothing and exits 1 listing each figure that differs.
``tests/test_quoted_figures.py`` runs the check, and fails on a
measured-looking number left unmarked outside :data:`NOT_MEASURED`.
"""

import argparse
import glob
import json
import os
import re
import sys

from benchmarks.figures import figure_sources as src
from benchmarks.figures.figure_names import FIGURES
from benchmarks.sweep.records import atomic_write_text

#: A marked figure: its name, then the text quoted, on one line.
MARK = re.compile(r"<!-- fig: (?P<name>[\w.-]+) -->(?P<text>.*?)<!-- /fig -->")
#: A number that reads as a measurement: a ratio, a percentage, a time, a size, "N times".
MEASURED = re.compile(r"\d+(?:\.\d+)?(?:x\b|%|\s?(?:ms|µs|s|MB|GB)\b|(?<!Section \d) times\b)")
_CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.DOTALL | re.MULTILINE)
#: The documents whose figures are marked, relative to the checkout (globs).
DOCUMENTS = (
    "README.md",
    "results/README.md",
    "benchmarks/README.md",
    "docs/guide/*.md",
    "notebooks/*.ipynb",
    "benchmarks/*.ipynb",
)
#: Measured-looking numbers of the documents' prose that are not measurements: the text around
#: each, and why it is not a figure to compute.
NOT_MEASURED = {
    "about 2 GB of disk": "the environment's size on disk, an installation fact",
    "its libraries, 4.7 GB": "the CUDA build of torch on disk, an installation fact",
    "2.1 GB": "the CUDA 11.8 pip libraries on disk, an installation fact",
    "| < 5 ms |": "a goal of the targets table",
    "leave 0.2 s idle": "a setting of the benchmarks",
    "within 10%": "the benchmarks' threshold for comparable losses",
    "more than 10%": "the same threshold",
    "50 ms": "a setting of the benchmark notebooks: the calibrated length of a timed run",
    "within 1% of": "a tolerance the notebook checks",
    "(0.1% here)": "a tolerance the notebook checks",
    "accuracy is already 100%": "what the notebook's own run prints, not a benchmark result",
    "shrinks by 30% an epoch": "the notebook's learning-rate decay, a setting",
    "over 2 GB": "protobuf's limit on a model's size",
    "95% held-out accuracy": "the target of the time-to-accuracy study, a setting",
}


def prose(path, text):
    """A document's prose: a notebook's markdown cells, without code, code spans or marked figures.

    Examples
    --------
    >>> prose("a.md", "1.5x `2x` <!-- fig: a -->3x<!-- /fig -->\\n```\\n4x\\n```")
    '1.5x  \\n'
    """
    if path.endswith(".ipynb"):
        cells = json.loads(text)["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return MARK.sub("", _CODE.sub("", text))


def unmarked_numbers(root):
    """``(path, number, line)`` for each measured-looking number of the documents' prose left
    unmarked.

    Numbers whose line holds a phrase of :data:`NOT_MEASURED` around them are not counted.

    Examples
    --------
    >>> isinstance(unmarked_numbers("."), list)
    True
    """
    found = []
    for path in document_paths(root):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = prose(path, f.read())
        for line in text.splitlines():
            for number in MEASURED.findall(line):
                if not any(number in phrase and phrase in line for phrase in NOT_MEASURED):
                    found.append((path, number, line.strip()))
    return found


def compute_all(root):
    """Every figure of :data:`FIGURES`, by name, computed from the results under ``root``.

    Examples
    --------
    >>> compute_all(".")["target.zoo.mobilenet_large.phrase"].endswith(("faster", "slower", "same"))
    True
    """
    results = src.Results(root)
    return {name: str(compute(results)) for name, compute in FIGURES.items()}


def document_paths(root):
    """The documents of :data:`DOCUMENTS` under ``root``, relative to it, sorted.

    Examples
    --------
    >>> document_paths(".")[:1]
    ['README.md']
    """
    paths = set()
    for pattern in DOCUMENTS:
        paths.update(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
    return sorted(paths)


def _encode(path, text):
    """``text`` as it is written in ``path``: inside a JSON string for a notebook."""
    return json.dumps(text, ensure_ascii=False)[1:-1] if path.endswith(".ipynb") else text


def marked_figures(path, text):
    """``(line, name, quoted)`` for each marked figure of a document's text.

    Examples
    --------
    >>> marked_figures("a.md", "x\\nis <!-- fig: a.b -->1.8x slower<!-- /fig -->.")
    [(2, 'a.b', '1.8x slower')]
    """
    return [(text.count("\n", 0, m.start()) + 1, m["name"], m["text"]) for m in MARK.finditer(text)]


def refresh_text(path, text, figures):
    """``(new text, differences)``: ``text`` with each marked figure set to its value in
    ``figures``.

    Each difference is ``(line, name, quoted, computed)``; a name missing from
    ``figures`` is one, computed ``None``, and stays as quoted.

    Examples
    --------
    >>> refresh_text("a.md", "<!-- fig: a -->1x<!-- /fig -->", {"a": "2x"})
    ('<!-- fig: a -->2x<!-- /fig -->', [(1, 'a', '1x', '2x')])
    """
    differences = []

    def replace(match):
        computed = figures.get(match["name"])
        value = None if computed is None else _encode(path, computed)
        if value != match["text"]:
            line = text.count("\n", 0, match.start()) + 1
            differences.append((line, match["name"], match["text"], computed))
        return match[0] if value is None else f"<!-- fig: {match['name']} -->{value}<!-- /fig -->"

    return MARK.sub(replace, text), differences


def refresh(root, check=False):
    """Rewrite every marked figure of the documents under ``root``; ``(path, line, name, quoted,
    computed)``.

    With ``check``, nothing is written: the differences are only returned.

    Examples
    --------
    >>> refresh(".", check=True)
    []
    """
    figures = compute_all(root)
    found = []
    for path in document_paths(root):
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        new, differences = refresh_text(path, text, figures)
        found += [(path, *d) for d in differences]
        if new != text and not check:
            atomic_write_text(full, new)
    return found


def main(argv=None):
    """``python -m benchmarks.figures.quoted_figures [--check] [--root DIR]``; exit status 1 on a
    difference.

    Examples
    --------
    >>> main(["--check"])
    0 quoted figure(s) differ from the results
    0
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on a stale figure"
    )
    parser.add_argument("--root", default=".", help="the checkout (default: the current folder)")
    args = parser.parse_args(argv)
    differences = refresh(args.root, check=args.check)
    for path, line, name, quoted, computed in differences:
        print(f"{path}:{line}: {name}: quoted {quoted!r}, computed {computed!r}")
    verb = "differ from the results" if args.check else "rewritten from the results"
    print(f"{len(differences)} quoted figure(s) {verb}")
    return 1 if differences and (args.check or any(d[4] is None for d in differences)) else 0


if __name__ == "__main__":
    sys.exit(main())
