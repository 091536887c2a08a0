"""The VNC desktop: :class:`VNCController` turns actions into RFB input events and frames,
over one connection of :mod:`vnc_use.desktops.vnc.client` (every operation handed to the
reactor thread and awaited with a deadline; see :mod:`vnc_use.desktops.vnc`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import operator
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from PIL import Image
from twisted.internet.defer import Deferred, succeed
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.task import deferLater
from twisted.python.failure import Failure

from vnc_use.desktops.address import parse_server
from vnc_use.desktops.base import CaptureRule, Settled
from vnc_use.desktops.frametap import FrameSink, FrameTap
from vnc_use.desktops.keyboard import (
    KeyboardLimits,
    KeyEvent,
    combo_scancode_events,
    scancode_events,
)
from vnc_use.desktops.png import encode_png
from vnc_use.desktops.region import ScreenRegion, check_framebuffer
from vnc_use.desktops.rfb_security import (
    NONE,
    Security,
)
from vnc_use.desktops.settle import Rect, SettlePolicy, UpdateWatcher, WatchResult, capture
from vnc_use.desktops.vnc.client import (
    _START_LOCK,
    _check_ca_file,
    _Client,
    _connect_error,
    _display_hint,
    _Factory,
    _register_shutdown,
    _RfbChannel,
    _round_trip,
    _settle,
    _start_reactor,
    _target,
    _timeout_error,
    _VencryptUnusable,
    reactor,
)
from vnc_use.desktops.vnc.keys import (
    QEMU_KEYS,
    _keysym,
    _maybe_unmapped,
    _text_events,
    key_label,
    to_vnc_keys,
)
from vnc_use.desktops.vnc.tap import TapChannel, exclusively
from vnc_use.desktops.xkeymap import (
    KeyRound,
    RemoteKeys,
    XKeymap,
    needs_key,
    plan_rounds,
    xvnc_display,
)
from vnc_use.errors import (
    ConfigError,
    VncConnectionError,
    VncTimeoutError,
    VncUseError,
)

__all__ = ["INPUT_SETTLE", "PIXELS_PER_NOTCH", "UNMAPPED_KEY_PAUSE", "VNCController"]

log = logging.getLogger(__name__)

T = TypeVar("T")

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
#: How :meth:`VNCController.type_text` waits after a paste before pressing Return: the app
#: inserts the text once it has fetched it through the RDP clipboard.
PASTE_SETTLE = SettlePolicy(quiet=0.2, max_wait=2.0)
#: How :meth:`VNCController.type_text` waits before it maps new characters onto keycodes it
#: used earlier in the same text (:mod:`vnc_use.desktops.xkeymap`): the app must have taken
#: the keys typed with them (a round trip, then the screen quiet).
ROUND_SETTLE = SettlePolicy(quiet=0.15, max_wait=1.0)


_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}
_PAGE_KEYS = {"up": "pgup", "down": "pgdn", "left": "left", "right": "right"}


class VNCController:
    """One VNC connection: screenshots, pointer and keyboard, safe to call from any thread.

    It implements :class:`~vnc_use.desktops.base.Desktop`.

    ``timeout`` bounds every operation after connecting, ``connect_timeout`` the TCP
    connection plus the VNC handshake. Errors are :mod:`vnc_use.errors` classes with one-line
    messages; coordinates outside the screen and bad names raise :class:`ValueError`.

    Set :attr:`screen_region` before :meth:`connect` when the server exports more than the
    screen (see :mod:`vnc_use.desktops.region`): the controller then presents that rectangle as the
    screen (screenshots, :meth:`screen_size` and pointer coordinates are all region pixels).
    """

    #: The framebuffer rectangle that is the screen (None: the whole framebuffer).
    screen_region: ScreenRegion | None = None
    #: Limits of the keyboard path behind the server (the RDP bridge's: ASCII only, a pause
    #: before pressing a key again); None: any Unicode, at full speed.
    keyboard: KeyboardLimits | None = None
    #: How many texts :meth:`type_text` pasted (``--rdp-paste-text``) instead of typing.
    pastes: int = 0

    def __init__(self, *, timeout: float = 10.0, connect_timeout: float = 5.0) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._timeout = float(timeout)
        self._connect_timeout = float(connect_timeout)
        self._lock = threading.RLock()
        self._server = ""
        self._target = ""  # "host port N", for messages
        self._factory: _Factory | None = None
        self._client: _Client | None = None
        self._dead = False
        self._inflight: concurrent.futures.Future[Any] | None = None
        self._primed: set[int] = set()
        self._security: Security | None = None
        self._xkeymap: XKeymap | None = None
        self._assigned: dict[int, tuple[int, int]] = {}
        self._remote_keys = RemoteKeys()

    # ------------------------------------------------------------------ lifecycle

    def connect(
        self,
        server: str,
        password: str | None = None,
        *,
        username: str | None = None,
        ca_file: str | None = None,
    ) -> VNCController:
        """Connect to ``server`` (see :func:`parse_server`) and return ``self``.

        ``password`` is the VNC or user password, ``username`` the user name for logins that
        need one (macOS type 30, VeNCrypt Plain), ``ca_file`` a PEM file of the CA that signed
        the server's certificate (VeNCrypt X509 subtypes; default the system trust store).
        The security type is chosen here (see :mod:`vnc_use.desktops.rfb_security`) and
        available afterwards as :attr:`security`. Nothing ever prompts for credentials.
        """
        host, port = parse_server(server)
        if ca_file is not None:
            _check_ca_file(ca_file)
        with self._lock:
            if self._client is not None:
                self.disconnect()
            self._server = server
            self._target = _target(host, port)
            self._security = None
            hint = _display_hint(server, port)
            try:
                factory, client = self._attempt(host, port, password, username, ca_file, hint)
            except _VencryptUnusable:
                log.info("no VeNCrypt subtype fits; connecting again without VeNCrypt")
                factory, client = self._attempt(
                    host, port, password, username, ca_file, hint, skip_vencrypt=True
                )
            self._factory, self._client, self._dead = factory, client, False
            self._primed = set()
            self._remote_keys = RemoteKeys.for_server(getattr(client, "name", None))
            self._xkeymap = self._find_keymap(host, port)
            self._security = factory.security or Security(NONE, "None", False)
            factory.on_lost = self._on_lost
            self._accept_framebuffer()
            log.info(
                "connected to %s (%dx%d), security %s",
                factory.target,
                client.width,
                client.height,
                self._security.describe(),
            )
            return self

    def _find_keymap(self, host: str, port: int) -> XKeymap | None:
        """The keymap of the Xvnc on this machine behind ``host:port`` (None: another server,
        or a keyboard with limits: the RDP bridge's); see :mod:`vnc_use.desktops.xkeymap`."""
        if self.keyboard is not None:
            return None
        display = xvnc_display(host, port)
        return XKeymap.open(display) if display is not None else None

    def _attempt(
        self,
        host: str,
        port: int,
        password: str | None,
        username: str | None,
        ca_file: str | None,
        hint: str,
        *,
        skip_vencrypt: bool = False,
    ) -> tuple[_Factory, _Client]:
        """One TCP connection and handshake, bounded by ``connect_timeout``."""
        factory = _Factory(
            host,
            port,
            password=password,
            username=username,
            ca_file=ca_file,
            hint=hint,
            skip_vencrypt=skip_vencrypt,
        )
        _register_shutdown()
        with _START_LOCK:
            _start_reactor()
        fut: concurrent.futures.Future[_Client] = concurrent.futures.Future()
        seconds = self._connect_timeout

        def start() -> None:
            def ok(client: _Client) -> _Client:
                _settle(fut, client)
                return client

            def failed(reason: Failure) -> None:
                _settle(fut, exc=_connect_error(factory, reason.value or RuntimeError("failed")))

            factory.deferred.addCallbacks(ok, failed)
            # The endpoint's own limit is a backstop; the deadline below ends the wait.
            endpoint = HostnameEndpoint(reactor, host, port, timeout=seconds + 5)
            factory.pending = endpoint.connect(factory)
            factory.pending.addErrback(lambda r: factory.clientConnectionFailed(None, r))

        reactor.callFromThread(start)
        try:
            client = fut.result(timeout=seconds)
        except concurrent.futures.TimeoutError:
            error = _timeout_error(factory, seconds)
            self._abort(factory)
            raise error from None
        except VncUseError:
            self._abort(factory)
            raise
        except Exception as exc:  # pragma: no cover - every failure is mapped in `failed`
            self._abort(factory)
            raise _connect_error(factory, exc) from None
        return factory, client

    @property
    def security(self) -> Security | None:
        """The security of the current connection (type, name, encrypted), or ``None``."""
        return self._security

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
            self._release_keys()
            factory, client = self._factory, self._client
            self._factory, self._client, self._dead = None, None, True
            if factory is None or client is None:
                return
            factory.on_lost = None
            _stop_tap(client)
            if client.transport is not None and client.transport.connected:
                reactor.callFromThread(client.transport.loseConnection)
                if not factory.lost.wait(timeout=min(self._timeout, 5.0)):
                    self._abort(factory)
            log.info("disconnected from %s", self._server)

    def _release_keys(self) -> None:
        """Empty the spare keycodes this connection filled, once the app took its keys."""
        assigned, self._assigned = self._assigned, {}
        if self._xkeymap is None or not assigned:
            return
        if self._client is not None and not self._dead:
            with contextlib.suppress(VncUseError, ValueError):
                self.settle_input(ROUND_SETTLE)
        self._xkeymap.release(assigned)

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

    def round_trip(self) -> tuple[int, int]:
        """Wait for one server round trip, then return the screen size.

        When it returns, the server has processed every input event sent before, and a change
        of the desktop size made since the last frame has arrived (servers announce it only in
        a framebuffer update, so :meth:`screen_size` alone can be out of date).
        """
        self._call(_round_trip, "a round trip")
        return self.screen_size()

    def first_press_since(self, t: float) -> float | None:
        """Wall-clock time of the first button or key press sent at or after ``t`` (epoch
        seconds) on this connection, or None (where a step's video shows its click)."""
        client = self._client
        presses = tuple(client.presses or ()) if client is not None else ()
        return next((p for p in presses if p >= t), None)

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

    def settled_frame(
        self, policy: SettlePolicy, fenced: Callable[[], object] | None = None
    ) -> tuple[Image.Image, WatchResult]:
        """Wait until the screen stops changing, then return the frame (RGB) and how it went.

        ``fenced`` is called (in the reactor thread) once the server has answered the wait's
        first request, i.e. has handled every input sent before (see
        :class:`~vnc_use.desktops.settle.UpdateWatcher`).

        Uses the framebuffer updates of this connection (see :mod:`vnc_use.desktops.settle`): an
        incremental request stays outstanding while waiting, so only changed rectangles move
        and a quiet screen costs nothing; the frame is the client's copy of the screen, kept
        complete by those updates (one full refresh on the first call of a connection).
        """

        def run(client: _Client) -> Any:  # a Deferred firing with (frame, result)
            d: Deferred[tuple[Image.Image, WatchResult]] = Deferred()
            once = _Once(fenced)

            def wait() -> None:
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
                    fenced=once,
                )

                def on_update(rects: list[Rect]) -> None:
                    if (int(client.width), int(client.height)) == size:
                        watcher.on_update(rects)
                        return
                    # The desktop was resized during the wait (a user, a VM window): the
                    # server may have dropped the requests of the old size with the
                    # announcement (TigerVNC does), so the old wait would never end. Wait
                    # again at the new size, from a full refresh.
                    watcher.cancel()
                    log.info(
                        "the desktop was resized to %dx%d during a screenshot; waiting again",
                        client.width,
                        client.height,
                    )
                    wait()

                client.update_hook = on_update
                watcher.start()

            wait()
            return d

        image: Image.Image
        result: WatchResult
        image, result = self._call(run, "a screenshot", timeout=policy.max_wait + self._timeout)
        return (image if image.mode == "RGB" else image.convert("RGB")), result

    def capture(self, rule: CaptureRule) -> Settled:
        """A settled screenshot as ``rule`` says, encoded (waits on this connection's
        framebuffer updates: :meth:`settled_frame`; see :mod:`vnc_use.desktops.settle`)."""
        return capture(self, rule)

    # ------------------------------------------------------------------ pointer

    def move(self, x: int, y: int) -> None:
        """Move the pointer to ``(x, y)``."""
        x, y = self._point(x, y)
        self._call(lambda c: c.move_pointer(x, y), "a pointer move")

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
            c.move_pointer(x, y)
            c.mouseDown(button)

        self._call(run, "a button press")

    def mouse_up(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and release ``button``."""
        x, y = self._point(x, y)
        button = _button(button)

        def run(c: _Client) -> None:
            c.move_pointer(x, y)
            c.mouseUp(button)

        self._call(run, "a button release")

    def drag_and_drop(self, x0: int, y0: int, x1: int, y1: int, steps: int = 10) -> None:
        """Press the left button at ``(x0, y0)``, move there in ``steps`` moves, release."""
        x0, y0 = self._point(x0, y0)
        x1, y1 = self._point(x1, y1)
        steps = max(1, int(steps))

        def run(c: _Client) -> None:
            c.move_pointer(x0, y0)
            c.mouseDown(1)
            for i in range(1, steps + 1):
                c.move_pointer(x0 + (x1 - x0) * i // steps, y0 + (y1 - y0) * i // steps)
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
            c.move_pointer(x, y)
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
            c.move_pointer(x, y)
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
        limits = self.keyboard
        if limits is not None and limits.paster is not None and not limits.typeable(text):
            self._paste_text(limits, text, press_enter, clear_first)
            return
        if limits is not None:
            limits.refuse_untypeable(text)
        if limits is not None and limits.scancodes and self._scancodes_ok():
            self._type_scancodes(limits, text, press_enter, clear_first)
            return
        if limits is None:
            self._type_any_script(text, press_enter, clear_first)
            return
        events: list[tuple[int, bool]] = []
        if clear_first:
            ctrl, a, bsp = _keysym("ctrl"), _keysym("a"), _keysym("bsp")
            events += [(ctrl, True), (a, True), (a, False), (ctrl, False)]
            events += [(bsp, True), (bsp, False)]
        parts = [text] if limits is None else limits.chunks(text)
        for i, part in enumerate(parts):
            if i and limits is not None:  # the same key again: let its release land first
                self._keys(events, "typing")
                events = []
                self.round_trip()
                time.sleep(limits.repeat_gap)
            events += _text_events(part)
        if press_enter:
            ret = _keysym("enter")
            events += [(ret, True), (ret, False)]
        self._keys(events, "typing")

    def _type_any_script(self, text: str, press_enter: bool, clear_first: bool) -> None:
        """Type ``text`` exactly in any script, or refuse it before any key (one line naming
        the characters): see :mod:`vnc_use.desktops.xkeymap`."""
        keymap = self._xkeymap
        if not any(needs_key(_keysym(ch)) for ch in text if ch not in "\r\n\t"):
            rounds = [KeyRound(text, {}, frozenset())]  # ASCII: every keymap has it
        elif keymap is None:
            self._remote_keys.take(text)
            rounds = [KeyRound(text, {}, frozenset())]
        else:
            try:
                rounds = plan_rounds(text, keymap.mapping())
            except OSError as exc:
                raise VncUseError(f"cannot type on {self._target}: {exc}") from None
        events: list[tuple[int, bool]] = []
        if clear_first:
            ctrl, a, bsp = _keysym("ctrl"), _keysym("a"), _keysym("bsp")
            events += [(ctrl, True), (a, True), (a, False), (ctrl, False)]
            events += [(bsp, True), (bsp, False)]
        for i, part in enumerate(rounds):
            if i:  # the app must have taken the keys typed with the keycodes about to change
                self._keys(events, "typing")
                events = []
                self.settle_input(ROUND_SETTLE)
            if part.assign and keymap is not None:
                try:
                    keymap.assign(part.assign)
                except OSError as exc:
                    raise VncUseError(f"cannot type on {self._target}: {exc}") from None
                self._assigned.update(part.assign)
                self._primed.update(k for pair in part.assign.values() for k in pair)
            events += _text_events(part.text, shift=part.shifted)
        if press_enter:
            ret = _keysym("enter")
            events += [(ret, True), (ret, False)]
        self._keys(events, "typing")

    def key_combo(self, keys: str) -> None:
        """Press a ``"+"``-joined combination such as ``"control+a"`` (see :func:`to_vnc_keys`).

        Keys go down in order and come up in reverse order.
        """
        names = to_vnc_keys(keys)
        syms = [_keysym(name) for name in names]
        if self.keyboard is not None and self.keyboard.scancodes and self._scancodes_ok():
            coded = combo_scancode_events(names)
            if coded is not None:
                self._send_scancodes(coded, "a key combination")
                return
        events = [(s, True) for s in syms] + [(s, False) for s in reversed(syms)]
        self._keys(events, "a key combination")

    # -- the scancode path (RDP bridge) ------------------------------------- issue 30
    def _scancodes_ok(self) -> bool:
        """Whether the server takes QEMU extended key events (scancodes): TigerVNC does."""
        client = self._require()
        return QEMU_KEYS in getattr(client, "negotiated_encodings", ())

    def _type_scancodes(
        self, limits: KeyboardLimits, text: str, press_enter: bool, clear_first: bool
    ) -> None:
        """Type ``text`` as US-key scancodes with Shift held where needed, never a lock key
        (see :mod:`vnc_use.desktops.keyboard`)."""
        if limits.resync is not None:  # the remote lock state: the bridge's (Caps Lock off)
            limits.resync()
        events: list[KeyEvent] = []
        if clear_first:
            events += combo_scancode_events(["ctrl", "a"]) or []
            events += combo_scancode_events(["bsp"]) or []
        for i, part in enumerate(limits.chunks(text)):
            if i:  # the same key again: let its release land first
                self._send_scancodes(events, "typing")
                events = []
                self.round_trip()
                time.sleep(limits.repeat_gap)
            events += scancode_events(part)
        if press_enter:
            events += combo_scancode_events(["enter"]) or []
        self._send_scancodes(events, "typing")

    def _send_scancodes(self, events: list[KeyEvent], what: str) -> None:
        def run(c: _Client) -> None:
            for sym, code, down in events:
                c.transport.write(struct.pack("!BBHII", 255, 0, int(down), sym, code))
                if c.frame_tap is not None:  # the video's key mark (issue 32)
                    c.frame_tap.on_key(key_label(sym), bool(down))

        self._call(run, what)

    def _paste_text(
        self, limits: KeyboardLimits, text: str, press_enter: bool, clear_first: bool
    ) -> None:
        """Text the keyboard cannot type, through the desktop's clipboard and Ctrl+V."""
        assert limits.paster is not None
        if clear_first:
            self.key_combo("control+a")
            self.key_combo("backspace")

        def press_paste() -> None:
            self.key_combo("control+v")
            self.settle_input(PASTE_SETTLE)  # the app inserts the text once it fetched it

        limits.paster.paste(text, press_paste)
        self.pastes += 1
        if press_enter:
            self.key_combo("enter")

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

    # ------------------------------------------------------------------ video (issue 32)

    def start_recording(self, sink: FrameSink) -> None:
        """Feed ``sink`` frames from this connection's updates (see
        :mod:`vnc_use.desktops.frametap`) until :meth:`stop_recording` or the disconnect."""
        client = self._require()

        def start() -> None:
            if client.frame_tap is None:
                client.frame_tap = FrameTap(TapChannel(client, lambda: self._box(client)), sink)
                client.frame_tap.start()

        reactor.callFromThread(start)

    def stop_recording(self) -> None:
        """Stop feeding the video (idempotent); returns once the tap is stopped."""
        client = self._client
        if client is not None and client.frame_tap is not None:
            _stop_tap(client).wait(timeout=self._timeout)

    # ------------------------------------------------------------------ plumbing

    def _require(self) -> _Client:
        client = self._client
        if client is None:
            raise VncConnectionError("not connected to a VNC server; call connect() first")
        if not self.is_connected():
            raise VncConnectionError(
                f"the connection to VNC server {self._target} was lost; reconnect"
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
                d = exclusively(client, fn)  # never while a poll of the video is on its way
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
                    f"VNC server {self._target} did not answer {what} within {self._timeout:g} s;"
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
                exc=VncConnectionError(f"the connection to VNC server {self._target} was lost"),
            )

    @staticmethod
    def _abort(factory: _Factory) -> None:
        def abort() -> None:
            client = factory.client
            if client is not None and client.transport is not None:
                client.transport.abortConnection()
            elif factory.pending is not None and not factory.pending.called:
                factory.pending.cancel()  # still connecting: stop the TCP attempt

        reactor.callFromThread(abort)


class _Once:
    """A callback that runs at most once however often it is called (a wait begun again
    after a resize must not report the input handled twice)."""

    def __init__(self, fn: Callable[[], object] | None) -> None:
        self._fn = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def _stop_tap(client: _Client) -> threading.Event:
    """Stop a connection's video tap (from any thread); the event is set once it is."""
    done = threading.Event()

    def stop() -> None:
        tap, client.frame_tap = client.frame_tap, None
        if tap is not None:
            tap.stop()
        done.set()

    reactor.callFromThread(stop)
    return done


def _button(button: int) -> int:
    button = operator.index(button)
    if not 1 <= button <= 8:
        raise ValueError(f"bad mouse button {button}; use 1-8 (1 left, 2 middle, 3 right)")
    return button


def _repeats(magnitude: int, unit: int) -> int:
    if magnitude < 0:
        raise ValueError(f"scroll magnitude must not be negative, got {magnitude}")
    return max(1, round(magnitude / unit))
