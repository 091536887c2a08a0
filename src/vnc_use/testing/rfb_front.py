"""An RFB front that greets as macOS, RealVNC, UltraVNC or TightVNC and relays to a real server.

No Mac, RealVNC Server or UltraVNC runs on a Linux test machine, yet a VNC client must be
checked against their greetings and logins. :class:`RfbFront` listens on 127.0.0.1, sends
the chosen server's protocol version and security types, performs the login the client
picks (Apple's Diffie-Hellman type 30 as macOS does it, or VncAuth type 2) and, once the
client is in, logs in to a real backend VNC server (TigerVNC ``Xvnc`` with ``None`` or
VncAuth) and relays the session byte for byte. What happened is kept in
:attr:`RfbFront.attempts` (the type chosen, the user name tried, success) so tests can
assert on it; passwords are never kept.

>>> with RfbFront("macos", "127.0.0.1::5901", backend_password="secret",
...               username="alice", password="fourteen chars") as front:   # doctest: +SKIP
...     print(front.server)          # connect a client here

Types the front only announces (Apple's 33/35/36, RealVNC's RA2 family, UltraVNC's
MS-Logon II, Tight 16) end with a failed SecurityResult naming the type when a client picks
one. Run ``python -m vnc_use.testing.rfb_front --help`` to start one by hand.

The module uses threads and plain sockets (no Twisted, no vncdotool), ``pow()`` for the
Diffie-Hellman exchange and ``cryptography`` for AES and DES.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import secrets
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from vnc_use.desktops.service import Service

__all__ = [
    "MODP_4096",
    "PROFILES",
    "FrontError",
    "LoginAttempt",
    "Profile",
    "RfbFront",
    "apple_dh_client_block",
    "vnc_auth_response",
]

log = logging.getLogger(__name__)

#: RFC 3526 group 16 (4096-bit MODP) prime: what a current macOS sends for type 30, with
#: generator 5 and a 512-byte key length.
MODP_4096 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
    "955817183995497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64"
    "ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7ABF5AE8CDB0933D71E8C94E04A25619DCEE3D226"
    "1AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E2"
    "08E24FA074E5AB3143DB5BFCE0FD108E4B82D120A92108011A723C12A787E6D788719A10BDBA5B2699C32718"
    "6AF4E23C1A946834B6150BDA2583E9CA2AD44CE8DBBBC2DB04DE8EF92E8EFC141FBECAA6287C59474E6BC05D"
    "99B2964FA090C3A2233BA186515BE7ED1F612970CEE2D7AFB81BDD762170481CD0069127D5B05AA993B4EA98"
    "8D8FDDC186FFB7DC90A6C08F4DF435C934063199FFFFFFFFFFFFFFFF",
    16,
)

APPLE_DH_GENERATOR = 5
APPLE_DH_KEY_LENGTH = 512

_NAMES = {
    1: "None",
    2: "VncAuth",
    5: "RA2",
    6: "RA2ne",
    13: "RA2_256",
    16: "Tight",
    19: "VeNCrypt",
    30: "Apple",
    33: "Apple 33",
    35: "Apple 35",
    36: "Apple 36",
    113: "MS-Logon II",
}

_RECV_TIMEOUT = 30.0  # a client that stops mid-handshake is dropped after this long


class FrontError(RuntimeError):
    """The front could not be set up (bad profile, bad address, missing credentials)."""


@dataclass(frozen=True)
class Profile:
    """How a server greets: its protocol version line and the security types it offers.

    ``password_type`` says whether type 2 (VncAuth) joins the list when the front has a
    VNC password (macOS "VNC viewers may control screen with password", RealVNC's "VNC
    password" authentication, UltraVNC with a VNC password set beside MS-Logon).
    """

    name: str
    version: bytes
    types: tuple[int, ...]
    password_type: bool = True
    description: str = ""


PROFILES: dict[str, Profile] = {
    "macos": Profile(
        "macos",
        b"RFB 003.889\n",
        (30, 33, 36, 35),
        description="macOS Screen Sharing",
    ),
    "realvnc": Profile("realvnc", b"RFB 005.000\n", (5, 6, 13), description="RealVNC Server 5+"),
    "ultravnc": Profile(
        "ultravnc", b"RFB 003.008\n", (113,), description="UltraVNC with MS-Logon II"
    ),
    "tightvnc": Profile(
        "tightvnc", b"RFB 003.008\n", (2, 16), password_type=False, description="TightVNC 1.3"
    ),
}


@dataclass
class LoginAttempt:
    """One client connection as the front saw it. Never holds a password."""

    client_version: str = ""
    offered: tuple[int, ...] = ()
    chosen: int | None = None
    username: str | None = None
    success: bool = False
    reason: str = ""
    relayed: bool = False
    done: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)


# ---------------------------------------------------------------------- crypto helpers


def _reverse_bits(byte: int) -> int:
    return int(f"{byte:08b}"[::-1], 2)


def _des_encrypt(key8: bytes, data: bytes) -> bytes:
    try:  # cryptography >= 43 keeps TripleDES among the "decrepit" ciphers
        from cryptography.hazmat.decrepit.ciphers import algorithms as decrepit
    except ImportError:  # pragma: no cover - older cryptography
        decrepit = algorithms  # type: ignore[misc]
    encryptor = Cipher(decrepit.TripleDES(key8 * 3), modes.ECB()).encryptor()
    return encryptor.update(data) + encryptor.finalize()


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """VncAuth (type 2): the challenge DES-encrypted with the password's first 8 bytes.

    The key's bytes are bit-reversed, as every VNC server and client does it.
    """
    key = password.encode("latin-1", "replace")[:8].ljust(8, b"\0")
    return _des_encrypt(bytes(_reverse_bits(b) for b in key), challenge)


def _aes_ecb(key: bytes, data: bytes, *, decrypt: bool) -> bytes:
    cipher = Cipher(algorithms.AES(key), modes.ECB())
    op = cipher.decryptor() if decrypt else cipher.encryptor()
    return op.update(data) + op.finalize()


def _apple_key(shared: int, key_length: int) -> bytes:
    return hashlib.md5(shared.to_bytes(key_length, "big")).digest()


def apple_dh_client_block(
    username: str,
    password: str,
    generator: int,
    prime: int,
    server_public: int,
    key_length: int,
) -> bytes:
    """The client's answer in Apple's type 30: AES-128-ECB(user[64] + password[64]) + its key.

    Shared with tests that play the client by hand; the AES key is the MD5 of the shared
    secret written big-endian in ``key_length`` bytes.
    """
    private = secrets.randbelow(prime - 3) + 2
    public = pow(generator, private, prime)
    shared = pow(server_public, private, prime)
    plain = _pad64(username) + _pad64(password)
    cipher = _aes_ecb(_apple_key(shared, key_length), plain, decrypt=False)
    return cipher + public.to_bytes(key_length, "big")


def _pad64(text: str) -> bytes:
    raw = text.encode("utf-8")[:63]
    return raw + b"\0" + secrets.token_bytes(63 - len(raw))


def _unpad64(block: bytes) -> str:
    return block.split(b"\0", 1)[0].decode("utf-8", "replace")


# ---------------------------------------------------------------------- socket helpers


class _Closed(Exception):
    """The peer closed the connection."""


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise _Closed
        data += chunk
    return bytes(data)


def _parse_address(address: str) -> tuple[str, int]:
    """``HOST::PORT`` (a port) or ``HOST:N`` (display N, port 5900+N), as VNC tools write it."""
    if "::" in address:
        host, _, port_text = address.rpartition("::")
        offset = 0
    elif ":" in address:
        host, _, port_text = address.rpartition(":")
        offset = 5900
    else:
        host, port_text, offset = address, "0", 5900
    try:
        port = int(port_text) + offset
    except ValueError:
        raise FrontError(f"bad backend address {address!r}; use HOST::PORT") from None
    return host or "127.0.0.1", port


# ---------------------------------------------------------------------- the front


class RfbFront(Service):
    """Greets as ``profile`` on 127.0.0.1 and relays logged-in clients to ``backend``.

    ``username``/``password`` are what type 30 (Apple) accepts; ``vnc_password`` is what
    type 2 accepts (first 8 characters, as VncAuth does) and, for profiles with
    ``password_type``, adds type 2 to the offered list. ``types`` overrides the profile's
    list. ``backend_password`` logs the front in to the backend when it asks for VncAuth.
    """

    def __init__(
        self,
        profile: str | Profile,
        backend: str,
        *,
        backend_password: str | None = None,
        username: str | None = None,
        password: str | None = None,
        vnc_password: str | None = None,
        types: tuple[int, ...] | None = None,
        dh_generator: int = APPLE_DH_GENERATOR,
        dh_prime: int = MODP_4096,
        dh_key_length: int = APPLE_DH_KEY_LENGTH,
    ) -> None:
        if isinstance(profile, str):
            if profile not in PROFILES:
                known = ", ".join(PROFILES)
                raise FrontError(f"unknown profile {profile!r}; use one of {known}")
            profile = PROFILES[profile]
        self.profile = profile
        self.backend = _parse_address(backend)
        self._backend_password = backend_password
        self._username = username
        self._password = password
        self._vnc_password = vnc_password
        offered = list(types if types is not None else profile.types)
        if types is None and vnc_password is not None and profile.password_type:
            offered.append(2)
        if 2 in offered and vnc_password is None:
            raise FrontError(f"the {profile.name} profile offers VncAuth: give a vnc_password")
        if 30 in offered and (username is None or password is None):
            raise FrontError("type 30 (Apple) needs the username and password to accept")
        self.types = tuple(offered)
        if dh_prime.bit_length() > dh_key_length * 8:
            raise FrontError("the Diffie-Hellman prime does not fit the key length")
        self._dh = (dh_generator, dh_prime, dh_key_length)
        self.attempts: list[LoginAttempt] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._workers: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.port = 0

    # ------------------------------------------------------------------ public surface

    @property
    def server(self) -> str:
        """The address clients connect to, ``"127.0.0.1::PORT"``."""
        return f"127.0.0.1::{self.port}"

    def start(self) -> RfbFront:
        """Listen on a free port of 127.0.0.1 and accept clients in a background thread."""
        if self._listener is not None:
            return self
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stopping.clear()
        self._thread = threading.Thread(target=self._accept_loop, name="rfb-front", daemon=True)
        self._thread.start()
        log.info("rfb front (%s) on %s -> %s:%d", self.profile.name, self.server, *self.backend)
        return self

    def stop(self) -> None:
        """Stop listening, close every open connection and wait for the worker threads."""
        self._stopping.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in list(self._sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for worker in self._workers:
            worker.join(timeout=5)
        self._workers.clear()

    def wait_attempt(self, index: int = -1, timeout: float = 10.0) -> LoginAttempt:
        """The ``index``-th attempt (default: the latest) once its login is decided."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if self.attempts:
                    try:
                        attempt = self.attempts[index]
                    except IndexError:
                        attempt = None
                    if attempt is not None and attempt.done.is_set():
                        return attempt
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no decided login attempt {index} within {timeout:g} s")
                self._changed.wait(left)

    # ------------------------------------------------------------------ connection handling

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            worker = threading.Thread(
                target=self._serve, args=(client,), name="rfb-front-conn", daemon=True
            )
            self._workers = [w for w in self._workers if w.is_alive()]
            self._workers.append(worker)
            worker.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
            if self._stopping.is_set():
                sock.shutdown(socket.SHUT_RDWR)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        sock.close()

    def _finish(self, attempt: LoginAttempt) -> None:
        with self._changed:
            attempt.done.set()
            self._changed.notify_all()

    def _serve(self, client: socket.socket) -> None:
        attempt = LoginAttempt(offered=self.types)
        with self._changed:
            self.attempts.append(attempt)
        self._track(client)
        client.settimeout(_RECV_TIMEOUT)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        backend: socket.socket | None = None
        try:
            version = self._greet(client, attempt)
            backend = self._login(client, attempt, version)
            if backend is not None:
                self._relay(client, backend, attempt)
        except (_Closed, OSError) as exc:
            if not attempt.done.is_set():
                attempt.reason = attempt.reason or "the client closed the connection"
                log.debug("rfb front: connection ended during the handshake: %s", exc)
        except Exception as exc:  # a malformed client message: end this connection only
            attempt.reason = attempt.reason or f"the front failed: {exc}"
            log.warning("rfb front: connection dropped: %s", exc, exc_info=True)
        finally:
            self._finish(attempt)
            if backend is not None:
                self._untrack(backend)
            self._untrack(client)

    def _greet(self, client: socket.socket, attempt: LoginAttempt) -> tuple[int, int]:
        client.sendall(self.profile.version)
        line = _recv_exact(client, 12)
        attempt.client_version = line.decode("ascii", "replace").strip()
        try:
            major, minor = int(line[4:7]), int(line[8:11])
        except ValueError:
            attempt.reason = "the client did not send an RFB version"
            raise _Closed from None
        return major, minor

    def _login(
        self, client: socket.socket, attempt: LoginAttempt, version: tuple[int, int]
    ) -> socket.socket | None:
        """Run the security handshake; the connected backend socket on success."""
        legacy = version < (3, 7)  # 3.3: the server picks the type, no SecurityResult text
        reasons = version >= (3, 8)
        if legacy:
            chosen = 2 if 2 in self.types else self.types[0]
            client.sendall(struct.pack("!I", chosen))
        else:
            client.sendall(bytes([len(self.types), *self.types]))
            chosen = _recv_exact(client, 1)[0]
        attempt.chosen = chosen
        if chosen not in self.types:
            self._fail(client, attempt, f"security type {chosen} was not offered", reasons)
            return None
        if chosen == 30:
            ok, why = self._apple_login(client, attempt)
        elif chosen == 2:
            ok, why = self._vnc_login(client)
        else:
            name = _NAMES.get(chosen, "unknown")
            self._fail(
                client, attempt, f"security type {chosen} ({name}) is only announced", reasons
            )
            return None
        if not ok:
            self._fail(client, attempt, why, reasons)
            return None
        try:
            backend = self._backend_login(attempt)
        except (OSError, _Closed, FrontError) as exc:
            self._fail(client, attempt, f"backend: {exc}", reasons)
            return None
        attempt.success = True
        self._finish(attempt)
        client.sendall(struct.pack("!I", 0))
        return backend

    def _fail(
        self, client: socket.socket, attempt: LoginAttempt, reason: str, with_reason: bool
    ) -> None:
        attempt.success = False
        attempt.reason = reason
        self._finish(attempt)
        log.info("rfb front: login refused: %s", reason)
        message = struct.pack("!I", 1)
        if with_reason:
            text = reason.encode("utf-8")
            message += struct.pack("!I", len(text)) + text
        client.sendall(message)
        return None

    def _apple_login(self, client: socket.socket, attempt: LoginAttempt) -> tuple[bool, str]:
        generator, prime, key_length = self._dh
        private = secrets.randbelow(prime - 3) + 2
        public = pow(generator, private, prime)
        client.sendall(
            struct.pack("!HH", generator, key_length)
            + prime.to_bytes(key_length, "big")
            + public.to_bytes(key_length, "big")
        )
        block = _recv_exact(client, 128 + key_length)
        client_public = int.from_bytes(block[128:], "big")
        if not 1 < client_public < prime - 1:
            return False, "the client's Diffie-Hellman key is out of range"
        shared = pow(client_public, private, prime)
        plain = _aes_ecb(_apple_key(shared, key_length), block[:128], decrypt=True)
        user, password = _unpad64(plain[:64]), _unpad64(plain[64:])
        attempt.username = user
        if user != self._username or not secrets.compare_digest(
            password.encode(), (self._password or "").encode()
        ):
            return False, f"Authentication failed for user {user or '(empty)'}"
        return True, ""

    def _vnc_login(self, client: socket.socket) -> tuple[bool, str]:
        challenge = secrets.token_bytes(16)
        client.sendall(challenge)
        response = _recv_exact(client, 16)
        expected = vnc_auth_response(self._vnc_password or "", challenge)
        if not secrets.compare_digest(response, expected):
            return False, "Authentication failed: wrong VNC password"
        return True, ""

    def _backend_login(self, attempt: LoginAttempt) -> socket.socket:
        backend = socket.create_connection(self.backend, timeout=_RECV_TIMEOUT)
        self._track(backend)
        backend.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            line = _recv_exact(backend, 12)
            if not line.startswith(b"RFB "):
                raise FrontError("the backend is not a VNC server")
            backend.sendall(b"RFB 003.008\n")
            count = _recv_exact(backend, 1)[0]
            if count == 0:
                raise FrontError("the backend refused the connection")
            offered = _recv_exact(backend, count)
            if 1 in offered:
                backend.sendall(b"\x01")
            elif 2 in offered:
                if self._backend_password is None:
                    raise FrontError("the backend asks for a VNC password; give backend_password")
                backend.sendall(b"\x02")
                challenge = _recv_exact(backend, 16)
                backend.sendall(vnc_auth_response(self._backend_password, challenge))
            else:
                raise FrontError(f"the backend offers no type the front speaks: {list(offered)}")
            (result,) = struct.unpack("!I", _recv_exact(backend, 4))
            if result != 0:
                raise FrontError("the backend refused the front's login")
        except BaseException:
            self._untrack(backend)
            raise
        return backend

    def _relay(self, client: socket.socket, backend: socket.socket, attempt: LoginAttempt) -> None:
        """ClientInit to the backend, its ServerInit to the client, then bytes both ways."""
        backend.sendall(_recv_exact(client, 1))
        head = _recv_exact(backend, 24)
        (name_length,) = struct.unpack("!I", head[20:24])
        client.sendall(head + _recv_exact(backend, name_length))
        attempt.relayed = True
        client.settimeout(None)
        backend.settimeout(None)
        with selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, backend)
            selector.register(backend, selectors.EVENT_READ, client)
            while not self._stopping.is_set():
                for key, _ in selector.select(timeout=0.5):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    target: socket.socket = key.data
                    data = source.recv(65536)
                    if not data:
                        return
                    target.sendall(data)


