"""The fleet's own tables in the database the workers share (beside DBOS's ``dbos`` schema).

``vnc_use_fleet_workers``: one row per worker (``--worker-id``): its labels, its desktops (each
free or busy with a run), its state (``alive``, ``draining``, ``stopped``, ``dead``) and its
last heartbeat. A live worker also holds a session-level advisory lock on its own connection
(:func:`worker_lock_key`): PostgreSQL frees it the moment the worker's process dies, so any
other worker notices a SIGKILL at once; a hung worker is noticed by its heartbeat's age, and
fenced (:meth:`FleetDb.fence`): every session it opened (named ``vnc-use worker <id>``,
:func:`worker_tag`) is ended, its locks with them, so it can write nothing more.

``vnc_use_fleet_runs``: one row per run submitted to the fleet: its label, task, spec (the
:class:`~vnc_use.runs.spec.RunSpec`'s JSON: never a secret), the desktop it is pinned to once
its first leg started and that desktop's kind (:data:`DESKTOP_KINDS`: a ``local`` desktop is
reachable only by the worker that started it, the run's ``worker_id``), the worker of its last
leg, its status, its last
:class:`~vnc_use.agent.state.RunResult` (the machine that asks gets it without sharing a
folder with the workers) and when ``fleet prune`` deleted its folder's content. The run
folders' content itself (screenshots, record, events, video) is in :mod:`vnc_use.fleet.blobs`;
the ``report`` column of earlier versions is no longer written.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vnc_use.store import postgres
from vnc_use.store.lease import lease_number

__all__ = [
    "DEAD_AFTER",
    "DESKTOP_KINDS",
    "MIN_DEAD_AFTER",
    "FleetDb",
    "RunRow",
    "fleet_has_run",
    "kind_of_address",
    "worker_lock_key",
    "worker_tag",
]

DEAD_AFTER = 30.0
"""A worker whose last heartbeat is older than this many seconds is declared dead (the
default of ``vnc-use worker --dead-after``)."""

MIN_DEAD_AFTER = 3.0
"""The shortest ``--dead-after``: a few heartbeats."""

FENCE_WAIT = 5.0
"""Seconds :meth:`FleetDb.fence` waits for the ended sessions to be gone."""

DESKTOP_KINDS = ("vnc", "local", "rdp")
"""What a run's desktop is: ``vnc`` (an address any worker can reach), ``local`` (one a worker
started with ``--desktops N``: only that worker reaches it), ``rdp`` (an ``rdp://`` address
any worker can reach)."""

WORKERS = "vnc_use_fleet_workers"
RUNS = "vnc_use_fleet_runs"

_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {WORKERS} (worker_id TEXT PRIMARY KEY, labels JSONB NOT NULL,"
    " desktops JSONB NOT NULL, state TEXT NOT NULL, host TEXT NOT NULL DEFAULT '',"
    " started TIMESTAMPTZ NOT NULL DEFAULT now(), heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " legs_done INTEGER NOT NULL DEFAULT 0)",
    f"CREATE TABLE IF NOT EXISTS {RUNS} (thread_id TEXT PRIMARY KEY, label TEXT NOT NULL,"
    " task TEXT NOT NULL, spec JSONB NOT NULL, desktop TEXT, worker_id TEXT,"
    " status TEXT NOT NULL, legs INTEGER NOT NULL DEFAULT 1, result JSONB, report TEXT,"
    " created TIMESTAMPTZ NOT NULL DEFAULT now(), updated TIMESTAMPTZ NOT NULL DEFAULT now())",
    # added after the first release: a fleet database made before upgrades in place
    f"ALTER TABLE {RUNS} ADD COLUMN IF NOT EXISTS desktop_kind TEXT",
    # when `fleet prune` deleted the run's screenshots, events and video (vnc_use.fleet.blobs)
    f"ALTER TABLE {RUNS} ADD COLUMN IF NOT EXISTS pruned TIMESTAMPTZ",
)


def worker_tag(worker_id: str) -> str:
    """What every session of worker ``worker_id`` is named after (its ``application_name``)."""
    return f"vnc-use worker {worker_id}"


def kind_of_address(desktop: str) -> str:
    """The kind of a desktop known only by its address (a row pinned before the fleet kept
    kinds): an ``rdp://`` one is ``rdp``, any other ``vnc``."""
    return "rdp" if desktop.startswith("rdp://") else "vnc"


def fleet_has_run(url: str, thread_id: str) -> bool:
    """Whether the database at ``url`` holds a fleet run ``thread_id`` (creates nothing)."""
    conn = postgres.connect(url, application_name="vnc-use fleet client")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT to_regclass('{RUNS}') IS NOT NULL AS ready")
            ready = cur.fetchone()
            if not (ready and ready["ready"]):
                return False
            cur.execute(f"SELECT 1 FROM {RUNS} WHERE thread_id = %s", (thread_id,))
            return cur.fetchone() is not None
    finally:
        conn.close()


def worker_lock_key(worker_id: str) -> int:
    """The advisory lock a live worker holds on its own session."""
    return lease_number(f"vnc-use-fleet-worker:{worker_id}")


