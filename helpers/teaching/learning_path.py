"""The README's learning path, written from the notebooks themselves so that it cannot go stale.

Each course notebook (``notebooks/NN_name.ipynb``) opens with a markdown cell that
starts with its title, ``# N. Title`` (``N`` the number of its file), and holds
three lines a reader sees too::

    - **Requires:** 01, 03
    - **Teaches:** one short sentence: what the notebook shows.
    - **API:** whole-training

``Requires`` lists the notebooks to read first, by number (``none`` for the first
ones); each must come earlier in the reading order; ``Teaches`` holds at most
:data:`MAX_TEACHES_WORDS` words (the notebook's own introduction says the rest).
A notebook that teaches onnxruntime-training 1.19.2's own API, and so runs only where that
package is installed, says so in a fourth line, which starts with :data:`NEEDS_TRAINING`::

    - **Needs:** onnxruntime-training 1.19.2 (...), and where to learn the same without it.

The others run on the maintained onnxruntime too (kernel ``ort-maintained``, the optimizers'
backend ``"onnx"``): :func:`maintained_notebooks` lists them, and
``python -m helpers.teaching.learning_path --maintained`` prints them for ``make test``, which
runs them on that kernel.
:func:`learning_path_table`
turns these cards into the README's table, which stands between the lines
``<!-- learning-path: start -->`` and ``<!-- learning-path: end -->``.
``python -m helpers.teaching.learning_path`` rewrites it; ``--check`` only says
whether it is up to date (``tests/test_learning_path.py`` runs it).
"""

import argparse
import glob
import json
import os
import re
import sys
from collections import namedtuple

from ..portable.atomic_files import write_atomic

#: The lines around the generated table in the README.
START, END = "<!-- learning-path: start -->", "<!-- learning-path: end -->"

#: The fields of a notebook's first cell.
FIELDS = ("Requires", "Teaches", "API")
#: The longest ``Teaches`` line, in words: the README's table stays one a reader scans.
MAX_TEACHES_WORDS = 16
#: How the ``Needs`` line of a notebook that runs only with the training package starts.
NEEDS_TRAINING = "onnxruntime-training 1.19.2"

_FIELD = re.compile(r"^\s*[-*]?\s*\*\*(Requires|Teaches|API|Needs):\*\*\s*(.*?)\s*$", re.M)
_TITLE = re.compile(r"^#\s+(\d+)\.\s+(.+?)\s*$", re.M)

#: What the learning path says of one notebook.
NotebookCard = namedtuple(
    "NotebookCard",
    ["number", "path", "title", "requires", "teaches", "api", "needs"],
    defaults=("",),
)
NotebookCard.__doc__ = """What the learning path says of one notebook: its number (from its file
name), its path, its title, the numbers of the notebooks it requires, what it teaches, the API
it uses, and its ``Needs`` line (empty when it runs on any onnxruntime).

Examples
--------
>>> NotebookCard(2, "notebooks/02_x.ipynb", "Step by step", (1,), "The loss.", "whole-training")
... # doctest: +NORMALIZE_WHITESPACE
NotebookCard(number=2, path='notebooks/02_x.ipynb', title='Step by step', requires=(1,),
             teaches='The loss.', api='whole-training', needs='')
"""


