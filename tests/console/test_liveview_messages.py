"""The console's live view reads every client message noVNC sends by its length, so the page's
input can be told apart (dropped, or forwarded for the run's holder) without stalling: an
extended-clipboard ``ClientCutText`` (its length negative), ``ClientFence``,
``EnableContinuousUpdates`` and QEMU's extended key event."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from vnc_use.console.liveview import PersonSession, _page_to_server


class _Socket:
    """The page's WebSocket: hands out the given frames, then waits forever."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = list(frames)

    async def receive_bytes(self) -> bytes:
        if self.frames:
            return self.frames.pop(0)
        await asyncio.Event().wait()
        return b""


class _Writer:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None


def _page_stream() -> list[bytes]:
    caps = struct.pack(">II", 0x1F000001, 0x100000)
    return [
        b"\x01",  # ClientInit
        struct.pack(">Bxxxi", 6, -len(caps)) + caps,  # extended clipboard: negative length
        struct.pack(">BxxxIB", 248, 0x80000001, 1) + b"x",  # ClientFence with a payload
        struct.pack(">BBHHHH", 150, 1, 0, 0, 64, 64),  # EnableContinuousUpdates
        struct.pack(">BBHH", 5, 1, 7, 9) + struct.pack(">BBHH", 5, 0, 7, 9),  # a click
        struct.pack(">BBHII", 255, 0, 1, 0x61, 30),  # QEMU extended key down
        struct.pack(">BBHHHH", 3, 0, 0, 0, 8, 8),  # FramebufferUpdateRequest
    ]


async def _relay(session: PersonSession | None) -> bytes:
    from vnc_use.console.liveview import _Buffer

    page: Any = _Buffer(_Socket(_page_stream()))  # type: ignore[arg-type]
    writer: Any = _Writer()
    job = asyncio.ensure_future(_page_to_server(page, writer, False, session))
    for _ in range(200):
        if writer.data.endswith(struct.pack(">BBHHHH", 3, 0, 0, 0, 8, 8)):
            break
        await asyncio.sleep(0.01)
    job.cancel()
    return bytes(writer.data)


def test_a_view_only_page_has_its_input_dropped_and_the_rest_relayed() -> None:
    sent = asyncio.run(_relay(None))
    assert sent.startswith(b"\x01") and sent.endswith(struct.pack(">BBHHHH", 3, 0, 0, 0, 8, 8))
    assert struct.pack(">BBHH", 5, 1, 7, 9) not in sent and b"\xff\x00" not in sent
    assert struct.pack(">BBHHHH", 150, 1, 0, 0, 64, 64) in sent


def test_the_holders_page_has_its_input_forwarded_and_counted() -> None:
    clicks: list[tuple[int, int, int]] = []
    keys: list[int] = []

    async def go() -> bytes:
        session = PersonSession("console 0123456789", lambda *c: clicks.append(c), keys.append)
        return await _relay(session)

    sent = asyncio.run(go())
    assert (
        struct.pack(">BBHH", 5, 1, 7, 9) in sent
        and struct.pack(">BBHII", 255, 0, 1, 0x61, 30) in sent
    )
    assert clicks == [(7, 9, 1)] and sum(keys) == 1
