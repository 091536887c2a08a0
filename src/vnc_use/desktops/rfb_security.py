"""RFB security types: names, which one to use, what to say when none fits, Apple's login.

This module is pure (no vncdotool, no Twisted): the VNC backend (:mod:`vnc_use.desktops.vnc`)
feeds it what the server offered and what the user gave, and sends what it returns.

Why vnc-use chooses the type itself: vncdotool takes the *largest* number it knows, so a Mac
offering 30 (Apple) and 2 (VNC password) got 30 even with no user name, and a server offering
VeNCrypt TLS next to VncAuth was used in the clear. Here the choice only considers types whose
credentials were given, and prefers, in order, types that encrypt the whole session (VeNCrypt's
TLS and X509 subtypes), one that encrypts the credentials (30), the VNC password (2), none (1).

Apple's type 30 is Diffie-Hellman plus AES-128-ECB of ``user[64] + password[64]`` keyed with
the MD5 of the shared secret. It is computed with Python's ``pow()``: cryptography's FFDH API
is deprecated and spends about 5 s validating the 4096-bit group a current macOS sends.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = [
    "APPLE_CREDENTIAL_FIELD",
    "MODP_4096",
    "SECURITY_TYPES",
    "VENCRYPT",
    "VENCRYPT_SUBTYPES",
    "Credentials",
    "Security",
    "apple_dh_decrypt",
    "apple_dh_response",
    "choose_security_type",
    "choose_vencrypt_subtype",
    "describe_types",
    "is_loopback",
    "no_usable_type_message",
    "plain_credentials",
    "security_name",
    "vnc_auth_response",
]

NONE, VNC_AUTH, TIGHT, TLS, VENCRYPT, APPLE_DH = 1, 2, 16, 18, 19, 30

#: Security types by number (RFB's registry, plus the ones servers were seen to offer).
SECURITY_TYPES: dict[int, str] = {
    0: "Invalid",
    1: "None",
    2: "VncAuth",
    5: "RA2",
    6: "RA2ne",
    7: "SSPI",
    8: "SSPIne",
    13: "RA2_256",
    16: "Tight",
    17: "Ultra",
    18: "TLS",
    19: "VeNCrypt",
    20: "SASL",
    21: "MD5",
    22: "xvp",
    23: "SecureTunnel",
    24: "IntegratedSSH",
    30: "Apple DH",
    31: "Apple",
    32: "Apple",
    33: "Apple RSA",
    34: "Apple",
    35: "Apple",
    36: "Apple SRP",
    113: "MS-Logon II",
    129: "RealVNC",
    130: "RealVNC",
}

PLAIN, TLS_NONE, TLS_VNC, TLS_PLAIN = 256, 257, 258, 259
X509_NONE, X509_VNC, X509_PLAIN = 260, 261, 262

#: VeNCrypt (type 19) subtypes, version 0.2.
VENCRYPT_SUBTYPES: dict[int, str] = {
    PLAIN: "Plain",
    TLS_NONE: "TLSNone",
    TLS_VNC: "TLSVnc",
    TLS_PLAIN: "TLSPlain",
    X509_NONE: "X509None",
    X509_VNC: "X509Vnc",
    X509_PLAIN: "X509Plain",
    263: "TLSSASL",
    264: "X509SASL",
}

_TLS_SUBTYPES = frozenset({TLS_NONE, TLS_VNC, TLS_PLAIN})
_X509_SUBTYPES = frozenset({X509_NONE, X509_VNC, X509_PLAIN})
_APPLE_TYPES = frozenset({30, 31, 32, 33, 34, 35, 36})
_REALVNC_TYPES = frozenset({5, 6, 7, 8, 13, 129, 130})

#: RFC 3526 group 16 (4096-bit MODP prime): the size of group a current macOS sends for type
#: 30 (with generator 5). vnc-use accepts any group; test servers imitating a Mac use this one.
MODP_4096 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E"
    "3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF"
    "5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D3"
    "9A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08"
    "CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF69558171839"
    "95497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DB"
    "EF0A8AEA71575D060C7DB3970F85A6E1E4C7ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA"
    "06D98A0864D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E208E24FA074E5AB31"
    "43DB5BFCE0FD108E4B82D120A92108011A723C12A787E6D788719A10BDBA5B2699C327186AF4E23C1A946834B6"
    "150BDA2583E9CA2AD44CE8DBBBC2DB04DE8EF92E8EFC141FBECAA6287C59474E6BC05D99B2964FA090C3A2233B"
    "A186515BE7ED1F612970CEE2D7AFB81BDD762170481CD0069127D5B05AA993B4EA988D8FDDC186FFB7DC90A6C0"
    "8F4DF435C934063199FFFFFFFFFFFFFFFF",
    16,
)

#: Bytes of each of the user name and password fields of an Apple (type 30) login; the
#: text must leave room for a terminating NUL.
APPLE_CREDENTIAL_FIELD = 64


@dataclass(frozen=True)
class Security:
    """The security a connection uses: RFB type number, its name, whether it is encrypted.

    For VeNCrypt ``number`` is the subtype (e.g. 258 TLSVnc), the name says both.
    """

    number: int
    name: str
    encrypted: bool

    def describe(self) -> str:
        """``"VeNCrypt TLSVnc (258), encrypted"``: for progress lines and logs."""
        state = "encrypted" if self.encrypted else "not encrypted"
        return f"{self.name} ({self.number}), {state}"


@dataclass(frozen=True)
class Credentials:
    """What the user gave: which secrets exist (never the secrets themselves here)."""

    password: bool
    username: bool
    ca_file: bool = False
    loopback: bool = False


def security_name(number: int) -> str:
    """``"VeNCrypt TLSVnc"`` for a subtype, ``"VncAuth"`` for a type, ``"type 77"`` if unknown."""
    if number in VENCRYPT_SUBTYPES:
        return f"VeNCrypt {VENCRYPT_SUBTYPES[number]}"
    return SECURITY_TYPES.get(number, f"type {number}")


def describe_types(numbers: Iterable[int]) -> str:
    """``"30 Apple DH, 2 VncAuth"``: each offered number with its name."""
    parts = []
    for n in numbers:
        name = VENCRYPT_SUBTYPES.get(n) if n >= 256 else SECURITY_TYPES.get(n)
        parts.append(f"{n} {name}" if name else f"{n} (unknown)")
    return ", ".join(parts) or "none"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.lower() in {"localhost", "localhost.localdomain"}:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _subtype_usable(subtype: int, creds: Credentials) -> bool:
    if subtype in (TLS_NONE, X509_NONE):
        return True
    if subtype in (TLS_VNC, X509_VNC):
        return creds.password
    if subtype in (TLS_PLAIN, X509_PLAIN):
        return creds.password and creds.username
    if subtype == PLAIN:  # user name and password in the clear: loopback only
        return creds.password and creds.username and creds.loopback
    return False


def _subtype_rank(subtype: int, creds: Credentials) -> tuple[int, int]:
    # Encryption first; X509 (a verified server) before anonymous TLS when a CA was given,
    # after it otherwise (a self-signed VNC certificate rarely passes the system store).
    if subtype in _X509_SUBTYPES:
        tier = 0 if creds.ca_file else 1
    elif subtype in _TLS_SUBTYPES:
        tier = 1 if creds.ca_file else 0
    else:
        tier = 2
    # Then the login that uses what the user gave: Plain (user+password), Vnc, None.
    if subtype in (TLS_PLAIN, X509_PLAIN, PLAIN):
        login = 0
    elif subtype in (TLS_VNC, X509_VNC):
        login = 1
    else:
        login = 2
    return tier, login


def choose_vencrypt_subtype(offered: Sequence[int], creds: Credentials) -> int | None:
    """The VeNCrypt subtype to use among ``offered``, or ``None`` when none can be used."""
    usable = [s for s in offered if _subtype_usable(s, creds)]
    if not usable:
        return None
    return min(usable, key=lambda s: _subtype_rank(s, creds))


def choose_security_type(
    offered: Sequence[int], creds: Credentials, *, vencrypt: bool = True
) -> int | None:
    """The RFB security type to use among ``offered``, or ``None`` when none can be used.

    VeNCrypt (19) is chosen whenever offered (and ``vencrypt`` is true): its subtypes arrive
    only after choosing it, and every subtype vnc-use speaks but Plain encrypts the session.
    Apple DH (30) needs a user name and a password, VncAuth (2) a password.
    """
    order = [APPLE_DH, VNC_AUTH, NONE]
    if vencrypt:
        order.insert(0, VENCRYPT)
    for candidate in order:
        if candidate not in offered:
            continue
        if candidate == APPLE_DH and not (creds.username and creds.password):
            continue
        if candidate == VNC_AUTH and not creds.password:
            continue
        return candidate
    return None


# --------------------------------------------------------------------------- messages

_PASSWORD_HOW = "set VNC_PASSWORD or pass --vnc-password"
_USER_HOW = "give the user name with --vnc-user or VNC_USERNAME"
_MAC_SETTING = (
    'or turn on "VNC viewers may control screen with password" in the Mac\'s Screen Sharing '
    "settings"
)


def no_usable_type_message(
    target: str,
    offered: Sequence[int],
    creds: Credentials,
    subtypes: Sequence[int] | None = None,
) -> str:
    """One line for a server that offered nothing vnc-use can use with the given credentials.

    ``target`` names what was tried (``"127.0.0.1 port 5900"``). Names what is missing when a
    type vnc-use speaks needs a credential that was not given, otherwise lists the offered
    types and the server setting that admits vnc-use.
    """
    offered = list(offered)
    listed = describe_types(offered)
    if subtypes is not None:
        listed = listed.replace(
            "19 VeNCrypt", f"19 VeNCrypt with subtypes {describe_types(subtypes)}"
        )
    head = f"VNC server {target} offers security types {listed}"
    if any(t in _APPLE_TYPES for t in offered):
        return f"{head}: {_apple_fix(offered, creds)}"
    if subtypes is not None:
        return f"{head}: {_vencrypt_fix(subtypes, creds)}"
    if VNC_AUTH in offered and not creds.password:
        return f"{head}: it asks for a password and none was given; {_PASSWORD_HOW}"
    return f"{head}, none of which vnc-use speaks; {'; '.join(_server_hints(offered))}"


def _apple_fix(offered: Sequence[int], creds: Credentials) -> str:
    """What a Mac (Screen Sharing) needs that was not given."""
    if VNC_AUTH in offered and not creds.password:
        return (
            f"it asks for a password and none was given; {_PASSWORD_HOW} (with a "
            "user name too, --vnc-user or VNC_USERNAME, vnc-use uses macOS's own login)"
        )
    missing = []
    if not creds.username:
        missing.append(_USER_HOW)
    if not creds.password:
        missing.append("the password with VNC_PASSWORD or --vnc-password")
    if missing and APPLE_DH in offered:
        return (
            "macOS Screen Sharing asks for a user name and password; "
            f"{' and '.join(missing)}, {_MAC_SETTING}"
        )
    return (
        "of Apple's logins vnc-use speaks only type 30; turn on "
        '"VNC viewers may control screen with password" in the Mac\'s Screen Sharing '
        "settings and give that password (VNC_PASSWORD or --vnc-password)"
    )


def _vencrypt_fix(subtypes: Sequence[int], creds: Credentials) -> str:
    """What a VeNCrypt server needs that was not given, or the setting that admits vnc-use."""
    wants_user = any(s in (PLAIN, TLS_PLAIN, X509_PLAIN) for s in subtypes)
    wants_password = any(s in (TLS_VNC, X509_VNC) for s in subtypes) or wants_user
    if wants_user and not creds.username:
        fix = f"{_USER_HOW}"
        if not creds.password:
            fix += f" and the password ({_PASSWORD_HOW})"
        if any(s in _X509_SUBTYPES for s in subtypes) and not creds.ca_file:
            fix += ", and the server's CA certificate with --vnc-ca FILE"
        return f"it asks for a user name and password (wayvnc, VeNCrypt Plain); {fix}"
    if wants_password and not creds.password:
        return f"it asks for a password and none was given; {_PASSWORD_HOW}"
    if PLAIN in subtypes and not creds.loopback:
        return (
            "Plain (256) would send the password in the clear, which vnc-use does "
            "only to a loopback address; allow a TLS or X509 subtype on the server"
        )
    return "allow TLSVnc, X509Vnc, TLSPlain or X509Plain on the server"


def _server_hints(offered: Sequence[int]) -> list[str]:
    """The setting of each known server that offered only types vnc-use does not speak."""
    hints = []
    if any(t in _REALVNC_TYPES for t in offered):
        hints.append(
            'RealVNC Server: set Authentication to "VNC password" and Encryption to "Prefer off"'
        )
    if 113 in offered:
        hints.append("UltraVNC: turn MS-Logon off and set a VNC password")
    if TIGHT in offered:
        hints.append("TightVNC: set a VNC password (type 2)")
    if not hints:
        hints.append("allow VncAuth (2), None (1) or VeNCrypt TLS on the server")
    return hints


# --------------------------------------------------------------------------- VeNCrypt Plain


def plain_credentials(username: str, password: str) -> bytes:
    """VeNCrypt Plain's message: u32 user length, u32 password length, user, password (UTF-8)."""
    user, word = username.encode("utf-8"), password.encode("utf-8")
    return len(user).to_bytes(4, "big") + len(word).to_bytes(4, "big") + user + word


