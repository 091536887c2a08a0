"""wayvnc for real: headless sway with a terminal, wayvnc with and without its password.

These tests check the fixture (vnc_use.testing.wayland) and what wayvnc 0.5 actually offers:
type 1 without auth; VeNCrypt (19) with only X509Plain (262) with ``enable_auth``. The
X509Plain login is played by hand here (Python's ``ssl`` checking the throw-away CA), so the
fixture is proven without depending on vnc-use's own VeNCrypt client.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator

import pytest

from vnc_use.desktops.vnc import VNCController
from vnc_use.testing.wayland import WaylandDesktop

pytestmark = pytest.mark.desktop

RETURN = 0xFF0D


@pytest.fixture(scope="module")
def open_wayland() -> Iterator[WaylandDesktop]:
    """wayvnc without auth on headless sway, with the typing terminal open."""
    with WaylandDesktop() as desk:
        desk.start_typing_terminal()
        yield desk


@pytest.fixture(scope="module")
def auth_wayland() -> Iterator[WaylandDesktop]:
    """wayvnc with ``enable_auth``, a user, a 14-character password and a throw-away cert."""
    with WaylandDesktop(auth=True, username="wayuser", password="wayland-pass14") as desk:
        desk.start_typing_terminal()
        yield desk


def _recv(sock: socket.socket | ssl.SSLSocket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, f"the server closed the connection after {data!r}"
        data += chunk
    return data


def _connect(server: str) -> tuple[socket.socket, bytes, list[int]]:
    port = int(server.rpartition("::")[2])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    greeting = _recv(sock, 12)
    sock.sendall(b"RFB 003.008\n")
    count = _recv(sock, 1)[0]
    return sock, greeting, list(_recv(sock, count))


def _vencrypt_subtypes(sock: socket.socket) -> list[int]:
    """Choose VeNCrypt (19) and read the server's subtype list (version 0.2)."""
    sock.sendall(bytes([19]))
    assert _recv(sock, 2) == b"\x00\x02"
    sock.sendall(b"\x00\x02")
    assert _recv(sock, 1) == b"\x00"
    count = _recv(sock, 1)[0]
    return list(struct.unpack(f"!{count}I", _recv(sock, 4 * count)))


def _x509plain(
    desk: WaylandDesktop, password: str, context: ssl.SSLContext
) -> tuple[int, ssl.SSLSocket]:
    """VeNCrypt X509Plain by hand: TLS checked by ``context``, then user and password."""
    sock, _, types = _connect(desk.server)
    assert types == [19]
    assert _vencrypt_subtypes(sock) == [262]
    sock.sendall(struct.pack("!I", 262))
    assert _recv(sock, 1) == b"\x01"
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    user, secret = desk.username.encode(), password.encode()
    tls.sendall(struct.pack("!II", len(user), len(secret)) + user + secret)
    (result,) = struct.unpack("!I", _recv(tls, 4))
    return result, tls


def _type_line(sock: ssl.SSLSocket, text: str) -> None:
    """KeyEvent messages for ``text`` (plain ASCII) and Return."""
    for keysym in [ord(c) for c in text] + [RETURN]:
        sock.sendall(struct.pack("!BBxxI", 4, 1, keysym) + struct.pack("!BBxxI", 4, 0, keysym))


def test_wayvnc_without_auth_offers_none_and_types_exactly(open_wayland: WaylandDesktop) -> None:
    sock, greeting, types = _connect(open_wayland.server)
    sock.close()
    assert (greeting, types) == (b"RFB 003.008\n", [1])
    before = len(open_wayland.typed_lines())
    text = "Hello, Wayland! 1+2=3 ~/path_{x}"
    with VNCController(timeout=10.0, connect_timeout=5.0).connect(open_wayland.server) as vnc:
        assert vnc.screen_size() == open_wayland.size
        vnc.type_text(text, press_enter=True)
        lines = open_wayland.wait_typed(before + 1)
    assert lines[before] == text


