"""Markdown for the profiling scripts: tables, and the sections of ``results/kernel_survey.md``.

The kernel survey and the A/B scripts of this folder each write their own
section of the same file (:func:`write_section`), so that running one
leaves what the others measured.
"""
import os

from benchmarks.records import atomic_write_text


def markdown(rows, columns):
    """A markdown table of ``rows`` (dicts) with the given ``columns``.

    Examples
    --------
    >>> print(markdown([{"a": 1, "b": 2}], ["a", "b"]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_section(path, name, text, title="# Kernel survey"):
    """Replace the section ``name`` of the markdown file ``path`` by ``text``; add it when missing.

    The survey and the A/B scripts of this folder each write their own
    section of ``results/kernel_survey.md``, between two comments, and
    leave the others alone.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "survey.md")
    >>> write_section(path, "a", "first")
    >>> write_section(path, "b", "second")
    >>> write_section(path, "a", "again")
    >>> print(open(path).read())
    # Kernel survey
    <BLANKLINE>
    <!-- a: begin -->
    again
    <!-- a: end -->
    <BLANKLINE>
    <!-- b: begin -->
    second
    <!-- b: end -->
    <BLANKLINE>
    """
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    block = f"{begin}\n{text.strip()}\n{end}"
    old = title
    if os.path.exists(path):
        with open(path, encoding="utf-8") as stream:
            old = stream.read()
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = f"{old.rstrip()}\n\n{block}\n"
    atomic_write_text(path, new)
