"""Running the ``vnc-use`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from vnc_use.testing.desktop import TestDesktop

__all__ = ["CLI", "VNC_USE", "listening_addresses", "run_cli", "vnc_use"]

CLI = [sys.executable, "-m", "vnc_use.cli"]


def run_cli(
    args: list[str], desktop: TestDesktop | None = None, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if desktop is not None:
        env["VNC_PASSWORD"] = desktop.password
    env.update(kwargs.pop("env", {}))
    return subprocess.run(
        CLI + args,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=kwargs.pop("stdin", subprocess.DEVNULL),
        **kwargs,
    )


VNC_USE = str(Path(sys.executable).parent / "vnc-use")


def vnc_use(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """Run the installed `vnc-use` command, as a person would."""
    return subprocess.run(
        [VNC_USE, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def listening_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp{,6})."""
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            if width == 8:
                found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                found.append(socket.inet_ntop(socket.AF_INET6, words))
    return found
