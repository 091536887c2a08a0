"""Headless Chromium driven over the DevTools protocol, for the tests that look at a page as a
person would (the run report, the live view).

Chromium runs with its network features off, on 127.0.0.1 only; each :class:`Page` keeps every
console message, exception, failed load and request it saw. Its absence fails the test with the
install command (never a skip).
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from websockets.sync.client import ClientConnection, connect

INSTALL_HINT = "install it with: sudo apt-get install -y chromium (scripts/install.sh does)"


def chromium_binary() -> str:
    """Debian's Chromium; its absence fails the test with the install command."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"headless Chromium is not installed: {INSTALL_HINT}")


class Page:
    """One tab, with everything it logged since :meth:`open` was called."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def open(self, url: str, timeout: float = 30) -> None:
        """Navigate and wait for the load event (all images included)."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.browser.wait_for(self, "Page.loadEventFired", timeout)

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in reply, reply
        return reply["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, exceptions, failed loads: all must be absent."""
        out = []
        for e in self.events:
            method, params = e["method"], e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
            ):
                out.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                out.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                out.append(f"failed load: {params}")
        return out

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        ]

    def capture(self) -> bytes:
        """A PNG of the viewport as it is now."""
        return base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])

    def screenshot(self, path: Path, width: int = 1280) -> Image.Image:
        """A screenshot of the whole page, ``width`` CSS pixels wide."""
        height = 800
        for _ in range(2):  # lay the page out at this width, then fit the height to it
            self.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            height = int(self.evaluate("document.documentElement.scrollHeight"))
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return Image.open(path)


class Browser:
    """Headless Chromium on 127.0.0.1, driven over its DevTools WebSocket (no network use)."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.stderr = (profile.parent / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [
                chromium_binary(),
                *("--headless", "--no-sandbox", "--disable-gpu"),
                *("--disable-background-networking", "--disable-component-update"),
                *("--disable-sync", "--no-first-run", "--no-default-browser-check"),
                "--hide-scrollbars",
                *("--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"),
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            stdin=subprocess.DEVNULL,
        )
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(self._ws_url(), max_size=None, open_timeout=20)
        )
        self._id = 0
        self._pages: dict[str, Page] = {}

    def _ws_url(self, timeout: float = 30) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.profile.parent / "chromium.log").read_text(errors="replace")
                pytest.fail(f"chromium exited with {self.proc.returncode}: {log[-2000:]}")
            lines = port_file.read_text().split() if port_file.exists() else []
            if len(lines) == 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        pytest.fail("chromium did not open its DevTools port")

    def send(self, method: str, params: dict[str, Any], session: str | None = None) -> Any:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = self._receive(30)
            if reply.get("id") == self._id:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})

    def _receive(self, timeout: float) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.ws.recv(timeout=timeout))
        page = self._pages.get(reply.get("sessionId", ""))
        if page is not None and "method" in reply:
            page.events.append(reply)
        return reply

    def wait_for(self, page: Page, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in page.events):
            left = deadline - time.monotonic()
            assert left > 0, f"no {method} within {timeout} s"
            self._receive(left)

    def new_page(self, *, isolated: bool = False) -> Page:
        """A new tab; ``isolated``: in a browser context of its own (its own cookies, as
        another browser's)."""
        params: dict[str, Any] = {"url": "about:blank"}
        if isolated:
            params["browserContextId"] = self.send("Target.createBrowserContext", {})[
                "browserContextId"
            ]
        target = self.send("Target.createTarget", params)["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, session["sessionId"])
        self._pages[page.session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        return page

    def close(self) -> None:
        with contextlib.suppress(Exception):  # it may close the socket before answering
            self.send("Browser.close", {})
        self._stack.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()
