"""Open the built site's pages in headless Chromium, as a reader would (``make docs-test``).

Every page loads, holds content, shows no Python traceback and fits the window at 1280 px and
390 px (a phone). What issue 25 asked of the landing page stays true: the headline ratio and
figure at the top, a sidebar whose "API reference" link is above the fold; and the results
pages are compact tables and full-width figures a reader can scan. Screenshots land beside the
site, in ``_screenshots``.
"""

import glob
import os
import re

import pytest
from site_browser import DESKTOP, PHONE, measure
from site_paths import API_PAGES, EXECUTED, GUIDE_PAGES, NOTEBOOK, ROOT, SITE

PAGES = {
    "landing": ("index.html", "The learning path"),
    "notebook": (NOTEBOOK, "Train a linear regression"),
    "api": ("api.html", "OrtGradientOptimizer"),
    "glossary": ("glossary.html", "YieldOp"),
}


# --- Every page: loads, holds content, no traceback, fits the window -------------------


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders(browser, page):
    path, expected = PAGES[page]
    m = measure(browser, path, screenshot=f"{page}.png")
    text = m["text"]
    assert len(text.split()) > 100, f"{path} is empty or missing"
    assert expected in text
    if page == "api":  # the API's examples show the errors functions raise, on purpose
        text = browser.evaluate(
            "(() => { const a = document.querySelector('article').cloneNode(true);"
            " a.querySelectorAll('pre').forEach(p => p.remove()); return a.textContent; })()"
        )
    assert "Traceback (most recent call last)" not in text
    assert not re.search(r"\b\w+Error: ", text), f"{path} shows an error"
    assert "ERROR:" not in text, f"{path} shows a theme's or an extension's error"
    if page == "notebook":
        assert [i for i in m["images"] if i["src"].endswith(".png")], (
            "the notebook page shows no rendered plot"
        )


@pytest.mark.parametrize("path", [PAGES["landing"][0], *EXECUTED, *API_PAGES, *GUIDE_PAGES])
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280px", "390px"])
def test_page_fits_the_window(browser, path, size):
    """No content wider than the window: long lines wrap, wide tables and figures scroll inside the
    page."""
    m = measure(browser, path, size)
    assert m["viewWidth"] == size[0]
    assert m["pageWidth"] <= m["viewWidth"], (
        f"{path} is {m['pageWidth']}px wide in a {m['viewWidth']}px window: {m['tooWide']}"
    )


# --- The user guide ---------------------------------------------------------------------


@pytest.mark.parametrize("path", GUIDE_PAGES)
def test_guide_page_reads_as_a_page(browser, path):
    """One title, prose, no markup left raw (a role, a figure marker), every link inside the site
    landing on a file of the site, and the page in the sidebar."""
    m = measure(browser, path, screenshot=f"{path.replace('/', '-')[:-5]}.png")
    text = " ".join(m["text"].split())
    assert len(text.split()) > 150, f"{path} is nearly empty"
    assert "Traceback (most recent call last)" not in text
    found = browser.evaluate(
        "(() => { const a = document.querySelector('article').cloneNode(true);"
        " a.querySelectorAll('pre, code').forEach(c => c.remove());"
        " return {h1: document.querySelectorAll('article h1').length, prose: a.textContent,"
        " links: [...document.querySelectorAll('article a')].map(a => a.getAttribute('href')),"
        " sidebar: [...document.querySelectorAll('.sidebar-tree a')]"
        ".map(a => a.getAttribute('href'))}; })()"
    )
    for raw in ("{repo}", "{doc}", "<!--", "fig:", "](", "```"):  # outside code, where it is shown
        assert raw not in found["prose"], f"{path} shows {raw!r}: markup left unrendered"
    assert found["h1"] == 1, f"{path} has {found['h1']} titles"
    folder = os.path.dirname(path)
    for link in found["links"]:
        if not link or "://" in link or link.startswith(("#", "mailto:")):
            continue
        target = os.path.normpath(os.path.join(SITE, folder, link.split("#")[0]))
        assert os.path.exists(target), f"{path} links {link}, which is not on the site"
    # the sidebar links the page it shows as "#"
    assert any(h == "#" or h.endswith(os.path.basename(path)) for h in found["sidebar"]), (
        f"{path} is not in the sidebar"
    )