# --------------------------------------------------------------------------- Apple type 30


def _field(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) >= APPLE_CREDENTIAL_FIELD or b"\0" in raw:
        raise ValueError(
            f"the {what} is too long for macOS's login (at most "
            f"{APPLE_CREDENTIAL_FIELD - 1} bytes of UTF-8, no NUL)"
        )
    return raw.ljust(APPLE_CREDENTIAL_FIELD, b"\0")


#: Upper bound of the client's private exponent: 512 random bits are far beyond what a
#: 4096-bit group's strength needs, and make ``pow()`` 8 times cheaper than a full-size one.
_EXPONENT = 1 << 512


def _aes_key(shared: int, key_length: int) -> bytes:
    return hashlib.md5(shared.to_bytes(key_length, "big")).digest()


def apple_dh_response(
    generator: int,
    modulus: bytes,
    server_key: bytes,
    username: str,
    password: str,
    *,
    private_key: int | None = None,
) -> bytes:
    """The client's answer to Apple's type-30 challenge: 128 encrypted bytes + public key.

    ``modulus`` and ``server_key`` are the big-endian values the server sent, both of the key
    length it announced (any length). Raises :class:`ValueError` (a one-line reason) on a
    malformed challenge or credentials that do not fit the 64-byte fields.
    """
    length = len(modulus)
    p = int.from_bytes(modulus, "big")
    y = int.from_bytes(server_key, "big")
    if length == 0 or len(server_key) != length or p < 7 or generator < 2:
        raise ValueError("the server sent a malformed Apple Diffie-Hellman challenge")
    if not 1 < y < p - 1:
        raise ValueError("the server sent an invalid Apple Diffie-Hellman public key")
    plain = _field(username, "user name") + _field(password, "password")
    x = private_key if private_key is not None else 2 + secrets.randbelow(min(p - 3, _EXPONENT))
    public = pow(generator, x, p)
    shared = pow(y, x, p)
    encryptor = Cipher(algorithms.AES(_aes_key(shared, length)), modes.ECB()).encryptor()
    ciphertext = encryptor.update(plain) + encryptor.finalize()
    return ciphertext + public.to_bytes(length, "big")