def read_card(path, root="."):
    """The :class:`NotebookCard` of one notebook, read from its first cell.

    Parameters
    ----------
    path : str
        The notebook, relative to ``root`` (``notebooks/01_name.ipynb``).
    root : str
        The repository.

    Raises
    ------
    ValueError
        When the first cell is not markdown, lacks the title or one of the lines
        of :data:`FIELDS`, has a ``Needs`` line that does not start with
        :data:`NEEDS_TRAINING`, or its title's number is not its file's; the message
        says what to write.

    Examples
    --------
    >>> import json, os, tempfile
    >>> cell = ["# 2. Step by step\\n", "\\n", "- **Requires:** 01\\n",
    ...         "- **Teaches:** The loss in ONNX.\\n", "- **API:** whole-training\\n"]
    >>> notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": cell}]}
    >>> with tempfile.TemporaryDirectory() as root:
    ...     os.mkdir(os.path.join(root, "notebooks"))
    ...     with open(os.path.join(root, "notebooks", "02_step.ipynb"), "w") as f:
    ...         json.dump(notebook, f)
    ...     card = read_card("notebooks/02_step.ipynb", root)
    >>> card.title, card.requires, card.teaches
    ('Step by step', (1,), 'The loss in ONNX.')
    """
    with open(os.path.join(root, path), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    number = int(os.path.basename(path).split("_", 1)[0])
    first = cells[0] if cells else {"cell_type": None, "source": ""}
    text = "".join(first["source"])
    title = _TITLE.search(text)
    if first["cell_type"] != "markdown" or title is None:
        raise ValueError(
            f"{path}: its first cell must be markdown and start with its title, "
            f"'# {number}. Title'."
        )
    if int(title.group(1)) != number:
        raise ValueError(
            f"{path}: its title says notebook {title.group(1)}, its file name {number:02d}: "
            "renumber one of them."
        )
    fields = dict(_FIELD.findall(text))
    missing = [name for name in FIELDS if not fields.get(name)]
    if missing:
        lines = "\n".join(f"- **{name}:** ..." for name in missing)
        raise ValueError(
            f"{path}: its first cell lacks {', '.join(missing)}: add, below the title,\n{lines}"
        )
    words = len(fields["Teaches"].split())
    if words > MAX_TEACHES_WORDS:
        raise ValueError(
            f"{path}: its 'Teaches:' line has {words} words, more than {MAX_TEACHES_WORDS}: say "
            "what the notebook shows in one short sentence, the rest in its introduction."
        )
    needs = fields.get("Needs", "")
    if "Needs" in fields and not needs.startswith(NEEDS_TRAINING):
        raise ValueError(
            f"{path}: its 'Needs:' line must start with '{NEEDS_TRAINING}', the one package a "
            "notebook may need beyond the maintained onnxruntime; a notebook that runs on any "
            "onnxruntime has no 'Needs:' line."
        )
    requires = fields["Requires"]
    numbers = () if requires.lower() == "none" else tuple(map(int, re.findall(r"\d+", requires)))
    return NotebookCard(
        number, path, title.group(2), numbers, fields["Teaches"], fields["API"], needs
    )


def read_cards(root="."):
    """The cards of every notebook of ``root/notebooks``, in reading order, dependencies checked.

    Raises
    ------
    ValueError
        When two notebooks share a number, or one requires a notebook that does
        not exist or comes later.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as root:
    ...     read_cards(root)
    []
    """
    paths = sorted(glob.glob(os.path.join(root, "notebooks", "[0-9]*.ipynb")))
    cards = [read_card(os.path.relpath(p, root).replace(os.sep, "/"), root) for p in paths]
    numbers = [card.number for card in cards]
    for card in cards:
        if numbers.count(card.number) > 1:
            raise ValueError(f"{card.path}: another notebook has the number {card.number:02d}.")
        for required in card.requires:
            if required not in numbers or required >= card.number:
                raise ValueError(
                    f"{card.path} requires notebook {required:02d}, which "
                    + ("does not exist" if required not in numbers else "comes after it")
                    + ": fix its 'Requires:' line."
                )
    return cards


def maintained_notebooks(root="."):
    """The notebooks that run on the maintained onnxruntime: those without a ``Needs`` line.

    Examples
    --------
    >>> import os
    >>> root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    >>> "notebooks/01_linear_regression_whole_training.ipynb" in maintained_notebooks(root)
    True
    """
    return [card.path for card in read_cards(root) if not card.needs]


def learning_path_table(cards):
    """The README's table of the learning path, one row per notebook; a notebook with a
    ``Needs`` line says it needs the training package.

    Examples
    --------
    >>> card = NotebookCard(1, "notebooks/01_a.ipynb", "First", (), "The basics.", "both")
    >>> print(learning_path_table([card]))
    | Notebook | Requires | What it teaches |
    | --- | --- | --- |
    | [1. First](notebooks/01_a.ipynb) | none | The basics. |
    >>> print(learning_path_table([card._replace(needs=NEEDS_TRAINING)]).splitlines()[-1])
    | [1. First](notebooks/01_a.ipynb) | none | The basics. *Needs onnxruntime-training 1.19.2.* |
    """
    rows = ["| Notebook | Requires | What it teaches |", "| --- | --- | --- |"]
    for card in cards:
        requires = ", ".join(f"{n:02d}" for n in card.requires) or "none"
        teaches = f"{card.teaches} *Needs {NEEDS_TRAINING}.*" if card.needs else card.teaches
        rows.append(f"| [{card.number}. {card.title}]({card.path}) | {requires} | {teaches} |")
    return "\n".join(rows)


def with_table(readme, table):
    """``readme`` with ``table`` between the lines :data:`START` and :data:`END`.

    Raises
    ------
    ValueError
        When the README lacks one of the two lines.

    Examples
    --------
    >>> with_table(f"Intro\\n{START}\\nold\\n{END}\\nRest\\n", "new").splitlines()[1:4]
    ['<!-- learning-path: start -->', 'new', '<!-- learning-path: end -->']
    """
    if START not in readme or END not in readme:
        raise ValueError(f"The README needs the lines {START} and {END} around its learning path.")
    before, rest = readme.split(START, 1)
    after = rest.split(END, 1)[1]
    return f"{before}{START}\n{table}\n{END}{after}"


def refresh(root=".", check=False):
    """Write the learning path of ``root/README.md`` from the notebooks; return whether it changed.

    With ``check=True`` nothing is written: the result says whether the README is stale.
    The README is replaced atomically (a temporary file beside it, then renamed).

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as root:
    ...     with open(os.path.join(root, "README.md"), "w") as f:
    ...         _ = f.write(f"{START}\\n{END}\\n")
    ...     stale = refresh(root, check=True)
    ...     changed, again = refresh(root), refresh(root, check=True)
    >>> stale, changed, again
    (True, True, False)
    """
    path = os.path.join(root, "README.md")
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    updated = with_table(readme, learning_path_table(read_cards(root)))
    if updated != readme and not check:
        write_atomic(path, updated)
    return updated != readme


def main(argv=None):
    """``python -m helpers.teaching.learning_path [--check | --maintained] [--root ROOT]``; the
    exit status.

    0 when the table is up to date (or was rewritten), 1 when ``--check`` finds it
    stale, 2 when a notebook's first cell breaks the convention (the message says
    what to write). ``--maintained`` writes nothing: it prints the paths of
    :func:`maintained_notebooks`, one a line.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as root:
    ...     with open(os.path.join(root, "README.md"), "w") as f:
    ...         _ = f.write(f"{START}\\nold\\n{END}\\n")
    ...     main(["--check", "--root", root])  # doctest: +ELLIPSIS
    The README's learning path differs from the notebooks: run python -m ...
    1
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is stale")
    parser.add_argument(
        "--maintained",
        action="store_true",
        help="print the notebooks that run on the maintained onnxruntime, one a line",
    )
    parser.add_argument("--root", default=".", help="the repository (default: .)")
    options = parser.parse_args(argv)
    try:
        if options.maintained:
            print("\n".join(maintained_notebooks(options.root)))
            return 0
        changed = refresh(options.root, check=options.check)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if changed and options.check:
        print(
            "The README's learning path differs from the notebooks: run "
            "python -m helpers.teaching.learning_path"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
