"""Headless Chromium, driven through its DevTools protocol, measuring the built site's pages.

Used by ``docs/test_site_*.py`` (``make docs-test``); no package beyond the standard
library and a Chromium binary. Screenshots land in the site's ``_screenshots`` folder.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--hide-scrollbars",
    "--window-size=1280,800",
]
DESKTOP = (1280, 800)
PHONE = (390, 844)


class Browser:
    """Headless Chromium driven through the DevTools protocol, on a pipe (no port, no package).

    The protocol sets the window to any size (a command-line window is at least
    500 px wide), measures pages with a script and takes screenshots.
    """

    def __init__(self, chromium, site):
        self.site = site
        commands_read, self._commands = os.pipe()  # Chromium reads commands on its fd 3
        self._replies, replies_write = os.pipe()  # and writes replies on its fd 4
        self.profile = tempfile.mkdtemp(prefix="docs-test-chromium-")

        def as_fds_3_and_4():
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        self.process = subprocess.Popen(
            [
                chromium,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            pass_fds=(3, 4, commands_read, replies_write),
            preexec_fn=as_fds_3_and_4,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._id = 0
        self._events = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.send("Page.enable", session=self.session)

    def _receive(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, session=None, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_for(self, event, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for i, message in enumerate(self._events):
                if message.get("method") == event and message.get("sessionId") == self.session:
                    return self._events.pop(i)
            self._events.append(self._receive())
        raise TimeoutError(f"no {event} within {timeout} s")

    def open(self, path, size):
        """Load the site's page ``path`` in a window of ``size`` (width, height) pixels."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=self.session,
            width=size[0],
            height=size[1],
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events.clear()
        self.send(
            "Page.navigate",
            session=self.session,
            url="file://" + os.path.abspath(os.path.join(self.site, path)),
        )
        self._wait_for("Page.loadEventFired")

    def evaluate(self, expression):
        reply = self.send(
            "Runtime.evaluate",
            session=self.session,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, name, around=None):
        """A picture of the window, or of the region ``around`` (x, y, width, height) of the
        page."""
        shots = os.path.join(self.site, "_screenshots")
        os.makedirs(shots, exist_ok=True)
        region = {}
        if around:
            x, y, width, height = around
            region = {
                "clip": {"x": x, "y": y, "width": width, "height": height, "scale": 1},
                "captureBeyondViewport": True,
            }
        data = self.send("Page.captureScreenshot", session=self.session, format="png", **region)[
            "data"
        ]
        path = os.path.join(shots, name)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        assert os.path.getsize(path) > 10_000, f"{path} is a blank picture"

    def close(self):
        try:
            self.send("Browser.close")
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - closing anyway
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


# --- Measuring a page in the browser ---------------------------------------------------

