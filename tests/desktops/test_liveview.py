"""The live view (`vnc-use view`): noVNC + websockify on 127.0.0.1 behind a token.

A real headless Chromium (Debian's `chromium`) opens the printed URL, driven over the
DevTools protocol; the page must connect and show the desktop's own colours. The token must
guard every HTTP path and the WebSocket, and the page must get the view-only password.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
from PIL import Image
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from vnc_use.desktops.liveview import LiveView
from vnc_use.desktops.local import DESKTOP_COLOR, TERMINAL_COLOR, LocalDesktop
from vnc_use.testing.desktop import TestDesktop

from chromium import Browser
from cli_tools import VNC_USE, listening_addresses, vnc_use

pytestmark = pytest.mark.desktop

URL_RE = re.compile(r"live view \((view only|interactive)\): (http://127\.0\.0\.1:(\d+)/([\w-]+)/)")


# --------------------------------------------------------------------------- helpers


def read_until(proc: subprocess.Popen[bytes], pattern: re.Pattern[str], timeout: float) -> str:
    """Read ``proc``'s stdout (unbuffered) until ``pattern`` matches; returns all read."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + timeout
    while not pattern.search(seen.decode(errors="replace")):
        left = deadline - time.monotonic()
        assert left > 0 and proc.poll() is None, f"no {pattern.pattern!r} in: {seen!r}"
        if selector.select(timeout=left):
            seen += os.read(fd, 65536)
    return seen.decode()


