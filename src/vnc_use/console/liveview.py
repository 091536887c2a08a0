"""The live desktop on a run's page: noVNC in the page, the RFB stream through the console.

The console logs in to the VNC server itself and offers the page a session that needs no
password (RFB security type None), then relays the bytes both ways. So no password reaches the
browser: not in a URL, not in a file the page fetches, not in a WebSocket frame.

**View only**: the console logs in with the desktop's *view-only* password where there is one
(the local desktop's, an RDP bridge's, ``VNC_VIEW_PASSWORD``): the VNC server then ignores
every key and pointer event of the session, whatever is done to the page. Where the console
has only the full password, it drops the page's key, pointer and clipboard messages itself
(RFB client messages 4, 5 and 6, and QEMU's extended key event), so the page still cannot
act on the desktop.

**Interactive, for the run's holder only** (:mod:`vnc_use.console.holding`): the session of
the browser that holds the run (checked on the server when the WebSocket opens) logs in with
the desktop's full password and forwards the page's key, pointer and clipboard messages while
a :class:`PersonSession` allows it -- through the same reader as ``vnc-use view
--interactive``'s recording relay (:class:`~vnc_use.desktops.person_tap.ClientReader`): each
click with its position, key presses only as a count, never which keys. The session is
revoked (input dropped at once, then the session closed: the page reconnects view-only) when
the run is handed back or taken by someone else, by this console or from anywhere else (the
hold is checked again every :data:`HOLD_POLL_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.websockets import WebSocket, WebSocketDisconnect

from vnc_use.desktops.person_tap import ClientReader, OnClick, OnKeys
from vnc_use.desktops.rfb_security import vnc_auth_response

__all__ = ["HOLD_POLL_S", "LiveTarget", "PersonSession", "relay"]

log = logging.getLogger(__name__)

_VERSION = b"RFB 003.008\n"
_NONE, _VNC_AUTH = 1, 2
# client-to-server messages and their sizes after the type byte (None: it has a length)
_FIXED = {
    0: 19,
    2: None,
    3: 9,
    4: 7,
    5: 5,
    6: None,
    150: 9,
    248: None,
    250: 3,
    251: None,
    255: None,
}
_INPUT = frozenset({4, 5, 6, 255})
HOLD_POLL_S = 0.3
"""How often a holder's session asks whether the run is still theirs."""


@dataclass(frozen=True)
class LiveTarget:
    """A VNC server to show and how the console logs in to it."""

    host: str
    port: int
    password: str | None
    enforced: bool
    """True when ``password`` is a view-only one the server enforces."""
    full_password: str | None = None
    """The desktop's full password, for the holder's interactive session (None: none here)."""


class PersonSession:
    """The interactive session of the run's holder: their input reaches the desktop while
    :attr:`allowed`, and is reported (clicks with positions, key presses as a count) to
    ``on_click`` / ``on_keys``; :meth:`revoke` ends it."""

    def __init__(
        self,
        person: str,
        on_click: OnClick,
        on_keys: OnKeys,
        on_lost: Callable[[str], None] = lambda _why: None,
    ) -> None:
        self.person = person
        self.allowed = True
        self.reader = ClientReader(on_click, on_keys, on_lost, stage="messages")
        self.ended = asyncio.Event()
        self.closed = asyncio.Event()
        """Set once everything of the session is finished (its video segment too)."""

    def revoke(self) -> None:
        """No more input from this session (at once), and end it (call in the event loop)."""
        self.allowed = False
        self.ended.set()


class _Buffer:
    """Bytes read from a WebSocket, handed out by count."""

    def __init__(self, websocket: WebSocket) -> None:
        self.ws = websocket
        self.data = b""

    async def read(self, n: int) -> bytes:
        while len(self.data) < n:
            self.data += await self.ws.receive_bytes()
        out, self.data = self.data[:n], self.data[n:]
        return out


async def _server_login(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, password: str | None
) -> None:
    """The RFB handshake with the VNC server, up to its SecurityResult."""
    version = await reader.readexactly(12)
    if not version.startswith(b"RFB "):
        raise ConnectionError("not a VNC server")
    writer.write(_VERSION)
    count = (await reader.readexactly(1))[0]
    if count == 0:
        length = struct.unpack(">I", await reader.readexactly(4))[0]
        raise ConnectionError((await reader.readexactly(length)).decode(errors="replace"))
    offered = list(await reader.readexactly(count))
    if password and _VNC_AUTH in offered:
        writer.write(bytes([_VNC_AUTH]))
        challenge = await reader.readexactly(16)
        writer.write(vnc_auth_response(password, challenge))
    elif _NONE in offered:
        writer.write(bytes([_NONE]))
    else:
        raise ConnectionError(f"the VNC server offers no login the console can use: {offered}")
    await writer.drain()
    if struct.unpack(">I", await reader.readexactly(4))[0] != 0:
        raise ConnectionError("the VNC server refused the console's login")


