"""The pure security-type helpers: names, the choice, the messages, Apple's type-30 crypto."""

from __future__ import annotations

import re
import secrets

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from vnc_use.desktops import rfb_security as rs
from vnc_use.desktops.rfb_security import MODP_4096, Credentials

#: RFC 2409 group 2 (1024-bit MODP, generator 2): a second, shorter key length.
MODP_1024 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E"
    "3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF"
    "5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF",
    16,
)

ALL = Credentials(password=True, username=True, ca_file=True, loopback=True)
PASSWORD_ONLY = Credentials(password=True, username=False)
NOTHING = Credentials(password=False, username=False)
REPR = re.compile(r"bytearray\(|b'|\(\d+,\)|\[\d+(, \d+)*\]")


def _server_challenge(p: int, g: int) -> tuple[int, bytes, bytes]:
    length = (p.bit_length() + 7) // 8
    private = 2 + secrets.randbelow(p - 3)
    return private, p.to_bytes(length, "big"), pow(g, private, p).to_bytes(length, "big")


# --------------------------------------------------------------------------- names


def test_table_names_the_types_servers_offer() -> None:
    expected = {
        1: "None",
        2: "VncAuth",
        5: "RA2",
        6: "RA2ne",
        13: "RA2_256",
        16: "Tight",
        18: "TLS",
        19: "VeNCrypt",
        30: "Apple DH",
        113: "MS-Logon II",
    }
    for number, name in expected.items():
        assert rs.SECURITY_TYPES[number] == name
    for number in (31, 32, 33, 35, 36):
        assert rs.SECURITY_TYPES[number].startswith("Apple")
    assert {n: rs.VENCRYPT_SUBTYPES[n] for n in range(256, 263)} == {
        256: "Plain",
        257: "TLSNone",
        258: "TLSVnc",
        259: "TLSPlain",
        260: "X509None",
        261: "X509Vnc",
        262: "X509Plain",
    }
    assert rs.describe_types([19, 2, 77]) == "19 VeNCrypt, 2 VncAuth, 77 (unknown)"
    assert rs.security_name(262) == "VeNCrypt X509Plain"
    assert rs.security_name(2) == "VncAuth"


# --------------------------------------------------------------------------- the choice


@pytest.mark.parametrize(
    ("offered", "creds", "expected"),
    [
        ([30, 2], PASSWORD_ONLY, 2),  # no user name: never Apple, even though 30 > 2
        ([30, 2], ALL, 30),
        ([2, 30], ALL, 30),
        ([19, 2], PASSWORD_ONLY, 19),  # TLS first: TigerVNC's default TLSVnc,VncAuth
        ([2, 19], NOTHING, 19),  # VeNCrypt may offer TLSNone; its subtypes decide
        ([1, 2], PASSWORD_ONLY, 2),
        ([1, 2], NOTHING, 1),
        ([2], NOTHING, None),
        ([30, 33, 36], PASSWORD_ONLY, None),
        ([5, 6, 13], ALL, None),
        ([113], ALL, None),
        ([16, 2], PASSWORD_ONLY, 2),
    ],
)
def test_choice_uses_only_types_whose_credentials_were_given(
    offered: list[int], creds: Credentials, expected: int | None
) -> None:
    assert rs.choose_security_type(offered, creds) == expected


def test_choice_can_leave_vencrypt_out() -> None:
    assert rs.choose_security_type([19, 2], PASSWORD_ONLY, vencrypt=False) == 2


@pytest.mark.parametrize(
    ("offered", "creds", "expected"),
    [
        ([258, 2], PASSWORD_ONLY, 258),
        ([261, 258], PASSWORD_ONLY, 258),  # no CA given: anonymous TLS first
        ([261, 258], Credentials(password=True, username=False, ca_file=True), 261),
        ([262], PASSWORD_ONLY, None),  # wayvnc: needs a user name
        ([262], Credentials(password=True, username=True), 262),
        ([257, 258], PASSWORD_ONLY, 258),  # use the password that was given
        ([257, 258], NOTHING, 257),
        ([256], Credentials(password=True, username=True, loopback=False), None),
        ([256], Credentials(password=True, username=True, loopback=True), 256),
        ([256, 259], Credentials(password=True, username=True, loopback=True), 259),
    ],
)
def test_vencrypt_subtype_choice(
    offered: list[int], creds: Credentials, expected: int | None
) -> None:
    assert rs.choose_vencrypt_subtype(offered, creds) == expected