def apple_dh_decrypt(modulus: bytes, server_private: int, response: bytes) -> tuple[str, str]:
    """The server's side of type 30: the user name and password in a client's response.

    For test servers that imitate macOS. ``response`` is what :func:`apple_dh_response`
    returns (128 encrypted bytes, then the client's public key).
    """
    length = len(modulus)
    if len(response) != 2 * APPLE_CREDENTIAL_FIELD + length:
        raise ValueError("an Apple Diffie-Hellman response has the wrong length")
    p = int.from_bytes(modulus, "big")
    client_public = int.from_bytes(response[2 * APPLE_CREDENTIAL_FIELD :], "big")
    shared = pow(client_public, server_private, p)
    decryptor = Cipher(algorithms.AES(_aes_key(shared, length)), modes.ECB()).decryptor()
    plain = decryptor.update(response[: 2 * APPLE_CREDENTIAL_FIELD]) + decryptor.finalize()

    def text(field: bytes) -> str:
        return field.split(b"\0", 1)[0].decode("utf-8", "replace")

    return text(plain[:APPLE_CREDENTIAL_FIELD]), text(plain[APPLE_CREDENTIAL_FIELD:])


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """The answer to a VncAuth (type 2) challenge: the 16 bytes DES-encrypted with the
    password's first 8 bytes, each byte's bits reversed (RFB's own key order)."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES

    raw = password.encode("latin-1", errors="replace")[:8].ljust(8, b"\0")
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in raw)
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge[:16]) + encryptor.finalize()
