"""The landing page's headline: the ratio sentence of the reference benchmark's summary.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``): the
marker ``<!-- headline -->`` becomes the sentence of ``results/reference/summary.md``
on the two APIs against torch eager, with the most threads it has.
"""

import os
import re

from sphinx.util import logging

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOGGER = logging.getLogger(__name__)

SUMMARY = os.path.join(ROOT, "results", "reference", "summary.md")
_SECTION = re.compile(
    r"^## (?P<machine>.+?), (?P<cores>\d+) cores?, (?P<threads>\d+) threads?$", re.M
)


def _api_answer(text, api):
    """``(span, faster, total, slower)`` of the summary's sentence on ``api`` against torch eager.

    ``slower`` is ``'1.1x more for MLP 10-500-1, batch 1000'`` or ``''``.
    """
    match = re.search(
        rf"The {api} API against torch(?: eager)?: faster in (?P<faster>\d+) of (?P<total>\d+) "
        r"configurations "
        r"\((?P<span>[\d.]+x(?: to [\d.]+x)?)\)(?:, slower in \d+ \((?P<slow>[\d.]+x(?: to "
        r"[\d.]+x)?): "
        r"(?P<where>[^)]*)\))?",
        text,
    )
    if not match:
        return None
    slower = f"{match['slow']} more for {match['where']}" if match["slow"] else ""
    return match["span"], int(match["faster"]), int(match["total"]), slower


def _answer_phrase(answer, tail):
    span, faster, total, slower = answer
    where = f" in {faster} of {total} configurations" if faster < total else ""
    return f"**{span} less{tail}{where}" + (f" ({slower})" if slower else "")


def headline():
    """The ratio sentence of ``results/reference/summary.md``, with the most threads it has.

    Where a configuration is slower, the sentence says so: the headline is the
    summary's answer, not its best part.
    """
    with open(SUMMARY, encoding="utf-8") as f:
        text = f.read()
    sections = list(_SECTION.finditer(text))
    if not sections:
        raise ValueError("no '## <machine>, N cores, T threads' section")
    best = max(sections, key=lambda m: int(m.group("threads")))
    body = text[best.end() :]
    end_of_body = re.search(r"^## ", body, re.M)  # the next section, of this machine or another
    body = body[: end_of_body.start()] if end_of_body else body
    whole, forward_backward = (
        _api_answer(body, "whole-training"),
        _api_answer(body, "forward/backward"),
    )
    if not whole or not forward_backward:
        raise ValueError(
            f"no 'faster in N of M configurations (A to B)' sentence under '{best.group(0)}'"
        )
    models = re.findall(r"^\| MLP ([\d-]+), batch", body, re.M)
    sizes = sorted(set(models), key=lambda m: [int(x) for x in m.split("-")])
    which = f"MLPs ({sizes[0]} to {sizes[-1]})" if len(sizes) > 1 else "MLPs"
    threads = int(best.group("threads"))
    return (
        f"On the project's {best.group('cores')}-core machine ({best.group('machine')}, {threads} "
        f"thread{'s' if threads > 1 else ''}), a training step of the benchmark's {which} takes "
        f"{_answer_phrase(whole, ' time** with the whole-training API than with torch eager')}, "
        f"and {_answer_phrase(forward_backward, '** with the forward/backward API')} "
        f"({{doc}}`benchmark results <benchmarks>`)."
    )


def _fill_headline(app, docname, source):
    text = source[0]
    if "<!-- headline -->" in text:
        app.env.note_dependency(SUMMARY)  # a new sweep rebuilds the page
        try:
            sentence = headline()
        except (OSError, ValueError) as exc:
            LOGGER.warning(
                "the landing page's headline: %s in %s (docs/_ext/headline.py reads it)",
                exc,
                os.path.relpath(SUMMARY, ROOT),
                location=docname,
            )
            sentence = ""
        source[0] = text.replace("<!-- headline -->", sentence)


def setup(app):
    app.connect("source-read", _fill_headline)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
