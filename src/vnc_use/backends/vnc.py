"""VNC backend: :class:`VNCController` turns actions into RFB input events and frames.

This is the only module of vnc-use that imports vncdotool and Twisted.

How it uses vncdotool (see ``reference/vncdotool-notes.md`` for the measured traps):

* vncdotool runs the Twisted reactor in one daemon thread. Every operation on a connection
  runs *inside that reactor thread* (it is the client's single owner thread); callers on any
  thread hand it over with ``reactor.callFromThread`` and wait on a per-call
  :class:`concurrent.futures.Future` with a timeout. vncdotool's ``ThreadedVNCClientProxy``
  and its shared result queue are not used for calls, so a late result can never be taken
  by the next call, and ``None``-returning methods such as ``keyEvent`` are safe.
* A per-controller lock serialises operations, so a click (move, press, release) is never
  interleaved with another thread's input.
* Every wait has a deadline. After a timeout the connection is aborted and marked dead.
* ``api.shutdown()`` is registered once with :mod:`atexit` (the reactor cannot restart).
* ``TCP_NODELAY`` is set on the socket (vncdotool's own check never fires).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ipaddress
import logging
import operator
import re
import threading
import time
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from PIL import Image
from twisted.internet import error as twisted_error
from twisted.internet import reactor as _twisted_reactor
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from vncdotool import api
from vncdotool.client import (
    AuthenticationError,
    ProtocolError,
    VNCDoToolClient,
    VNCDoToolFactory,
)
from vncdotool.keys import KEYMAP

from vnc_use.errors import ConfigError, VncAuthError, VncConnectionError, VncTimeoutError
from vnc_use.png import encode_png
from vnc_use.region import ScreenRegion, check_framebuffer
from vnc_use.settle import Rect, SettlePolicy, UpdateWatcher, WatchResult

__all__ = [
    "INPUT_SETTLE",
    "PIXELS_PER_NOTCH",
    "UNMAPPED_KEY_PAUSE",
    "VNCController",
    "parse_server",
    "to_vnc_keys",
]

log = logging.getLogger(__name__)

# vncdotool's VNC-password handshake uses cryptography's TripleDES, which warns on every login
# that it will move; nothing a user of vnc-use can act on.
warnings.filterwarnings("ignore", message="TripleDES has been moved", module=r"vncdotool\.")

T = TypeVar("T")

# Twisted types the global reactor as a module; it is an IReactorCore/IReactorThreads object.
reactor: Any = _twisted_reactor

#: Pixels of scroll that one mouse-wheel notch stands for in :meth:`VNCController.scroll_at`
#: (most toolkits scroll about 3 lines, 50-100 px, per notch). At least one notch is sent.
PIXELS_PER_NOTCH = 100
#: Seconds to let X clients go idle before the first press of a keysym the server may have to
#: add to its keymap (non-ASCII characters); see ``VNCController._keys``. Once per keysym
#: and connection.
UNMAPPED_KEY_PAUSE = 0.03
#: Pixels of scroll that one PageUp/PageDown (or arrow key) stands for in ``scroll``.
PIXELS_PER_PAGE = 400
#: How :meth:`VNCController.settle_input` waits after a click for the keys that depend on it:
#: the screen unchanged for ``quiet`` s (a window manager's focus change redraws decorations),
#: at most ``max_wait`` s on a screen that keeps changing.
INPUT_SETTLE = SettlePolicy(quiet=0.05, max_wait=0.5)

# --------------------------------------------------------------------------- addresses

_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?$")
_ADDRESS_HINT = "use host::port (e.g. localhost::5901), host:display (e.g. localhost:1) or host"


def parse_server(server: str) -> tuple[str, int]:
    """Split a VNC address into ``(host, port)``.

    Accepts ``host::port``, ``host:display`` (port ``5900 + display``), a bare ``host``
    (port 5900) and bracketed IPv6 as ``[::1]::port`` / ``[::1]:display`` / ``[::1]``.
    Raises :class:`~vnc_use.errors.ConfigError` with a one-line hint on anything else.
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(f"bad VNC address {server!r}: {why}; {_ADDRESS_HINT}")

    text = server.strip() if isinstance(server, str) else ""
    if not text:
        raise bad("it is empty")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise bad("missing ']' after the IPv6 address")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"{host!r} is not an IPv6 address") from None
    else:
        host, sep, rest = text.partition(":")
        rest = sep + rest
        if not _HOST_RE.match(host):
            raise bad(f"{host!r} is not a host name or address")
    if not rest:
        return host, 5900
    if rest.startswith("::"):
        number, offset, what = rest[2:], 0, "port"
    elif rest.startswith(":"):
        number, offset, what = rest[1:], 5900, "display number"
    else:
        raise bad(f"unexpected {rest!r} after the host")
    if not number.isdigit() or not number.isascii():
        raise bad(f"{number!r} is not a {what}")
    port = int(number) + offset
    if not 0 < port < 65536:
        raise bad(f"port {port} is out of range")
    return host, port


