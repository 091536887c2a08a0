"""The action journal: what was sent to the desktop, written to disk before and after.

LangGraph re-runs the node that was executing when a process died, so without a record an
action could run twice after a crash. ``act`` therefore writes ``dispatched`` (flushed and
fsynced) before it sends an action, and ``done`` once a screenshot round trip has proved the
server received it. When ``act`` starts for a call, the journal tells it what happened before:

- nothing: a fresh call, run it;
- ``done``: it ran, and only the checkpoint was lost: do not run it again (a custom function's
  ``done`` carries its result, which answers the model again);
- ``dispatched`` without ``done``: it may or may not have happened. It is never silently
  re-executed: a person decides (``hitl_mode``), or the model is told the outcome is unknown.

The journal lives in the same database as the checkpoints (:mod:`vnc_use.store.storage`): a
table ``vnc_use_journal`` of ``(thread_id, key, record)`` rows, one JSON object per record, in
the SQLite file of the runs folder or in PostgreSQL. So a run resumed on another machine, against
the same database, knows which actions were performed. Every append is committed (and, in
SQLite, fsynced) before :meth:`Journal.dispatched` returns, i.e. before any byte goes out.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "JOURNAL_TABLE",
    "STOP_KEY",
    "Journal",
    "JournalStore",
    "Outcome",
    "SqliteJournalStore",
    "call_key",
    "import_jsonl",
]

JOURNAL_TABLE = "vnc_use_journal"
"""The journal's table, next to the checkpointer's own in the same database."""


class Outcome(str, Enum):
    """What the journal knows about one call."""

    NEW = "new"
    """Never sent, or a person chose to send it again: run it."""
    DONE = "done"
    """The server received it; only the checkpoint was lost: do not run it again."""
    UNCERTAIN = "uncertain"
    """Sent, but not known to have arrived: ask a person, or tell the model."""
    UNKNOWN = "unknown"
    """Was uncertain, and it was settled not to run it again: tell the model so."""


STOP_KEY = "stop"
"""The journal key of stop requests (:meth:`Journal.request_stop`); no action has it."""


def call_key(model_call: int, call_index: int) -> str:
    """The journal key of call ``call_index`` of the answer to model call ``model_call``."""
    return f"{model_call}:{call_index}"


class JournalStore(Protocol):
    """Where journal records are kept: rows of ``(thread_id, key, record)``, oldest first."""

    def append(self, thread_id: str, key: str, record: str) -> None:
        """Add one record (a JSON object as text), committed before returning."""

    def load(self, thread_id: str, key: str | None = None) -> list[str]:
        """The thread's records (of one call when ``key`` is given), oldest first."""

    def close(self) -> None:
        """Close the connection the store opened."""


class SqliteJournalStore:
    """The journal in a SQLite file (the checkpoint database of the runs folder).

    Its own connection in autocommit mode, ``synchronous=FULL``: each record is on disk when
    :meth:`append` returns. The checkpointer's connection to the same file (WAL mode) is a
    different one; SQLite serialises the writers (``timeout`` seconds at most).
    """

    def __init__(self, path: str | Path, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {JOURNAL_TABLE} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "thread_id TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL)"
        )
        self._conn.execute(
            f"CREATE INDEX IF NOT EXISTS {JOURNAL_TABLE}_thread ON {JOURNAL_TABLE} (thread_id, key)"
        )

    def append(self, thread_id: str, key: str, record: str) -> None:
        with self._lock:
            self._conn.execute(
                f"INSERT INTO {JOURNAL_TABLE} (thread_id, key, record) VALUES (?, ?, ?)",
                (thread_id, key, record),
            )

    def load(self, thread_id: str, key: str | None = None) -> list[str]:
        sql = f"SELECT record FROM {JOURNAL_TABLE} WHERE thread_id = ?"
        params: tuple[str, ...] = (thread_id,)
        if key is not None:
            sql, params = sql + " AND key = ?", (thread_id, key)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", params).fetchall()
        return [str(row[0]) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Journal:
    """An append-only, durable record of the actions one run sent to its desktop."""

    def __init__(self, store: JournalStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id

    def _append(self, record: dict[str, Any]) -> None:
        # default=str: a custom function's result that is not quite JSON is kept as text
        # rather than failing after the function ran
        text = json.dumps({"ts": round(time.time(), 3), **record}, ensure_ascii=False, default=str)
        self.store.append(self.thread_id, str(record["key"]), text)

    def records(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every record (of one call when ``key`` is given), oldest first."""
        out = []
        for text in self.store.load(self.thread_id, key):
            try:
                record = json.loads(text)
            except json.JSONDecodeError:  # not ours: never written by _append
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def outcome(self, key: str) -> Outcome:
        """What happened to call ``key`` so far."""
        records = self.records(key)
        if not records:
            return Outcome.NEW
        last = records[-1]
        if last.get("state") == "done":
            return Outcome.DONE
        if last.get("state") == "dispatched":
            return Outcome.UNCERTAIN
        return Outcome.NEW if last.get("decision") == "again" else Outcome.UNKNOWN

    def dispatched(self, key: str, name: str, step: int) -> None:
        """Record that the action is about to be sent (before any byte goes out)."""
        self._append({"key": key, "state": "dispatched", "name": name, "step": step})

    def done(self, key: str, name: str, step: int, output: Mapping[str, Any] | None = None) -> None:
        """Record that the server has received the action, or that a custom function returned
        ``output`` (kept, so a resumed run answers the model with the same result)."""
        record: dict[str, Any] = {"key": key, "state": "done", "name": name, "step": step}
        if output is not None:
            record["output"] = dict(output)
        self._append(record)

    def output(self, key: str) -> dict[str, Any] | None:
        """The result recorded with call ``key``'s ``done`` (custom functions), if any."""
        for record in reversed(self.records(key)):
            if record.get("state") == "done":
                found = record.get("output")
                return dict(found) if isinstance(found, dict) else None
        return None

    def resolved(self, key: str, decision: str, step: int) -> None:
        """Record how an uncertain action was settled (``again`` or ``unknown``)."""
        self._append({"key": key, "state": "resolved", "decision": decision, "step": step})

    def request_stop(self) -> None:
        """Ask the run to stop at its next step boundary (from any process that opens the same
        storage); the leg running it watches :meth:`stop_requests`."""
        self._append({"key": STOP_KEY, "state": "stop_requested"})

    def stop_requests(self) -> int:
        """How many stops were asked for so far (a leg stops when the count grows)."""
        return len(self.store.load(self.thread_id, STOP_KEY))

    def dispatch_count(self, key: str) -> int:
        """How many times the action was sent (more than 1 only after a recorded decision)."""
        return sum(1 for r in self.records(key) if r.get("state") == "dispatched")


def import_jsonl(journal: Journal, path: Path) -> int:
    """Copy an older run's ``journal.jsonl`` (the journal's file before it moved into the
    database) into ``journal`` when that holds nothing yet; returns how many records came."""
    if journal.records() or not path.is_file():
        return 0
    count = 0
    for line in path.read_text("utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a crash mid-write: it never completed
            continue
        if isinstance(record, dict) and "key" in record:
            journal.store.append(journal.thread_id, str(record["key"]), line)
            count += 1
    return count