async def _page_login(page: _Buffer) -> None:
    """The RFB handshake with the page: version 3.8, security type None."""
    await page.ws.send_bytes(_VERSION)
    await page.read(12)
    await page.ws.send_bytes(bytes([1, _NONE]))
    await page.read(1)
    await page.ws.send_bytes(struct.pack(">I", 0))


async def _page_to_server(
    page: _Buffer,
    writer: asyncio.StreamWriter,
    passthrough: bool,
    session: PersonSession | None = None,
) -> None:
    """The page's messages to the server: all of them (``passthrough``: the server enforces
    view-only), else read one by one, input only while ``session`` allows it."""
    if passthrough:
        if page.data:
            writer.write(page.data)
            page.data = b""
        while True:
            writer.write(await page.ws.receive_bytes())
            await writer.drain()
    writer.write(await page.read(1))  # ClientInit: the shared flag
    while True:
        kind = (await page.read(1))[0]
        size = _FIXED.get(kind, -1)
        if size == -1:
            raise ConnectionError(f"an RFB message the console does not relay: {kind}")
        if size is None:
            body = await _sized_body(page, kind)
        else:
            body = await page.read(size)
        message = bytes([kind]) + body
        if kind in _INPUT:
            if session is None or not session.allowed:
                continue
            session.reader.feed(message)  # counts it; which key is never read
        writer.write(message)
        await writer.drain()


async def _sized_body(page: _Buffer, kind: int) -> bytes:
    """The rest of a client message whose length is in it."""
    if kind == 2:  # SetEncodings: pad, count(u16), count * s32
        head = await page.read(3)
        return head + await page.read(4 * struct.unpack(">H", head[1:3])[0])
    if kind == 6:  # ClientCutText: pad(3), length(s32; negative: extended clipboard), text
        head = await page.read(7)
        return head + await page.read(abs(struct.unpack(">i", head[3:7])[0]))
    if kind == 251:  # SetDesktopSize: pad, w, h, count(u8), pad, count * 16
        head = await page.read(7)
        return head + await page.read(16 * head[5])
    if kind == 248:  # ClientFence: pad(3), flags(u32), length(u8), payload
        head = await page.read(8)
        return head + await page.read(head[7])
    if kind == 255:  # QEMU: only its extended key event (subtype 0): down(u16), sym, code
        sub = await page.read(1)
        if sub[0] == 0:
            return sub + await page.read(10)
    raise ConnectionError(f"an RFB message the console does not relay: {kind}")


async def _server_to_page(reader: asyncio.StreamReader, ws: WebSocket) -> None:
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        await ws.send_bytes(chunk)


async def _watch(session: PersonSession, still_held: Callable[[], Awaitable[bool]]) -> None:
    """Revoke ``session`` once the run is no longer its person's; return when it ends."""
    while not session.ended.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(session.ended.wait(), HOLD_POLL_S)
        if not session.ended.is_set() and not await still_held():
            session.revoke()


async def relay(
    websocket: WebSocket,
    target: LiveTarget,
    session: PersonSession | None = None,
    still_held: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Serve one page's live view of ``target`` until either side closes: view only, or,
    with ``session`` (the run's holder; ``still_held`` asks whether it still is), with the
    person's input forwarded and recorded until the session is revoked."""
    if session is not None and not target.full_password:
        session = None  # no full password here: the holder watches too
    password = target.full_password if session is not None else target.password
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(target.host, target.port), 10
        )
    except (OSError, asyncio.TimeoutError):
        await websocket.close(code=1011)
        return
    try:
        await asyncio.wait_for(_server_login(reader, writer, password), 10)
        protocols = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol="binary" if "binary" in protocols else None)
        page = _Buffer(websocket)
        await _page_login(page)
        passthrough = target.enforced and session is None
        jobs = [
            asyncio.ensure_future(_page_to_server(page, writer, passthrough, session)),
            asyncio.ensure_future(_server_to_page(reader, websocket)),
        ]
        if session is not None:
            held = still_held or _always
            jobs.append(asyncio.ensure_future(_watch(session, held)))
        done, rest = await asyncio.wait(jobs, return_when=asyncio.FIRST_COMPLETED)
        for job in rest:
            job.cancel()
        if session is not None:
            session.revoke()
        for job in done:
            exc = job.exception()
            if exc is not None and not isinstance(exc, WebSocketDisconnect):
                log.debug("live view ended: %s", exc)
    except (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
        log.debug("live view failed: %s", exc)
    except WebSocketDisconnect:
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await websocket.close()


async def _always() -> bool:
    return True
