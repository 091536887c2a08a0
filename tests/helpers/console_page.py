"""Driving the web console's pages in headless Chromium as a person would: controls found by
their accessible names (the Chromium accessibility tree), a run's status read from the page."""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from websockets.sync.client import ClientConnection, connect

from chromium import Page

__all__ = [
    "LiveSocket",
    "click_desktop",
    "fill",
    "live_socket",
    "on_canvas",
    "press",
    "status_of",
    "type_keys",
    "value_of",
    "wait",
    "wait_live",
    "wait_status",
]


def wait(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def _node(page: Page, name: str, role: str | None = None) -> dict[str, Any]:
    for _ in range(50):  # the page may reload meanwhile (a run that ended): look again
        try:
            return _find(page, name, role)
        except AssertionError as exc:
            if "Could not find node" not in str(exc) and "no control named" not in str(exc):
                raise
            time.sleep(0.1)
    return _find(page, name, role)


def _find(page: Page, name: str, role: str | None = None) -> dict[str, Any]:
    page.send("Page.bringToFront")  # a tab in the background lays out nothing: no AX tree
    root = page.send("DOM.getDocument", depth=0)["root"]["nodeId"]
    params: dict[str, Any] = {"nodeId": root, "accessibleName": name}
    if role:
        params["role"] = role
    nodes = [
        n for n in page.send("Accessibility.queryAXTree", **params)["nodes"] if not n.get("ignored")
    ]
    assert nodes, f"no control named {name!r} on the page"
    return nodes[0]


def _call(page: Page, name: str, function: str, role: str | None = None) -> Any:
    node = _node(page, name, role)
    obj = page.send("DOM.resolveNode", backendNodeId=node["backendDOMNodeId"])["object"]
    reply = page.send(
        "Runtime.callFunctionOn",
        objectId=obj["objectId"],
        functionDeclaration=function,
        returnByValue=True,
    )
    return reply["result"].get("value")


def press(page: Page, name: str) -> None:
    """Click the button whose accessible name is ``name``."""
    _call(page, name, "function () { this.click(); }", "button")


def fill(page: Page, name: str, value: str) -> None:
    """Set the text field whose accessible name is ``name``."""
    _call(page, name, f"function () {{ this.value = {json.dumps(value)}; }}", "textbox")


def status_of(page: Page) -> str:
    try:
        return str(page.evaluate("(document.body && document.body.dataset.status) || ''"))
    except AssertionError as exc:  # the page reloads (a run that ended): ask again
        if "navigated" in str(exc) or "context" in str(exc).lower():
            return ""
        raise


def wait_status(page: Page, *statuses: str, timeout: float = 60) -> str:
    return str(
        wait(f"status {statuses}", lambda: status_of(page) in statuses and status_of(page), timeout)
    )


def value_of(page: Page, name: str, role: str | None = None) -> Any:
    """The value of the control whose accessible name is ``name``."""
    return _call(page, name, "function () { return this.value; }", role)


# -- the live view (noVNC's canvas on a run's page) ------------------------------------------
def wait_live(page: Page, mode: str) -> None:
    """Wait until the page's live view is connected in ``mode``."""
    wait(
        f"a {mode} live view",
        lambda: page.evaluate(
            "(() => { const b = document.getElementById('screen');"
            f" return b.dataset.state === 'connected' && b.dataset.mode === {json.dumps(mode)}"
            " && !!b.querySelector('canvas'); })()"
        ),
    )


def on_canvas(page: Page, size: tuple[int, int], x: int, y: int) -> tuple[float, float]:
    """Where desktop pixel (x, y) is in the page's viewport (noVNC scales the desktop)."""
    page.send("Page.bringToFront")  # a tab in the background gets no input events
    box = page.evaluate(
        "(() => { const c = document.querySelector('#screen canvas'); c.scrollIntoView();"
        " const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()"
    )
    width, height = size
    return box[0] + (x + 0.5) * box[2] / width, box[1] + (y + 0.5) * box[3] / height


def click_desktop(page: Page, size: tuple[int, int], x: int, y: int) -> None:
    """A real mouse click on the live view's canvas at desktop pixel (x, y)."""
    cx, cy = on_canvas(page, size, x, y)
    page.send("Input.dispatchMouseEvent", type="mouseMoved", x=cx, y=cy)
    for kind in ("mousePressed", "mouseReleased"):
        page.send("Input.dispatchMouseEvent", type=kind, x=cx, y=cy, button="left", clickCount=1)


def _key(page: Page, key: str, code: str, vk: int, text: str = "", modifiers: int = 0) -> None:
    params = {"key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers}
    page.send("Input.dispatchKeyEvent", type="keyDown", text=text, **params)
    page.send("Input.dispatchKeyEvent", type="keyUp", **params)


def type_keys(page: Page, text: str, clear_first: bool = False) -> None:
    """Real key presses into the focused canvas (``clear_first``: select all, delete)."""
    if clear_first:
        ctrl = {"key": "Control", "code": "ControlLeft", "windowsVirtualKeyCode": 17}
        page.send("Input.dispatchKeyEvent", type="rawKeyDown", modifiers=2, **ctrl)
        _key(page, "a", "KeyA", 65, modifiers=2)
        page.send("Input.dispatchKeyEvent", type="keyUp", **ctrl)
        _key(page, "Backspace", "Backspace", 8)
    for ch in text:
        if ch == " ":
            _key(page, " ", "Space", 32, " ")
        else:
            _key(page, ch, f"Key{ch.upper()}", ord(ch.upper()), ch)


@dataclass
class LiveSocket:
    """A run's live view (``/runs/{id}/websockify``) spoken to as a raw RFB client: past the
    handshake (no security, shared), with the desktop's size from the server's init."""

    ws: ClientConnection
    size: tuple[int, int] = (0, 0)
    _got: bytes = field(default=b"", repr=False)

    def read(self, n: int) -> bytes:
        """Exactly ``n`` bytes of the stream."""
        while len(self._got) < n:
            self._got += self.ws.recv(timeout=10)  # type: ignore[operator]
        out, self._got = self._got[:n], self._got[n:]
        return bytes(out)


@contextlib.contextmanager
def live_socket(
    base: str, thread_id: str, headers: dict[str, str], query: str = ""
) -> Iterator[LiveSocket]:
    """The console's live view of ``thread_id`` as a raw RFB client (see :class:`LiveSocket`)."""
    url = base.replace("http://", "ws://") + f"/runs/{thread_id}/websockify{query}"
    with connect(url, additional_headers=headers, open_timeout=10, max_size=None) as ws:
        live = LiveSocket(ws)
        assert live.read(12) == b"RFB 003.008\n"
        ws.send(b"RFB 003.008\n")
        assert live.read(2) == bytes([1, 1])  # one security type: None
        ws.send(bytes([1]))
        assert live.read(4) == b"\0\0\0\0"
        ws.send(bytes([1]))  # ClientInit, shared
        width, height = struct.unpack(">HH", live.read(4))
        rest = live.read(16 + 4)
        live.read(struct.unpack(">I", rest[16:20])[0])  # the desktop's name
        live.size = (width, height)
        yield live
