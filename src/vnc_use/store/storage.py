"""Where a run's durable state lives: checkpoints, the action journal and desktop leases.

One place holds all three, so a run resumed on another machine finds its checkpoints *and*
which actions were performed, and two runs that share the checkpoints cannot share a desktop:

- :class:`SqliteStorage` (the default): ``<runs_dir>/vnc-use.sqlite`` (or another file), the
  journal in a table of the same file, leases as lock files in the file's folder
  (``.vnc-use-leases/``);
- :class:`PostgresStorage` (``--checkpointer postgresql://...``, ``VNC_USE_DATABASE_URL``, or a
  ``PostgresSaver`` given to ``VncUseAgent(checkpointer=...)``): the journal in a table of the
  same database, leases as advisory locks.

Screenshots stay content-addressed files in the run folders under ``--runs-dir``.

What a host of the graph (``VncUseAgent``, a LangGraph Server graph factory) calls::

    storage = open_storage(location, runs_dir)      # or storage_for_checkpointer(saver, ...)
    with storage.lease(vnc_address, thread_id).hold(timeout=60):   # LeaseBusy after 60 s
        journal = storage.journal(thread_id)
        ...  # run the graph with AgentContext(journal=journal, ...)
    storage.close()

:attr:`Storage.described` is the location with any password shown as ``***`` (what run.json
keeps); :attr:`Storage.secrets` are values to redact (the database password).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from vnc_use.errors import ConfigError, StorageError
from vnc_use.store.holds import DesktopHolds
from vnc_use.store.journal import Journal, JournalStore, SqliteJournalStore
from vnc_use.store.lease import FileLease, Lease, PostgresLease

__all__ = [
    "CHECKPOINT_DB",
    "LEASE_DIR",
    "PostgresStorage",
    "SqliteStorage",
    "Storage",
    "open_storage",
    "storage_for_checkpointer",
]

CHECKPOINT_DB = "vnc-use.sqlite"
"""The default checkpoint database, in the runs folder."""

LEASE_DIR = ".vnc-use-leases"
"""The lock files of the SQLite default, next to its database file."""


class Storage:
    """Checkpoints, journal and leases in one place; :meth:`close` closes what it opened."""

    described: str
    """Where it is, safe to record (no password)."""
    secrets: tuple[str, ...] = ()
    """Values that must never be written (the database password)."""

    def __init__(self) -> None:
        self._saver: BaseCheckpointSaver[Any] | None = None
        self._journal_store: JournalStore | None = None
        self._closers: list[Any] = []

    @property
    def checkpointer(self) -> BaseCheckpointSaver[Any]:
        """The checkpointer, opened (and its tables created) on first use."""
        if self._saver is None:
            self._saver = self._open_saver()
        return self._saver

    def journal(self, thread_id: str) -> Journal:
        """The action journal of run ``thread_id``."""
        if self._journal_store is None:
            self._journal_store = self._open_journal_store()
        return Journal(self._journal_store, thread_id)

    def lease(self, address: str, holder: str) -> Lease:
        """The lease of the desktop at ``address`` for run ``holder`` (not yet taken)."""
        raise NotImplementedError

    def holds(self, address: str) -> DesktopHolds:
        """A person's holds on the desktop at ``address`` (:mod:`vnc_use.store.holds`), kept
        with the journal."""
        desktop = self.lease(address, "-").desktop
        return DesktopHolds(self.journal(f"@desktop:{desktop}").store, desktop)

    def _open_saver(self) -> BaseCheckpointSaver[Any]:
        raise NotImplementedError

    def _open_journal_store(self) -> JournalStore:
        raise NotImplementedError

    def close(self) -> None:
        """Close the connections this storage opened (a checkpointer given to it stays open)."""
        if self._journal_store is not None:
            self._journal_store.close()
            self._journal_store = None
        while self._closers:
            self._closers.pop().close()


class SqliteStorage(Storage):
    """A SQLite file: checkpoints (``SqliteSaver``), the journal table, lock files beside it."""

    def __init__(self, path: str | os.PathLike[str], saver: BaseCheckpointSaver[Any] | None = None):
        super().__init__()
        self.path = Path(path)
        self.described = str(self.path)
        self._saver = saver

    def _open_saver(self) -> BaseCheckpointSaver[Any]:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        saver = SqliteSaver(conn)
        try:
            _set_up(saver)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ConfigError(
                f"the checkpoint database {self.path} is unreadable ({exc}); move it away to "
                "start afresh, or use another runs folder"
            ) from None
        self._closers.append(conn)
        return saver

    def _open_journal_store(self) -> JournalStore:
        try:
            return SqliteJournalStore(self.path)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot open the journal in {self.path}: {exc}") from None

    def lease(self, address: str, holder: str) -> Lease:
        return FileLease(self.path.parent / LEASE_DIR, address, holder)


def _set_up(saver: SqliteSaver, patience: float = 30.0) -> None:
    """Create the checkpoint tables. Switching a new file to WAL mode can fail at once with
    "database is locked" while another connection sets it up (agents starting together, e.g.
    the tasks of ``vnc-use eval``), without waiting for the busy timeout: try again then."""
    deadline = time.monotonic() + patience
    while True:
        try:
            saver.setup()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class PostgresStorage(Storage):
    """A PostgreSQL database: ``PostgresSaver``, the journal table, advisory-lock leases."""

    def __init__(self, conninfo: str, saver: BaseCheckpointSaver[Any] | None = None) -> None:
        from vnc_use.store import postgres

        super().__init__()
        self.conninfo = conninfo
        self.described = postgres.redact(conninfo)
        password = postgres.password_of(conninfo)
        self.secrets = (password,) if password else ()
        self._saver = saver

    def _open_saver(self) -> BaseCheckpointSaver[Any]:
        from vnc_use.store import postgres

        conn, saver = postgres.open_saver(self.conninfo)
        self._closers.append(conn)
        return saver

    def _open_journal_store(self) -> JournalStore:
        from vnc_use.store import postgres

        return postgres.PostgresJournalStore(self.conninfo)

    def lease(self, address: str, holder: str) -> Lease:
        return PostgresLease(self.conninfo, address, holder)


def open_storage(location: str | os.PathLike[str] | None, runs_dir: str | Path) -> Storage:
    """The storage at ``location``: a ``postgresql://`` URL, a SQLite file, or ``None`` for
    ``<runs_dir>/vnc-use.sqlite``. Nothing is connected until first used."""
    if location is None or str(location).strip() == "":
        return SqliteStorage(Path(runs_dir) / CHECKPOINT_DB)
    text = os.fspath(location)
    from vnc_use.store.postgres import is_postgres_url

    if is_postgres_url(text):
        return PostgresStorage(text.strip())
    if "://" in text:
        raise ConfigError(
            f"unknown checkpointer {text.split('://')[0]}://...: give a postgresql:// URL or "
            "the path of a SQLite file"
        )
    return SqliteStorage(Path(text))


def storage_for_checkpointer(saver: BaseCheckpointSaver[Any], runs_dir: str | Path) -> Storage:
    """Storage around a checkpointer someone else opened: a ``PostgresSaver`` keeps the journal
    and leases in its database, a ``SqliteSaver`` in its file, anything else (e.g. in memory)
    in ``<runs_dir>/vnc-use.sqlite``."""
    from vnc_use.store.postgres import conninfo_of

    conninfo = conninfo_of(saver)
    if conninfo is not None:
        return PostgresStorage(conninfo, saver)
    if isinstance(saver, SqliteSaver):
        found = saver.conn.execute("PRAGMA database_list").fetchone()
        if found and found[2]:
            return SqliteStorage(found[2], saver)
    return SqliteStorage(Path(runs_dir) / CHECKPOINT_DB, saver)