creds_strategy = st.builds(
    Credentials,
    password=st.booleans(),
    username=st.booleans(),
    ca_file=st.booleans(),
    loopback=st.booleans(),
)
KNOWN = sorted(rs.SECURITY_TYPES)
SUBTYPES = sorted(rs.VENCRYPT_SUBTYPES)


def _usable(number: int, creds: Credentials) -> bool:
    if number == 30:
        return creds.username and creds.password
    if number == 2:
        return creds.password
    return number in (1, 19)


@given(offered=st.lists(st.sampled_from([*KNOWN, 200, 255]), max_size=8), creds=creds_strategy)
def test_choice_is_the_best_offered_type_with_its_credentials(
    offered: list[int], creds: Credentials
) -> None:
    choice = rs.choose_security_type(offered, creds)
    usable = [t for t in offered if _usable(t, creds)]
    if choice is None:
        assert usable == []
        return
    assert choice in usable
    rank = [19, 30, 2, 1]  # session encrypted, credentials encrypted, VNC password, nothing
    assert all(rank.index(choice) <= rank.index(t) for t in usable)


@given(offered=st.lists(st.sampled_from(SUBTYPES), min_size=1, max_size=8), creds=creds_strategy)
def test_subtype_choice_encrypts_unless_only_loopback_plain(
    offered: list[int], creds: Credentials
) -> None:
    choice = rs.choose_vencrypt_subtype(offered, creds)
    if choice is None:
        return
    assert choice in offered
    if choice == 256:
        assert creds.loopback and not (set(offered) & set(range(257, 263)) - {257, 260})
    if choice in (259, 262, 256):
        assert creds.username and creds.password
    if choice in (258, 261):
        assert creds.password


# --------------------------------------------------------------------------- messages


@given(
    offered=st.lists(st.sampled_from([*KNOWN, 200]), min_size=1, max_size=6, unique=True),
    subtypes=st.none() | st.lists(st.sampled_from(SUBTYPES), min_size=1, max_size=4),
    creds=creds_strategy,
)
def test_messages_are_one_line_without_reprs(
    offered: list[int], subtypes: list[int] | None, creds: Credentials
) -> None:
    text = rs.no_usable_type_message("127.0.0.1 port 5901", offered, creds, subtypes)
    assert "\n" not in text
    assert not REPR.search(text), text
    assert "127.0.0.1 port 5901" in text
    assert "did not speak" not in text
    for number in offered:
        assert f"{number} " in text


def test_message_for_realvnc_names_ra2_and_the_setting() -> None:
    text = rs.no_usable_type_message("10.0.0.5 port 5900", [5, 6, 13], ALL)
    assert "5 RA2, 6 RA2ne, 13 RA2_256" in text
    assert 'Authentication to "VNC password"' in text and '"Prefer off"' in text


def test_message_for_ultravnc_names_ms_logon() -> None:
    text = rs.no_usable_type_message("h port 5900", [113], ALL)
    assert "113 MS-Logon II" in text and "MS-Logon off" in text and "VNC password" in text


def test_message_for_a_mac_without_user_name_says_how_to_give_one() -> None:
    text = rs.no_usable_type_message("mac port 5900", [30, 33, 36], PASSWORD_ONLY)
    assert "30 Apple DH" in text and "33 Apple" in text
    assert "--vnc-user" in text and "VNC_USERNAME" in text
    assert "VNC viewers may control screen with password" in text


def test_message_for_a_missing_password_names_both_ways() -> None:
    text = rs.no_usable_type_message("h port 5900", [2], NOTHING)
    assert "VNC_PASSWORD" in text and "--vnc-password" in text


def test_message_for_wayvnc_without_user_names_user_and_ca() -> None:
    text = rs.no_usable_type_message("h port 5900", [19], PASSWORD_ONLY, [262])
    assert "19 VeNCrypt with subtypes 262 X509Plain" in text
    assert "--vnc-user" in text and "VNC_USERNAME" in text and "--vnc-ca" in text


def test_message_for_plain_off_loopback_refuses_clear_text() -> None:
    creds = Credentials(password=True, username=True, loopback=False)
    text = rs.no_usable_type_message("h port 5900", [19], creds, [256])
    assert "in the clear" in text and "loopback" in text


