"""The RFB front (vnc_use.testing.rfb_front) checked by code we did not write, and on the wire.

The front imitates macOS Screen Sharing's type-30 login; the proof that the imitation is
right is vncdotool's own type-30 client logging in through it to a real Xvnc with the probe
app (a screenshot of the desktop's size, a click the probe receives). The other tests read
the greetings byte by byte, as a client would.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator

import pytest

from vnc_use.desktops import rfb_security as client_side
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.rfb_front import (
    APPLE_DH_KEY_LENGTH,
    MODP_4096,
    PROFILES,
    FrontError,
    RfbFront,
    apple_dh_client_block,
    vnc_auth_response,
)

from desktop_fixtures import Probe

USER = "alice"
PASSWORD = "correct-horse7"  # 14 characters: type 30 must take it whole
VNC_PASSWORD = "legacy12"


# ------------------------------------------------------------------ a raw client for the wire


def _recv(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, f"the front closed the connection after {data!r}"
        data += chunk
    return data


def _greeting(
    server: str, version: bytes = b"RFB 003.008\n"
) -> tuple[socket.socket, bytes, list[int]]:
    """Connect, read the server's version, answer ``version``, read the offered types."""
    port = int(server.rpartition("::")[2])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    greeting = _recv(sock, 12)
    sock.sendall(version)
    count = _recv(sock, 1)[0]
    return sock, greeting, list(_recv(sock, count))


def _security_result(sock: socket.socket) -> tuple[int, str]:
    (result,) = struct.unpack("!I", _recv(sock, 4))
    if result == 0:
        return 0, ""
    (length,) = struct.unpack("!I", _recv(sock, 4))
    return result, _recv(sock, length).decode()


def _apple_login(server: str, user: str, password: str) -> tuple[int, str, socket.socket]:
    sock, _, types = _greeting(server)
    assert 30 in types
    sock.sendall(b"\x1e")
    generator, key_length = struct.unpack("!HH", _recv(sock, 4))
    prime = int.from_bytes(_recv(sock, key_length), "big")
    server_public = int.from_bytes(_recv(sock, key_length), "big")
    sock.sendall(apple_dh_client_block(user, password, generator, prime, server_public, key_length))
    result, reason = _security_result(sock)
    return result, reason, sock


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def mac_front(desktop: TestDesktop) -> Iterator[RfbFront]:
    """macOS Screen Sharing's greeting (types 30, 33, 36, 35) in front of ``desktop``."""
    with RfbFront(
        "macos", desktop.server, backend_password=desktop.password, username=USER, password=PASSWORD
    ) as front:
        yield front


# ------------------------------------------------------------------ the constants macOS sends