# ---------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """Run a front by hand: greet as a server, relay logged-in clients to a real one."""
    parser = argparse.ArgumentParser(
        prog="python -m vnc_use.testing.rfb_front",
        description=(
            "Listen on 127.0.0.1 and greet VNC clients as macOS Screen Sharing, RealVNC, "
            "UltraVNC or TightVNC; relay clients that log in to a real VNC server. "
            "Passwords come from the environment: RFB_FRONT_PASSWORD (type 30), "
            "RFB_FRONT_VNC_PASSWORD (type 2), VNC_PASSWORD (the backend's)."
        ),
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="macos")
    parser.add_argument("--backend", required=True, help="the real server, HOST::PORT")
    parser.add_argument("--user", help="the user name type 30 accepts")
    parser.add_argument(
        "--types", help="offer these types instead, comma-separated (e.g. 30,2)", default=None
    )
    args = parser.parse_args(argv)
    types = None
    if args.types:
        try:
            types = tuple(int(t) for t in args.types.split(","))
        except ValueError:
            parser.error(f"bad --types {args.types!r}; use numbers such as 30,2")
    try:
        front = RfbFront(
            args.profile,
            args.backend,
            backend_password=os.environ.get("VNC_PASSWORD"),
            username=args.user,
            password=os.environ.get("RFB_FRONT_PASSWORD"),
            vnc_password=os.environ.get("RFB_FRONT_VNC_PASSWORD"),
            types=types,
        )
    except FrontError as exc:
        print(f"rfb_front: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with front:
        offered = ", ".join(f"{t} {_NAMES.get(t, '?')}" for t in front.types)
        print(f"{front.profile.description or front.profile.name} front: {front.server}")
        print(f"offers: {offered}", flush=True)
        seen = 0
        try:
            while True:
                try:
                    attempt = front.wait_attempt(seen, timeout=3600)
                except TimeoutError:
                    continue
                seen += 1
                verdict = "logged in" if attempt.success else f"refused ({attempt.reason})"
                who = f" as {attempt.username}" if attempt.username else ""
                print(f"client {attempt.client_version}: type {attempt.chosen}{who}: {verdict}")
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
