"""The notebooks on the built site (``make docs-test``): each page offers its notebook for
download, the notebooks' code fits the page (88 characters), and the executed notebooks show
code that does not scroll sideways, tables in one style (one header row, padded, aligned,
legible in light and dark mode, bars beside their numbers) and figures that link to their full
size and stay legible on a phone.
"""

import glob
import os
import re

import pytest
from site_browser import DESKTOP, PHONE, measure, region_of
from site_paths import EXECUTED, ROOT, SITE


def test_notebook_pages_offer_their_notebook():
    pages = sorted(glob.glob(os.path.join(SITE, "notebooks", "*.html")))
    assert len(pages) >= 11
    for path in pages:
        with open(path, encoding="utf-8") as f:
            page = f.read()
        name = os.path.basename(path).replace(".html", ".ipynb")
        links = re.findall(
            r'<a class="reference download internal" download="" href="([^"]+)"', page
        )
        assert [link for link in links if link.endswith(name)], (
            f"{path} offers no download of {name}"
        )
        for link in links:
            assert os.path.exists(os.path.join(os.path.dirname(path), link)), (
                f"{link} is not on the site"
            )
        # no "view source" button that opens a .txt copy of the notebook
        assert ".ipynb.txt" not in page


def test_notebook_code_fits_the_page():
    """The notebooks' own code, in code cells and in the prose's code blocks: 88 characters a line
    at most."""
    import nbformat

    long_lines = []
    for path in sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb"))):
        for cell in nbformat.read(path, as_version=4).cells:
            source = (
                cell.source
                if cell.cell_type == "code"
                else "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", cell.source, flags=re.M | re.S))
            )
            long_lines += [
                f"{os.path.basename(path)}: {line}"
                for line in source.splitlines()
                if len(line) > 88
            ]
    assert not long_lines, f"{len(long_lines)} lines over 88 characters, first: {long_lines[0]}"


@pytest.mark.parametrize("path", EXECUTED)
def test_notebook_page_code_tables_and_figures(browser, path):
    name = os.path.basename(path).split("_")[0]
    m = measure(browser, path, DESKTOP, screenshot=f"notebook-{name}-1280.png")
    assert m["codeBlocks"] > 10
    assert not m["scrollingCode"], (
        f"{path}: code scrolls sideways at 1280px: {m['scrollingCode'][:3]}"
    )
    assert m["tables"], f"{path} prints no table"
    for i, table in enumerate(m["tables"]):
        where = f"{path}, table {i + 1}"
        assert 2 <= table["columns"] <= 8, f"{where} has {table['columns']} columns"
        assert table["emptyHeaderRows"] == 0, f"{where} has an empty header row"
        assert table["minPadding"] >= 6, f"{where} has cells without padding"
        assert not table["misaligned"], (
            f"{where}: headers not aligned with their column: {table['misaligned']}"
        )
        assert table["minContrast"] >= 4.5, (
            f"{where}: text of contrast {table['minContrast']:.1f} in light mode"
        )
        assert table["barsWithText"] == 0, f"{where}: numbers drawn over bars"
    for image in m["images"]:
        assert image["link"] and image["link"].endswith(".png"), (
            f"{path}: a figure is not a link to its file"
        )
        assert os.path.exists(
            os.path.normpath(os.path.join(SITE, os.path.dirname(path), image["link"]))
        )
        assert image["scale"] > 0.6, (
            f"{path}: a figure is shown at {image['scale']:.2f} of its size"
        )
    for what, condition in (
        ("table", "c => c.querySelector('div.cell_output table')"),
        ("figure", "c => c.querySelector('div.cell_output img')"),
    ):
        region = region_of(browser, condition)
        if region:
            browser.screenshot(f"notebook-{name}-{what}-1280.png", around=region)
    dark = measure(browser, path, DESKTOP, theme="dark")
    for i, table in enumerate(dark["tables"]):
        assert table["minContrast"] >= 4.5, (
            f"{path}, table {i + 1}: text of contrast {table['minContrast']:.1f} in dark mode"
        )
    for theme, tables in (("light", m["tables"]), ("dark", dark["tables"])):
        for table in [t for t in tables if t["bars"]]:
            assert table["barContrast"] >= 3, (
                f"{path}: bars of contrast {table['barContrast']:.1f} in {theme} mode"
            )
    phone = measure(browser, path, PHONE, screenshot=f"notebook-{name}-390.png")
    for what, condition in (
        ("table", "c => c.querySelector('div.cell_output table')"),
        ("figure", "c => c.querySelector('div.cell_output img')"),
    ):
        region = region_of(browser, condition)
        if region:
            browser.screenshot(f"notebook-{name}-{what}-390.png", around=region)
    for image in phone["images"]:
        assert image["scale"] > 0.6, (
            f"{path}: at 390px a figure is shown at {image['scale']:.2f} of its size"
        )


def test_kernel_tables_draw_bars_beside_their_numbers(browser):
    m = measure(browser, "notebooks/13_profiling_a_training_step.html", DESKTOP, theme="dark")
    bars = [t for t in m["tables"] if t["bars"]]
    assert len(bars) >= 2, "notebook 13 shows no kernel table with bars"
    assert all(t["barsWithText"] == 0 and t["minContrast"] >= 4.5 for t in bars)
    region = browser.evaluate(
        "(() => { const td = [...document.querySelectorAll('div.cell_output td')].find("
        "c => getComputedStyle(c).backgroundImage.includes('gradient'));"
        " const r = td.closest('div.cell').getBoundingClientRect();"
        " return [0, r.top + scrollY - 20, innerWidth, Math.min(r.height + 40, 800)]; })()"
    )
    browser.screenshot("notebook-13-kernels-dark.png", around=region)
    measure(browser, "notebooks/13_profiling_a_training_step.html", DESKTOP, theme="light")
    browser.screenshot("notebook-13-kernels-light.png", around=region)


def test_notebook_3_outputs(browser):
    m = measure(browser, "notebooks/03_training_artifacts.html")
    text = m["text"]
    # the L1 formula stays whole in its table cell
    assert "mean(|y - t|)" in text, "the L1 loss formula is broken"
    # warnings in full, not cut at 100 characters
    assert (
        "DeprecationWarning: You are using the legacy TorchScript-based ONNX export. Starting in"
        in text
    )
    assert "Please set the training mode before exporting the model." in " ".join(text.split())
    # a print is one output box, even when a slow call ran between its lines
    outputs = browser.evaluate(
        "[...document.querySelectorAll('div.output.stream')].map(o => o.innerText)"
    )
    joined = [o for o in outputs if "nodes the loss appended" in o]
    assert joined and "outputs:" in joined[0], "the custom loss's print is split in two boxes"
