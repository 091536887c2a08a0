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

    def bad(why: str) -> ConfigError:
        return ConfigError(f"bad VNC address {server!r}: {why}; {_ADDRESS_HINT}")

    text = server.strip() if isinstance(server, str) else ""
    if not text:
        raise bad("it is empty")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise bad("missing ']' after the IPv6 address")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"{host!r} is not an IPv6 address") from None
    else:
        host, sep, rest = text.partition(":")
        rest = sep + rest
        if not _HOST_RE.match(host):
            raise bad(f"{host!r} is not a host name or address")
    if not rest:
        return host, 5900
    if rest.startswith("::"):
        number, offset, what = rest[2:], 0, "port"
    elif rest.startswith(":"):
        number, offset, what = rest[1:], 5900, "display number"
    else:
        raise bad(f"unexpected {rest!r} after the host")
    if not number.isdigit() or not number.isascii():
        raise bad(f"{number!r} is not a {what}")
    port = int(number) + offset
    if not 0 < port < 65536:
        raise bad(f"port {port} is out of range")
    return host, port