def _pi_bits(bits: int) -> int:
    """floor(2**bits * pi), by Machin's formula in integers."""
    one = 1 << (bits + 64)

    def arctan_inv(x: int) -> int:
        total = term = one // x
        n, sign = 1, -1
        while term:
            term //= x * x
            total += sign * (term // (2 * n + 1))
            sign, n = -sign, n + 1
        return total

    return (4 * (4 * arctan_inv(5) - arctan_inv(239))) >> 64


def test_the_prime_is_rfc3526_group_16() -> None:
    """RFC 3526: p = 2^4096 - 2^4032 - 1 + 2^64 * ( [2^3966 pi] + 240904 )."""
    expected = 2**4096 - 2**4032 - 1 + 2**64 * (_pi_bits(3966) + 240904)
    assert expected == MODP_4096
    assert expected == client_side.MODP_4096  # the copy the client-side tests use
    assert MODP_4096.bit_length() == 4096 == APPLE_DH_KEY_LENGTH * 8


def test_vnc_auth_response_matches_vncdotool() -> None:
    """The front's VncAuth check agrees with vncdotool's client (bit-reversed DES key)."""
    from vncdotool.rfb import _vnc_des, des_encrypt

    challenge = bytes(range(16))
    for password in ("password", "legacy12", "short", "longer-than-eight"):
        assert vnc_auth_response(password, challenge) == des_encrypt(_vnc_des(password), challenge)
    assert vnc_auth_response("password-and-more", challenge) == vnc_auth_response(
        "password", challenge
    )


# ------------------------------------------------------------------ proof by vncdotool's client


@pytest.mark.desktop
@pytest.mark.filterwarnings("ignore:Diffie-Hellman over finite fields")  # vncdotool's FFDH
def test_vncdotool_type30_logs_in_through_the_front(mac_front: RfbFront, probe: Probe) -> None:
    """vncdotool's own Apple (type 30) client, with a user name: screenshot and click work."""
    from vncdotool import api

    # vncdotool builds the 4096-bit group with cryptography's FFDH: about 5 s per login here.
    client = api.connect(mac_front.server, password=PASSWORD, username=USER, timeout=90)
    try:
        client.refreshScreen()
        assert client.screen.size == probe.desktop.size
        x, y = probe.canvas_point()
        client.mouseMove(x, y)
        client.mousePress(1)
        press = probe.log.wait_type("press")
        assert (press["x"], press["y"]) == (x, y)
    finally:
        client.disconnect()
    attempt = mac_front.wait_attempt(0)
    assert (attempt.chosen, attempt.username, attempt.success, attempt.relayed) == (
        30,
        USER,
        True,
        True,
    )
    assert attempt.client_version == "RFB 003.008"  # vncdotool answers 3.889 with 3.8
    assert PASSWORD not in repr(mac_front.attempts)


# ------------------------------------------------------------------ type 30 on the wire


@pytest.mark.desktop
def test_macos_greeting_and_the_dh_group_it_sends(mac_front: RfbFront) -> None:
    sock, greeting, types = _greeting(mac_front.server)
    with sock:
        assert greeting == b"RFB 003.889\n"
        assert types == [30, 33, 36, 35]
        sock.sendall(b"\x1e")
        generator, key_length = struct.unpack("!HH", _recv(sock, 4))
        assert (generator, key_length) == (5, 512)
        assert int.from_bytes(_recv(sock, key_length), "big") == MODP_4096


@pytest.mark.desktop
def test_type30_takes_the_password_whole(mac_front: RfbFront, desktop: TestDesktop) -> None:
    """Same first 8 characters, different tail: refused, with the user named and no password."""
    result, reason, sock = _apple_login(mac_front.server, USER, PASSWORD[:8] + "XXXXXX")
    sock.close()
    assert result == 1
    assert USER in reason and PASSWORD not in reason
    attempt = mac_front.wait_attempt(0)
    assert (attempt.chosen, attempt.username, attempt.success) == (30, USER, False)

    result, reason, sock = _apple_login(mac_front.server, USER, PASSWORD)
    with sock:
        assert (result, reason) == (0, "")
        sock.sendall(b"\x01")  # ClientInit, shared
        width, height = struct.unpack("!HH", _recv(sock, 4))
    assert (width, height) == desktop.size
    assert mac_front.wait_attempt(1).success


@pytest.mark.desktop
def test_wrong_user_is_refused(mac_front: RfbFront) -> None:
    result, reason, sock = _apple_login(mac_front.server, "mallory", PASSWORD)
    sock.close()
    assert result == 1 and "mallory" in reason
    assert not mac_front.wait_attempt(0).success


@pytest.mark.desktop
def test_an_announced_type_ends_with_a_reason(mac_front: RfbFront) -> None:
    sock, _, _ = _greeting(mac_front.server)
    with sock:
        sock.sendall(bytes([33]))
        result, reason = _security_result(sock)
    assert result == 1 and "33" in reason


# ------------------------------------------------------------------ VncAuth and other servers


@pytest.mark.desktop
def test_macos_with_the_vnc_password_option_adds_type_2(desktop: TestDesktop, probe: Probe) -> None:
    """vncdotool through the front's type 2 (VncAuth); a wrong VNC password is refused."""
    from vncdotool import api

    with RfbFront(
        "macos",
        desktop.server,
        backend_password=desktop.password,
        username=USER,
        password=PASSWORD,
        vnc_password=VNC_PASSWORD,
        types=(2,),  # vncdotool would pick 30 over 2; offer 2 alone to drive it
    ) as front:
        client = api.connect(front.server, password=VNC_PASSWORD, timeout=20)
        try:
            client.refreshScreen()
            assert client.screen.size == desktop.size
        finally:
            client.disconnect()
        attempt = front.wait_attempt(0)
        assert (attempt.chosen, attempt.success) == (2, True)

        sock, _, _ = _greeting(front.server)
        with sock:
            sock.sendall(b"\x02")
            challenge = _recv(sock, 16)
            sock.sendall(vnc_auth_response("wrong-pw", challenge))
            result, reason = _security_result(sock)
        assert result == 1 and "password" in reason
    full = RfbFront("macos", desktop.server, username=USER, password=PASSWORD, vnc_password="x")
    assert full.types == (30, 33, 36, 35, 2)


@pytest.mark.parametrize(
    ("profile", "greeting", "types"),
    [
        ("realvnc", b"RFB 005.000\n", [5, 6, 13]),
        ("ultravnc", b"RFB 003.008\n", [113]),
    ],
)
def test_windows_server_greetings(profile: str, greeting: bytes, types: list[int]) -> None:
    """RealVNC's RA2 family and UltraVNC's MS-Logon II are announced, not performed."""
    with RfbFront(profile, "127.0.0.1::1") as front:
        sock, seen, offered = _greeting(front.server)
        with sock:
            assert (seen, offered) == (greeting, types)
            sock.sendall(bytes([types[0]]))
            result, reason = _security_result(sock)
        assert result == 1 and str(types[0]) in reason
        assert front.wait_attempt(0).chosen == types[0]
    with RfbFront(profile, "127.0.0.1::1", vnc_password=VNC_PASSWORD) as front:
        sock, _, offered = _greeting(front.server)
        sock.close()
        assert offered == [*types, 2]


@pytest.mark.desktop
def test_tightvnc_greeting_and_vncauth(desktop: TestDesktop) -> None:
    from vncdotool import api

    with RfbFront(
        "tightvnc", desktop.server, backend_password=desktop.password, vnc_password=VNC_PASSWORD
    ) as front:
        sock, greeting, types = _greeting(front.server)
        sock.close()
        assert (greeting, types) == (b"RFB 003.008\n", [2, 16])
        client = api.connect(front.server, password=VNC_PASSWORD, timeout=20)
        try:
            client.refreshScreen()
            assert client.screen.size == desktop.size
        finally:
            client.disconnect()
        assert front.wait_attempt(1).success


def test_bad_set_ups_are_refused_early() -> None:
    with pytest.raises(FrontError, match="unknown profile"):
        RfbFront("windows95", "127.0.0.1::5900")
    with pytest.raises(FrontError, match="vnc_password"):
        RfbFront("tightvnc", "127.0.0.1::5900")
    with pytest.raises(FrontError, match="type 30"):
        RfbFront("macos", "127.0.0.1::5900")
    with pytest.raises(FrontError, match="HOST::PORT"):
        RfbFront("realvnc", "127.0.0.1::fifty")
    assert set(PROFILES) == {"macos", "realvnc", "ultravnc", "tightvnc"}


@pytest.mark.desktop
def test_the_command_line_front(desktop: TestDesktop) -> None:
    """`python -m vnc_use.testing.rfb_front`: prints its address, greets, logs attempts."""
    env = {**os.environ, "RFB_FRONT_PASSWORD": PASSWORD, "VNC_PASSWORD": desktop.password}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "vnc_use.testing.rfb_front"),
            *("--profile", "macos", "--backend", desktop.server, "--user", USER),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "macOS Screen Sharing front: 127.0.0.1::" in first, first
        server = first.split(": ", 1)[1].strip()
        assert "30 Apple" in proc.stdout.readline()
        result, _, sock = _apple_login(server, USER, "not the one")
        sock.close()
        assert result == 1
        line = proc.stdout.readline()
        assert f"type 30 as {USER}: refused" in line, line
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    output = (proc.stdout.read() if proc.stdout else "") + line + first
    assert PASSWORD not in output


@pytest.mark.desktop
def test_clients_answering_3889_or_33(mac_front: RfbFront) -> None:
    """Apple's own viewer answers 003.889 (3.8 rules); an old 3.3 client is told the type."""
    port = int(mac_front.server.rpartition("::")[2])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        _recv(sock, 12)
        sock.sendall(b"RFB 003.889\n")
        assert list(_recv(sock, 1 + 4)) == [4, 30, 33, 36, 35]
    assert mac_front.wait_attempt(0).client_version == "RFB 003.889"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        _recv(sock, 12)
        sock.sendall(b"RFB 003.003\n")
        assert struct.unpack("!I", _recv(sock, 4)) == (30,)
        generator, key_length = struct.unpack("!HH", _recv(sock, 4))
        assert (generator, key_length) == (5, 512)