def test_wayvnc_refuses_characters_beyond_ascii_in_one_line(open_wayland: WaylandDesktop) -> None:
    """wayvnc drops a character its keyboard layout lacks ("Failed to look up keyboard symbol"
    in its log, issue 38): vnc-use refuses such text before any key, naming the characters."""
    before = len(open_wayland.typed_lines())
    with VNCController(timeout=10.0, connect_timeout=5.0).connect(open_wayland.server) as vnc:
        with pytest.raises(ValueError, match=r"cannot type 'ü' 'ß' on this VNC server: wayvnc"):
            vnc.type_text("Grüße", press_enter=True)
        vnc.type_text("after the refusal", press_enter=True)
        lines = open_wayland.wait_typed(before + 1)
    assert lines[before:] == ["after the refusal"]


def test_wayvnc_with_auth_offers_vencrypt_x509plain_only(auth_wayland: WaylandDesktop) -> None:
    sock, greeting, types = _connect(auth_wayland.server)
    with sock:
        assert (greeting, types) == (b"RFB 003.008\n", [19])
        assert _vencrypt_subtypes(sock) == [262]


def test_wayvnc_x509plain_login_by_hand(auth_wayland: WaylandDesktop) -> None:
    """The CA file makes TLS trusted; the user and password open the desktop; typing arrives."""
    assert auth_wayland.ca_file is not None
    trusted = ssl.create_default_context(cafile=str(auth_wayland.ca_file))
    result, tls = _x509plain(auth_wayland, auth_wayland.password, trusted)
    with tls:
        assert result == 0
        tls.sendall(b"\x01")  # ClientInit
        width, height = struct.unpack("!HH", _recv(tls, 4))
        assert (width, height) == auth_wayland.size
        before = len(auth_wayland.typed_lines())
        _type_line(tls, "typed over tls 42")
        lines = auth_wayland.wait_typed(before + 1)
    assert lines[before] == "typed over tls 42"


def _read_to_eof(sock: ssl.SSLSocket, limit: float = 10.0) -> bytes:
    sock.settimeout(limit)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_wayvnc_refuses_a_wrong_password(auth_wayland: WaylandDesktop) -> None:
    """Measured: wayvnc 0.5.0 (neatvnc 0.5.4) answers a wrong password with a *broken*
    SecurityResult: status 0 ("OK"), then a little-endian length 28 (the size of "Invalid
    username or password") and bytes of its memory instead of the text, then it closes.
    A client sees "OK" and then the connection end before any ServerInit arrives."""
    assert auth_wayland.ca_file is not None
    trusted = ssl.create_default_context(cafile=str(auth_wayland.ca_file))
    result, tls = _x509plain(auth_wayland, "not-the-password", trusted)
    with tls:
        tls.sendall(b"\x01")  # ClientInit: a right password gets the ServerInit now
        rest = _read_to_eof(tls)
    assert b"WayVNC" not in rest  # no ServerInit, whatever the version
    if result == 0:  # neatvnc 0.5.4 (Debian 12): the broken "OK", then garbage, then the end
        assert rest[:4] == struct.pack("<I", 28)
    else:  # a fixed neatvnc: a proper SecurityResult "failed" with its reason
        assert result == 1


def test_wayvnc_certificate_is_untrusted_without_the_ca(auth_wayland: WaylandDesktop) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _x509plain(auth_wayland, auth_wayland.password, ssl.create_default_context())


def test_a_port_taken_meanwhile_gets_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """The free port can be taken between the pick and wayvnc's bind: wayvnc then exits and
    the desktop starts on another port (and a listener that is not wayvnc is not mistaken)."""
    import vnc_use.testing.wayland as wayland

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        picks = iter([taken])
        real = wayland.free_port
        monkeypatch.setattr(wayland, "free_port", lambda: next(picks, None) or real())
        with WaylandDesktop() as desk:
            assert desk.port != taken
            sock, greeting, types = _connect(desk.server)
            sock.close()
            assert (greeting, types) == (b"RFB 003.008\n", [1])