# A function of the theme ('light' or 'dark'): measures the page's layout in that theme.
_MEASURE = r"""(theme) => {
function luminance(rgb) {
  const c = rgb.map(v => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}
function rgba(text) { const m = text.match(/[\d.]+/g); return m ? m.map(Number) : [0, 0, 0, 0]; }
function background(e) {
  for (; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c.length < 4 || c[3] > 0.5) return c.slice(0, 3);
  }
  return [255, 255, 255];
}
function contrast(a, b) {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}
document.body.dataset.theme = theme;
const root = document.documentElement;
const article = document.querySelector('article') || document.body;
const r = {viewWidth: root.clientWidth, pageWidth: root.scrollWidth, pageHeight: root.scrollHeight};
r.text = article.innerText;
r.tooWide = [...article.querySelectorAll('*')].filter(
  e => e.getBoundingClientRect().right > root.clientWidth + 1
    && getComputedStyle(e.parentElement).overflowX === 'visible'
    && !e.closest('table, a.image-full-size')).slice(0, 3).map(e => e.tagName + '.' + e.className);
const pres = [...article.querySelectorAll('pre')];
r.codeBlocks = pres.length;
r.scrollingCode = pres.filter(p => p.scrollWidth > p.clientWidth + 1).map(
  p => p.textContent.split('\n').reduce((a, b) => a.length >= b.length ? a : b).slice(0, 120));
r.tables = [...article.querySelectorAll('div.cell_output table')].map(t => {
  const head = t.tHead ? [...t.tHead.rows] : [];
  const body = t.tBodies.length ? [...t.tBodies[0].rows] : [];
  const width = row => [...row.cells].reduce((n, c) => n + c.colSpan, 0);
  const cells = [...t.querySelectorAll('th, td')];
  const last = head.length ? head[head.length - 1] : null;
  const misaligned = [];
  if (last && body.length) {
    const offset = width(body[0]) - width(last);
    [...last.cells].forEach((th, i) => {
      const td = body[0].cells[i + Math.max(offset, 0)];
      if (td && td.tagName === 'TD' && th.textContent.trim()
          && getComputedStyle(th).textAlign !== getComputedStyle(td).textAlign)
        misaligned.push(th.textContent.trim());
    });
  }
  const text = cells.filter(c => c.textContent.trim());
  const bars = cells.filter(c => getComputedStyle(c).backgroundImage.includes('gradient'));
  return {
    columns: Math.max(0, ...body.map(width)),
    headerRows: head.length,
    emptyHeaderRows: head.filter(
      row => [...row.cells].slice(1).every(c => !c.textContent.trim())).length,
    minPadding: Math.min(...cells.map(c => parseFloat(getComputedStyle(c).paddingLeft))),
    misaligned: misaligned,
    minContrast: Math.min(...text.map(
      c => contrast(rgba(getComputedStyle(c).color).slice(0, 3), background(c)))),
    bars: bars.length,
    barsWithText: bars.filter(c => c.textContent.trim()).length,
    barContrast: Math.min(...bars.map(c => contrast(
      rgba(getComputedStyle(c).backgroundImage.match(/rgba?\([^)]*\)/)[0]).slice(0, 3),
      background(c.parentElement)))),
  };
});
r.images = [...article.querySelectorAll('img')].map(i => ({
  link: i.closest('a') ? i.closest('a').getAttribute('href') : null,
  src: i.getAttribute('src'),
  scale: i.naturalWidth ? i.getBoundingClientRect().width / i.naturalWidth : 0,
  width: i.getBoundingClientRect().width,
}));
const api = [...document.querySelectorAll('.sidebar-tree a')].find(
  a => a.textContent.trim() === 'API reference');
r.apiLinkBottom = api ? api.getBoundingClientRect().bottom : null;
r.sidebarLinks = [...document.querySelectorAll('.sidebar-tree a')].map(
  a => [a.textContent.trim(), a.getBoundingClientRect().height]);
r.downloads = [...article.querySelectorAll('a.download')].map(a => a.getAttribute('href'));
const contents = article.querySelector('nav.contents');
r.contents = contents ? {
  visible: contents.getBoundingClientRect().height > 0
    && getComputedStyle(contents).display !== 'none',
  top: contents.getBoundingClientRect().top + window.scrollY,
  links: contents.querySelectorAll('a').length} : null;
r.objects = article.querySelectorAll('dl.py > dt[id]').length;
r.modules = [...article.querySelectorAll('[id^="module-helpers"]')].map(e => e.id.slice(7));
return r;
}"""


def region_of(browser, condition):
    """(x, y, width, height) of the first notebook cell for which the JS ``condition(cell)``
    holds."""
    return browser.evaluate(
        "(() => "
        f"{{ const cell = [...document.querySelectorAll('article div.cell')].find({condition});"
        " if (!cell) return null; const r = cell.getBoundingClientRect();"
        " return [0, r.top + scrollY - 10, innerWidth, Math.min(r.height + 20, 1000)]; })()"
    )


def measure(browser, path, size=DESKTOP, theme="light", screenshot=None):
    """The layout of the site's page ``path`` in a window of ``size``, in ``theme``."""
    browser.open(path, size)
    result = browser.evaluate(f"({_MEASURE})({json.dumps(theme)})")
    if screenshot:
        browser.screenshot(screenshot)
    return result
