"""A relay in front of a VNC server that records what a person does through it: their
clicks, with positions, and how many keys they pressed -- never which keys, never text.

``vnc-use view --interactive ID`` puts it between the person (the browser's live view, or any
VNC client given its address) and the run's desktop while they hold it
(:mod:`vnc_use.runs.takeover`), so the run's record says what the person did without
keeping what they typed (a person who takes over to log in types a password).

It reads the client's side of RFB 3.7 / 3.8: the version, the security type the client
chooses, the VNC authentication response (passed on, never kept), ``ClientInit``, then each
client message by its length -- ``PointerEvent`` (a button going down is a click),
``KeyEvent`` and QEMU's extended key event (a key going down is counted), and the others
skipped (``ClientCutText``'s text is relayed and never looked at). The server's list of
security types is narrowed to None and VNC authentication, whose client side can be read;
a server that offers neither gets none (the client says so). Anything it cannot read stops
the recording, never the relay, and is told once (``on_lost``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from collections.abc import Callable

from vnc_use.desktops.service import Service
from vnc_use.errors import ConfigError

__all__ = ["ClientReader", "OnClick", "OnKeys", "PersonTap"]

log = logging.getLogger(__name__)

READABLE_TYPES = (2, 1)
"""Security types whose client side the tap reads: VNC authentication, None."""

OnClick = Callable[[int, int, int], None]
OnKeys = Callable[[int], None]

_FIXED = {0: 20, 3: 10, 4: 8, 5: 6, 150: 10, 250: 4}
"""Client messages of a fixed length, by type."""


class ClientReader:
    """Reads the client's bytes of one connection and reports clicks and key presses."""

    def __init__(
        self,
        on_click: OnClick,
        on_keys: OnKeys,
        on_lost: Callable[[str], None],
        *,
        stage: str = "version",
    ):
        """``stage="messages"`` reads client messages only (the handshake was read by the
        caller: the console's live view)."""
        self.on_click, self.on_keys, self.on_lost = on_click, on_keys, on_lost
        self.buffer = bytearray()
        self.stage = stage
        self.buttons = 0
        self.lost = False

    def feed(self, data: bytes) -> None:
        """The next bytes the client sent (any split)."""
        if self.lost:
            return
        self.buffer += data
        try:
            while self._step():
                pass
        except ValueError as exc:
            self.lost = True
            self.buffer.clear()
            self.on_lost(str(exc))

    def _take(self, n: int) -> bytes | None:
        if len(self.buffer) < n:
            return None
        taken = bytes(self.buffer[:n])
        del self.buffer[:n]
        return taken

    def _step(self) -> bool:
        """Consume one complete unit; False when more bytes are needed."""
        if self.stage == "version":
            version = self._take(12)
            if version is None:
                return False
            if version[:8] != b"RFB 003." or version[8:11] in (b"003",):
                raise ValueError(f"the client speaks {version!r}, not RFB 3.7 or 3.8")
            self.stage = "security"
            return True
        if self.stage == "security":
            chosen = self._take(1)
            if chosen is None:
                return False
            if chosen[0] not in READABLE_TYPES:
                raise ValueError(f"the client chose security type {chosen[0]}")
            self.stage = "auth" if chosen[0] == 2 else "init"
            return True
        if self.stage in ("auth", "init"):
            n = 16 if self.stage == "auth" else 1
            if self._take(n) is None:  # the response is passed on, never kept
                return False
            self.stage = "init" if self.stage == "auth" else "messages"
            return True
        return self._message()

    def _message(self) -> bool:
        if not self.buffer:
            return False
        kind = self.buffer[0]
        size = self._size(kind)
        if size is None:
            return False
        message = self._take(size)
        assert message is not None
        if kind == 5:
            mask, x, y = struct.unpack(">BHH", message[1:6])
            pressed = mask & ~self.buttons & 0b111  # left, middle, right going down
            for bit in range(3):
                if pressed & (1 << bit):
                    self.on_click(x, y, bit + 1)
            self.buttons = mask
        elif _key_down(kind, message):
            self.on_keys(1)
        return True

    def _size(self, kind: int) -> int | None:
        """The whole message's length, once enough of it is here to know (None: not yet)."""
        b = self.buffer
        if kind in _FIXED:
            size = _FIXED[kind]
        elif kind == 2:  # SetEncodings
            size = 4 + 4 * struct.unpack(">H", b[2:4])[0] if len(b) >= 4 else -1
        elif kind == 6:  # ClientCutText (negative length: extended clipboard): never read
            size = 8 + abs(struct.unpack(">i", b[4:8])[0]) if len(b) >= 8 else -1
        elif kind == 248:  # ClientFence
            size = 9 + b[8] if len(b) >= 9 else -1
        elif kind == 251:  # SetDesktopSize
            size = 8 + 16 * b[6] if len(b) >= 7 else -1
        elif kind == 255:  # QEMU: the extended key event only
            if len(b) < 2:
                return None
            if b[1] != 0:
                raise ValueError(f"the client sent QEMU message {b[1]}")
            size = 12
        else:
            raise ValueError(f"the client sent message type {kind}")
        return None if size < 0 or len(b) < size else size


