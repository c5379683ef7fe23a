"""Markdown for the profiling scripts: tables, and the sections of ``results/kernel_survey.md``.

The kernel survey and the A/B scripts of this folder each write their own
section of the same file (:func:`write_section`), so that running one
leaves what the others measured.
"""

import os

from benchmarks.sweep.records import (
    atomic_write_text,
    machine_info,
    machine_lines,
    package_versions,
)

#: The comments around the machine block atop the page.
MACHINE = ("<!-- machine: begin -->", "<!-- machine: end -->")


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


def machine_block(lines):
    """The machine block atop ``results/kernel_survey.md``: the machine that wrote its last section.

    Examples
    --------
    >>> print(machine_block(["- **Processor**: AMD EPYC"]))
    <!-- machine: begin -->
    The last section written was measured on (each section says its own load):
    <BLANKLINE>
    - **Processor**: AMD EPYC
    <!-- machine: end -->
    """
    intro = "The last section written was measured on (each section says its own load):"
    return "\n".join([MACHINE[0], intro, "", *lines, MACHINE[1]])


def write_section(path, name, text, title="# Kernel survey", machine=None):
    """Replace the section ``name`` of the markdown file ``path`` by ``text``; add it when missing.

    The survey and the A/B scripts of this folder each write their own
    section of ``results/kernel_survey.md``, between two comments, and
    leave the others alone. Under the title, the machine in full
    (:func:`machine_block`): ``machine``, its lines, default this
    machine's (:func:`benchmarks.sweep.records.machine_lines`).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "survey.md")
    >>> write_section(path, "a", "first", machine=["- **Processor**: X"])
    >>> write_section(path, "b", "second", machine=["- **Processor**: Y"])
    >>> write_section(path, "a", "again", machine=["- **Processor**: Z"])
    >>> print(open(path).read())
    # Kernel survey
    <BLANKLINE>
    <!-- machine: begin -->
    The last section written was measured on (each section says its own load):
    <BLANKLINE>
    - **Processor**: Z
    <!-- machine: end -->
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
    if machine is None:
        machine = machine_lines(machine_info(), package_versions())
    new = title
    if os.path.exists(path):
        with open(path, encoding="utf-8") as stream:
            new = stream.read()
    for section, body in ((name, text.strip()), ("machine", None)):
        begin, end = f"<!-- {section}: begin -->", f"<!-- {section}: end -->"
        block = machine_block(machine) if body is None else f"{begin}\n{body}\n{end}"
        if begin in new and end in new:
            new = new[: new.index(begin)] + block + new[new.index(end) + len(end) :]
        elif body is None:  # the machine, right under the title
            head, _, rest = new.partition("\n")
            new = f"{head}\n\n{block}\n\n{rest.lstrip()}"
        else:
            new = f"{new.rstrip()}\n\n{block}\n"
    atomic_write_text(path, new)
