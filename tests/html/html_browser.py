"""Headless Chromium driven over the DevTools protocol, for the HTML report's browser tests.

``Chromium`` starts ``/usr/bin/chromium --headless`` with a fresh profile
and ``--remote-debugging-port=0``, reads the port Chromium chose from
``DevToolsActivePort`` in that profile, and talks to the page target over
its WebSocket (``websocket-client``).  ``Chromium.load`` enables the
Runtime, Log, Page and Network domains *before* navigating, so everything
the page does is seen: console calls, uncaught exceptions, log entries
(a Content-Security-Policy violation is one), JavaScript dialogs (accepted
at once, so a page cannot hang the test), and every network request.
The browser is closed over the protocol and its process group ended by its
own pid, never by name.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium")
            else (shutil.which("chromium") or "/usr/bin/chromium"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1200,900"]


def unavailable() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is not installed (`make sysdeps` installs Debian's chromium)"
    try:
        import websocket  # noqa: F401 - only whether it is there
    except ImportError:
        return "websocket-client is not installed (pip install -e '.[test]')"
    return None


@dataclass
class PageLoad:
    """What one page load showed."""

    console: list[dict] = field(default_factory=list)  # Runtime.consoleAPICalled params
    exceptions: list[dict] = field(default_factory=list)  # Runtime.exceptionThrown params
    log: list[dict] = field(default_factory=list)  # Log.entryAdded entries
    dialogs: list[dict] = field(default_factory=list)  # Page.javascriptDialogOpening params
    requests: list[str] = field(default_factory=list)  # URLs of Network.requestWillBeSent

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, error log entries (CSP violations among them)."""
        out = [" ".join(str(a.get("value", a.get("description", ""))) for a in c.get("args", []))
               for c in self.console if c.get("type") in ("error", "warning", "assert")]
        out += [e["exceptionDetails"].get("text", "") + " " +
                str(e["exceptionDetails"].get("exception", {}).get("description", "")) for e in self.exceptions]
        out += [e.get("text", "") for e in self.log if e.get("level") in ("error", "warning")]
        return out

    def fetched(self) -> list[str]:
        """Requests other than the page's own file and data: URLs."""
        return [u for u in self.requests if not u.startswith(("file:", "data:", "about:"))]


class Chromium:
    """One headless browser with one page, for a test session."""

    def __init__(self, profile: Path, timeout_s: float = 30.0):
        import websocket

        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port = self._port(profile / "DevToolsActivePort")
        self.ws = websocket.create_connection(self._page_socket(port), timeout=timeout_s, suppress_origin=True)
        self.next_id = 0
        self.load: PageLoad | None = None

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return int(path.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self.proc.returncode} before listening")
            time.sleep(0.05)
        raise RuntimeError(f"chromium wrote no {path.name} within {self.timeout_s:.0f} s")

    def _page_socket(self, port: int) -> str:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.05)
        raise RuntimeError("chromium shows no page target")

    def send(self, method: str, **params) -> dict:
        """Call ``method``; events arriving meanwhile are recorded in the current load."""
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        load = self.load
        if load is None or method is None:
            return
        if method == "Runtime.consoleAPICalled":
            load.console.append(params)
        elif method == "Runtime.exceptionThrown":
            load.exceptions.append(params)
        elif method == "Log.entryAdded":
            load.log.append(params["entry"])
        elif method == "Page.javascriptDialogOpening":
            load.dialogs.append(params)
            self.ws.send(json.dumps({"id": 0, "method": "Page.handleJavaScriptDialog", "params": {"accept": True}}))
        elif method == "Network.requestWillBeSent":
            load.requests.append(params["request"]["url"])

    def open(self, path: Path, settle_s: float = 0.3) -> PageLoad:
        """Load ``path`` and wait for its load event (and ``settle_s`` more for late messages)."""
        self.load = PageLoad()
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable")
        self.send("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self._event(msg)
            if msg.get("method") == "Page.loadEventFired":
                break
        else:
            raise RuntimeError(f"{path} did not finish loading within {self.timeout_s:.0f} s")
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            self.evaluate("1")
            time.sleep(0.05)
        return self.load

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable results only)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, out: Path, width: int = 1200) -> Path:
        """A PNG of the whole page at ``width`` CSS pixels."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=min(height, 16000),
                  deviceScaleFactor=1, mobile=False)
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        out.write_bytes(base64.b64decode(shot["data"]))
        self.send("Emulation.clearDeviceMetricsOverride")
        return out

    def shot_of(self, selector_index: tuple[str, int]) -> bytes:
        """A PNG of one element (``document.querySelectorAll(selector)[index]``) as drawn."""
        selector, index = selector_index
        box = self.evaluate(f"(() => {{ const e = document.querySelectorAll({json.dumps(selector)})[{index}];"
                            "e.scrollIntoView(); const r = e.getBoundingClientRect();"
                            "return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()")
        x, y, w, h = box
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": x, "y": y, "width": max(w, 1), "height": max(h, 1), "scale": 1})
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:  # noqa: BLE001 - the browser may already be gone; the process is ended below
            pass
        try:
            self.ws.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    import struct

    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


def png_rgb(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG: {header}"
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        _unfilter(kind, line, prev, bpp)
        rows.append(bytes(line) if bpp == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        prev = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 255
        elif kind == 2:
            line[i] = (line[i] + up) & 255
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 255
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255


def colored_pixels(png: bytes) -> int:
    """Pixels of a clear hue (not white, grey or black): where the report drew its sides' colours."""
    _, _, rows = png_rgb(png)
    count = 0
    for row in rows:
        for i in range(0, len(row), 3):
            r, g, b = row[i], row[i + 1], row[i + 2]
            if max(r, g, b) - min(r, g, b) > 60:
                count += 1
    return count
