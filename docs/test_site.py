"""Open the built site in headless Chromium, as a reader would.

Run by ``make docs-test`` after a (quick) build: the landing page, one
notebook page with a rendered plot and the API page must load, hold content,
and show no Python traceback. Screenshots land beside the site.
"""
import os
import re
import shutil
import subprocess

import pytest

SITE = os.environ.get("DOCS_SITE", os.path.join(os.path.dirname(__file__), "_build", "quick"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--allow-file-access-from-files", "--window-size=1280,2000",
]
PAGES = {
    "landing": ("index.html", "The learning path"),
    "notebook": ("notebooks/01_linear_regression_whole_training.html", "Train a linear regression"),
    "api": ("api.html", "OrtGradientOptimizer"),
}


def _chromium(args, tmp_path):
    profile = tmp_path / "profile"
    result = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )
    return result


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM, "chromium is not installed: `make docs-test` installs it (apt-get install chromium)"
    assert os.path.exists(os.path.join(SITE, "index.html")), f"no site in {SITE}: build it first"
    return CHROMIUM


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders(browser, tmp_path, page):
    path, expected = PAGES[page]
    url = "file://" + os.path.abspath(os.path.join(SITE, path))
    dom = _chromium(["--dump-dom", url], tmp_path).stdout
    text = re.sub(r"<[^>]+>", " ", dom)
    assert len(text.split()) > 100, f"{path} is empty or missing"
    assert expected in text
    # the API page's examples show the errors functions raise, on purpose: check the rest
    shown = re.sub(r"<pre\b.*?</pre>", " ", dom, flags=re.S) if page == "api" else dom
    shown = re.sub(r"<[^>]+>", " ", shown)
    assert "Traceback (most recent call last)" not in shown
    assert not re.search(r"\b\w+Error: ", shown.split("API reference")[0] if page == "api" else shown), (
        f"{path} shows an error"
    )
    if page == "api":
        assert "Traceback (most recent call last)" in text  # the examples are there, and were stripped above
    if page == "notebook":
        plots = re.findall(r'<img[^>]+src="(data:image/png[^"]+|[^"]+\.png)"', dom)
        assert plots, "the notebook page shows no rendered plot"
    shots = os.path.join(SITE, "_screenshots")
    os.makedirs(shots, exist_ok=True)
    shot = os.path.join(shots, f"{page}.png")
    _chromium([f"--screenshot={shot}", url], tmp_path)
    assert os.path.getsize(shot) > 10_000  # a real picture, not a blank page


_MEASURE = (
    "<script>window.addEventListener('load', () => {"
    "const wide = [...document.querySelectorAll('article *')].filter("
    "e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1"
    " && getComputedStyle(e.parentElement).overflowX === 'visible');"
    "document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
    "document.body.setAttribute('data-view-width', document.documentElement.clientWidth);"
    "document.body.setAttribute('data-too-wide', wide.slice(0, 3).map(e => e.tagName + '.' + e.className).join(' '));"
    "});</script>"
)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_fits_the_viewport(browser, tmp_path, page):
    """No content wider than the window: long lines wrap, wide tables scroll inside the page."""
    path, _ = PAGES[page]
    original = os.path.join(SITE, path)
    # a copy beside the page (same relative links), with a script that measures the layout
    measured = original.replace(".html", ".measure.html")
    with open(original, encoding="utf-8") as f:
        html = f.read()
    with open(measured, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", _MEASURE + "</body>"))
    try:
        dom = _chromium(
            ["--window-size=1024,800", "--virtual-time-budget=3000", "--dump-dom", "file://" + os.path.abspath(measured)],
            tmp_path,
        ).stdout
    finally:
        os.remove(measured)
    page_width = int(re.search(r'data-page-width="(\d+)"', dom).group(1))
    view_width = int(re.search(r'data-view-width="(\d+)"', dom).group(1))
    too_wide = re.search(r'data-too-wide="([^"]*)"', dom).group(1)
    assert page_width <= view_width, f"{path} is {page_width}px wide in a {view_width}px window: {too_wide}"
