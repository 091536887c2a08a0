"""Ask an RDP server, before FreeRDP connects, which security it speaks and which TLS
certificate it shows: the X.224 connection request with an RDP negotiation request
([MS-RDPBCGR] 2.2.1.1), then a TLS handshake whose certificate's SHA-256 is taken.

This is how vnc-use refuses a changed certificate (trust on first use, ``--rdp-cert-fingerprint``)
with one line naming both fingerprints, and tells "unreachable" or "needs NLA credentials"
apart within ``--connect-timeout``, before a FreeRDP process starts. The connection is
closed right after the TLS handshake: no credentials are ever sent here.
"""

from __future__ import annotations

import hashlib
import socket
import ssl
import struct
from dataclasses import dataclass

from vnc_use.errors import ConfigError, VncConnectionError

__all__ = [
    "PROTOCOL_HYBRID",
    "PROTOCOL_SSL",
    "RdpProbe",
    "RdpUnreachableError",
    "colon_hex",
    "probe_server",
]

PROTOCOL_SSL = 0x1
"""TLS security (``PROTOCOL_SSL``)."""
PROTOCOL_HYBRID = 0x2
"""NLA: TLS plus CredSSP (``PROTOCOL_HYBRID``)."""
_NEG_RSP, _NEG_FAILURE = 0x02, 0x03
_FAILURES = {
    0x01: "SSL_REQUIRED_BY_SERVER",
    0x02: "SSL_NOT_ALLOWED_BY_SERVER",
    0x03: "SSL_CERT_NOT_ON_SERVER",
    0x04: "INCONSISTENT_FLAGS",
    0x05: "HYBRID_REQUIRED_BY_SERVER",
    0x06: "SSL_WITH_USER_AUTH_REQUIRED_BY_SERVER",
}
_PROTOCOL_NAMES = {0: "standard RDP security", PROTOCOL_SSL: "TLS", PROTOCOL_HYBRID: "NLA"}


class RdpUnreachableError(VncConnectionError):
    """The RDP server could not be reached (refused, timed out, not RDP)."""


@dataclass(frozen=True)
class RdpProbe:
    """What the server said: the protocol it chose and its certificate's SHA-256 (hex)."""

    protocol: int
    fingerprint: str
    """SHA-256 of the DER certificate, lowercase hex without separators ("" without TLS)."""

    @property
    def protocol_name(self) -> str:
        """``"NLA"``, ``"TLS"`` or ``"standard RDP security"``."""
        return _PROTOCOL_NAMES.get(self.protocol, f"protocol {self.protocol:#x}")


def colon_hex(fingerprint: str) -> str:
    """``"c8fd0a..."`` -> ``"c8:fd:0a:..."`` (how FreeRDP's ``/cert:fingerprint`` wants it)."""
    return ":".join(fingerprint[i : i + 2] for i in range(0, len(fingerprint), 2))


def probe_server(host: str, port: int, timeout: float, *, allow_nla: bool) -> RdpProbe:
    """Negotiate with ``host:port`` and read its certificate, within ``timeout`` seconds.

    ``allow_nla`` asks for TLS or NLA (there are credentials); without it only TLS is asked
    for, so a server that insists on NLA says so (:class:`ConfigError` naming the fix).
    Raises :class:`RdpUnreachableError` when the server cannot be reached or does not speak RDP.
    """
    where = f"the RDP server at {host} port {port}"
    wanted = PROTOCOL_SSL | (PROTOCOL_HYBRID if allow_nla else 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            protocol = _negotiate(sock, wanted, where)
            if protocol == 0:
                return RdpProbe(0, "")
            return RdpProbe(protocol, _certificate_sha256(sock, host))
    except TimeoutError:
        raise RdpUnreachableError(
            f"cannot reach {where}: no answer within {timeout:g} s (--connect-timeout); check "
            "the address and that Remote Desktop is enabled and the port open"
        ) from None
    except ConnectionRefusedError:
        raise RdpUnreachableError(
            f"cannot reach {where}: connection refused (nothing listens on that port; is "
            "Remote Desktop enabled, and is it the right port?)"
        ) from None
    except (OSError, ssl.SSLError, struct.error) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise RdpUnreachableError(f"cannot reach {where}: {reason}") from None


def _negotiate(sock: socket.socket, wanted: int, where: str) -> int:
    """Send the connection request; return the protocol the server selected."""
    neg_req = struct.pack("<BBHI", 0x01, 0, 8, wanted)
    x224 = bytes([6 + len(neg_req), 0xE0, 0, 0, 0, 0, 0]) + neg_req
    sock.sendall(struct.pack(">BBH", 3, 0, 4 + len(x224)) + x224)
    header = _read(sock, 4)
    if header[0] != 3:
        raise RdpUnreachableError(f"{where} did not answer as an RDP server (no TPKT header)")
    body = _read(sock, struct.unpack(">H", header[2:])[0] - 4)
    if len(body) < 15:  # an X.224 confirm without negotiation response: old RDP security
        return 0
    kind, _flags, _length, value = struct.unpack("<BBHI", body[7:15])
    if kind == _NEG_FAILURE:
        code = _FAILURES.get(value, f"failure code {value}")
        if value == 0x05:
            raise ConfigError(
                f"{where} requires NLA (Network Level Authentication), which needs credentials: "
                "give --rdp-user (or RDP_USERNAME) and set RDP_PASSWORD"
            )
        raise RdpUnreachableError(f"{where} refused the security vnc-use asked for ({code})")
    if kind != _NEG_RSP:
        raise RdpUnreachableError(f"{where} sent an unexpected negotiation answer ({kind})")
    return int(value)


def _certificate_sha256(sock: socket.socket, host: str) -> str:
    """The TLS handshake (no trust decided here: the fingerprint is what is checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=True) as tls:
        der = tls.getpeercert(binary_form=True)
    if not der:
        raise RdpUnreachableError(f"the RDP server at {host} showed no TLS certificate")
    return hashlib.sha256(der).hexdigest()


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RdpUnreachableError("the RDP server closed the connection during negotiation")
        data += chunk
    return data