def start_view(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`vnc-use view --port 0 ARGS` in the background."""
    return subprocess.Popen(
        [VNC_USE, "view", "--port", "0", *args],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop_view(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    """SIGTERM the view (by PID); returns its exit code and the rest of its output."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    return proc.returncode, (out + err).decode(errors="replace")


def color_share(image: Image.Image, hex_color: str, tolerance: int = 3) -> float:
    """The share of ``image``'s pixels within ``tolerance`` of ``hex_color``."""
    want = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    rgb = image.convert("RGB")
    hits = sum(
        count
        for count, pixel in rgb.getcolors(maxcolors=rgb.width * rgb.height) or []
        if all(abs(a - b) <= tolerance for a, b in zip(pixel, want, strict=True))
    )
    return hits / (rgb.width * rgb.height)


def http_get(url: str) -> tuple[int, Message, bytes]:
    """Status, headers (case-insensitive) and body of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, b""


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """docs/desktops/local-desktop.md's flow, step 1: `vnc-use desktop up` (in a temporary state
    folder)."""
    folder = tmp_path_factory.mktemp("desktop-state")
    up = vnc_use("desktop", "up", "--state-dir", str(folder))
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield folder
    finally:
        down = vnc_use("desktop", "down", "--state-dir", str(folder))
        assert down.returncode == 0, down.stdout + down.stderr


# --------------------------------------------------------------------------- tests


def test_view_shows_the_desktop_in_a_browser(state_dir: Path, tmp_path: Path) -> None:
    """docs/desktops/local-desktop.md's flow, step 2: `vnc-use view`, opened in Chromium, shows
    the desktop."""
    view = start_view("--state-dir", str(state_dir))
    try:
        printed = read_until(view, URL_RE, timeout=30)
        match = URL_RE.search(printed)
        assert match is not None and match.group(1) == "view only"
        url, port = match.group(2), int(match.group(3))
        assert listening_addresses(port) == ["127.0.0.1"]
        creds = LocalDesktop(state_dir).credentials()
        assert creds.password not in printed and creds.view_password not in printed

        browser = Browser(tmp_path / "chromium-profile")
        try:
            page = browser.new_page()
            page.send(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=860,
                deviceScaleFactor=1,
                mobile=False,
            )
            page.send("Page.navigate", url=url)
            deadline = time.monotonic() + 30
            while page.evaluate("document.body && document.body.dataset.state") != "connected":
                state = page.evaluate("document.body && document.body.innerText")
                assert time.monotonic() < deadline, f"the page never connected: {state}"
                time.sleep(0.05)
            assert "view only" in page.evaluate("document.body.innerText")
            assert page.evaluate("window.vncUseRfb.viewOnly") is True
            shot = tmp_path / "live-view.png"
            while True:  # frames arrive after the connect event
                shot.write_bytes(page.capture())
                image = Image.open(shot)
                desktop, terminal = (color_share(image, c) for c in (DESKTOP_COLOR, TERMINAL_COLOR))
                if desktop > 0.005 and terminal > 0.1:
                    break
                assert time.monotonic() < deadline, (
                    f"no desktop in {shot}: {desktop:.1%} desktop, {terminal:.1%} terminal colour"
                )
                time.sleep(0.1)
        finally:
            browser.close()
    finally:
        code, rest = stop_view(view)
    assert code == 0, rest
    assert "live view stopped" in rest and "Traceback" not in rest
    assert listening_addresses(port) == []


def test_the_token_guards_every_path(state_dir: Path) -> None:
    desk = LocalDesktop(state_dir)
    state, creds = desk.read_state(), desk.credentials()
    assert state is not None
    with LiveView("127.0.0.1", state.port, creds.view_password) as view:
        base = view.url.rstrip("/")
        root = base.rsplit("/", 1)[0]
        assert view.url == f"http://127.0.0.1:{view.address[1]}/{view.token}/"
        assert len(view.token) >= 32
        for url in (
            f"{root}/",
            f"{root}/core/rfb.js",
            f"{root}/credentials.json",
            f"{root}/{'x' * len(view.token)}/",
            f"{root}/{'x' * len(view.token)}/credentials.json",
            f"{base}",  # no slash: not under the token's folder
            f"{base}/core/",  # no directory listings
            f"{base}/app/ui.js",  # only noVNC's core and vendor modules are served
            f"{base}/core/../vnc.html",
        ):
            status, _, body = http_get(url)
            assert status == 404, url
            assert creds.view_password.encode() not in body

        status, headers, page = http_get(view.url)
        assert status == 200 and b"vnc-use live view" in page and b"view only" in page
        status, headers, module = http_get(f"{base}/core/rfb.js")
        assert status == 200 and "javascript" in headers["content-type"]
        assert b"export default class RFB" in module
        status, headers, body = http_get(f"{base}/credentials.json")
        assert status == 200 and headers["cache-control"] == "no-store"
        assert json.loads(body) == {"password": creds.view_password, "view_only": True}

        ws_root = root.replace("http://", "ws://")
        for bad in (f"{ws_root}/websockify", f"{ws_root}/{'x' * len(view.token)}/websockify"):
            with pytest.raises(InvalidStatus, match="404"):
                ws_connect(bad, open_timeout=10)
        with ws_connect(f"{ws_root}/{view.token}/websockify", open_timeout=10) as ws:
            banner = ws.recv(timeout=10)  # the VNC server's greeting, relayed by websockify
            assert isinstance(banner, bytes) and banner.startswith(b"RFB 003.")


def test_interactive_view_gets_the_full_password(state_dir: Path) -> None:
    view = start_view("--interactive", "--state-dir", str(state_dir))
    try:
        match = URL_RE.search(read_until(view, URL_RE, timeout=30))
        assert match is not None and match.group(1) == "interactive"
        status, _, body = http_get(f"{match.group(2)}credentials.json")
        assert status == 200
        creds = LocalDesktop(state_dir).credentials()
        assert json.loads(body) == {"password": creds.password, "view_only": False}
    finally:
        code, rest = stop_view(view)
    assert code == 0, rest


def test_view_of_another_server(desktop: TestDesktop) -> None:
    """`vnc-use view --vnc ...`: with VNC_VIEW_PASSWORD, or with VNC_PASSWORD and a warning."""
    for variable, enforced in (("VNC_VIEW_PASSWORD", True), ("VNC_PASSWORD", False)):
        env = {"VNC_VIEW_PASSWORD": "", "VNC_PASSWORD": "", variable: desktop.password}
        view = start_view("--vnc", desktop.server, env=env)
        try:
            printed = read_until(view, re.compile(r"Ctrl-C stops"), timeout=30)
            match = URL_RE.search(printed)
            assert match is not None and match.group(1) == "view only"
            assert ("only the page's promise" not in printed) is enforced
            assert desktop.password not in printed
            status, _, body = http_get(f"{match.group(2)}credentials.json")
            assert status == 200 and json.loads(body)["password"] == desktop.password
        finally:
            code, rest = stop_view(view)
        assert code == 0, rest


def test_missing_novnc_names_the_install_command(state_dir: Path) -> None:
    proc = vnc_use("view", "--novnc-dir", str(state_dir / "nowhere"), "--state-dir", str(state_dir))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert line.startswith("vnc-use: the live view needs noVNC")
    assert line.endswith(f"run: {sudo}apt-get install -y novnc")
