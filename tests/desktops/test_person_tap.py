"""The recording relay's reading of a VNC client's bytes (:mod:`vnc_use.desktops.person_tap`):
clicks with positions, key presses counted, text never kept, any split of the stream."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from vnc_use.desktops.person_tap import ClientReader, _ServerFilter

SECRET = b"correct horse battery staple"


def _client_stream() -> bytes:
    """A VNC-auth client session: version, type 2, the response, ClientInit, messages."""
    out = b"RFB 003.008\n" + bytes([2]) + b"R" * 16 + b"\x01"
    out += bytes([0, 0, 0, 0]) + b"\x00" * 16  # SetPixelFormat
    out += struct.pack(">BBH", 2, 0, 2) + struct.pack(">ii", 0, -223)  # SetEncodings
    out += struct.pack(">BBHHHH", 3, 1, 0, 0, 100, 100)  # FramebufferUpdateRequest
    out += struct.pack(">BBHH", 5, 0, 10, 20)  # a move
    out += struct.pack(">BBHH", 5, 1, 10, 20)  # left button down: a click
    out += struct.pack(">BBHH", 5, 1, 11, 21)  # dragging: not another click
    out += struct.pack(">BBHH", 5, 0, 11, 21)
    for ch in SECRET:  # each key down and up
        out += struct.pack(">BBHI", 4, 1, 0, ch) + struct.pack(">BBHI", 4, 0, 0, ch)
    out += struct.pack(">BxxxI", 6, len(SECRET)) + SECRET  # ClientCutText: skipped
    caps = struct.pack(">II", 0x1F000001, 0x100000)  # noVNC's extended clipboard capabilities
    out += struct.pack(">Bxxxi", 6, -len(caps)) + caps  # (its length is negative)
    out += struct.pack(">BBHI", 255, 0, 1, 0x61) + struct.pack(">I", 30)  # QEMU key down
    out += struct.pack(">BBHH", 5, 4, 300, 400)  # right button down
    return out


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
def test_clicks_and_key_counts_from_any_split(sizes: list[int]) -> None:
    clicks: list[tuple[int, int, int]] = []
    keys: list[int] = []
    lost: list[str] = []
    reader = ClientReader(lambda x, y, b: clicks.append((x, y, b)), keys.append, lost.append)
    data, i = _client_stream(), 0
    for size in sizes * (len(data) // max(1, sum(sizes)) + 1):
        reader.feed(data[i : i + size])
        i += size
        if i >= len(data):
            break
    reader.feed(data[i:])
    assert lost == []
    assert clicks == [(10, 20, 1), (300, 400, 3)]
    assert sum(keys) == len(SECRET) + 1
    assert SECRET not in bytes(reader.buffer)


def test_an_unreadable_client_stops_the_recording_not_the_relay() -> None:
    lost: list[str] = []
    reader = ClientReader(lambda *a: None, lambda n: None, lost.append)
    reader.feed(b"RFB 003.008\n" + bytes([19]))  # VeNCrypt: not readable
    assert lost and "security type 19" in lost[0]
    reader.feed(b"more bytes")  # nothing raised
    assert len(lost) == 1


def test_the_server_offers_only_readable_security_types() -> None:
    server = _ServerFilter()
    out = server.feed(b"RFB 003.008\n")
    assert out == b"RFB 003.008\n"
    assert server.feed(bytes([3, 19, 2, 18])) == bytes([1, 2])  # VncAuth only
    assert server.feed(b"after") == b"after"
