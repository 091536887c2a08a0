"""The VNC connection under :class:`~vnc_use.desktops.vnc.VNCController`: vncdotool's client
with vnc-use's own security handshake (VeNCrypt TLS, Apple's type 30, VncAuth; never a
terminal prompt), the TLS options, the Twisted reactor in its one daemon thread, and the
one-line errors a failed connect ends with (see :mod:`vnc_use.desktops.vnc`)."""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import struct
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image
from twisted.internet import error as twisted_error
from twisted.internet import reactor as _twisted_reactor
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.python.failure import Failure
from twisted.python.log import PythonLoggingObserver
from vncdotool import api
from vncdotool.client import (
    AuthenticationError,
    ProtocolError,
    VNCDoToolClient,
    VNCDoToolFactory,
)
from zope.interface import implementer

from vnc_use.desktops.frametap import FrameTap
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
from vnc_use.desktops.settle import Rect
from vnc_use.desktops.vnc.keys import key_label
from vnc_use.errors import (
    ConfigError,
    VncAuthError,
    VncConnectionError,
    VncTimeoutError,
    VncUseError,
)

log = logging.getLogger(__name__)

PRESSES_KEPT = 600.0
"""Seconds of button and key presses a connection remembers (an action's first press is
looked up right after the action: a long typed text keeps its click)."""

# vncdotool's VNC-password handshake uses cryptography's TripleDES, which warns on every login
# that it will move; nothing a user of vnc-use can act on.
warnings.filterwarnings("ignore", message="TripleDES has been moved", module=r"vncdotool\.")

# Twisted types the global reactor as a module; it is an IReactorCore/IReactorThreads object.
reactor: Any = _twisted_reactor
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

    #: The video's tap on this connection (see :mod:`vnc_use.desktops.frametap`), or None.
    frame_tap: FrameTap | None = None

    def commitUpdate(self, rectangles: list[Rect] | None = None) -> None:
        rects: list[Rect] = [tuple(r) for r in rectangles or ()]  # type: ignore[misc]
        tap = self.frame_tap
        for hook in (self.update_hook, tap.on_update if tap is not None else None):
            if hook is not None:
                try:
                    hook(rects)
                except Exception:  # a broken watcher must not break the protocol
                    log.exception("framebuffer update hook failed")
        super().commitUpdate(rectangles)

    #: Wall-clock times of the button and key presses sent in the last
    #: :data:`PRESSES_KEPT` seconds, each taken after the video's tap made the frame that
    #: marks it (the report seeks a step's video to its first press).
    presses: deque[float] | None = None
    _buttons = 0

    def pointerEvent(self, x: int, y: int, buttonmask: int = 0) -> None:
        super().pointerEvent(x, y, buttonmask)
        if self.frame_tap is not None:
            self.frame_tap.on_pointer(x, y, buttonmask)
        pressed, self._buttons = buttonmask & ~self._buttons, buttonmask
        if pressed:
            self._pressed()

    def keyEvent(self, key: int, down: bool = True) -> None:
        super().keyEvent(key, down)
        if self.frame_tap is not None:
            self.frame_tap.on_key(key_label(key), bool(down))
        if down:
            self._pressed()

    def _pressed(self) -> None:
        now = time.time()
        if self.presses is None:
            self.presses = deque()
        while self.presses and self.presses[0] < now - PRESSES_KEPT:
            self.presses.popleft()
        self.presses.append(now)

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
