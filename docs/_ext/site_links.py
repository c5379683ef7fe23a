"""The site's links: figures to their full size, notebooks to their download, files to the
repository.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``).
"""

import os
import posixpath
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.util.osutil import relative_uri

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Where the repository is browsed, e.g. "https://github.com/OWNER/ort-training-notebooks"
# (DOCS_REPOSITORY_URL overrides it). When set, the pages link the repository's files
# ({repo}`benchmarks/bench_your_model.ipynb`) and each page's "view source" button opens
# its source file there; while it is empty, {repo} links download the file from the
# site itself and the pages have no "view source" button (it would open a .txt copy).
REPOSITORY_URL = os.environ.get("DOCS_REPOSITORY_URL", "").rstrip("/")
REPOSITORY_BRANCH = os.environ.get("DOCS_REPOSITORY_BRANCH", "main")


# --- Figures link to their full size --------------------------------------------------


def _link_images(app, doctree, docname):
    """Wrap each image (notebook outputs, figures) in a link to its file: a click opens it."""
    if app.builder.format != "html":
        return
    images = relative_uri(app.builder.get_target_uri(docname), "_images")
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.reference):
            continue
        uri = image["uri"]
        if uri in app.env.images:
            target = posixpath.join(images, app.env.images[uri][1])
        elif "://" in uri or uri.startswith("data:"):
            target = uri
        else:
            continue
        link = nodes.reference("", "", refuri=target, classes=["image-full-size"])
        image.replace_self(link)
        link.append(image)


# --- Notebook pages: a download link to the notebook ----------------------------------


class NotebookDownload(SphinxTransform):
    """Below a notebook page's title: a link that downloads the ``.ipynb`` it was built from."""

    default_priority = 200

    def apply(self):
        source = self.env.doc2path(self.env.docname)
        if not str(source).endswith(".ipynb"):
            return
        title = next(iter(self.document.findall(nodes.title)), None)
        if title is None:
            return
        filename = os.path.basename(str(source))
        link = addnodes.download_reference(
            "",
            "",
            nodes.literal(filename, filename),
            reftarget=filename,
            refdoc=self.env.docname,
            refexplicit=True,
            refdomain="",
            reftype="download",
        )
        paragraph = nodes.paragraph(
            "",
            "",
            nodes.Text("Download this notebook: "),
            link,
            nodes.Text(" (without outputs; run it with the project's kernel)."),
            classes=["notebook-download"],
        )
        title.parent.insert(title.parent.index(title) + 1, paragraph)


# --- Notebooks' links to the docs' pages ----------------------------------------------


def _notebook_links_to_pages(app, docname, source):
    """A notebook's link to a page of the docs opens that page of the site.

    A notebook links the glossary as ``[opset](../docs/glossary.md#opset)``: the path
    from ``notebooks/`` in the repository, which JupyterLab and GitHub follow. On the
    site the notebooks are one folder below the docs' pages (``docs/notebooks`` links
    to ``notebooks``), so ``../docs/`` becomes ``../`` before myst reads the notebook,
    and myst resolves the page and its heading's anchor (``glossary.html#opset``).
    """
    if docname.startswith("notebooks/"):
        source[0] = source[0].replace("](../docs/", "](../")


# --- Links to the repository's files ---------------------------------------------------


def repo_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{repo}`path``: the repository's file at ``path`` (from the repository root).

    ``{repo}`label <path>``` shows ``label`` instead of the path.

    With :data:`REPOSITORY_URL`, a link to the file in the repository; without it, a
    download of the file, copied onto the site.
    """
    path = text.strip()
    named = re.fullmatch(r"(?P<label>.+?)\s*<(?P<path>[^<>]+)>", path)
    path, label = (
        (named["path"], nodes.Text(named["label"])) if named else (path, nodes.literal(path, path))
    )
    if REPOSITORY_URL:
        url = f"{REPOSITORY_URL}/blob/{REPOSITORY_BRANCH}/{path}"
        return [nodes.reference(rawtext, "", label, refuri=url)], []
    env = inliner.document.settings.env
    target = posixpath.relpath(posixpath.join("..", path), posixpath.dirname(env.docname) or ".")
    link = addnodes.download_reference(
        rawtext,
        "",
        label,
        reftarget=target,
        refdoc=env.docname,
        refexplicit=True,
        refdomain="",
        reftype="download",
    )
    return [link], []


#: Files of the results that are pages of the site, by their path in the repository.
RESULT_PAGES = {
    "results/reference/summary.md": "benchmarks",
    "results/reference/details.md": "benchmark_details",
}
_LINK = re.compile(r"(?<!!)\[(?P<label>[^\]]+)\]\((?P<target>[^)\s]+)\)")


def _link_result_files(app, relative_path, parent_docname, content):
    """In an included results page, a link to a file becomes its page on the site, or the file.

    ``summary.md`` and ``details.md`` link their files relative to themselves, which
    works in the repository; on the site, the link to ``details.md`` opens its page,
    and a CSV is downloaded (or opened in the repository, with :data:`REPOSITORY_URL`).
    """
    folder = os.path.dirname(os.path.join(app.srcdir, str(relative_path)))

    def relink(match):
        target = match["target"]
        if "://" in target or target.startswith("#"):
            return match.group(0)
        path = os.path.relpath(os.path.normpath(os.path.join(folder, target)), ROOT).replace(
            os.sep, "/"
        )
        label = match["label"].strip("`")
        if path in RESULT_PAGES:
            return f"{{doc}}`{label} <{RESULT_PAGES[path]}>`"
        return f"{{repo}}`{label} <{path}>`"

    content[0] = _LINK.sub(relink, content[0])


def _view_source_link(app, pagename, templatename, context, doctree):
    """With a repository, the "view source" button opens the page's source file there."""
    if not REPOSITORY_URL or not context.get("page_source_suffix"):
        return
    source = os.path.relpath(os.path.realpath(app.env.doc2path(pagename)), ROOT)
    context["theme_source_view_link"] = f"{REPOSITORY_URL}/blob/{REPOSITORY_BRANCH}/{source}"


def setup(app):
    app.connect("source-read", _notebook_links_to_pages)
    app.connect("include-read", _link_result_files)
    app.connect("doctree-resolved", _link_images)
    app.connect("html-page-context", _view_source_link)
    app.add_transform(NotebookDownload)
    app.add_role("repo", repo_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
