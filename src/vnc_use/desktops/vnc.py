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
* The security handshake is vnc-use's own (``_Client``): the type is chosen by
  :mod:`vnc_use.desktops.rfb_security` among those whose credentials were given (VeNCrypt TLS
  first), VeNCrypt 0.2 and Apple's type 30 are spoken here, nothing ever reads a terminal,
  and every failure ends the connect at once with one line naming host and TCP port.
* The connect is bounded by ``connect_timeout``; its message says how far it got (no TCP
  connection, no VNC greeting, or a greeting but no completed handshake).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import operator
import struct
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from PIL import Image
from twisted.internet import error as twisted_error
from twisted.internet import reactor as _twisted_reactor
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from twisted.python.log import PythonLoggingObserver
from vncdotool import api
from vncdotool.client import (
    AuthenticationError,
    ProtocolError,
    VNCDoToolClient,
    VNCDoToolFactory,
)
from vncdotool.keys import KEYMAP
from vncdotool.rfb import Encoding
from zope.interface import implementer

from vnc_use.desktops.address import parse_server
from vnc_use.desktops.base import CaptureRule, Settled
from vnc_use.desktops.keyboard import (
    KeyboardLimits,
    KeyEvent,
    combo_scancode_events,
    scancode_events,
)
from vnc_use.desktops.png import encode_png
from vnc_use.desktops.region import ScreenRegion, check_framebuffer
from vnc_use.desktops.rfb_security import (
    APPLE_DH,
    NONE,
    PLAIN,
    TLS_NONE,
    TLS_PLAIN,
    TLS_VNC,
    VNC_AUTH,
    X509_PLAIN,
    X509_VNC,
    Credentials,
    Security,
    apple_dh_response,
    choose_security_type,
    choose_vencrypt_subtype,
    describe_types,
    is_loopback,
    no_usable_type_message,
    plain_credentials,
    security_name,
)
from vnc_use.desktops.settle import Rect, SettlePolicy, UpdateWatcher, WatchResult, capture
from vnc_use.errors import (
    ConfigError,
    VncAuthError,
    VncConnectionError,
    VncTimeoutError,
    VncUseError,
)

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
#: How :meth:`VNCController.type_text` waits after a paste before pressing Return: the app
#: inserts the text once it has fetched it through the RDP clipboard.
PASTE_SETTLE = SettlePolicy(quiet=0.2, max_wait=2.0)

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


_SHIFT_L = 0xFFE1