# --- The landing page -------------------------------------------------------------------


def test_landing_page_headline_figure_and_sidebar(browser):
    m = measure(browser, "index.html", DESKTOP, screenshot="landing-1280.png")
    text = " ".join(m["text"].split())
    # the ratio sentence of results/reference/summary.md (docs/_ext/headline.py reads it), first
    ratio = re.search(
        r"takes ([\d.]+)x to ([\d.]+)x less time with the whole-training API than with torch eager",
        text,
    )
    assert ratio, "the landing page has no headline ratio"
    assert text.index(ratio.group(0)) < 300, "the headline is not at the top of the page"
    with open(os.path.join(ROOT, "results", "reference", "summary.md"), encoding="utf-8") as f:
        summary = f.read()
    assert f"({ratio.group(1)}x to {ratio.group(2)}x)" in summary, (
        "the headline is not the summary's"
    )
    figures = [i for i in m["images"] if "time_to_accuracy" in i["src"]]
    assert figures, "the landing page has no figure"
    assert figures[0]["link"] and figures[0]["link"].endswith(".png"), (
        "the figure does not open its full size"
    )
    assert os.path.exists(os.path.join(SITE, figures[0]["link"]))
    assert figures[0]["width"] >= 600, "the figure is shown smaller than the column"
    # short sidebar titles: each on one line, and the API reference above the fold
    assert m["apiLinkBottom"] is not None and m["apiLinkBottom"] <= DESKTOP[1], (
        f"the sidebar's API reference link is at {m['apiLinkBottom']}px, below the fold of "
        f"{DESKTOP[1]}px"
    )
    heights = [h for _, h in m["sidebarLinks"] if h]
    assert max(heights) - min(heights) < 8, f"a sidebar title wraps: {m['sidebarLinks']}"
    # a file that is not a page is linked: to the repository, or downloaded from the site
    links = browser.evaluate(
        "[...document.querySelectorAll('article a')].map(a => a.getAttribute('href'))"
    )
    links = [link for link in links if link and link.endswith("bench_your_model.ipynb")]
    assert links, "the landing page does not link benchmarks/bench_your_model.ipynb"
    for link in links:
        assert "://" in link or os.path.exists(os.path.join(SITE, link)), (
            f"{link} is not on the site"
        )
    assert not re.search(r"\b(this file|beside this file)\b", text)
    phone = measure(browser, "index.html", PHONE, screenshot="landing-390.png")
    figure = [i for i in phone["images"] if "time_to_accuracy" in i["src"]][0]
    assert figure["scale"] > 0.6, (
        f"at 390px the figure is shown at {figure['scale']:.2f} of its size"
    )


# --- The glossary -----------------------------------------------------------------------

#: Each term of the glossary and its anchor, the heading's slug: what a notebook links at the
#: term's first use, ``[opset](../docs/glossary.md#opset)`` (GitHub makes the same anchors).
GLOSSARY = {
    "Training graph": "training-graph",
    "Training model": "training-model",
    "Gradient graph": "gradient-graph",
    "YieldOp": "yieldop",
    "OrtValue": "ortvalue",
    "IR version": "ir-version",
    "Opset": "opset",
    "Artifacts": "artifacts",
    "Whole-training API": "whole-training-api",
    "Forward/backward API": "forwardbackward-api",
    "Rewrite": "rewrite",
    "Step model": "step-model",
    "Contrib operator": "contrib-operator",
    "Other names": "other-names",
}


