"""The landing page's learning path: the README's table, read when the site is built.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``). The README's
table is written from the notebooks' first cells (:mod:`helpers.teaching.learning_path`;
``tests/test_learning_path.py`` fails when it is stale); the marker line
``<!-- learning-path -->`` of a page becomes that table. Its links,
``[1. Title](notebooks/01_name.ipynb)``, become links to the notebooks' pages
(``{doc}`` roles: myst would follow ``docs/notebooks``, a link to ``notebooks``, out of
the docs' folder).
"""

import os
import re

from helpers.teaching.learning_path import END, START

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
MARKER = "<!-- learning-path -->"


_NOTEBOOK_LINK = re.compile(r"\[(?P<title>[^\]]+)\]\((?P<doc>notebooks/[\w-]+)\.ipynb\)")


def readme_table(readme):
    """The table between the README's learning-path markers, its notebooks linked as pages.

    Examples
    --------
    >>> readme_table(f"{START}\\n| [2. The `Module`](notebooks/02_x.ipynb) |\\n{END}\\nMore.")
    '| {doc}`2. The Module <notebooks/02_x>` |'
    """
    table = readme.split(START, 1)[1].split(END, 1)[0].strip()
    return _NOTEBOOK_LINK.sub(
        lambda m: f"{{doc}}`{m['title'].replace('`', '')} <{m['doc']}>`", table
    )


def _fill_learning_path(app, docname, source):
    if MARKER in source[0]:
        with open(README, encoding="utf-8") as f:
            source[0] = source[0].replace(MARKER, readme_table(f.read()))


def _pages_with_the_table(app, env, added, changed, removed):
    """Read the pages holding the marker again at every build: the README may have changed."""
    pages = []
    for docname in env.found_docs - added - changed:
        path = env.doc2path(docname)
        if str(path).endswith(".md"):
            with open(path, encoding="utf-8") as f:
                if MARKER in f.read():
                    pages.append(docname)
    return pages


def setup(app):
    app.connect("source-read", _fill_learning_path)
    app.connect("env-get-outdated", _pages_with_the_table)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