def _text_events(text: str) -> list[tuple[int, bool]]:
    """Key events typing ``text`` as keysyms; an upper-case ASCII letter inside a Shift press.

    TigerVNC's Xvnc makes an upper-case keysym sent without Shift by toggling Caps Lock
    around the key (measured, issue 30): the text arrives, but the X server's lock state flips
    and apps see Caps Lock presses (a nested remote-desktop client forwards them). With Shift
    held the letter's key matches as it is, on any Latin layout.
    """
    events: list[tuple[int, bool]] = []
    for sym in _text_keysyms(text):
        press = [(sym, True), (sym, False)]
        if ord("A") <= sym <= ord("Z"):
            press = [(_SHIFT_L, True), *press, (_SHIFT_L, False)]
        events += press
    return events


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
    """vncdotool's client plus TCP_NODELAY, resize tracking, a link to its factory, and
    vnc-use's own security negotiation.

    The negotiation replaces vncdotool's (which takes the largest type number it knows and
    prompts on the terminal, inside the reactor thread, for a missing Apple user name): the
    type comes from :func:`~vnc_use.desktops.rfb_security.choose_security_type`, VeNCrypt's
    TLS subtypes are spoken here, and any failure ends the handshake at once through
    :meth:`_fail` with a one-line :mod:`vnc_use.errors` error. Nothing here reads a terminal.
    """

    factory: _Factory

    #: Called with each framebuffer update's rectangles, after they are painted (reactor).
    update_hook: Callable[[list[Rect]], None] | None = None
    #: Screen size when ``screen`` was last made complete by a full refresh; every update
    #: since was painted into it, so it mirrors the server's framebuffer (see settled_frame).
    synced_size: tuple[int, int] | None = None
    #: VeNCrypt subtype chosen (0 while none), and the inner login it implies.
    _subtype = 0

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
        self.factory.stage = "greeting"
        try:
            peer = self.transport.getPeer().host
        except Exception:
            peer = self.factory.host
        self.factory.peer_loopback = is_loopback(str(peer))

    #: Whether this connection has sent a pointer position yet (see :meth:`move_pointer`).
    pointer_sent = False

    def move_pointer(self, x: int, y: int) -> None:
        """Send the pointer to ``(x, y)``.

        x11vnc ignores a connection's first pointer event when it names the position x11vnc
        last recorded (0, 0 at start), although the real pointer is elsewhere (measured: a
        first click at (0, 0) arrived at the screen's centre). The first position of a
        connection is therefore preceded by a neighbouring one, so the server always sees a move.
        """
        if not self.pointer_sent:
            self.pointer_sent = True
            self.mouseMove(x + 1 if x + 1 < int(self.width) else max(x - 1, 0), y)
        self.mouseMove(x, y)

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
        self.factory.stage = "ready"
        super().vncConnectionMade()

    # ------------------------------------------------------------------ handshake errors

    def dataReceived(self, data: bytes) -> None:
        if self.factory.stage == "ready":
            super().dataReceived(data)
            return
        try:
            super().dataReceived(data)
        except Exception as exc:  # never an "Unhandled Error" traceback from the handshake
            log.debug("VNC handshake failed", exc_info=True)
            self._fail(
                VncConnectionError(
                    f"the VNC handshake with {self.factory.target} failed: "
                    f"{_one_line(str(exc)) or type(exc).__name__}"
                )
            )

    def _fail(self, error: Exception) -> None:
        """End the handshake with ``error`` (reactor thread): fail the connect, drop the link."""
        self.factory.fail(error)
        self._handler = lambda: None  # ignore whatever else arrives
        if self.transport is not None:
            self.transport.abortConnection()

    def vncProtocolError(self, reason: str) -> None:
        target = self.factory.target
        if self.factory.stage == "greeting":
            head = _one_line(bytes(self._packet[:12]).decode("latin-1"))
            self._fail(
                VncConnectionError(
                    f"{target} answered, but not as a VNC server (it sent "
                    f'"{head}"); check the address and port{self.factory.hint}'
                )
            )
        else:
            self._fail(
                VncConnectionError(
                    f"VNC server {target} broke the protocol during the handshake: "
                    f"{_one_line(reason)}"
                )
            )

    def _handleInitial(self) -> None:
        before = self._handler
        super()._handleInitial()
        if self._handler is not before:  # the greeting was a valid RFB version
            self.factory.stage = "security"
            log.info(
                "VNC server %s greets with RFB %d.%d; using %d.%d",
                self.factory.target,
                *self._version_server,
                *self._version,
            )

    def _handleConnMessage(self, block: bytes) -> None:
        self._fail(
            VncConnectionError(
                f"VNC server {self.factory.target} refused the connection: "
                f"{_one_line(block.decode('utf-8', 'replace')) or 'no reason given'}"
            )
        )

    def ardRequestCredentials(self) -> None:  # pragma: no cover - never reached, by design
        self._fail(VncAuthError(f"VNC server {self.factory.target} asked for credentials"))
        raise RuntimeError("vnc-use never prompts for credentials")

    def vncRequestPassword(self) -> None:
        password = self.factory.vnc_password
        if password is None:
            self._fail(
                VncAuthError(
                    f"VNC server {self.factory.target} asks for a password and none was "
                    "given; set VNC_PASSWORD or pass --vnc-password"
                )
            )
            return
        self.sendPassword(password)

    def vncAuthFailed(self, reason: bytes | str) -> None:
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        said = _one_line(reason)
        f = self.factory
        security = f.security
        number = security.number if security is not None else 0
        user = f.vnc_username or ""
        if number == APPLE_DH:
            text = (
                f'macOS at {f.target} rejected the login of user "{user}"; check the user '
                "name (--vnc-user / VNC_USERNAME) and the password (VNC_PASSWORD / "
                "--vnc-password)"
            )
        elif number in (PLAIN, TLS_PLAIN, X509_PLAIN):
            text = (
                f'VNC server {f.target} rejected the login of user "{user}"; check the user '
                "name (--vnc-user / VNC_USERNAME) and the password (VNC_PASSWORD / "
                "--vnc-password)"
            )
        else:
            text = (
                f"VNC server {f.target} rejected the password; check it (VNC_PASSWORD / "
                "--vnc-password; VNC uses only its first 8 characters)"
            )
        if said and said.lower() not in {"authentication failed", "authentication failure"}:
            text += f" (the server said: {said})"
        self._fail(VncAuthError(text))

    # ------------------------------------------------------------------ security types

    def _handleAuth(self, block: bytes) -> None:
        """RFB 3.3: the server alone picks the type (a u32)."""
        (number,) = struct.unpack("!I", block)
        f = self.factory
        f.offered = [number]
        if number == 0:
            self.expect(self._handleConnFailed, 4)
        elif number == NONE:
            f.security = Security(NONE, "None", False)
            self._doClientInitialization()
        elif number == VNC_AUTH and f.vnc_password is not None:
            f.security = Security(VNC_AUTH, "VncAuth", False)
            self.expect(self._handleVNCAuth, 16)
        else:
            self._fail(VncAuthError(no_usable_type_message(f.target, [number], f.credentials)))

    def _handleNumberSecurityTypes(self, block: bytes) -> None:
        count = block[0]
        if count:
            self.expect(self._handleOfferedTypes, count)
        else:
            self.expect(self._handleConnFailed, 4)

    def _handleOfferedTypes(self, block: bytes) -> None:
        f = self.factory
        offered = list(block)
        f.offered = offered
        log.info("VNC server %s offers security types %s", f.target, describe_types(offered))
        choice = choose_security_type(offered, f.credentials, vencrypt=not f.skip_vencrypt)
        if choice is None:
            self._fail(VncAuthError(no_usable_type_message(f.target, offered, f.credentials)))
            return
        self.transport.write(bytes([choice]))
        f.stage = "auth"
        if choice == NONE:
            f.security = Security(NONE, "None", False)
            if self._version < (3, 8):
                self._doClientInitialization()
            else:
                self.expect(self._handleVNCAuthResult, 4)
        elif choice == VNC_AUTH:
            f.security = Security(VNC_AUTH, "VncAuth", False)
            self.expect(self._handleVNCAuth, 16)
        elif choice == APPLE_DH:
            f.security = Security(APPLE_DH, "Apple DH", False)
            self.expect(self._handleDHAuth, 4)
        else:  # VeNCrypt
            self.expect(self._handleVencryptVersion, 2)

    def _handleDHAuthCert(self, block: bytes) -> None:
        """Apple (type 30): answer with ``pow()`` and AES; never prompt (see rfb_security)."""
        f = self.factory
        try:
            response = apple_dh_response(
                int(self.generator),
                bytes(self.modulus),
                block,
                f.vnc_username or "",
                f.vnc_password or "",
            )
        except ValueError as exc:
            self._fail(VncAuthError(f"cannot log in to macOS at {f.target}: {exc}"))
            return
        self.transport.write(response)
        self.expect(self._handleVNCAuthResult, 4)

    def _handleVencryptVersion(self, block: bytes) -> None:
        major, minor = block[0], block[1]
        if (major, minor) < (0, 2):
            self._fail(
                VncConnectionError(
                    f"VNC server {self.factory.target} speaks VeNCrypt {major}.{minor}; "
                    "vnc-use speaks 0.2"
                )
            )
            return
        self.transport.write(b"\x00\x02")
        self.expect(self._handleVencryptAck, 1)

    def _handleVencryptAck(self, block: bytes) -> None:
        if block[0] != 0:
            self._fail(
                VncConnectionError(f"VNC server {self.factory.target} refused VeNCrypt version 0.2")
            )
            return
        self.expect(self._handleVencryptCount, 1)

    def _handleVencryptCount(self, block: bytes) -> None:
        if block[0] == 0:
            self._fail(
                VncConnectionError(f"VNC server {self.factory.target} offers no VeNCrypt subtype")
            )
            return
        self.expect(self._handleVencryptSubtypes, 4 * block[0])

    def _handleVencryptSubtypes(self, block: bytes) -> None:
        f = self.factory
        subtypes = list(struct.unpack(f"!{len(block) // 4}I", block))
        log.info("VNC server %s offers VeNCrypt subtypes %s", f.target, describe_types(subtypes))
        creds = f.credentials
        choice = choose_vencrypt_subtype(subtypes, creds)
        if choice is None:
            message = no_usable_type_message(f.target, f.offered, creds, subtypes)
            fallback = choose_security_type(f.offered, creds, vencrypt=False)
            self._fail(_VencryptUnusable(message) if fallback else VncAuthError(message))
            return
        self._subtype = choice
        self.transport.write(struct.pack("!I", choice))
        f.security = Security(choice, security_name(choice), choice != PLAIN)
        if choice == PLAIN:
            self._vencrypt_login()
        else:
            self.expect(self._handleVencryptTlsAccept, 1)

    def _handleVencryptTlsAccept(self, block: bytes) -> None:
        f = self.factory
        if block[0] != 1:
            self._fail(VncConnectionError(f"VNC server {f.target} could not start its TLS session"))
            return
        f.stage = "tls"
        try:
            options = _tls_options(self._subtype, f.host, f.ca_file)
        except VncUseError as exc:
            self._fail(exc)
            return
        self.transport.startTLS(options)
        self._vencrypt_login()

    def _vencrypt_login(self) -> None:
        """The login inside VeNCrypt (after TLS, if any): None, VncAuth or Plain."""
        f = self.factory
        subtype = self._subtype
        if subtype in (TLS_VNC, X509_VNC):
            self.expect(self._handleVNCAuth, 16)
            return
        if subtype in (PLAIN, TLS_PLAIN, X509_PLAIN):
            self.transport.write(plain_credentials(f.vnc_username or "", f.vnc_password or ""))
        self.expect(self._handleVNCAuthResult, 4)

    def _doClientInitialization(self) -> None:
        self.factory.stage = "init"
        super()._doClientInitialization()