def test_the_glossary_defines_each_term_and_every_link_to_it_lands_on_one():
    with open(os.path.join(SITE, "glossary.html"), encoding="utf-8") as f:
        glossary = f.read()
    anchors = set(re.findall(r'\bid="([^"]+)"', glossary))
    for term, anchor in GLOSSARY.items():
        assert f">{term}<" in glossary, f"the glossary has no heading {term!r}"
        assert anchor in anchors, f"the glossary has no anchor #{anchor} for {term!r}"
    # its own links between terms, then those of every other page (the notebooks')
    own = re.findall(r'href="#([^"]+)"', glossary)
    assert len(own) > len(GLOSSARY), "the glossary's terms do not link each other"
    assert set(own) - {""} <= anchors
    for path in glob.glob(os.path.join(SITE, "**", "*.html"), recursive=True):
        with open(path, encoding="utf-8") as f:
            for anchor in re.findall(r'href="(?:\.\./)*glossary\.html#([^"]+)"', f.read()):
                assert anchor in anchors, f"{os.path.relpath(path, SITE)} links #{anchor}"


# --- The results pages ------------------------------------------------------------------

_RESULTS_LAYOUT = r"""(() => {
const article = document.querySelector('article');
const tables = [...article.querySelectorAll('table')].map(t => ({
  columns: Math.max(0, ...[...t.rows].map(r => r.cells.length)),
  tallestRow: Math.max(0, ...[...t.tBodies[0].rows].map(r => r.getBoundingClientRect().height)),
}));
const images = [...article.querySelectorAll('img')].map(i => ({
  src: i.getAttribute('src'), link: i.closest('a') ? i.closest('a').getAttribute('href') : null,
  shown: i.getBoundingClientRect().width, natural: i.naturalWidth,
  column: article.getBoundingClientRect().width}));
const downloads = [...article.querySelectorAll('a.download')].map(a => a.getAttribute('href'));
return {tables, images, downloads, h1: article.querySelectorAll('h1').length,
        height: document.documentElement.scrollHeight, text: article.innerText};
})()"""


@pytest.mark.parametrize("page", ["benchmarks.html", "benchmark_details.html"])
def test_results_pages_a_reader_can_scan(browser, page):
    """Compact tables (at most 8 columns, rows one or two lines tall), one title, full-width
    figures, CSVs linked."""
    browser.open(page, DESKTOP)
    browser.screenshot(f"results-{page[:-5]}-1280.png")
    m = browser.evaluate(_RESULTS_LAYOUT)
    assert m["h1"] == 1, f"{page} has {m['h1']} titles"
    assert m["tables"], f"{page} shows no table"
    for table in m["tables"]:
        assert table["columns"] <= 8, f"a table of {page} has {table['columns']} columns"
        # compact rows: at most three lines of text (the page replaced had rows of 250-300 px)
        assert table["tallestRow"] <= 90, f"a row of {page} is {table['tallestRow']}px tall"
    for image in m["images"]:
        assert image["link"] and os.path.exists(os.path.join(SITE, image["link"])), (
            f"{image['src']} opens nothing"
        )
        assert image["shown"] >= min(image["natural"], image["column"]) - 2, (
            f"{image['src']} is shown at {image['shown']:.0f}px of {image['natural']}px in a "
            f"{image['column']:.0f}px column"
        )
    for link in m["downloads"]:
        assert os.path.exists(os.path.join(SITE, link)), f"{link} is not on the site"
    text = " ".join(m["text"].split())
    assert not re.search(r"\b(this file|beside this file|details\.md says)\b", text)
    assert "../" not in text, "a page shows a path of the repository instead of a link"
    if page == "benchmark_details.html":
        csvs = [link for link in m["downloads"] if link.endswith(".csv")]
        assert len(csvs) >= 3, f"the details link {len(csvs)} CSVs"
        assert m["height"] < 40_000, f"the details page is {m['height']}px tall"