# --------------------------------------------------------------------------- keys

_MODIFIERS = {
    "control": "ctrl",
    "ctrl": "ctrl",
    "alt": "alt",
    "option": "alt",
    "shift": "shift",
    "meta": "super",
    "super": "super",
    "command": "super",
    "cmd": "super",
    "win": "super",
    "windows": "super",
}
_NAMED = {
    "enter": "enter",
    "return": "enter",
    "escape": "esc",
    "esc": "esc",
    "tab": "tab",
    "backspace": "bsp",
    "delete": "del",
    "del": "del",
    "space": "space",
    "up": "up",
    "down": "down",
    "left": "left",
    "right": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "pageup": "pgup",
    "pgup": "pgup",
    "pagedown": "pgdn",
    "pgdn": "pgdn",
    "home": "home",
    "end": "end",
    "insert": "ins",
    "ins": "ins",
    "minus": "minus",
    "plus": "+",
}
_NAMED.update({f"f{n}": f"f{n}" for n in range(1, 13)})

# vncdotool names this module emits that are not in vncdotool's KEYMAP (single characters
# are sent as keysyms directly).
_CHAR_KEYSYMS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09}


def _split_combo(keys: str) -> list[str]:
    if keys == "+":
        return ["+"]
    if keys.endswith("++"):
        return [*keys[:-2].split("+"), "+"]
    return keys.split("+")


def to_vnc_keys(keys: str) -> list[str]:
    """Map the model's ``"+"``-joined key names to vncdotool key names, in press order.

    Names are case-insensitive (``control``/``ctrl``, ``alt``, ``shift``,
    ``meta``/``super``/``command``/``cmd``/``win``, ``enter``/``return``, ``escape``/``esc``,
    ``tab``, ``backspace``, ``delete``/``del``, ``space``, arrows ``up``/``arrowup``...,
    ``pageup``/``page_up``/``pagedown``, ``home``, ``end``, ``insert``, ``f1``-``f12``).
    Single characters stand for themselves; ``-`` becomes ``minus`` and ``+`` may be the last
    key (``"control++"``). A single letter keeps its case when it is the only key, is sent
    upper-case with ``shift`` (``"shift+a"`` -> ``["shift", "A"]``) and lower-case with other
    modifiers only (``"Control+A"`` means ctrl+a, as in shortcut notation).
    Unknown names raise :class:`ValueError` naming them.
    """
    if not isinstance(keys, str) or not keys.strip():
        raise ValueError(f"empty key combination {keys!r}")
    tokens = _split_combo(keys.strip())
    out: list[str] = []
    for raw in tokens:
        token = raw if raw == " " else raw.strip()
        if not token:
            raise ValueError(f"empty key name in {keys!r}")
        if len(token) == 1:
            out.append("minus" if token == "-" else token)
            continue
        name = token.lower().replace("_", "").replace(" ", "")
        if name in _MODIFIERS:
            out.append(_MODIFIERS[name])
        elif name in _NAMED:
            out.append(_NAMED[name])
        else:
            raise ValueError(f"unknown key name {token!r} in {keys!r}")
    if len(out) > 1 and len(out[-1]) == 1 and out[-1].isalpha():
        mods = set(out[:-1])
        out[-1] = out[-1].upper() if "shift" in mods else out[-1].lower()
    return out