class _VencryptUnusable(VncAuthError):
    """VeNCrypt was chosen but none of its subtypes fits; another offered type would."""


def _tls_options(subtype: int, host: str, ca_file: str | None) -> Any:
    """Twisted TLS options for a VeNCrypt subtype: anonymous TLS or a verified X509 server."""
    from twisted.internet import ssl

    if subtype in (TLS_NONE, TLS_VNC, TLS_PLAIN):
        # Anonymous Diffie-Hellman, as TigerVNC/GnuTLS offer it: TLS 1.2 at most (TLS 1.3 has
        # no anonymous suites) and security level 0 (which OpenSSL needs for aNULL suites).
        return _AnonymousTls()
    if ca_file:
        try:
            pem = Path(ca_file).read_bytes()
            trust: Any = ssl.trustRootFromCertificates(  # type: ignore[no-untyped-call]
                [ssl.Certificate.loadPEM(block) for block in _pem_blocks(pem)]
            )
        except Exception:  # checked at connect (_check_ca_file); changed since?
            raise ConfigError(
                f"cannot read the CA certificate {ca_file} given with --vnc-ca"
            ) from None
    else:
        trust = ssl.platformTrust()  # type: ignore[no-untyped-call]
    return ssl.optionsForClientTLS(host, trustRoot=trust)


