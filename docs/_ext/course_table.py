"""The landing page's learning path: the README's table, read when the site is built.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``). The README's
table is written from the notebooks' first cells (:mod:`helpers.teaching.learning_path`;
``tests/test_learning_path.py`` fails when it is stale); the marker line
``<!-- learning-path -->`` of a page becomes that table. Its links,
``[1. Title](notebooks/01_name.ipynb)``, open the notebooks' pages: the pages of the docs
see the notebooks at the same relative path (``docs/notebooks`` links to ``notebooks``).
"""

import os

from helpers.teaching.learning_path import END, START

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
MARKER = "<!-- learning-path -->"


def readme_table(readme):
    """The table between the README's learning-path markers.

    Examples
    --------
    >>> readme_table(f"# Course\\n{START}\\n| a |\\n| --- |\\n{END}\\nMore.")
    '| a |\\n| --- |'
    """
    return readme.split(START, 1)[1].split(END, 1)[0].strip()


def _fill_learning_path(app, docname, source):
    if MARKER in source[0]:
        with open(README, encoding="utf-8") as f:
            source[0] = source[0].replace(MARKER, readme_table(f.read()))


def setup(app):
    app.connect("source-read", _fill_learning_path)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