def _key_down(kind: int, message: bytes) -> bool:
    """A ``KeyEvent`` or QEMU extended key event pressing a key (which key is never read)."""
    if kind == 4:
        return bool(message[1])
    return kind == 255 and bool(struct.unpack(">H", message[2:4])[0])


class _ServerFilter:
    """The server's side until its security types: the version passed on, then the list of
    types narrowed to the readable ones; everything after that passed on as it comes."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.stage = "version"

    def feed(self, data: bytes) -> bytes:
        if self.stage == "done":
            return data
        self.buffer += data
        out = b""
        if self.stage == "version":
            if len(self.buffer) < 12:
                return b""
            out, self.buffer = bytes(self.buffer[:12]), self.buffer[12:]
            # RFB 3.3 servers choose the type themselves (the client side is then not read)
            self.stage = "types" if out[8:11] != b"003" else "done"
            if self.stage == "done":
                return out + bytes(self.buffer)
        if not self.buffer:
            return out
        count = self.buffer[0]
        if count == 0 or len(self.buffer) < 1 + count:  # a refusal (its reason follows)
            if count == 0:
                self.stage = "done"
                return out + bytes(self.buffer)
            return out
        offered = list(self.buffer[1 : 1 + count])
        kept = [t for t in READABLE_TYPES if t in offered] or [offered[0]]
        self.stage = "done"
        return out + bytes([len(kept), *kept]) + bytes(self.buffer[1 + count :])


class PersonTap(Service):
    """Listen on ``host:port`` (127.0.0.1, a free port by default) and relay each connection
    to the VNC server at ``target``, reporting the person's clicks and key presses."""

    def __init__(
        self,
        target: tuple[str, int],
        on_click: OnClick,
        on_keys: OnKeys,
        on_lost: Callable[[str], None] = lambda _why: None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.target = target
        self.on_click, self.on_keys, self.on_lost = on_click, on_keys, on_lost
        try:
            self._listener = socket.create_server((host, port))
        except OSError as exc:
            raise ConfigError(
                f"the recording relay cannot listen on {host}:{port}: {exc}"
            ) from None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> PersonTap:
        self._spawn(self._accept, "person-tap")
        return self

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError as exc:
                log.info("the recording relay cannot reach %s: %s", self.target, exc)
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            reader = ClientReader(self.on_click, self.on_keys, self.on_lost)
            self._spawn(self._pump, "person-tap-in", client, server, reader.feed)
            self._spawn(self._pump, "person-tap-out", server, client, _ServerFilter().feed)

    def _pump(
        self, source: socket.socket, sink: socket.socket, seen: Callable[[bytes], object]
    ) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                out = seen(data)
                sink.sendall(out if isinstance(out, bytes) else data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for thread in threads:
            thread.join(timeout=5)