# --------------------------------------------------------------------------- VeNCrypt Plain


def test_plain_credentials_layout() -> None:
    raw = rs.plain_credentials("anna", "päss")
    assert raw == b"\x00\x00\x00\x04\x00\x00\x00\x05annap\xc3\xa4ss"


# --------------------------------------------------------------------------- Apple type 30


@settings(max_examples=6, deadline=None)
@given(
    username=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=15
    ),
    password=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=15
    ),
)
def test_apple_login_round_trip_with_the_macos_group(username: str, password: str) -> None:
    private, modulus, server_key = _server_challenge(MODP_4096, 5)
    response = rs.apple_dh_response(5, modulus, server_key, username, password)
    assert len(response) == 128 + 512
    assert rs.apple_dh_decrypt(modulus, private, response) == (username, password)


def test_apple_login_sends_the_whole_password() -> None:
    private, modulus, server_key = _server_challenge(MODP_1024, 2)
    password = "fourteen-chars"  # VncAuth would keep only 8
    response = rs.apple_dh_response(2, modulus, server_key, "anna", password)
    assert len(response) == 128 + 128  # any key length: here 128 bytes
    assert rs.apple_dh_decrypt(modulus, private, response) == ("anna", password)


def test_apple_response_matches_an_independent_computation() -> None:
    """Recompute the response from the spec with fixed keys: g^x, MD5(shared), AES-ECB."""
    import hashlib

    server_private, client_private = 0x1234567, 0x7654321
    length = 128
    modulus = MODP_1024.to_bytes(length, "big")
    server_key = pow(2, server_private, MODP_1024).to_bytes(length, "big")
    response = rs.apple_dh_response(
        2, modulus, server_key, "user", "secret", private_key=client_private
    )
    shared = pow(2, server_private * client_private, MODP_1024).to_bytes(length, "big")
    key = hashlib.md5(shared).digest()
    block = b"user".ljust(64, b"\0") + b"secret".ljust(64, b"\0")
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    expected = enc.update(block) + enc.finalize()
    assert response[:128] == expected
    assert response[128:] == pow(2, client_private, MODP_1024).to_bytes(length, "big")


def test_apple_server_side_reads_vncdotools_client() -> None:
    """Our decrypt (used by test servers) against vncdotool's type-30 client: code we did not
    write agrees on the layout (vncdotool needs the slow FFDH path: use a 1024-bit group)."""
    import warnings
    from types import SimpleNamespace

    from vncdotool.rfb import RFBClient

    private, modulus, server_key = _server_challenge(MODP_1024, 2)
    sent: list[bytes] = []
    fake = SimpleNamespace(
        factory=SimpleNamespace(username="anna", password="fourteen-chars"),
        modulus=modulus,
        serverKey=server_key,
        generator=2,
        keyLen=len(modulus),
        transport=SimpleNamespace(write=sent.append),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RFBClient._encryptArd(fake)
    assert rs.apple_dh_decrypt(modulus, private, sent[0]) == ("anna", "fourteen-chars")


@pytest.mark.parametrize(
    ("username", "password", "why"),
    [("u" * 64, "p", "user name is too long"), ("u", "p" * 70, "password is too long")],
)
def test_apple_credentials_that_do_not_fit_are_refused(
    username: str, password: str, why: str
) -> None:
    _, modulus, server_key = _server_challenge(MODP_1024, 2)
    with pytest.raises(ValueError, match=why):
        rs.apple_dh_response(2, modulus, server_key, username, password)


def test_apple_malformed_challenge_is_refused() -> None:
    _, modulus, server_key = _server_challenge(MODP_1024, 2)
    with pytest.raises(ValueError, match="malformed"):
        rs.apple_dh_response(2, modulus, server_key[:-1], "u", "p")
    with pytest.raises(ValueError, match="invalid"):
        rs.apple_dh_response(2, modulus, b"\0" * len(modulus), "u", "p")


def test_security_describe() -> None:
    assert rs.Security(258, "VeNCrypt TLSVnc", True).describe() == (
        "VeNCrypt TLSVnc (258), encrypted"
    )
    assert rs.is_loopback("127.0.0.1") and rs.is_loopback("::1") and rs.is_loopback("localhost")
    assert not rs.is_loopback("10.0.0.1") and not rs.is_loopback("example.com")