@dataclass
class RunRow:
    """A run as the fleet knows it."""

    thread_id: str
    label: str
    task: str
    spec: dict[str, Any]
    desktop: str | None
    desktop_kind: str | None
    worker_id: str | None
    status: str
    legs: int
    result: dict[str, Any] | None
    report: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> RunRow:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    @property
    def kind(self) -> str | None:
        """The kind of the desktop the run is pinned to (None: not pinned yet)."""
        if self.desktop is None:
            return None
        return self.desktop_kind or kind_of_address(self.desktop)


class FleetDb:
    """The fleet's tables on one autocommit connection (its own, never shared)."""

    def __init__(self, url: str, application_name: str = "vnc-use fleet") -> None:
        self.url = url
        self.conn = postgres.connect(url, application_name=application_name)
        # one creator at a time: workers starting together would race on CREATE TABLE
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (lease_number("vnc-use-fleet-ddl"),))
            for statement in _SCHEMA:
                cur.execute(statement)

    def close(self) -> None:
        self.conn.close()

    def lost(self) -> bool:
        """Whether this connection is gone (ended by the server, e.g. fenced, or broken)."""
        return bool(self.conn.closed or self.conn.broken)

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    @contextlib.contextmanager
    def setup_lock(self) -> Iterator[None]:
        """Hold the fleet's set-up lock (creating tables) for the block."""
        key = lease_number("vnc-use-fleet-setup")
        # polled, not waited for inside a statement: LangGraph's CREATE INDEX CONCURRENTLY
        # waits for every open transaction, a blocked pg_advisory_lock included (a deadlock)
        while not postgres.try_advisory_lock(self.conn, key):
            time.sleep(0.1)
        try:
            yield
        finally:
            postgres.release_advisory_lock(self.conn, key)

    # -- workers ---------------------------------------------------------------------------
    def hold_worker_lock(self, worker_id: str) -> bool:
        """Take this worker's liveness lock on this session (False: another process has it)."""
        return postgres.try_advisory_lock(self.conn, worker_lock_key(worker_id))

    def worker_lock_free(self, worker_id: str) -> bool:
        """Whether nobody holds ``worker_id``'s liveness lock (its process is gone)."""
        key = worker_lock_key(worker_id)
        if postgres.try_advisory_lock(self.conn, key):
            postgres.release_advisory_lock(self.conn, key)
            return True
        return False

    def register_worker(
        self, worker_id: str, labels: list[str], desktops: dict[str, str | None], host: str
    ) -> None:
        self._all(
            f"INSERT INTO {WORKERS} (worker_id, labels, desktops, state, host) "
            "VALUES (%s, %s, %s, 'alive', %s) ON CONFLICT (worker_id) DO UPDATE SET "
            "labels = EXCLUDED.labels, desktops = EXCLUDED.desktops, state = 'alive', "
            "host = EXCLUDED.host, started = now(), heartbeat = now(), legs_done = 0",
            (worker_id, json.dumps(labels), json.dumps(desktops), host),
        )

    def heartbeat(self, worker_id: str, desktops: dict[str, str | None]) -> str | None:
        """Record that the worker lives; returns its state (``dead`` if others said so)."""
        row = self._one(
            f"UPDATE {WORKERS} SET heartbeat = now(), desktops = %s WHERE worker_id = %s "
            "RETURNING state",
            (json.dumps(desktops), worker_id),
        )
        return str(row["state"]) if row else None

    def set_worker_state(self, worker_id: str, state: str) -> None:
        self._all(f"UPDATE {WORKERS} SET state = %s WHERE worker_id = %s", (state, worker_id))

    def count_leg(self, worker_id: str) -> None:
        self._all(
            f"UPDATE {WORKERS} SET legs_done = legs_done + 1 WHERE worker_id = %s", (worker_id,)
        )

    def workers(self) -> list[dict[str, Any]]:
        """Every worker, with ``age``: seconds since its last heartbeat."""
        return self._all(
            f"SELECT *, EXTRACT(EPOCH FROM now() - heartbeat)::float AS age FROM {WORKERS} "
            "ORDER BY worker_id"
        )

    def worker_state(self, worker_id: str) -> str | None:
        row = self._one(f"SELECT state FROM {WORKERS} WHERE worker_id = %s", (worker_id,))
        return str(row["state"]) if row else None

    def suspects(self, me: str, dead_after: float = DEAD_AFTER) -> dict[str, str]:
        """Other workers said to be alive or draining whose process is gone (their lock is
        free) or silent for ``dead_after`` seconds, each with why."""
        found = {}
        for row in self.workers():
            if row["worker_id"] == me or row["state"] not in ("alive", "draining"):
                continue
            if self.worker_lock_free(row["worker_id"]):
                found[str(row["worker_id"])] = "its process is gone"
            elif row["age"] > dead_after:
                found[str(row["worker_id"])] = f"silent for {row['age']:.1f} s"
        return found

    def gone(self, me: str) -> set[str]:
        """Workers declared dead or stopped: a leg DBOS still counts as theirs (one it handed
        a worker as it stopped, or a fenced worker as it woke) is for the others to recover."""
        return {
            str(row["worker_id"])
            for row in self.workers()
            if row["worker_id"] != me and row["state"] in ("dead", "stopped")
        }

    def label_desktops(self, label: str) -> int:
        """The most desktops any live worker of ``label`` owns (0: none)."""
        row = self._one(
            f"SELECT COALESCE(MAX((SELECT count(*) FROM jsonb_object_keys(desktops))), 0) AS n "
            f"FROM {WORKERS} WHERE state IN ('alive', 'draining') AND labels ? %s",
            (label,),
        )
        return int(row["n"]) if row else 0

    def fence(self, worker_id: str) -> int:
        """End every session of worker ``worker_id`` (its liveness lock, its legs' desktop
        leases, checkpoints and journal, DBOS's pool), waiting until they are gone: a hung
        worker that wakes can write nothing more. How many were ended. Needs the right to
        signal those sessions: the same role (or ``pg_signal_backend``)."""
        tag = worker_tag(worker_id)
        rows = self._all(
            "SELECT pid, application_name FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND starts_with(application_name, %s)",
            (tag,),
        )
        pids = [int(r["pid"]) for r in rows if postgres.tagged(r["application_name"], tag)]
        for pid in pids:
            self._all("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + FENCE_WAIT
        while pids and time.monotonic() < deadline:
            left = self._all("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,))
            if not left:
                break
            time.sleep(0.05)
        return len(pids)

    def declare_dead(self, worker_id: str) -> bool:
        """Mark a worker dead; True for the one caller that did (it recovers the legs)."""
        row = self._one(
            f"UPDATE {WORKERS} SET state = 'dead', desktops = '{{}}'::jsonb "
            "WHERE worker_id = %s AND state IN ('alive', 'draining') RETURNING worker_id",
            (worker_id,),
        )
        return row is not None

    # -- runs ------------------------------------------------------------------------------
    def create_run(self, thread_id: str, label: str, task: str, spec: dict[str, Any]) -> bool:
        """A new run (False: the thread id is taken)."""
        row = self._one(
            f"INSERT INTO {RUNS} (thread_id, label, task, spec, status) "
            "VALUES (%s, %s, %s, %s, 'queued') ON CONFLICT (thread_id) DO NOTHING "
            "RETURNING thread_id",
            (thread_id, label, task, json.dumps(spec)),
        )
        return row is not None

    def run(self, thread_id: str) -> RunRow | None:
        row = self._one(f"SELECT * FROM {RUNS} WHERE thread_id = %s", (thread_id,))
        return RunRow.of(row) if row else None

    def runs(self, limit: int = 100) -> list[RunRow]:
        rows = self._all(f"SELECT * FROM {RUNS} ORDER BY updated DESC LIMIT %s", (limit,))
        return [RunRow.of(r) for r in rows]

    def set_spec(self, thread_id: str, spec: dict[str, Any]) -> None:
        """The run's spec from its next leg on (a cost cap raised on resume)."""
        self._all(
            f"UPDATE {RUNS} SET spec = %s, updated = now() WHERE thread_id = %s",
            (json.dumps(spec), thread_id),
        )

    def next_leg(self, thread_id: str, status: str) -> int:
        """Count a new leg of the run (its number) and set the run's status."""
        row = self._one(
            f"UPDATE {RUNS} SET legs = legs + 1, status = %s, updated = now() "
            "WHERE thread_id = %s RETURNING legs",
            (status, thread_id),
        )
        assert row is not None
        return int(row["legs"])

    def pin(self, thread_id: str, desktop: str, kind: str, worker_id: str) -> None:
        """The run's leg runs now on ``desktop`` (of ``kind``), driven by ``worker_id``."""
        self._all(
            f"UPDATE {RUNS} SET desktop = %s, desktop_kind = %s, worker_id = %s, "
            "status = 'running', updated = now() WHERE thread_id = %s",
            (desktop, _checked_kind(kind), worker_id, thread_id),
        )

    def repin(self, thread_id: str, desktop: str, kind: str) -> None:
        """The run's next leg goes to ``desktop`` (``resume --fleet --vnc ADDR``); the worker
        of its last leg stays recorded until a leg starts there."""
        self._all(
            f"UPDATE {RUNS} SET desktop = %s, desktop_kind = %s, updated = now() "
            "WHERE thread_id = %s",
            (desktop, _checked_kind(kind), thread_id),
        )

    def finish_leg(
        self, thread_id: str, status: str, result: dict[str, Any], report: str | None
    ) -> None:
        self._all(
            f"UPDATE {RUNS} SET status = %s, result = %s, report = COALESCE(%s, report), "
            "updated = now() WHERE thread_id = %s",
            (status, json.dumps(result, default=str), report, thread_id),
        )


def _checked_kind(kind: str) -> str:
    if kind not in DESKTOP_KINDS:
        raise ValueError(f"desktop kind {kind!r} is not one of {', '.join(DESKTOP_KINDS)}")
    return kind
