"""Headless Chromium for the HTML reports' tests, driven over the DevTools protocol on a pipe (standard library).

One browser per test module (:func:`browser`); each page opens in its own tab, which records every
console message, uncaught exception, log entry (a refused request, a policy violation) and network
request the page makes. Where no Chromium is installed the browser tests skip with one line saying so
(``.ci/run`` installs Debian's ``chromium`` package when it is missing).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT, DATA

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Executable names tried in order (``COMMCOST_CHROMIUM`` names one explicitly)."""

README_EXAMPLES = {
    "plan": ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
             "--zero", "1", "--train-tokens", "2T", "--price-per-gpu-hour", "2.5"),
    "search": ("search", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "512", "--seq", "8192",
               "--global-batch", "1024", "--no-progress"),
    "trace": ("trace", "tests/data/traces/trace_filter__sampled_rank-0.json.gz", "--system", "dgx-h100"),
    "timeline": ("timeline", "--system", "dgx-h100", "--nodes", "4", "--model", "llama2-7b", "--step-ms", "1200",
                 "--bucket", "auto"),
}
"""README commands (section "One example per subcommand"), each run once with ``--json --html``."""


def find_browser() -> str | None:
    """The Chromium executable, or None."""
    named = os.environ.get("COMMCOST_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.path.isfile(named) else None)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


class DataKeys(HTMLParser):
    """Every element's ``data-key`` -> ``data-value`` (the first of each key), parsed from the file."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-key" in a and "data-value" in a:
            self.values.setdefault(a["data-key"], a["data-value"])
        for k in ("src", "href", "action", "xlink:href", "poster", "data"):
            if a.get(k):
                self.urls.append(a[k])


def page_facts(html_text: str) -> DataKeys:
    p = DataKeys()
    p.feed(html_text)
    return p


def make_reports(out: Path) -> dict[str, tuple[Path, dict]]:
    """Run each README example with ``--json --html`` in one process: the page and the JSON of the same run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    import sys

    got = {}
    for name, argv in README_EXAMPLES.items():
        page = out / f"{name}.html"
        r = subprocess.run([sys.executable, "-m", "commcost", *argv, "--json", "--html", str(page)],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr[-800:]
        got[name] = (page, json.loads(r.stdout))
    # two ranks of one job: the cross-rank split into waiting and moving data
    ranks = out / "ranks"
    ranks.mkdir()
    for f in ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"):
        shutil.copy(DATA / "traces" / f, ranks / f)
    page = out / "trace_ranks.html"
    r = subprocess.run([sys.executable, "-m", "commcost", "trace", str(ranks), "--system", "dgx-h100", "--json",
                        "--html", str(page)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    got["trace_ranks"] = (page, json.loads(r.stdout))
    return got


_REPORTS: dict[str, tuple[Path, dict]] = {}
"""The reports of this test session, made once for every module that asks (the fixture is imported
into each module, so pytest's session scope alone would make them once per module)."""


@pytest.fixture(scope="session")
def reports(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """name -> (page path, the JSON dict the same run printed)."""
    if not _REPORTS:
        _REPORTS.update(make_reports(tmp_path_factory.mktemp("html")))
    return _REPORTS


class Browser:
    """Chromium headless with ``--remote-debugging-pipe``: messages are JSON, each ended by a NUL byte,
    written to the browser's fd 3 and read from its fd 4."""

    def __init__(self, exe: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="commcost-chromium-")
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()

        def fds() -> None:  # the pipe ends as fds 3 and 4 of the browser, whatever numbers they have here
            a, b = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
             "--hide-scrollbars", "--mute-audio", f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _send(self, msg: dict) -> None:
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")

    def _read(self, timeout_s: float) -> dict | None:
        end = time.monotonic() + timeout_s
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                return None
            ready, _, _ = select.select([self._from_r], [], [], left)
            if ready:
                chunk = os.read(self._from_r, 1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = 30.0) -> dict:
        """Send one command and wait for its answer (events that arrive meanwhile are kept in :attr:`events`)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            m = self._read(end - time.monotonic())
            if m is None:
                break
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)
        raise TimeoutError(f"no answer to {method} in {timeout_s} s")

    def wait_event(self, method: str, session: str, timeout_s: float = 30.0) -> dict:
        end = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < end:
            for m in self.events[seen:]:
                if m.get("method") == method and m.get("sessionId") == session:
                    return m
            seen = len(self.events)
            m = self._read(end - time.monotonic())
            if m is not None:
                self.events.append(m)
        raise TimeoutError(f"no {method} in {timeout_s} s")

    def open(self, path: Path, *, width: int = 1000, height: int = 900, mobile: bool = False) -> "Tab":
        """Open ``path`` in a new tab of ``width`` CSS pixels, recording what the page does."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=s)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                        "mobile": mobile}, session=s)
        start = len(self.events)
        url = path.resolve().as_uri()
        self.call("Page.navigate", {"url": url}, session=s)
        self.wait_event("Page.loadEventFired", s)
        self.call("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 150))", "awaitPromise": True},
                  session=s)  # late console messages
        return Tab(self, s, url, start)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout_s=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_w, self._from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Tab:
    """One opened page: what it logged and requested, its DOM, a screenshot."""

    def __init__(self, browser: Browser, session: str, url: str, start: int) -> None:
        self.b, self.s, self.url, self.start = browser, session, url, start

    def _events(self, method: str) -> list[dict]:
        return [m["params"] for m in self.b.events[self.start:] if m.get("sessionId") == self.s
                and m.get("method") == method]

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, error and warning log entries."""
        out = [f"console.{p['type']}: {p.get('args')}" for p in self._events("Runtime.consoleAPICalled")
               if p["type"] in ("error", "warning", "assert")]
        out += [f"exception: {p['exceptionDetails'].get('text')}" for p in self._events("Runtime.exceptionThrown")]
        out += [f"log {p['entry']['level']}: {p['entry'].get('text')}" for p in self._events("Log.entryAdded")
                if p["entry"]["level"] in ("error", "warning")]
        return out

    def requests(self) -> list[str]:
        """Every URL the page asked for, besides the page itself."""
        return [p["request"]["url"] for p in self._events("Network.requestWillBeSent")
                if p["request"]["url"] != self.url]

    def evaluate(self, expression: str):
        r = self.b.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.s)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def data_values(self) -> dict[str, str]:
        """``data-key`` -> ``data-value`` of the rendered DOM (the first of each key)."""
        pairs = self.evaluate("JSON.stringify(Array.from(document.querySelectorAll('[data-key][data-value]'))"
                              ".map(e => [e.dataset.key, e.dataset.value]))")
        out: dict[str, str] = {}
        for k, v in json.loads(pairs):
            out.setdefault(k, v)
        return out

    def screenshot(self) -> bytes:
        """The window (its first screenful) as PNG bytes; the tab is brought to the front first (a
        headless background tab does not paint)."""
        self.b.call("Page.bringToFront", session=self.s)
        r = self.b.call("Page.captureScreenshot", {"format": "png"}, session=self.s)
        return base64.b64decode(r["data"])


@pytest.fixture(scope="module")
def browser():
    exe = find_browser()
    if exe is None:
        pytest.skip("no Chromium found (apt-get install chromium; .ci/run installs it): browser checks not run")
    b = Browser(exe)
    try:
        b.call("Browser.getVersion", timeout_s=60)
    except (TimeoutError, RuntimeError, OSError) as exc:
        b.close()
        pytest.skip(f"Chromium at {exe} did not start headless ({exc})")
    yield b
    b.close()


NETWORK_URL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//|^\s*(?:https?|ftp|wss?):", re.I)
"""A URL that reaches the network: any scheme with an authority (``http://``, ``//host``) or http(s)/ws."""
