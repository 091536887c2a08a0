"""Processes that outlive the command that started them, and their state files: the one set
of helpers of the kept local desktop (:mod:`~vnc_use.desktops.local`, ``vnc-use desktop up``)
and the kept RDP bridge (:mod:`~vnc_use.desktops.rdp_kept`, ``vnc-use desktop rdp``).

The rules they share:

* A process is known by its PID **and** its start time (field 22 of ``/proc/PID/stat``) in
  one boot (:func:`boot_id`), as a :class:`ProcessRecord`; it is signalled only while it still
  has that start time, so a recycled PID is never touched. Nothing is looked up or killed by
  process name.
* Each kept process leads its own session (``start_new_session``): stopping it stops the
  session's members too (a browser's helpers), also after the leader died.
* The processes this Python process started are reaped when it stops them (:func:`keep_child`),
  so none is left a zombie.
* State and secrets are written with :func:`write_private`: mode 0600, atomically (a reader
  sees the old file or the new one, never half of one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ProcessRecord",
    "boot_id",
    "keep_child",
    "marked_processes",
    "process_start_time",
    "reap",
    "session_members",
    "stop_session",
    "terminate",
    "write_private",
]

log = logging.getLogger(__name__)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/PID/stat`` (after the command name), or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """The start time of a live (not zombie) process in clock ticks after boot, else None."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def session_members(session_id: int) -> dict[int, int]:
    """Live processes in session ``session_id``: ``{pid: start time}`` (read from /proc)."""
    members: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or fields[0] in ("Z", "X") or int(fields[3]) != session_id:
            continue
        members[int(entry.name)] = int(fields[19])
    return members


def marked_processes(variable: str, value: str) -> dict[int, int]:
    """Live processes whose environment has ``variable=value``: ``{pid: start time}``.

    With a random ``value`` put in the environment of the processes one starts, only they
    and their descendants carry it (also helpers that left the recorded sessions).
    """
    if not value:
        return {}
    marker = f"{variable}={value}".encode()
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if marker in environ.split(b"\0"):
            start = process_start_time(int(entry.name))
            if start is not None:
                found[int(entry.name)] = start
    return found


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``): start times count within it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


# Popen objects of the processes this Python process started: kept so they can be reaped
# (no zombies, no "still running" warnings) when the same process stops them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def keep_child(proc: subprocess.Popen[bytes]) -> None:
    """Remember a kept process this Python process started, to reap it when it is stopped."""
    _CHILDREN[proc.pid] = proc


def reap(pid: int) -> None:
    """Collect the exit status of ``pid`` if this process started it and it has ended."""
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        del _CHILDREN[pid]


@dataclass(frozen=True)
class ProcessRecord:
    """One kept process, as recorded in a ``state.json``."""

    name: str
    pid: int
    start_time: int
    argv: list[str] = field(default_factory=list)

    def is_ours(self, boot: str) -> bool:
        """Whether PID is alive and is still the process we started (same boot, same start)."""
        if boot != boot_id():
            return False
        return process_start_time(self.pid) == self.start_time


def _signal(targets: dict[int, int], sig: signal.Signals) -> None:
    for pid, start in targets.items():
        if process_start_time(pid) == start:  # still the same process
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def _wait_gone(targets: dict[int, int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        for pid in targets:
            reap(pid)
        if all(process_start_time(pid) != start for pid, start in targets.items()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def terminate(targets: dict[int, int], timeout: float = 5.0) -> bool:
    """SIGTERM the processes ``{pid: start time}`` (each checked against its start time), then
    SIGKILL what stays after ``timeout`` seconds; reaps the ones this process started. True
    when all are gone."""
    _signal(targets, signal.SIGTERM)
    if _wait_gone(targets, timeout):
        return True
    _signal(targets, signal.SIGKILL)
    return _wait_gone(targets, timeout)


def stop_session(record: ProcessRecord, boot: str, timeout: float = 5.0) -> bool:
    """Stop the recorded process and the rest of its session, if it is still ours; True when
    the recorded process itself was ours and running."""
    if boot != boot_id():
        return False
    leader_ours = record.is_ours(boot)
    if not leader_ours and process_start_time(record.pid) is not None:
        log.info("PID %d is no longer %s (recycled); leaving it alone", record.pid, record.name)
        return False
    # While the leader lives (and is ours), or after it died (its PID then stays reserved
    # as a session id while members exist), processes in session PID are ours.
    targets = session_members(record.pid)
    if not targets:
        reap(record.pid)
        return False
    terminate(targets, timeout)
    reap(record.pid)
    return leader_ours


def write_private(path: Path, data: bytes | str) -> None:
    """Write ``path`` with mode 0600, atomically: a new file beside it, then renamed over it."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # also when a stale temporary file had another mode
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    tmp.replace(path)
