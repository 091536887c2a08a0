"""Security types, logins, timeouts and connection messages against real servers.

* TigerVNC ``Xvnc`` with VeNCrypt TLS and X509 subtypes (a throw-away CA made here), None,
  and TLS next to VncAuth (TLS must win and say so).
* A small front that greets as macOS Screen Sharing (RFB 003.889, Apple type 30 with
  generator 5 and a 4096-bit group), checks the user name and password it decrypts and then
  relays the session to the probe's real Xvnc.
* Timeouts: a dropped SYN (a listener whose accept queue is full), a silent listener.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import pty
import secrets
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vnc_use.desktops.rfb_security import MODP_4096, Security, apple_dh_decrypt
from vnc_use.desktops.vnc import VNCController
from vnc_use.errors import ConfigError, VncAuthError, VncConnectionError, VncTimeoutError
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from desktop_fixtures import Probe, start_probe

CLI = [sys.executable, "-m", "vnc_use.cli"]
BAD_OUTPUT = ("Traceback", "Unhandled", "username:", "bytearray(", "(19,)")

# --------------------------------------------------------------------------- certificates


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def _ca(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throw-away CA, a server certificate it signed (127.0.0.1, localhost), another CA."""
    folder = tmp_path_factory.mktemp("tls")
    ca_key, ca_cert = _ca("vnc-use test CA")
    _, other_cert = _ca("some other CA")
    files = {"ca": folder / "ca.pem", "other_ca": folder / "other-ca.pem"}
    files["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files["other_ca"].write_bytes(other_cert.public_bytes(serialization.Encoding.PEM))
    names: dict[str, list[x509.GeneralName]] = {
        "": [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
        "wrong_name_": [x509.DNSName("vnc.example")],  # signed by the CA, other name
    }
    for prefix, alt_names in names.items():
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(str(alt_names[0].value)))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        files[f"{prefix}cert"] = folder / f"{prefix}server.pem"
        files[f"{prefix}key"] = folder / f"{prefix}server-key.pem"
        files[f"{prefix}cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(files[f"{prefix}key"], key)
    return files


@contextlib.contextmanager
def xvnc(security_types: str, tls: dict[str, Path] | None = None) -> Iterator[TestDesktop]:
    """A small Xvnc with these ``-SecurityTypes`` (and the test certificate, if given)."""
    desk = TestDesktop(
        320,
        240,
        security_types=security_types,
        x509_cert=tls["cert"] if tls else None,
        x509_key=tls["key"] if tls else None,
    )
    with desk:
        yield desk


# --------------------------------------------------------------------------- TigerVNC TLS


@pytest.mark.desktop
@pytest.mark.parametrize(
    ("types", "use_ca", "expected"),
    [
        ("TLSVnc", False, Security(258, "VeNCrypt TLSVnc", True)),
        ("TLSNone", False, Security(257, "VeNCrypt TLSNone", True)),
        ("X509Vnc", True, Security(261, "VeNCrypt X509Vnc", True)),
        ("X509None", True, Security(260, "VeNCrypt X509None", True)),
        ("X509Vnc,TLSVnc", True, Security(261, "VeNCrypt X509Vnc", True)),
        ("X509Vnc,TLSVnc", False, Security(258, "VeNCrypt TLSVnc", True)),
        ("VncAuth,TLSVnc", False, Security(258, "VeNCrypt TLSVnc", True)),
        ("None", False, Security(1, "None", False)),
        ("VncAuth", False, Security(2, "VncAuth", False)),
    ],
)
def test_tigervnc_security_types(
    types: str, use_ca: bool, expected: Security, tls_files: dict[str, Path]
) -> None:
    with xvnc(types, tls_files) as desk:
        ca = str(tls_files["ca"]) if use_ca else None
        with VNCController(connect_timeout=10).connect(
            desk.server, desk.password, ca_file=ca
        ) as vnc:
            assert vnc.security == expected
            assert vnc.screenshot().size == (320, 240)


@pytest.mark.desktop
@pytest.mark.parametrize("ca", ["other_ca", None])
def test_untrusted_certificate_is_one_line_about_vnc_ca(
    ca: str | None, tls_files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    with xvnc("X509Vnc", tls_files) as desk:
        ca_file = str(tls_files[ca]) if ca else None
        with pytest.raises(VncConnectionError) as info:
            VNCController(connect_timeout=10).connect(desk.server, desk.password, ca_file=ca_file)
    text = str(info.value)
    assert "\n" not in text
    assert "certificate" in text and "--vnc-ca" in text
    assert f"127.0.0.1 port {desk.port}" in text
    assert not any(bad in text for bad in BAD_OUTPUT)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.desktop
def test_certificate_for_another_name_is_one_line(tls_files: dict[str, Path]) -> None:
    other = {"cert": tls_files["wrong_name_cert"], "key": tls_files["wrong_name_key"]}
    with xvnc("X509Vnc", other) as desk, pytest.raises(VncConnectionError) as info:
        VNCController().connect(desk.server, desk.password, ca_file=str(tls_files["ca"]))
    text = str(info.value)
    assert "certificate" in text and "127.0.0.1" in text and "--vnc-ca" in text
    assert "\n" not in text and not any(bad in text for bad in BAD_OUTPUT)


@pytest.mark.parametrize("which", ["key", "missing"])
def test_bad_vnc_ca_file_is_a_config_error(which: str, tls_files: dict[str, Path]) -> None:
    path = str(tls_files["key"]) if which == "key" else str(tls_files["ca"]) + ".missing"
    with pytest.raises(ConfigError, match="--vnc-ca") as info:
        VNCController().connect("127.0.0.1::1", "pw", ca_file=path)
    assert path in str(info.value) and "[(" not in str(info.value)


@pytest.mark.desktop
def test_missing_password_on_tls_names_both_ways() -> None:
    with xvnc("TLSVnc") as desk, pytest.raises(VncAuthError) as info:
        VNCController().connect(desk.server, None)
    text = str(info.value)
    assert "VNC_PASSWORD" in text and "--vnc-password" in text
    assert "258 TLSVnc" in text and "did not speak" not in text


@pytest.mark.desktop
def test_typing_and_clicks_reach_the_app_over_tls(
    tls_files: dict[str, Path], tmp_path: Path
) -> None:
    with xvnc("X509Vnc", tls_files) as desk:
        probe = start_probe(desk, str(tmp_path / "events.jsonl"))
        with VNCController().connect(desk.server, desk.password, ca_file=str(tls_files["ca"])) as v:
            assert v.security is not None and v.security.encrypted
            x, y = probe.entry_center
            v.click(x, y)
            assert probe.log.wait_type("press", x=x, y=y)["button"] == 1
            text = "Grüße über TLS"
            v.type_text(text, clear_first=True, press_enter=True)
            assert probe.log.wait_type("submit", timeout=10)["text"] == text


# --------------------------------------------------------------------------- macOS type 30


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


class MacFront:
    """Greets as macOS Screen Sharing, logs in with type 30 or 2, relays to a real Xvnc.

    Type 30 is checked here (generator 5, 4096-bit group, as macOS sends) against
    ``user``/``password``; the front then logs in to the VncAuth Xvnc itself. Type 2 is
    passed through to the Xvnc.
    """

    def __init__(self, upstream: TestDesktop, types: tuple[int, ...], user: str, password: str):
        self.upstream, self.types, self.user, self.password = upstream, types, user, password
        self.choices: list[int] = []
        self.logins: list[str] = []  # user names that logged in or tried
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port: int = self.listener.getsockname()[1]
        self._socks: list[socket.socket] = [self.listener]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def server(self) -> str:
        return f"127.0.0.1::{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._socks.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            conn.sendall(b"RFB 003.889\n")
            _recv_exact(conn, 12)
            conn.sendall(bytes([len(self.types), *self.types]))
            choice = _recv_exact(conn, 1)[0]
            self.choices.append(choice)
            up = socket.create_connection(("127.0.0.1", self.upstream.port))
            self._socks.append(up)
            _recv_exact(up, 12)
            up.sendall(b"RFB 003.008\n")
            _recv_exact(up, _recv_exact(up, 1)[0])
            up.sendall(b"\x02")
            if choice == 30:
                if not self._apple_login(conn):
                    conn.close()
                    return
                self._vnc_login(up)
                conn.sendall(b"\0\0\0\0")
            self._relay(conn, up)

    def _apple_login(self, conn: socket.socket) -> bool:
        private = 2 + secrets.randbelow(MODP_4096 - 3)
        modulus = MODP_4096.to_bytes(512, "big")
        conn.sendall(
            struct.pack("!HH", 5, 512) + modulus + pow(5, private, MODP_4096).to_bytes(512, "big")
        )
        user, password = apple_dh_decrypt(modulus, private, _recv_exact(conn, 128 + 512))
        self.logins.append(user)
        if (user, password) == (self.user, self.password):
            return True
        reason = b"Authentication failed"
        conn.sendall(struct.pack("!II", 1, len(reason)) + reason)
        return False

    def _vnc_login(self, up: socket.socket) -> None:
        from vncdotool.rfb import _vnc_des, des_encrypt

        challenge = _recv_exact(up, 16)
        up.sendall(des_encrypt(_vnc_des(self.upstream.password), challenge))
        if _recv_exact(up, 4) != b"\0\0\0\0":
            raise ConnectionError("upstream login failed")

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        threading.Thread(target=pump, args=(b, a), daemon=True).start()
        pump(a, b)

    def close(self) -> None:
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept()/recv()
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def mac_front(
    upstream: TestDesktop, types: tuple[int, ...], user: str = "anna", password: str = ""
) -> Iterator[MacFront]:
    front = MacFront(upstream, types, user, password or "fourteen-chars")
    try:
        yield front
    finally:
        front.close()


@pytest.mark.desktop
def test_mac_login_with_user_name_types_into_the_app(probe: Probe) -> None:
    password = "Mac-Pass-14chr"  # all 14 characters count (VncAuth would keep 8)
    with mac_front(probe.desktop, (30, 33, 36, 2), password=password) as front:
        with VNCController().connect(front.server, password, username="anna") as vnc:
            assert vnc.security == Security(30, "Apple DH", False)
            x, y = probe.entry_center
            vnc.click(x, y)
            probe.log.wait_type("press", x=x, y=y)
            vnc.type_text("hello Mac", clear_first=True, press_enter=True)
            assert probe.log.wait_type("submit", timeout=10)["text"] == "hello Mac"
        assert front.choices == [30] and front.logins == ["anna"]


@pytest.mark.desktop
def test_mac_without_user_name_uses_the_vnc_password(probe: Probe) -> None:
    with mac_front(probe.desktop, (30, 2)) as front:
        with VNCController().connect(front.server, probe.desktop.password) as vnc:
            assert vnc.security == Security(2, "VncAuth", False)
            assert vnc.screenshot().size == probe.size
        assert front.choices == [2]


@pytest.mark.desktop
def test_mac_without_user_name_or_vnc_password_option_names_vnc_username(probe: Probe) -> None:
    with mac_front(probe.desktop, (30, 33, 36)) as front:
        started = time.monotonic()
        with pytest.raises(VncAuthError) as info:
            VNCController().connect(front.server, "whatever")
        assert time.monotonic() - started < 4  # ends at once: the issue asks "within seconds"
        assert front.choices == []  # nothing was chosen: no prompt, no login attempt
    text = str(info.value)
    assert "VNC_USERNAME" in text and "--vnc-user" in text
    assert "30 Apple DH, 33 Apple RSA, 36 Apple SRP" in text
    assert "VNC viewers may control screen with password" in text


@pytest.mark.desktop
def test_mac_rejected_login_names_the_user_not_the_password(probe: Probe) -> None:
    with mac_front(probe.desktop, (30,), password="the-right-one") as front:
        with pytest.raises(VncAuthError) as info:
            VNCController().connect(front.server, "Wrong-Pass-999", username="bob")
        assert front.logins == ["bob"]
    text = str(info.value)
    assert 'user "bob"' in text and "macOS" in text and "rejected" in text
    assert "Wrong-Pass-999" not in text


@pytest.mark.desktop
@pytest.mark.parametrize("terminal", [False, True], ids=["no-terminal", "terminal"])
def test_mac_without_user_name_never_prompts_and_exits(
    probe: Probe, terminal: bool, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    with mac_front(probe.desktop, (30, 33, 36)) as front:
        env = {**os.environ, "VNC_PASSWORD": "secret-pass-77"}
        env.pop("VNC_USERNAME", None)
        master, slave = pty.openpty() if terminal else (-1, -1)
        try:
            proc = subprocess.run(
                [*CLI, "run", "--vnc", front.server, "--task", "x", "--runs-dir", str(tmp_path)],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,  # a prompt or a blocked thread would hang here
                stdin=slave if terminal else subprocess.DEVNULL,
            )
        finally:
            if terminal:
                os.close(master)
                os.close(slave)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "VNC_USERNAME" in out and "--vnc-user" in out
    assert not any(bad in out for bad in BAD_OUTPUT), out
    assert "secret-pass-77" not in out
    assert front.choices == []


# --------------------------------------------------------------------------- VeNCrypt Plain


class VencryptFront:
    """Greets as a VeNCrypt server (wayvnc with ``enable_auth`` offers 19 with 262 only).

    TLS with the test certificate for X509 subtypes, anonymous (AECDH) for TLS ones, none for
    256; checks the Plain login, then relays to an Xvnc that offers None. A VncAuth (2) choice
    is accepted without checking (to see which type the client fell back to).
    """

    def __init__(
        self,
        upstream: TestDesktop,
        types: tuple[int, ...],
        subtypes: tuple[int, ...],
        tls: dict[str, Path],
        user: str = "anna",
        password: str = "wayvnc-pass-123",
    ) -> None:
        self.upstream, self.types, self.subtypes = upstream, types, subtypes
        self.tls, self.user, self.password = tls, user, password
        self.choices: list[int] = []
        self.logins: list[str] = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port: int = self.listener.getsockname()[1]
        self._socks: list[socket.socket] = [self.listener]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    server = MacFront.server
    _accept = MacFront._accept
    _relay = MacFront._relay
    close = MacFront.close

    def _tls(self, conn: socket.socket, subtype: int) -> socket.socket:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if subtype >= 260:
            ctx.load_cert_chain(self.tls["cert"], self.tls["key"])
        else:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            ctx.set_ciphers("aNULL:@SECLEVEL=0")
        conn.sendall(b"\x01")
        tls = ctx.wrap_socket(conn, server_side=True)
        self._socks.append(tls)
        return tls

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            conn.sendall(b"RFB 003.008\n")
            _recv_exact(conn, 12)
            conn.sendall(bytes([len(self.types), *self.types]))
            choice = _recv_exact(conn, 1)[0]
            self.choices.append(choice)
            if choice == 2:
                conn.sendall(secrets.token_bytes(16))
                _recv_exact(conn, 16)
            else:
                conn.sendall(b"\x00\x02")
                _recv_exact(conn, 2)
                conn.sendall(b"\x00" + bytes([len(self.subtypes)]))
                conn.sendall(b"".join(struct.pack("!I", s) for s in self.subtypes))
                (subtype,) = struct.unpack("!I", _recv_exact(conn, 4))
                self.choices.append(subtype)
                if subtype != 256:
                    conn = self._tls(conn, subtype)
                user_len, pass_len = struct.unpack("!II", _recv_exact(conn, 8))
                user = _recv_exact(conn, user_len).decode()
                password = _recv_exact(conn, pass_len).decode()
                self.logins.append(user)
                if (user, password) != (self.user, self.password):
                    reason = b"Authentication failed"
                    conn.sendall(struct.pack("!II", 1, len(reason)) + reason)
                    return
            up = socket.create_connection(("127.0.0.1", self.upstream.port))
            self._socks.append(up)
            _recv_exact(up, 12)
            up.sendall(b"RFB 003.008\n")
            _recv_exact(up, _recv_exact(up, 1)[0])
            up.sendall(b"\x01")
            _recv_exact(up, 4)
            conn.sendall(b"\0\0\0\0")
            self._relay(conn, up)


@pytest.fixture(scope="module")
def open_desktop() -> Iterator[TestDesktop]:
    """An Xvnc without a password, behind the VeNCrypt front."""
    with xvnc("None") as desk:
        yield desk


@pytest.mark.desktop
@pytest.mark.parametrize(
    ("subtypes", "use_ca", "expected"),
    [
        ((262,), True, Security(262, "VeNCrypt X509Plain", True)),  # wayvnc with enable_auth
        ((259,), False, Security(259, "VeNCrypt TLSPlain", True)),
        ((256,), False, Security(256, "VeNCrypt Plain", False)),  # loopback only
        ((256, 259), False, Security(259, "VeNCrypt TLSPlain", True)),
    ],
)
def test_vencrypt_plain_logins(
    subtypes: tuple[int, ...],
    use_ca: bool,
    expected: Security,
    open_desktop: TestDesktop,
    tls_files: dict[str, Path],
) -> None:
    front = VencryptFront(open_desktop, (19,), subtypes, tls_files)
    try:
        ca = str(tls_files["ca"]) if use_ca else None
        with VNCController().connect(
            front.server, "wayvnc-pass-123", username="anna", ca_file=ca
        ) as vnc:
            assert vnc.security == expected
            assert vnc.screenshot().size == (320, 240)
        assert front.logins == ["anna"]
    finally:
        front.close()


@pytest.mark.desktop
def test_wayvnc_without_user_name_names_user_and_ca(
    open_desktop: TestDesktop, tls_files: dict[str, Path]
) -> None:
    front = VencryptFront(open_desktop, (19,), (262,), tls_files)
    try:
        with pytest.raises(VncAuthError) as info:
            VNCController().connect(front.server, "wayvnc-pass-123")
    finally:
        front.close()
    text = str(info.value)
    assert "19 VeNCrypt with subtypes 262 X509Plain" in text
    assert "--vnc-user" in text and "VNC_USERNAME" in text and "--vnc-ca" in text
    assert front.logins == []


@pytest.mark.desktop
def test_wayvnc_without_ca_fails_on_the_certificate(
    open_desktop: TestDesktop, tls_files: dict[str, Path]
) -> None:
    front = VencryptFront(open_desktop, (19,), (262,), tls_files)
    try:
        with pytest.raises(VncConnectionError, match=r"certificate.*--vnc-ca"):
            VNCController().connect(front.server, "wayvnc-pass-123", username="anna")
    finally:
        front.close()
    assert front.logins == []  # the password never went to an unverified server


@pytest.mark.desktop
def test_plain_login_rejected_names_the_user(
    open_desktop: TestDesktop, tls_files: dict[str, Path]
) -> None:
    front = VencryptFront(open_desktop, (19,), (259,), tls_files)
    try:
        with pytest.raises(VncAuthError) as info:
            VNCController().connect(front.server, "not-the-password", username="anna")
    finally:
        front.close()
    text = str(info.value)
    assert 'user "anna"' in text and "not-the-password" not in text


@pytest.mark.desktop
def test_unusable_vencrypt_falls_back_to_another_offered_type(
    open_desktop: TestDesktop, tls_files: dict[str, Path]
) -> None:
    front = VencryptFront(open_desktop, (19, 2), (262,), tls_files)
    try:
        with VNCController().connect(front.server, "pw") as vnc:  # no user name for 262
            assert vnc.security == Security(2, "VncAuth", False)
        assert front.choices == [19, 2]  # the first connection learnt the subtypes
    finally:
        front.close()


# --------------------------------------------------------------------------- timeouts


@pytest.fixture
def full_listener() -> Iterator[int]:
    """A port whose SYNs are dropped: backlog 0, its one queue slot taken and never accepted.

    Linux drops a SYN when the accept queue is full (tcp_abort_on_overflow=0), as a
    firewall that drops packets would; no iptables needed.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=2)
    probe_sock = socket.socket()
    probe_sock.settimeout(0.5)
    try:  # check the premise on this machine: a further connect must not complete
        with pytest.raises(OSError):
            probe_sock.connect(("127.0.0.1", port))
    finally:
        probe_sock.close()
    yield port
    filler.close()
    listener.close()


def test_dropped_syn_is_no_tcp_connection(full_listener: int) -> None:
    with pytest.raises(VncTimeoutError) as info:
        VNCController(connect_timeout=1.0).connect(f"127.0.0.1::{full_listener}", "x")
    text = str(info.value)
    assert text.startswith(f"no TCP connection to 127.0.0.1 port {full_listener} within 1 s")
    assert "host down or firewalled" in text and "--connect-timeout" in text
    assert "greeting" not in text


def test_silent_listener_is_no_greeting() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)  # accepts (the kernel does) but never speaks
    port = listener.getsockname()[1]
    try:
        with pytest.raises(VncTimeoutError) as info:
            VNCController(connect_timeout=1.0).connect(f"127.0.0.1::{port}", "x")
    finally:
        listener.close()
    text = str(info.value)
    assert f"127.0.0.1 port {port} accepted the TCP connection but sent no VNC greeting" in text
    assert "(not a VNC server?)" in text


def test_greeting_without_handshake_is_its_own_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    conns: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            conns.append(conn)
            conn.sendall(b"RFB 003.008\n")  # then nothing: no security types

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(VncTimeoutError) as info:
            VNCController(connect_timeout=1.0).connect(f"127.0.0.1::{port}", "x")
    finally:
        listener.close()
        thread.join(timeout=5)
        for conn in conns:
            conn.close()
    assert "greeted but did not complete the handshake within 1 s" in str(info.value)


# --------------------------------------------------------------------------- messages


def test_display_number_message_names_the_port_and_how_to_write_one() -> None:
    with pytest.raises(VncConnectionError) as info:
        VNCController(connect_timeout=2).connect("127.0.0.1:5971")  # display 5971: port 11871
    text = str(info.value)
    assert "127.0.0.1 port 11871" in text
    assert "127.0.0.1::5971" in text


def test_unsupported_types_name_them_and_the_server_setting() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError, ConnectionError):
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"RFB 005.000\n")
                _recv_exact(conn, 12)
                conn.sendall(bytes([3, 5, 6, 13]))
                conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(VncAuthError) as info:
            VNCController(connect_timeout=3).connect(f"127.0.0.1::{port}", "pw", username="u")
    finally:
        listener.close()
        thread.join(timeout=5)
    text = str(info.value)
    assert f"127.0.0.1 port {port} offers security types 5 RA2, 6 RA2ne, 13 RA2_256" in text
    assert "RealVNC" in text and "did not speak" not in text
    assert not any(bad in text for bad in BAD_OUTPUT)


@contextlib.contextmanager
def scripted_server(script: list[bytes], reads: int = 64) -> Iterator[int]:
    """A one-connection server on 127.0.0.1 that sends ``script`` (reading what the client
    says between the parts) and then waits for the client to hang up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                for part in script:
                    conn.sendall(part)
                    with contextlib.suppress(socket.timeout):
                        conn.recv(reads)
                with contextlib.suppress(socket.timeout):
                    conn.recv(reads)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=6)


@pytest.mark.parametrize(
    ("script", "password", "expected"),
    [
        # RFB 3.3: the server alone picks the type (a u32)
        ([b"RFB 003.003\n", struct.pack("!I", 2)], None, "VNC_PASSWORD or pass --vnc-password"),
        ([b"RFB 003.003\n", struct.pack("!I", 16)], "pw", "16 Tight"),
        (
            [b"RFB 003.003\n", struct.pack("!II", 0, 12) + b"Too many tries"[:12]],
            "pw",
            "refused the connection: Too many tri",
        ),
        # VeNCrypt older than 0.2
        ([b"RFB 003.008\n", bytes([1, 19]), b"\x00\x01"], "pw", "VeNCrypt 0.1"),
        # 3.8 failure with a reason before any type
        ([b"RFB 003.008\n", b"\x00" + struct.pack("!I", 9) + b"go away\x01\x02"], "pw", "go away"),
    ],
    ids=["3.3-vncauth-no-password", "3.3-tight", "3.3-refused", "vencrypt-0.1", "no-types"],
)
def test_handshake_failures_are_one_line_and_log_no_unhandled_error(
    script: list[bytes], password: str | None, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    with scripted_server(script) as port, pytest.raises((VncAuthError, VncConnectionError)) as info:
        VNCController(connect_timeout=3).connect(f"127.0.0.1::{port}", password)
    text = str(info.value)
    assert expected in text and f"127.0.0.1 port {port}" in text
    assert "\n" not in text and not any(bad in text for bad in BAD_OUTPUT), text
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert "Unhandled" not in caplog.text


# --------------------------------------------------------------------------- the CLI


@pytest.mark.desktop
def test_cli_run_with_vnc_ca_records_the_security(
    tls_files: dict[str, Path], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(Reply.text("Nothing to do."))
    with xvnc("X509Vnc", tls_files) as desk:
        env = {**os.environ, "VNC_PASSWORD": desk.password}
        argv = [*CLI, "run", "--vnc", desk.server, "--task", "Look", "--runs-dir", str(tmp_path)]
        argv += ["--thread-id", "tls1", "--vnc-ca", str(tls_files["ca"]), "--connect-timeout", "8"]
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == f"run tls1 on {desk.server} (VeNCrypt X509Vnc, encrypted): Look"
    saved = json.loads((tmp_path / "tls1" / "run.json").read_text())
    assert saved["security"] == {"type": 261, "name": "VeNCrypt X509Vnc", "encrypted": True}
    assert saved["vnc_ca"] == str(tls_files["ca"]) and saved["connect_timeout"] == 8
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert desk.password.encode() not in path.read_bytes(), path


@pytest.mark.desktop
def test_approve_reconnects_with_the_recorded_ca_and_timeout(
    tls_files: dict[str, Path], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(
        Reply.calls(
            FunctionCallSpec("click_at", x=500, y=500, safety_decision=require_confirmation("ok?"))
        ),
        Reply.text("Clicked."),
    )
    base = ["--runs-dir", str(tmp_path)]
    with xvnc("X509Vnc", tls_files) as desk:
        env = {**os.environ, "VNC_PASSWORD": desk.password}
        argv = [*CLI, "run", "--vnc", desk.server, "--task", "Click", "--thread-id", "a1", *base]
        argv += ["--vnc-ca", str(tls_files["ca"]), "--connect-timeout", "7"]
        options = {"env": env, "capture_output": True, "text": True, "timeout": 60}
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, **options)
        assert proc.returncode == 3, proc.stdout + proc.stderr  # waits for an approval
        # no --vnc, --vnc-ca or --connect-timeout: approve takes them from the run
        proc = subprocess.run([*CLI, "approve", "a1", *base], stdin=subprocess.DEVNULL, **options)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: done" in proc.stdout
    saved = json.loads((tmp_path / "a1" / "run.json").read_text())
    assert saved["connect_timeout"] == 7 and saved["vnc_ca"] == str(tls_files["ca"])


@pytest.mark.desktop
@pytest.mark.parametrize("how", ["env", "flag"])
def test_cli_logs_in_to_a_mac_with_a_user_name(
    how: str, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    w, h = probe.size
    ex, ey = (round(v * 1000 / s) for v, s in zip(probe.entry_center, (w, h), strict=True))
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text="Grüße", press_enter=True)),
        Reply.text("Typed."),
    )
    password = "Mac-Pass-14chr"
    with mac_front(probe.desktop, (30, 33, 36), user="anna", password=password) as front:
        env = {**os.environ, "VNC_PASSWORD": password}
        argv = [*CLI, "run", "--vnc", front.server, "--task", "Type", "--thread-id", "m1"]
        argv += ["--runs-dir", str(tmp_path)]
        if how == "env":
            env["VNC_USERNAME"] = "anna"
        else:
            env.pop("VNC_USERNAME", None)
            argv += ["--vnc-user", "anna"]
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"run m1 on {front.server} (Apple DH, ")
    assert probe.log.wait_type("submit", timeout=10)["text"] == "Grüße"
    saved = json.loads((tmp_path / "m1" / "run.json").read_text())
    assert saved["vnc_username"] == "anna"
    assert saved["security"] == {"type": 30, "name": "Apple DH", "encrypted": False}
    assert password not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