def _keysym(name: str) -> int:
    """The X keysym for one vncdotool key name or one character."""
    if len(name) == 1:
        if name in _CHAR_KEYSYMS:
            return _CHAR_KEYSYMS[name]
        code = ord(name)
        if code < 0x20 or 0x7F <= code < 0xA0:
            raise ValueError(f"cannot type control character {name!r}")
        # Latin-1 keysyms equal their code points; others use the Unicode keysym range.
        return code if code < 0x100 else 0x01000000 + code
    if name in KEYMAP:
        return int(KEYMAP[name])
    raise ValueError(f"unknown vncdotool key name {name!r}")


def _text_keysyms(text: str) -> list[int]:
    return [_keysym(ch) for ch in text.replace("\r\n", "\n")]


# --------------------------------------------------------------------------- PNG


# --------------------------------------------------------------------------- vncdotool glue

_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}
_PAGE_KEYS = {"up": "pgup", "down": "pgdn", "left": "left", "right": "right"}
_SHUTDOWN_LOCK = threading.Lock()
_SHUTDOWN_REGISTERED = False
_START_LOCK = threading.Lock()


def _shutdown_reactor() -> None:
    try:
        api.shutdown()
    except Exception:  # pragma: no cover - interpreter is exiting
        log.debug("vncdotool shutdown failed", exc_info=True)


def _register_shutdown() -> None:
    global _SHUTDOWN_REGISTERED
    with _SHUTDOWN_LOCK:
        if not _SHUTDOWN_REGISTERED:
            atexit.register(_shutdown_reactor)
            _SHUTDOWN_REGISTERED = True


class _Client(VNCDoToolClient):  # type: ignore[misc]
    """vncdotool's client plus TCP_NODELAY, resize tracking and a link to its factory."""

    #: Called with each framebuffer update's rectangles, after they are painted (reactor).
    update_hook: Callable[[list[Rect]], None] | None = None
    #: Screen size when ``screen`` was last made complete by a full refresh; every update
    #: since was painted into it, so it mirrors the server's framebuffer (see settled_frame).
    synced_size: tuple[int, int] | None = None

    def commitUpdate(self, rectangles: list[Rect] | None = None) -> None:
        hook = self.update_hook
        if hook is not None:
            try:
                hook([tuple(r) for r in rectangles or ()])  # type: ignore[misc]
            except Exception:  # a broken watcher must not break the protocol
                log.exception("framebuffer update hook failed")
        super().commitUpdate(rectangles)

    def connectionMade(self) -> None:
        super().connectionMade()
        try:
            self.transport.setTcpNoDelay(True)
        except Exception:  # not a TCP transport (UNIX socket)
            log.debug("could not set TCP_NODELAY", exc_info=True)
        self.factory.client = self

    def updateDesktopSize(self, width: int, height: int) -> None:
        super().updateDesktopSize(width, height)
        self.width, self.height = width, height

    def vncConnectionMade(self) -> None:
        # vncdotool makes the first rectangle it receives the whole screen, pasted at (0, 0);
        # TigerVNC's first rectangle is often elsewhere (say 778,0 662x448), which left a black
        # hole in every later frame. Start from a canvas of the real size instead.
        if getattr(self, "screen", None) is None and self.width and self.height:
            self.screen: Image.Image = Image.new(
                "RGB", (int(self.width), int(self.height)), "black"
            )
        super().vncConnectionMade()


class _Factory(VNCDoToolFactory):  # type: ignore[misc]
    """Factory that also fails the handshake when the connection drops and reports losses."""

    protocol = _Client

    def __init__(self) -> None:
        super().__init__()
        self.client: _Client | None = None
        self.lost = threading.Event()
        self.on_lost: Callable[[], None] | None = None

    def clientConnectionLost(self, connector: Any, reason: Failure) -> None:
        super().clientConnectionLost(connector, reason)
        self.lost.set()
        if not self.deferred.called:
            self.deferred.errback(reason)
        if self.on_lost is not None:
            self.on_lost()


