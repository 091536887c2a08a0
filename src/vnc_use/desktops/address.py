"""VNC addresses: ``host::port``, ``host:display``, ``host`` and bracketed IPv6.

Kept apart from :mod:`vnc_use.desktops.vnc` so that reading an address imports no Twisted.
"""

from __future__ import annotations

import ipaddress
import re

from vnc_use.errors import ConfigError

__all__ = ["parse_server"]

_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?$")
_ADDRESS_HINT = "use host::port (e.g. localhost::5901), host:display (e.g. localhost:1) or host"


def parse_server(server: str) -> tuple[str, int]:
    """Split a VNC address into ``(host, port)``.

    Accepts ``host::port``, ``host:display`` (port ``5900 + display``), a bare ``host``
    (port 5900) and bracketed IPv6 as ``[::1]::port`` / ``[::1]:display`` / ``[::1]``.
    Raises :class:`~vnc_use.errors.ConfigError` with a one-line hint on anything else.
    """
    text = server.strip() if isinstance(server, str) else ""
    try:
        if not text:
            raise _Bad("it is empty")
        host, rest = _split_host(text)
        return host, _port(rest)
    except _Bad as why:
        raise ConfigError(f"bad VNC address {server!r}: {why}; {_ADDRESS_HINT}") from None


class _Bad(ValueError):
    """What is wrong with an address (turned into a one-line ConfigError)."""


def _split_host(text: str) -> tuple[str, str]:
    """The host (a name, an IPv4 or a bracketed IPv6 address) and what follows it."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise _Bad("missing ']' after the IPv6 address")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _Bad(f"{host!r} is not an IPv6 address") from None
        return host, rest
    host, sep, rest = text.partition(":")
    if not _HOST_RE.match(host):
        raise _Bad(f"{host!r} is not a host name or address")
    return host, sep + rest


def _port(rest: str) -> int:
    """The port of ``::port``, ``:display`` or nothing (5900)."""
    if not rest:
        return 5900
    if rest.startswith("::"):
        number, offset, what = rest[2:], 0, "port"
    elif rest.startswith(":"):
        number, offset, what = rest[1:], 5900, "display number"
    else:
        raise _Bad(f"unexpected {rest!r} after the host")
    if not number.isdigit() or not number.isascii():
        raise _Bad(f"{number!r} is not a {what}")
    port = int(number) + offset
    if not 0 < port < 65536:
        raise _Bad(f"port {port} is out of range")
    return port