def _check_ca_file(ca_file: str) -> None:
    """Fail early, in one line, on a --vnc-ca file that is missing or holds no certificate."""
    from cryptography import x509

    try:
        data = Path(ca_file).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the CA certificate file {ca_file} given with --vnc-ca: "
            f"{exc.strerror or 'unreadable'}"
        ) from None
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigError(
            f"the file {ca_file} given with --vnc-ca holds no PEM certificate; pass the CA "
            "certificate (-----BEGIN CERTIFICATE-----) that signed the VNC server's certificate"
        ) from None


def _pem_blocks(pem: bytes) -> list[bytes]:
    marker = b"-----END CERTIFICATE-----"
    blocks = [part + marker for part in pem.split(marker) if b"-----BEGIN" in part]
    if not blocks:
        raise ValueError("no PEM certificate in it")
    return blocks


@implementer(IOpenSSLClientConnectionCreator)
class _AnonymousTls:
    """Client TLS connections with anonymous Diffie-Hellman (aNULL) suites, TLS 1.2 at most."""

    def clientConnectionForTLS(self, tls_protocol: Any) -> Any:
        from OpenSSL import SSL

        ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
        ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
        ctx.set_cipher_list(b"aNULL:!eNULL:@SECLEVEL=0")
        connection = SSL.Connection(ctx, None)
        connection.set_app_data(tls_protocol)
        connection.set_connect_state()
        return connection


