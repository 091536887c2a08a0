"""What the managed desktop (:mod:`vnc_use.desktops.local`) and the test desktops share:
finding a free X display and loopback port, starting TigerVNC ``Xvnc`` on 127.0.0.1, and
stopping a child process.

A free display or port is only free *a moment ago*: another process (a second run, a parallel
test) can take the same number before our server binds it. The loser's server exits, but an
X socket and a port that answer do not say *whose* they are, so readiness is checked on our
own process: the display's lock file names its PID (:func:`display_owner`) and the port's
listening socket is one of its open files (:func:`listens_on`). A caller that sees its
server exit retries with another number."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

__all__ = [
    "XvncError",
    "display_free",
    "display_owner",
    "free_port",
    "listens_on",
    "port_free",
    "port_open",
    "stop_process",
    "vnc_password_file",
    "wait_for_xvnc",
    "xvnc_argv",
]


class XvncError(RuntimeError):
    """``vncpasswd`` failed (the callers re-raise it as their own error)."""


def display_free(number: int) -> bool:
    """Whether X display ``:number`` has neither a socket nor a lock file."""
    return not (
        Path(f"/tmp/.X11-unix/X{number}").exists() or Path(f"/tmp/.X{number}-lock").exists()
    )


def display_owner(number: int) -> int | None:
    """The PID in display ``:number``'s lock file (the X server that holds it), if any."""
    try:
        text = Path(f"/tmp/.X{number}-lock").read_text(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on ``port`` (any address, IPv4 or IPv6)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEXADDR:HEXPORT; state 0A is LISTEN; field 9 is the inode
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds a socket listening on TCP ``port`` (not some other
    process that took the same port)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def vnc_password_file(vncpasswd: str, passwords: Sequence[str]) -> bytes:
    """What ``vncpasswd -f`` makes of ``passwords`` (the full-access one, then optionally
    the view-only one): the contents of Xvnc's ``-rfbauth`` file (keep it mode 0600)."""
    result = subprocess.run(
        [vncpasswd, "-f"],
        input="".join(p + "\n" for p in passwords).encode(),
        capture_output=True,
        timeout=10,
        check=False,
    )
    if result.returncode != 0 or len(result.stdout) != 8 * len(passwords):
        raise XvncError(f"vncpasswd -f failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def xvnc_argv(
    xvnc: str,
    number: int,
    *,
    size: tuple[int, int],
    port: int,
    passwd_file: Path | str,
    depth: int = 24,
    security_types: str = "VncAuth",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of an Xvnc on display ``:number`` that listens on 127.0.0.1:``port``
    only (no IPv6, no X11 over TCP), with the password file ``passwd_file``."""
    width, height = size
    return [
        xvnc,
        f":{number}",
        *("-geometry", f"{width}x{height}", "-depth", str(depth)),
        *("-rfbport", str(port), "-interface", "127.0.0.1", "-localhost"),
        "-UseIPv6=0",  # IPv4 loopback only: -localhost alone also listens on ::1
        *("-nolisten", "tcp"),
        *("-rfbauth", str(passwd_file), "-SecurityTypes", security_types),
        "-AlwaysShared",
        *extra,
    ]


def wait_for_xvnc(
    number: int, port: int, pid: int, alive: Callable[[], bool], timeout: float
) -> Literal["ready", "exited", "timeout"]:
    """Wait until the Xvnc ``pid`` holds display ``:number`` and accepts X and VNC connections
    (``"ready"``), its process is gone (``alive()`` is false: ``"exited"``) or ``timeout``
    seconds passed. Another server that took the display or the port meanwhile is not ours:
    ours then exits, and the caller tries another number."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return "exited"
        if (
            Path(f"/tmp/.X11-unix/X{number}").exists()
            and display_owner(number) == pid
            and listens_on(pid, port)
            and port_open(port)
        ):
            return "ready"
        time.sleep(0.02)
    return "timeout"


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Terminate ``proc`` by PID, wait, kill if it does not exit in time."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
