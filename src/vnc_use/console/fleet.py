"""The console over a fleet (``vnc-use console --fleet URL``): the runs list is the fleet's
table, the desktops are its workers' labels, and every verb goes through the
:class:`~vnc_use.fleet.executor.FleetExecutor` (in a leg process, as locally).

A run's page is built from its run folder, as locally: the folder a worker on this host writes
into the console's ``--runs-dir``, or else a copy fetched from the fleet's database (every leg's
screenshots, events and video, whichever hosts took them), brought up to date as the page asks.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from vnc_use.console.index import Page
from vnc_use.fleet.blobs import EVENTS_NAME, FETCHED, RunStore
from vnc_use.fleet.db import FleetDb, RunRow
from vnc_use.fleet.submit import DEFAULT_LABEL, STEP_LEFT, UNDER_WAY
from vnc_use.record.runs import RunSummary, summarize
from vnc_use.runs import rules

__all__ = ["FleetRuns", "state_of"]


def state_of(status: str) -> str:
    """The state the run rules read from a fleet run's status."""
    return rules.state_of(
        status,
        waiting=status == "awaiting_approval",
        under_way=status in UNDER_WAY,
        step_left=status in STEP_LEFT,
    )


class FleetRuns:
    """The fleet's runs, as the console lists them (the same ``page`` and ``get`` as
    :class:`~vnc_use.console.index.RunIndex`)."""

    def __init__(self, url: str, runs_dir: str | Path, *, fresh_for: float = 0.5) -> None:
        self.url = url
        self.runs_dir = Path(runs_dir)
        self.fresh_for = fresh_for
        self._rows: list[RunRow] = []
        self._checked = 0.0
        self._lock = threading.Lock()
        self._fetched: dict[str, float] = {}  # run: when its folder was last brought up to date

    def _db(self) -> FleetDb:
        return FleetDb(self.url, application_name="vnc-use console")

    def rows(self) -> list[RunRow]:
        with self._lock:
            if time.monotonic() - self._checked >= self.fresh_for:
                db = self._db()
                try:
                    self._rows = db.runs(limit=10_000)
                finally:
                    db.close()
                self._checked = time.monotonic()
            return self._rows

    def labels(self) -> list[str]:
        """The labels of the fleet's workers (the default one when it has none yet)."""
        db = self._db()
        try:
            workers = db.workers()
        finally:
            db.close()
        found = sorted({str(label) for w in workers for label in (w.get("labels") or [])})
        return found or [DEFAULT_LABEL]

    def warm(self) -> None:
        """Nothing to read ahead: the table answers at once."""

    def _summary(self, row: RunRow) -> RunSummary:
        local = summarize(self.runs_dir / row.thread_id) if self._has_folder(row) else None
        result = row.result or {}
        status = "running" if row.status in UNDER_WAY else row.status
        spec = row.spec or {}
        return RunSummary(
            thread_id=row.thread_id,
            task=row.task,
            status=status,
            steps=int(result.get("steps") or (local.steps if local else 0)),
            started=local.started if local else None,
            last_event=local.last_event if local else None,
            path=self.runs_dir / row.thread_id,
            final_text=str(result.get("final_text") or ""),
            error=str(result["error"]) if result.get("error") else None,
            cost_usd=result.get("cost_usd") if isinstance(result.get("cost_usd"), float) else None,
            priced=isinstance(result.get("cost_usd"), float),
            provider=spec.get("provider"),
            model=spec.get("model"),
            desktop=row.desktop or f"label {row.label}",
        )

    def _has_folder(self, row: RunRow) -> bool:
        return (self.runs_dir / row.thread_id / EVENTS_NAME).exists()

    def fetch(self, thread_id: str) -> Path | None:
        """The run's folder here (None: it has recorded nothing yet): the one a worker on this
        host writes, or a copy from the fleet's database, brought up to date at most every
        ``fresh_for`` seconds."""
        folder = self.runs_dir / thread_id
        if (folder / EVENTS_NAME).exists() and not (folder / FETCHED).exists():
            return folder  # a worker on this host writes it
        with self._lock:
            if time.monotonic() - self._fetched.get(thread_id, -1e9) >= self.fresh_for:
                db = self._db()
                try:
                    store = RunStore(self.url, conn=db.conn)
                    if store.has_run(thread_id):
                        store.fetch_run(self.runs_dir, thread_id)
                        (folder / FETCHED).write_text(
                            "fetched from a fleet's database by vnc-use console\n"
                        )
                finally:
                    db.close()
                self._fetched[thread_id] = time.monotonic()
        return folder if (folder / EVENTS_NAME).exists() else None

    def row(self, thread_id: str) -> RunRow | None:
        db = self._db()
        try:
            return db.run(thread_id)
        finally:
            db.close()

    def get(self, thread_id: str) -> RunSummary | None:
        row = self.row(thread_id)
        return self._summary(row) if row is not None else None

    def page(self, *, status: str | None = None, offset: int = 0, limit: int = 50) -> Page:
        runs = [self._summary(r) for r in self.rows()]
        counts: dict[str, int] = {}
        for s in runs:
            counts[s.status] = counts.get(s.status, 0) + 1
        chosen = [s for s in runs if s.status == status] if status else runs
        return Page(chosen[offset : offset + limit], len(chosen), offset, limit, counts)