def _settle(fut: concurrent.futures.Future[Any], value: Any = None, exc: Any = None) -> None:
    """Complete ``fut`` once (runs in the reactor thread)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))
    else:
        fut.set_result(value)


def _connect_error(server: str, exc: BaseException) -> Exception:
    """Turn a vncdotool/Twisted handshake failure into a one-line vnc-use error."""
    if isinstance(exc, AuthenticationError):
        reason = str(exc) or "authentication failed"
        if "none provided" in reason:
            return VncAuthError(
                f"VNC server {server} asks for a password and none was given; pass it"
            )
        return VncAuthError(
            f"VNC server {server} rejected the password ({reason}); check the password "
            "(VNC uses only its first 8 characters)"
        )
    if isinstance(exc, ProtocolError):
        return VncConnectionError(
            f"{server} did not speak the VNC protocol ({exc}); check the address and port"
        )
    if isinstance(exc, twisted_error.ConnectionRefusedError):
        return VncConnectionError(
            f"connection to {server} refused; check that the VNC server runs and the port is right"
        )
    if isinstance(exc, twisted_error.DNSLookupError):
        return VncConnectionError(f"cannot resolve the host of {server}; check the address")
    if isinstance(exc, twisted_error.TimeoutError):
        return VncTimeoutError(f"TCP connection to {server} timed out; check address and firewall")
    if isinstance(exc, (twisted_error.ConnectionDone, twisted_error.ConnectionLost)):
        return VncConnectionError(
            f"{server} closed the connection during the VNC handshake; check that it is a VNC "
            "server and that it accepts this client"
        )
    return VncConnectionError(f"could not connect to {server}: {exc}".splitlines()[0])


# --------------------------------------------------------------------------- controller


class VNCController:
    """One VNC connection: screenshots, pointer and keyboard, safe to call from any thread.

    ``timeout`` bounds every operation after connecting, ``connect_timeout`` the TCP
    connection plus the VNC handshake. Errors are :mod:`vnc_use.errors` classes with one-line
    messages; coordinates outside the screen and bad names raise :class:`ValueError`.

    Set :attr:`screen_region` before :meth:`connect` when the server exports more than the
    screen (see :mod:`vnc_use.region`): the controller then presents that rectangle as the
    screen (screenshots, :meth:`screen_size` and pointer coordinates are all region pixels).
    """

    #: The framebuffer rectangle that is the screen (None: the whole framebuffer).
    screen_region: ScreenRegion | None = None

    def __init__(self, *, timeout: float = 10.0, connect_timeout: float = 5.0) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._timeout = float(timeout)
        self._connect_timeout = float(connect_timeout)
        self._lock = threading.RLock()
        self._server = ""
        self._factory: _Factory | None = None
        self._client: _Client | None = None
        self._dead = False
        self._inflight: concurrent.futures.Future[Any] | None = None
        self._primed: set[int] = set()

    # ------------------------------------------------------------------ lifecycle

    def connect(self, server: str, password: str | None = None) -> VNCController:
        """Connect to ``server`` (see :func:`parse_server`) and return ``self``."""
        host, port = parse_server(server)
        with self._lock:
            if self._client is not None:
                self.disconnect()
            self._server = server
            target = f"[{host}]::{port}" if ":" in host else f"{host}::{port}"
            _register_shutdown()
            with _START_LOCK:
                proxy = api.connect(target, password, _Factory, timeout=self._timeout)
                deadline = time.monotonic() + self._connect_timeout
                while not reactor.running and time.monotonic() < deadline:
                    time.sleep(0.002)
            factory: _Factory = proxy.factory
            fut: concurrent.futures.Future[_Client] = concurrent.futures.Future()

            def wait_handshake() -> None:
                def ok(client: _Client) -> _Client:
                    _settle(fut, client)
                    return client

                def failed(reason: Failure) -> None:
                    _settle(fut, exc=reason.value)

                factory.deferred.addCallbacks(ok, failed)

            reactor.callFromThread(wait_handshake)
            try:
                client = fut.result(timeout=self._connect_timeout)
            except concurrent.futures.TimeoutError:
                self._abort(factory)
                raise VncTimeoutError(
                    f"VNC server {server} did not complete the handshake within "
                    f"{self._connect_timeout:g} s; check that it is a VNC server, or raise "
                    "connect_timeout"
                ) from None
            except (VncAuthError, VncConnectionError, VncTimeoutError):
                raise
            except Exception as exc:
                self._abort(factory)
                raise _connect_error(server, exc) from None
            self._factory, self._client, self._dead = factory, client, False
            self._primed = set()
            factory.on_lost = self._on_lost
            self._accept_framebuffer()
            log.info("connected to %s (%dx%d)", server, client.width, client.height)
            return self

    def _accept_framebuffer(self) -> None:
        """After the handshake: refuse a framebuffer that is not the screen (x11vnc's
        ``-ncache``) unless :attr:`screen_region` picks the screen; disconnects on refusal."""
        client = self._require()
        try:
            check_framebuffer(
                self._server, int(client.width), int(client.height), self.screen_region
            )
        except ConfigError:
            self.disconnect()
            raise

    def disconnect(self) -> None:
        """Close the connection (idempotent); waits briefly for the server to see it."""
        with self._lock:
            factory, client = self._factory, self._client
            self._factory, self._client, self._dead = None, None, True
            if factory is None or client is None:
                return
            factory.on_lost = None
            if client.transport is not None and client.transport.connected:
                reactor.callFromThread(client.transport.loseConnection)
                if not factory.lost.wait(timeout=min(self._timeout, 5.0)):
                    self._abort(factory)
            log.info("disconnected from %s", self._server)

    def __enter__(self) -> VNCController:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.disconnect()

    def is_connected(self) -> bool:
        """Whether the transport is still connected (cheap; no round trip)."""
        client = self._client
        if client is None or self._dead or client.transport is None:
            return False
        return bool(client.transport.connected)

    # ------------------------------------------------------------------ screen

    def screen_size(self) -> tuple[int, int]:
        """The screen size ``(width, height)`` in pixels: the server's framebuffer, or the
        :attr:`screen_region` of it."""
        client = self._require()
        if self.screen_region is not None:
            return self.screen_region.width, self.screen_region.height
        return int(client.width), int(client.height)

    def _box(self, client: _Client) -> tuple[int, int, int, int]:
        """The screen's ``(x, y, width, height)`` in framebuffer pixels."""
        r = self.screen_region
        if r is None:
            return 0, 0, int(client.width), int(client.height)
        return r.x, r.y, r.width, r.height

    def _crop(self, client: _Client, image: Image.Image) -> Image.Image:
        if self.screen_region is None:
            return image.copy()
        x, y, w, h = self._box(client)
        return image.crop((x, y, x + w, y + h))

    def screenshot(self) -> Image.Image:
        """The current frame (a full, non-incremental refresh of the screen) as an RGB image."""

        def grab(client: _Client) -> Any:
            d: Deferred[Any] = Deferred()
            client.deferred = d  # fired by vncdotool once the update is painted
            client.framebufferUpdateRequest(*self._box(client), incremental=False)
            d.addCallback(lambda c: self._crop(c, c.screen))
            return d

        image: Image.Image = self._call(grab, "a screenshot")
        return image if image.mode == "RGB" else image.convert("RGB")

    def screenshot_png(self) -> bytes:
        """The current frame as PNG bytes (lossless RGB, encoded in memory; see
        :func:`encode_png`)."""
        return encode_png(self.screenshot())

    def settled_frame(self, policy: SettlePolicy) -> tuple[Image.Image, WatchResult]:
        """Wait until the screen stops changing, then return the frame (RGB) and how it went.

        Uses the framebuffer updates of this connection (see :mod:`vnc_use.settle`): an
        incremental request stays outstanding while waiting, so only changed rectangles move
        and a quiet screen costs nothing; the frame is the client's copy of the screen, kept
        complete by those updates (one full refresh on the first call of a connection).
        """

        def run(client: _Client) -> Any:  # a Deferred firing with (frame, result)
            d: Deferred[tuple[Image.Image, WatchResult]] = Deferred()
            size = (int(client.width), int(client.height))
            box = self._box(client)

            def done(result: WatchResult) -> None:
                client.update_hook = None
                client.synced_size = size
                d.callback((self._crop(client, client.screen), result))

            watcher = UpdateWatcher(
                _RfbChannel(client, box),
                policy,
                screen_size=(box[2], box[3]),
                synced=client.synced_size == size and client.screen is not None,
                done=done,
            )

            client.update_hook = watcher.on_update
            watcher.start()
            return d

        image: Image.Image
        result: WatchResult
        image, result = self._call(run, "a screenshot", timeout=policy.max_wait + self._timeout)
        return (image if image.mode == "RGB" else image.convert("RGB")), result

    # ------------------------------------------------------------------ pointer

    def move(self, x: int, y: int) -> None:
        """Move the pointer to ``(x, y)``."""
        x, y = self._point(x, y)
        self._call(lambda c: c.mouseMove(x, y), "a pointer move")

    def click(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and press and release ``button`` (1 left, 2 middle, 3 right)."""
        self._clicks(x, y, button, 1)

    def double_click(self, x: int, y: int) -> None:
        """Two left clicks at ``(x, y)``."""
        self._clicks(x, y, 1, 2)

    def triple_click(self, x: int, y: int) -> None:
        """Three left clicks at ``(x, y)``."""
        self._clicks(x, y, 1, 3)

    def mouse_down(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and press ``button`` (without releasing it)."""
        x, y = self._point(x, y)
        button = _button(button)

        def run(c: _Client) -> None:
            c.mouseMove(x, y)
            c.mouseDown(button)

        self._call(run, "a button press")

    def mouse_up(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and release ``button``."""
        x, y = self._point(x, y)
        button = _button(button)

        def run(c: _Client) -> None:
            c.mouseMove(x, y)
            c.mouseUp(button)

        self._call(run, "a button release")

    def drag_and_drop(self, x0: int, y0: int, x1: int, y1: int, steps: int = 10) -> None:
        """Press the left button at ``(x0, y0)``, move there in ``steps`` moves, release."""
        x0, y0 = self._point(x0, y0)
        x1, y1 = self._point(x1, y1)
        steps = max(1, int(steps))

        def run(c: _Client) -> None:
            c.mouseMove(x0, y0)
            c.mouseDown(1)
            for i in range(1, steps + 1):
                c.mouseMove(x0 + (x1 - x0) * i // steps, y0 + (y1 - y0) * i // steps)
            c.mouseUp(1)

        self._call(run, "a drag")

    def scroll_at(self, x: int, y: int, direction: str, magnitude: int = 800) -> None:
        """Turn the mouse wheel at ``(x, y)``: buttons 4 up, 5 down, 6 left, 7 right.

        ``magnitude`` is in pixels; one notch per :data:`PIXELS_PER_NOTCH` pixels, at least 1.
        """
        button = _BUTTONS.get(direction.lower() if isinstance(direction, str) else "")
        if button is None:
            raise ValueError(f"bad scroll direction {direction!r}; use up, down, left or right")
        x, y = self._point(x, y)
        notches = _repeats(magnitude, PIXELS_PER_NOTCH)

        def run(c: _Client) -> None:
            c.mouseMove(x, y)
            for _ in range(notches):
                c.mouseDown(button)
                c.mouseUp(button)

        self._call(run, "a scroll")

    def scroll(self, direction: str, magnitude: int = 800) -> None:
        """Scroll the whole document: PageUp/PageDown, or Left/Right arrows.

        Sent ``max(1, round(magnitude / 400))`` times.
        """
        key = _PAGE_KEYS.get(direction.lower() if isinstance(direction, str) else "")
        if key is None:
            raise ValueError(f"bad scroll direction {direction!r}; use up, down, left or right")
        sym = _keysym(key)
        self._keys([(sym, True), (sym, False)] * _repeats(magnitude, PIXELS_PER_PAGE), "a scroll")

    def _clicks(self, x: int, y: int, button: int, count: int) -> None:
        x, y = self._point(x, y)
        button = _button(button)

        def run(c: _Client) -> None:
            c.mouseMove(x, y)
            for _ in range(count):
                c.mouseDown(button)
                c.mouseUp(button)

        self._call(run, "a click")

    def settle_input(self, policy: SettlePolicy = INPUT_SETTLE) -> WatchResult:
        """Wait until the server has processed every event sent so far and the screen settled.

        Call it between a click and keys that depend on it. A window manager moves the
        keyboard focus only once it has seen the click; keys sent in the same burst reach the
        window that had the focus before (measured with openbox: 14 of 20 ``type_text_at``
        into another window went to the old one). A round trip proves the server has handed
        the click to the X clients; the settle then gives the window manager and the app time
        to react (the focus change redraws the windows), without a fixed sleep.
        """
        self._call(_round_trip, "a round trip")
        return self.settled_frame(policy)[1]

    # ------------------------------------------------------------------ keyboard

    def type_text(self, text: str, press_enter: bool = False, clear_first: bool = False) -> None:
        """Type ``text`` exactly (any Unicode), optionally clearing the field first.

        ``clear_first`` sends ctrl+a then BackSpace (select all, delete); ``press_enter``
        sends Return after the text.
        """
        events: list[tuple[int, bool]] = []
        if clear_first:
            ctrl, a, bsp = _keysym("ctrl"), _keysym("a"), _keysym("bsp")
            events += [(ctrl, True), (a, True), (a, False), (ctrl, False)]
            events += [(bsp, True), (bsp, False)]
        for sym in _text_keysyms(text):
            events += [(sym, True), (sym, False)]
        if press_enter:
            ret = _keysym("enter")
            events += [(ret, True), (ret, False)]
        self._keys(events, "typing")

    def key_combo(self, keys: str) -> None:
        """Press a ``"+"``-joined combination such as ``"control+a"`` (see :func:`to_vnc_keys`).

        Keys go down in order and come up in reverse order.
        """
        syms = [_keysym(name) for name in to_vnc_keys(keys)]
        events = [(s, True) for s in syms] + [(s, False) for s in reversed(syms)]
        self._keys(events, "a key combination")

    def key_down(self, key: str) -> None:
        """Press and hold one key (a single model key name)."""
        self._keys([(self._single_key(key), True)], "a key press")

    def key_up(self, key: str) -> None:
        """Release one key (a single model key name)."""
        self._keys([(self._single_key(key), False)], "a key release")

    @staticmethod
    def _single_key(key: str) -> int:
        names = to_vnc_keys(key)
        if len(names) != 1:
            raise ValueError(f"expected one key name, got {key!r}")
        return _keysym(names[0])

    def _keys(self, events: list[tuple[int, bool]], what: str) -> None:
        """Send key events, pausing before a keysym the server may first have to map.

        Xvnc adds a keysym missing from its keymap (``é``, ``→``...) when it first sees it
        pressed. An X client still busy with earlier keys reads that keymap change and the
        press together, looks the key up in its old keymap and drops it (measured in a Tk
        entry: about half of first-time accented characters lost). Before the first press of
        such a keysym on this connection we therefore wait for a server round trip plus
        :data:`UNMAPPED_KEY_PAUSE` so the client is idle when the new mapping arrives.
        """
        batches: list[list[tuple[int, bool]]] = [[]]
        fresh: set[int] = set()
        for sym, down in events:
            first = down and _maybe_unmapped(sym) and sym not in self._primed | fresh
            if first:
                fresh.add(sym)
                if batches[-1]:
                    batches.append([])
            batches[-1].append((sym, down))
        pause_first = bool(events) and events[0][1] and events[0][0] in fresh

        def send(c: _Client, batch: list[tuple[int, bool]]) -> None:
            for sym, down in batch:
                c.keyEvent(sym, down=down)

        def settle(c: _Client) -> Any:
            d = _round_trip(c)
            d.addCallback(lambda _: deferLater(reactor, UNMAPPED_KEY_PAUSE, lambda: None))
            return d

        def run(c: _Client) -> Any:
            d: Any = settle(c) if pause_first else succeed(None)
            for i, batch in enumerate(batches):
                if i:
                    d.addCallback(lambda _: settle(c))
                d.addCallback(lambda _, b=batch: send(c, b))
            return d

        self._call(run, what)
        self._primed.update(fresh)

    # ------------------------------------------------------------------ plumbing

    def _require(self) -> _Client:
        client = self._client
        if client is None:
            raise VncConnectionError("not connected to a VNC server; call connect() first")
        if not self.is_connected():
            raise VncConnectionError(
                f"the connection to VNC server {self._server} was lost; reconnect"
            )
        return client

    def _point(self, x: int, y: int) -> tuple[int, int]:
        """Screen pixels to framebuffer pixels (offset by :attr:`screen_region`), checked."""
        x, y = operator.index(x), operator.index(y)
        width, height = self.screen_size()
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(
                f"point ({x}, {y}) is outside the {width}x{height} screen; clamp it first"
            )
        region = self.screen_region
        return (x + region.x, y + region.y) if region is not None else (x, y)

    def _call(self, fn: Callable[[_Client], T], what: str, timeout: float | None = None) -> T:
        """Run ``fn(client)`` in the reactor thread and wait for its (deferred) result
        (at most ``timeout`` seconds, default the controller's)."""
        with self._lock:
            client = self._require()
            fut: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._inflight = fut

            def run() -> None:
                d = maybeDeferred(fn, client)
                d.addCallbacks(
                    lambda value: _settle(fut, value), lambda f: _settle(fut, exc=f.value)
                )

            reactor.callFromThread(run)
            try:
                return fut.result(timeout=self._timeout if timeout is None else timeout)
            except concurrent.futures.TimeoutError:
                self._dead = True
                if self._factory is not None:
                    self._abort(self._factory)
                raise VncTimeoutError(
                    f"VNC server {self._server} did not answer {what} within {self._timeout:g} s;"
                    " the connection is closed, reconnect"
                ) from None
            finally:
                self._inflight = None

    def _on_lost(self) -> None:
        """Reactor thread: the server closed the connection; fail the waiting call now."""
        fut = self._inflight
        if fut is not None:
            _settle(
                fut,
                exc=VncConnectionError(f"the connection to VNC server {self._server} was lost"),
            )

    @staticmethod
    def _abort(factory: _Factory) -> None:
        def abort() -> None:
            client = factory.client
            if client is not None and client.transport is not None:
                client.transport.abortConnection()

        reactor.callFromThread(abort)


def _maybe_unmapped(keysym: int) -> bool:
    """Whether a US keymap lacks ``keysym`` (so the server may have to add it)."""
    return keysym >= 0x80 and not 0xFF00 <= keysym <= 0xFFFF


class _RfbChannel:
    """The framebuffer-update requests and timers :class:`UpdateWatcher` uses (reactor)."""

    def __init__(self, client: _Client, box: tuple[int, int, int, int]) -> None:
        self._client = client
        self._box = box  # the screen: requests never ask for the rest of the framebuffer

    def request(self, *, incremental: bool, marker: bool = False) -> None:
        if marker:
            self._client.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)
        else:
            self._client.framebufferUpdateRequest(*self._box, incremental=incremental)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        return reactor.callLater(delay, fn)


def _round_trip(client: _Client) -> Any:
    """Reactor thread: request a 1x1 frame; the Deferred fires when the server has answered,
    so it has processed every input event sent before."""
    d: Deferred[Any] = Deferred()
    client.deferred = d
    client.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)
    return d


def _button(button: int) -> int:
    button = operator.index(button)
    if not 1 <= button <= 8:
        raise ValueError(f"bad mouse button {button}; use 1-8 (1 left, 2 middle, 3 right)")
    return button


def _repeats(magnitude: int, unit: int) -> int:
    if magnitude < 0:
        raise ValueError(f"scroll magnitude must not be negative, got {magnitude}")
    return max(1, round(magnitude / unit))