class _Factory(VNCDoToolFactory):  # type: ignore[misc]
    """One connection attempt: the credentials, how far the handshake got, how it ended.

    Fails the handshake when the connection drops, and reports later losses.
    """

    protocol = _Client

    def __init__(
        self,
        host: str = "",
        port: int = 0,
        *,
        password: str | None = None,
        username: str | None = None,
        ca_file: str | None = None,
        hint: str = "",
        skip_vencrypt: bool = False,
    ) -> None:
        super().__init__()
        self.host, self.port, self.hint = host, port, hint
        self.target = _target(host, port)
        self.vnc_password, self.vnc_username, self.ca_file = password, username, ca_file
        self.password = None  # vncdotool's own paths must find nothing to use
        self.username = None
        self.skip_vencrypt = skip_vencrypt
        self.peer_loopback = is_loopback(host)
        self.client: _Client | None = None
        self.lost = threading.Event()
        self.on_lost: Callable[[], None] | None = None
        #: "tcp" (connecting), "greeting", "security", "auth", "tls", "init", "ready".
        self.stage = "tcp"
        self.offered: list[int] = []
        self.security: Security | None = None
        self.pending: Any = None  # the endpoint's connect Deferred

    @property
    def credentials(self) -> Credentials:
        return Credentials(
            password=self.vnc_password is not None,
            username=bool(self.vnc_username),
            ca_file=bool(self.ca_file),
            loopback=self.peer_loopback,
        )

    def fail(self, error: BaseException | Failure) -> None:
        """Fail the connect once (later failures of the same attempt are dropped)."""
        if not self.deferred.called:
            self.deferred.errback(error)  # a Failure, or an exception it wraps

    def clientConnectionMade(self, protocol: VNCDoToolClient) -> None:
        if not self.deferred.called:
            self.deferred.callback(protocol)

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.fail(reason)

    def clientConnectionLost(self, connector: Any, reason: Failure) -> None:
        super().clientConnectionLost(connector, reason)
        self.lost.set()
        if not self.deferred.called:
            self.fail(self.handshake_loss(reason.value or RuntimeError("connection lost")))
        if self.on_lost is not None:
            self.on_lost()

    def handshake_loss(self, exc: BaseException) -> Exception:
        """The one-line error for a connection that ended before the handshake completed."""
        if type(exc).__name__ == "VerificationError":  # service_identity: the name differs
            return VncConnectionError(
                f"the TLS certificate of VNC server {self.target} is not made out to "
                f"{self.host}; connect by a name the certificate holds, or have the server use "
                "a certificate for this address (and pass its CA with --vnc-ca FILE)"
            )
        if self.stage == "tls" or _is_tls_error(exc):
            text = _one_line(_tls_reason(exc))
            if "certificate" in text.lower() or "verif" in text.lower():
                return VncConnectionError(
                    f"the TLS certificate of VNC server {self.target} is not trusted ({text}); "
                    "pass the CA certificate that signed it with --vnc-ca FILE"
                )
            return VncConnectionError(
                f"the TLS handshake with VNC server {self.target} failed ({text or 'no reason'})"
            )
        if self.stage == "greeting":
            return VncConnectionError(
                f"{self.target} closed the connection before sending a VNC greeting; check "
                f"that it is a VNC server{self.hint}"
            )
        chosen = f" after vnc-use chose {self.security.name}" if self.security else ""
        return VncConnectionError(
            f"VNC server {self.target} closed the connection during the security handshake"
            f"{chosen}; check that it accepts this client and its credentials"
        )


def _is_tls_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith(("OpenSSL", "service_identity")) or "SSL" in type(exc).__name__


