"""The live desktop on a run's page: noVNC in the page, the RFB stream through the console.

The console logs in to the VNC server itself and offers the page a session that needs no
password (RFB security type None), then relays the bytes both ways. So no password reaches the
browser: not in a URL, not in a file the page fetches, not in a WebSocket frame.

**View only**: the console logs in with the desktop's *view-only* password where there is one
(the local desktop's, an RDP bridge's, ``VNC_VIEW_PASSWORD``): the VNC server then ignores
every key and pointer event of the session, whatever is done to the page. Where the console
has only the full password, it drops the page's key, pointer and clipboard messages itself
(RFB client messages 4, 5 and 6), so the page still cannot act on the desktop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from dataclasses import dataclass

from starlette.websockets import WebSocket, WebSocketDisconnect

from vnc_use.desktops.rfb_security import vnc_auth_response

__all__ = ["LiveTarget", "relay"]

log = logging.getLogger(__name__)

_VERSION = b"RFB 003.008\n"
_NONE, _VNC_AUTH = 1, 2
# client-to-server messages and their sizes after the type byte (None: it has a length)
_FIXED = {0: 19, 2: None, 3: 9, 4: 7, 5: 5, 6: None, 150: 9, 248: None, 250: 3, 251: None}
_INPUT = frozenset({4, 5, 6})


@dataclass(frozen=True)
class LiveTarget:
    """A VNC server to show and how the console logs in to it."""

    host: str
    port: int
    password: str | None
    enforced: bool
    """True when ``password`` is a view-only one the server enforces."""


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


async def _page_to_server(page: _Buffer, writer: asyncio.StreamWriter, drop_input: bool) -> None:
    if not drop_input:
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
        if kind not in _INPUT:
            writer.write(bytes([kind]) + body)
            await writer.drain()


async def _sized_body(page: _Buffer, kind: int) -> bytes:
    """The rest of a client message whose length is in it."""
    if kind == 2:  # SetEncodings: pad, count(u16), count * s32
        head = await page.read(3)
        return head + await page.read(4 * struct.unpack(">H", head[1:3])[0])
    if kind == 6:  # ClientCutText: pad(3), length(u32), text
        head = await page.read(7)
        return head + await page.read(struct.unpack(">I", head[3:7])[0] & 0x7FFFFFFF)
    if kind == 251:  # SetDesktopSize: pad, w, h, count(u8), pad, count * 16
        head = await page.read(7)
        return head + await page.read(16 * head[5])
    # 248 (QEMU): a subtype byte and then its own fields; noVNC sends none without asking
    raise ConnectionError(f"an RFB message the console does not relay: {kind}")


async def _server_to_page(reader: asyncio.StreamReader, ws: WebSocket) -> None:
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        await ws.send_bytes(chunk)


async def relay(websocket: WebSocket, target: LiveTarget) -> None:
    """Serve one page's live view of ``target`` until either side closes."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(target.host, target.port), 10
        )
    except (OSError, asyncio.TimeoutError):
        await websocket.close(code=1011)
        return
    try:
        await asyncio.wait_for(_server_login(reader, writer, target.password), 10)
        protocols = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol="binary" if "binary" in protocols else None)
        page = _Buffer(websocket)
        await _page_login(page)
        jobs = [
            asyncio.ensure_future(_page_to_server(page, writer, not target.enforced)),
            asyncio.ensure_future(_server_to_page(reader, websocket)),
        ]
        done, rest = await asyncio.wait(jobs, return_when=asyncio.FIRST_COMPLETED)
        for job in rest:
            job.cancel()
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
