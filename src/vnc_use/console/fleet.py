"""The console over a fleet (``vnc-use console --fleet URL``): the runs list is the fleet's
table, the desktops are its workers' labels, and every verb goes through the
:class:`~vnc_use.fleet.executor.FleetExecutor` (in a leg process, as locally).

A run's page is built from its run folder, as locally: the folder a worker on this host writes
into the console's ``--runs-dir``, or else a copy fetched from the fleet's database (every leg's
screenshots, events and video, whichever hosts took them), brought up to date as the page asks.

The person's part of a run's video (its holder's interactive live view:
:meth:`FleetRuns.person_video`) is recorded into that folder, as ``vnc-use view --interactive``
records it, and stored into the fleet's database as the run's file (the segment's blob and the
run's ``video.json``), where the worker's next leg, ``report --fleet`` and the run's page find
it, between the agent's segments.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from vnc_use.console.index import Page
from vnc_use.fleet.blobs import EVENTS_NAME, FETCHED, RunStore
from vnc_use.fleet.db import FleetDb, RunRow
from vnc_use.fleet.submit import DEFAULT_LABEL, STEP_LEFT, UNDER_WAY
from vnc_use.record import run_record
from vnc_use.record.runs import RunSummary, summarize
from vnc_use.runs import rules

if TYPE_CHECKING:
    from vnc_use.runs.takeover import EventSink

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

    def fetch(self, thread_id: str, *, now: bool = False) -> Path | None:
        """The run's folder here (None: it has recorded nothing yet): the one a worker on this
        host writes, or a copy from the fleet's database, brought up to date at most every
        ``fresh_for`` seconds (``now``: at once)."""
        folder = self.runs_dir / thread_id
        if (folder / EVENTS_NAME).exists() and not (folder / FETCHED).exists():
            return folder  # a worker on this host writes it
        with self._lock:
            if now or time.monotonic() - self._fetched.get(thread_id, -1e9) >= self.fresh_for:
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

    @contextlib.contextmanager
    def person_video(
        self, thread_id: str, server: str, password: str, events: EventSink
    ) -> Iterator[None]:
        """Record the person's part of the run's video while the block runs (the holder's
        interactive live view of ``server``), into the run's folder here brought up to date
        first (so the segment comes after the agent's), as
        :func:`~vnc_use.runs.takeover.person_video` does; the segment reaches the fleet's
        database as it grows, and whole with the run's ``video.json`` when the block ends
        (before a hand-back's next leg starts, which fetches it). ``events``: the run's
        events in the fleet's database (a desktop that cannot be recorded is told there)."""
        from vnc_use.runs.takeover import person_video

        folder = self.fetch(thread_id, now=True)
        if folder is None or not run_record.path_of(folder).exists():  # no run's record yet
            yield
            return
        store = RunStore(self.url, application_name="vnc-use console")
        try:
            with (
                store.streaming_video(folder, thread_id),
                person_video(self.runs_dir, thread_id, server, password, events=events),
            ):
                yield
        finally:
            store.close()

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
