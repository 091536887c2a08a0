"""One run per desktop: a lease keyed by the desktop's address.

Two runs must never drive one desktop. A run takes the lease of its desktop from the moment it
starts or resumes until it ends or pauses for a person (model calls included), and gives it back
then. A second run on a leased desktop waits up to ``timeout`` seconds (``--lease-timeout``,
default 60) and then fails with :class:`LeaseBusy`, whose one-line message names the run
(thread id) that holds it.

Where the lease lives follows where the checkpoints live (:mod:`vnc_use.store.storage`), so the
runs that share a checkpoint store exclude each other:

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on a connection of its
  own whose ``application_name`` is the holder's thread id; released by the server when the
  holder's connection ends, whatever killed it.
- SQLite (the local default): ``fcntl.flock`` on a lock file per desktop in the folder of the
  checkpoint database; the file names its holder; the kernel releases it when the holder dies.

>>> with FileLease(lock_dir, "127.0.0.1::5901", "run-1").hold(timeout=60):   # doctest: +SKIP
...     ...  # drive the desktop
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vnc_use.desktops.address import parse_server
from vnc_use.errors import VncUseError

__all__ = [
    "DEFAULT_LEASE_TIMEOUT",
    "FileLease",
    "Lease",
    "LeaseBusy",
    "PostgresLease",
    "desktop_key",
    "lease_number",
]

DEFAULT_LEASE_TIMEOUT = 60.0
"""Seconds a run waits for a leased desktop before it fails (``--lease-timeout``)."""

_POLL_S = 0.1


class LeaseBusy(VncUseError):
    """Another run held the desktop for longer than the lease timeout."""

    def __init__(self, desktop: str, holder: str | None, waited: float, person: Any = None) -> None:
        self.desktop = desktop
        self.holder = holder
        if person is not None:  # a person took it over for a run (vnc_use.store.holds.Hold)
            super().__init__(
                f"the desktop {desktop} is held by {person.describe()}, who took over run "
                f"{holder} (waited {waited:g} s for it); wait until they hand it back "
                f"(vnc-use handback {holder})"
            )
            return
        who = f"run {holder}" if holder else "another run"
        super().__init__(
            f"the desktop {desktop} is in use by {who} (waited {waited:g} s for it); wait "
            "until that run ends or pauses for approval, or give a longer --lease-timeout"
        )


def desktop_key(address: str) -> str:
    """The desktop's address normalised to ``host::port`` (``host:1`` and ``host::5901`` are
    one desktop)."""
    host, port = parse_server(address)
    return f"{host.lower()}::{port}"


def lease_number(key: str) -> int:
    """A non-negative 63-bit number for ``key`` (a Postgres advisory lock is keyed by one)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


class Lease:
    """The lease of one desktop for one run (``holder``: its thread id); take it with
    :meth:`hold`."""

    def __init__(self, address: str, holder: str) -> None:
        self.desktop = desktop_key(address)
        self.holder = holder

    def _try(self) -> bool:
        """Take the lease if it is free."""
        raise NotImplementedError

    def _holder(self) -> str | None:
        """The thread id of the run that holds it (``None`` when not known)."""
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        """Give back what waiting took (connections, files)."""

    def acquire(
        self,
        timeout: float = DEFAULT_LEASE_TIMEOUT,
        on_wait: Callable[[str | None], None] | None = None,
    ) -> None:
        """Take the lease, waiting up to ``timeout`` seconds; :class:`LeaseBusy` after that.
        ``on_wait`` is told the holder's thread id once, when the lease is found taken."""
        deadline = time.monotonic() + max(0.0, timeout)
        told = on_wait is None
        try:
            while not self._try():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LeaseBusy(self.desktop, self._holder(), timeout)
                if not told and on_wait is not None:
                    on_wait(self._holder())
                    told = True
                time.sleep(min(_POLL_S, left))
        except BaseException:
            self._close()
            raise

    def release(self) -> None:
        """Give the lease back (the next waiting run takes it)."""
        try:
            self._release()
        finally:
            self._close()

    @contextlib.contextmanager
    def hold(
        self,
        timeout: float = DEFAULT_LEASE_TIMEOUT,
        on_wait: Callable[[str | None], None] | None = None,
    ) -> Iterator[Lease]:
        """Hold the lease for the ``with`` block (see :meth:`acquire`)."""
        self.acquire(timeout, on_wait)
        try:
            yield self
        finally:
            self.release()


class FileLease(Lease):
    """The lease as ``flock`` on ``<directory>/<desktop>.lock``, which names its holder."""

    def __init__(self, directory: str | os.PathLike[str], address: str, holder: str) -> None:
        super().__init__(address, holder)
        self.path = Path(directory) / f"{lease_number(self.desktop):016x}.lock"
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd

    def _try(self) -> bool:
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        who = {"thread_id": self.holder, "desktop": self.desktop, "pid": os.getpid()}
        text = json.dumps({**who, "host": socket.gethostname()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        return True

    def _holder(self) -> str | None:
        try:
            found: Any = json.loads(self.path.read_text("utf-8") or "{}")
        except (OSError, ValueError):
            return None
        holder = found.get("thread_id") if isinstance(found, dict) else None
        return str(holder) if holder else None

    def _release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class PostgresLease(Lease):
    """The lease as a Postgres advisory lock on a connection named after the holder."""

    def __init__(self, conninfo: str, address: str, holder: str) -> None:
        super().__init__(address, holder)
        self.conninfo = conninfo
        self.number = lease_number(self.desktop)
        self._conn: Any = None

    def _connection(self) -> Any:
        if self._conn is None:
            from vnc_use.store import postgres

            self._conn = postgres.connect(self.conninfo, application_name=self.holder[:63])
        return self._conn

    def _try(self) -> bool:
        from vnc_use.store import postgres

        return postgres.try_advisory_lock(self._connection(), self.number)

    def _holder(self) -> str | None:
        from vnc_use.store import postgres

        return postgres.advisory_holder(self._connection(), self.number)

    def _release(self) -> None:
        if self._conn is not None and not self._conn.closed:
            from vnc_use.store import postgres

            postgres.release_advisory_lock(self._conn, self.number)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()  # ends the session: the lock goes with it in any case
            self._conn = None