def _tls_reason(exc: BaseException) -> str:
    """Readable text of a pyOpenSSL / service_identity error (no tuples, no reprs)."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], list):  # OpenSSL.SSL.Error([(lib, func, reason), ...])
        parts = [str(item[-1]) for item in args[0] if isinstance(item, tuple) and item]
        if parts:
            return "; ".join(parts)
    return str(exc) or type(exc).__name__


def _target(host: str, port: int) -> str:
    """What was tried, for messages: ``"127.0.0.1 port 5901"``."""
    return f"{host} port {port}"


def _display_hint(server: str, port: int) -> str:
    """For ``host:N`` with N >= 100: how to write a port instead of a display number."""
    text = server.strip()
    rest = text.rsplit("]", 1)[1] if text.startswith("[") else text.partition(":")[2]
    if rest.startswith(":") or not rest.isdigit() or int(rest) < 100:
        return ""
    host = text[: len(text) - len(rest) - 1]
    return f" ({server} means display {rest}, port {port}; for port {rest} write {host}::{rest})"


def _one_line(text: str, limit: int = 200) -> str:
    """Printable single-line text, cut to ``limit`` characters."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    clean = " ".join(clean.split())
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _settle(fut: concurrent.futures.Future[Any], value: Any = None, exc: Any = None) -> None:
    """Complete ``fut`` once (runs in the reactor thread)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))
    else:
        fut.set_result(value)


def _connect_error(factory: _Factory, exc: BaseException) -> Exception:
    """Turn a Twisted/vncdotool failure of a connect into a one-line vnc-use error."""
    target, hint = factory.target, factory.hint
    if isinstance(exc, VncUseError):
        return exc
    if isinstance(exc, AuthenticationError):  # vncdotool's own paths (not reached normally)
        return VncAuthError(f"VNC server {target} rejected the login; check the password")
    if isinstance(exc, ProtocolError):
        return VncConnectionError(
            f"VNC server {target} broke the protocol during the handshake: {_one_line(str(exc))}"
        )
    if isinstance(exc, twisted_error.ConnectionRefusedError):
        return VncConnectionError(
            f"connection to {target} refused; check that the VNC server runs and the port is "
            f"right{hint}"
        )
    if isinstance(exc, twisted_error.DNSLookupError):
        return VncConnectionError(
            f"cannot resolve the host name {factory.host} (port {factory.port}); check the address"
        )
    if isinstance(exc, twisted_error.TimeoutError):
        return VncTimeoutError(
            f"no TCP connection to {target} (host down or firewalled); check the address and "
            f"firewall, or raise --connect-timeout{hint}"
        )
    if isinstance(exc, (twisted_error.ConnectionDone, twisted_error.ConnectionLost)):
        return factory.handshake_loss(exc)
    if _is_tls_error(exc):
        return factory.handshake_loss(exc)
    text = _one_line(str(exc)) or type(exc).__name__
    return VncConnectionError(f"could not connect to {target}: {text}{hint}")


def _timeout_error(factory: _Factory, seconds: float) -> VncTimeoutError:
    """The connect timed out: say how far it got (TCP, greeting or handshake)."""
    target, hint = factory.target, factory.hint
    if factory.stage == "tcp":
        return VncTimeoutError(
            f"no TCP connection to {target} within {seconds:g} s (host down or firewalled); "
            f"check the address and firewall, or raise --connect-timeout{hint}"
        )
    if factory.stage == "greeting":
        return VncTimeoutError(
            f"{target} accepted the TCP connection but sent no VNC greeting within "
            f"{seconds:g} s (not a VNC server?); check the address and port{hint}"
        )
    where = f" ({factory.security.name})" if factory.security is not None else ""
    return VncTimeoutError(
        f"VNC server {target} greeted but did not complete the handshake{where} within "
        f"{seconds:g} s; raise --connect-timeout if the link is slow"
    )


def _start_reactor() -> None:
    """Run the Twisted reactor in vncdotool's daemon thread (once; it cannot restart)."""
    if reactor.running or (api._THREAD is not None and api._THREAD.is_alive()):
        return
    thread = threading.Thread(
        target=reactor.run, name="Twisted Reactor", kwargs={"installSignalHandlers": False}
    )
    thread.daemon = True
    api._THREAD = thread  # so api.shutdown() joins it
    thread.start()
    PythonLoggingObserver().start()  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- controller


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

    def round_trip(self) -> tuple[int, int]:
        """Wait for one server round trip, then return the screen size.

        When it returns, the server has processed every input event sent before, and a change
        of the desktop size made since the last frame has arrived (servers announce it only in
        a framebuffer update, so :meth:`screen_size` alone can be out of date).
        """
        self._call(_round_trip, "a round trip")
        return self.screen_size()

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

        Uses the framebuffer updates of this connection (see :mod:`vnc_use.desktops.settle`): an
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
        return _QEMU_KEYS in getattr(client, "negotiated_encodings", ())

    def _type_scancodes(
        self, limits: KeyboardLimits, text: str, press_enter: bool, clear_first: bool
    ) -> None:
        """Type ``text`` as US-key scancodes with Shift held where needed, never a lock key
        (see :mod:`vnc_use.desktops.keyboard`)."""
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


#: QEMU's extended key event pseudo-encoding (keys as scancodes); vncdotool announces it.
_QEMU_KEYS = Encoding.PSEUDO_QEMU_EXTENDED_KEY_EVENT


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
