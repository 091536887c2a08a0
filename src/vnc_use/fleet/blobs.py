"""A fleet run's folder in the database the hosts share: a host's run folder is a cache.

Three tables beside the fleet's own (:mod:`vnc_use.fleet.db`):

- ``vnc_use_fleet_blobs``: content-addressed bytes (``sha256`` → ``data``): each screenshot,
  ``run.json`` version and video segment is stored **once**, however many runs, steps and
  files name it;
- ``vnc_use_fleet_files``: which file of which run folder holds which blob
  (``screenshots/<sha>.png``, ``run.json``, ``steps/0003-click_at.json``, ``video.json``,
  ``video.mp4``, ``video-2.mp4``...);
- ``vnc_use_fleet_events``: every line of each run's ``events.jsonl``, in order (the report,
  ``show`` and the run's listing are built from them);
- ``vnc_use_fleet_video_parts``: a video segment while its leg records it, as the bytes it
  grew by (the recorder's fragmented MP4 only ever appends): a leg whose host dies leaves its
  video up to a few seconds before; at the leg's end the whole segment becomes a blob.

A leg's run folder (:class:`~vnc_use.record.folder.RunFolder`) writes through a
:class:`RunStore` (its :class:`~vnc_use.record.folder.FolderStore`): a screenshot is in the
database before the step's checkpoint names it, an event as it is written; a screenshot the
folder lacks (taken on another host) is fetched on its first use. Before a leg, the worker
fetches what its folder lacks (:meth:`RunStore.fetch_run`: the record, the events, the video
index and segments, the screenshots); while the leg runs it sends what its video segment
grew by every few seconds (:meth:`RunStore.stream_video`), and the whole segment at the leg's
end (:meth:`RunStore.upload_video`). The machine that asks for a report fetches the folder the
same way and builds the report itself.

:meth:`RunStore.prune` deletes finished runs' files, events and videos (never those of a run
that can still be resumed or approved) and the blobs nothing names any more.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vnc_use.store import postgres
from vnc_use.store.lease import lease_number

__all__ = [
    "BLOBS",
    "EVENTS",
    "FETCHED",
    "FILES",
    "PRUNABLE",
    "VIDEO_PARTS",
    "FetchStats",
    "PruneStats",
    "RunStore",
    "kept_file",
]

log = logging.getLogger(__name__)

BLOBS = "vnc_use_fleet_blobs"
FILES = "vnc_use_fleet_files"
EVENTS = "vnc_use_fleet_events"
VIDEO_PARTS = "vnc_use_fleet_video_parts"
RUNS = "vnc_use_fleet_runs"

PRUNABLE = ("done", "denied", "failed", "step_limit", "timeout", "blocked", "diverged")
"""Statuses of a run nothing can continue: ``fleet prune`` may delete its folder's content.
Never ``awaiting_approval``, ``interrupted``, ``error``, ``stuck``, ``cost_limit`` (a person
or ``resume`` continues them), nor ``queued``/``running``."""

_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {BLOBS} (sha256 TEXT PRIMARY KEY, data BYTEA NOT NULL,"
    " bytes INTEGER NOT NULL, created TIMESTAMPTZ NOT NULL DEFAULT now())",
    # PNG and MP4 do not compress: store them as they are
    f"ALTER TABLE {BLOBS} ALTER COLUMN data SET STORAGE EXTERNAL",
    f"CREATE TABLE IF NOT EXISTS {FILES} (thread_id TEXT NOT NULL, path TEXT NOT NULL,"
    f" sha256 TEXT NOT NULL REFERENCES {BLOBS} (sha256), bytes INTEGER NOT NULL,"
    " updated TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (thread_id, path))",
    f"CREATE INDEX IF NOT EXISTS {FILES}_sha256 ON {FILES} (sha256)",
    f"CREATE TABLE IF NOT EXISTS {EVENTS} (id BIGSERIAL PRIMARY KEY, thread_id TEXT NOT NULL,"
    " line TEXT NOT NULL, created TIMESTAMPTZ NOT NULL DEFAULT now())",
    f"CREATE INDEX IF NOT EXISTS {EVENTS}_thread ON {EVENTS} (thread_id, id)",
    f"CREATE TABLE IF NOT EXISTS {VIDEO_PARTS} (thread_id TEXT NOT NULL, file TEXT NOT NULL,"
    " start BIGINT NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (thread_id, file, start))",
    f"ALTER TABLE {VIDEO_PARTS} ALTER COLUMN data SET STORAGE EXTERNAL",
)

_FK_VIOLATION = "23503"
_SEGMENT = re.compile(r"^video(-\d+)?\.mp4$")
_SCREENSHOT = re.compile(r"^screenshots/([0-9a-f]{64})\.png$")
_KEPT = re.compile(
    r"^(run\.json|video\.json|video(-\d+)?\.mp4|steps/\d{4}-[A-Za-z0-9_]{0,40}\.json"
    r"|screenshots/[0-9a-f]{64}\.png)$"
)
EVENTS_NAME = "events.jsonl"
FETCHED = ".fleet-run"
"""The mark of a run folder fetched from the database (``report --fleet``, the console over a
fleet): it may be fetched into again, unlike a folder a worker on this host writes."""
STREAM_SECONDS = 2.0
"""How often a leg sends what its video segment grew by."""
_FETCH_BATCH = 32
"""Blobs fetched per query (bounds the memory a fetch holds)."""


def kept_file(relative: str) -> bool:
    """Whether the database keeps this file of a run folder (the model's raw exchanges under
    ``model/`` and the report stay a host's own: nothing needs them elsewhere)."""
    return bool(_KEPT.match(relative))


@dataclass
class FetchStats:
    """What :meth:`RunStore.fetch_run` brought to the folder."""

    files: int = 0
    bytes: int = 0
    events: int = 0
    seconds: float = 0.0


@dataclass
class PruneStats:
    """What :meth:`RunStore.prune` deleted."""

    runs: list[str]
    files: int
    events: int
    blobs: int
    freed: int
    """Bytes of the deleted blobs and event lines."""
    size_before: int
    size_after: int
    """``pg_database_size`` before and after (PostgreSQL reuses the space it frees)."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.fetch")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _lacks(run_dir: Path, relative: str, sha: str, media: bool) -> bool:
    """Whether the folder lacks this file of the database's (or holds it otherwise)."""
    if not kept_file(relative):  # never a path outside the folder
        return False
    shot = bool(_SCREENSHOT.match(relative))
    if not media and (shot or _SEGMENT.match(relative)):
        return False
    target = run_dir / relative
    if not target.exists():
        return True
    return not shot and _sha(target.read_bytes()) != sha  # a screenshot's name is its hash


class RunStore:
    """Run folders' content in the fleet's database, on one connection of its own (named
    after the worker in a worker: a fence ends it, so a fenced worker stores nothing more).
    Thread-safe: a leg's threads share it."""

    def __init__(
        self, url: str, application_name: str = "vnc-use fleet store", *, conn: Any = None
    ) -> None:
        """Its own connection to ``url``, or ``conn`` (an autocommit connection of
        :func:`vnc_use.store.postgres.connect` it borrows, e.g. a leg's: no session more)."""
        self._owned = conn is None
        self.conn = (
            postgres.connect(url, application_name=application_name) if conn is None else conn
        )
        self._lock = threading.RLock()
        self._known: set[str] = set()  # blobs this store knows the database holds
        self._streamed: dict[tuple[str, str], int] = {}  # (run, segment): bytes sent as parts
        if not self._ready():
            with self.conn.transaction(), self.conn.cursor() as cur:
                key = lease_number("vnc-use-fleet-ddl")  # one creator at a time
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                for statement in _SCHEMA:
                    cur.execute(statement)

    def _ready(self) -> bool:
        """Whether the tables exist (a leg's store creates nothing, locks nothing)."""
        names = [BLOBS, FILES, EVENTS, VIDEO_PARTS]
        rows = self._all(
            "SELECT bool_and(to_regclass(n) IS NOT NULL) AS ready FROM unnest(%s::text[]) n",
            (names,),
        )
        return bool(rows and rows[0]["ready"])

    def close(self) -> None:
        if self._owned:
            self.conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock, self.conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    # -- writing (a leg's folder, through FolderStore) ---------------------------------------
    def put_screenshot(self, thread_id: str, sha: str, png: bytes) -> None:
        self._put(thread_id, f"screenshots/{sha}.png", sha, png)

    def put_file(self, thread_id: str, relative: str, data: bytes) -> None:
        if kept_file(relative):
            self._put(thread_id, relative, _sha(data), data)

    def put_event(self, thread_id: str, line: str) -> None:
        self._all(f"INSERT INTO {EVENTS} (thread_id, line) VALUES (%s, %s)", (thread_id, line))

    def _put(self, thread_id: str, path: str, sha: str, data: bytes) -> None:
        """Name blob ``sha`` as ``path`` of the run's folder, storing its bytes if the
        database lacks them; a blob the file named before and nothing names now is deleted."""
        with self._lock:
            for attempt in range(3):
                try:
                    self._put_once(thread_id, path, sha, data, send=attempt > 0)
                    self._known.add(sha)
                    return
                except Exception as exc:  # prune deleted the blob meanwhile: send it again
                    if getattr(exc, "sqlstate", None) != _FK_VIOLATION or attempt == 2:
                        raise
                    self._known.discard(sha)

    def _put_once(self, thread_id: str, path: str, sha: str, data: bytes, send: bool) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            if send or sha not in self._known:
                cur.execute(f"SELECT 1 FROM {BLOBS} WHERE sha256 = %s", (sha,))
                if cur.fetchone() is None:
                    cur.execute(
                        f"INSERT INTO {BLOBS} (sha256, data, bytes) VALUES (%s, %s, %s) "
                        "ON CONFLICT (sha256) DO NOTHING",
                        (sha, data, len(data)),
                    )
            cur.execute(
                f"SELECT sha256 FROM {FILES} WHERE thread_id = %s AND path = %s", (thread_id, path)
            )
            row = cur.fetchone()
            old = str(row["sha256"]) if row else None
            if old == sha:
                return
            cur.execute(
                f"INSERT INTO {FILES} (thread_id, path, sha256, bytes) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (thread_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256, "
                "bytes = EXCLUDED.bytes, updated = now()",
                (thread_id, path, sha, len(data)),
            )
            if old is not None:  # e.g. run.json's earlier version
                cur.execute(
                    f"DELETE FROM {BLOBS} b WHERE b.sha256 = %s AND NOT EXISTS "
                    f"(SELECT 1 FROM {FILES} f WHERE f.sha256 = b.sha256)",
                    (old,),
                )

    def _segments(self, run_dir: Path) -> list[Path]:
        return sorted(p for p in run_dir.glob("video*.mp4") if _SEGMENT.match(p.name))

    def _named(self, thread_id: str, path: str) -> str | None:
        rows = self._all(
            f"SELECT sha256 FROM {FILES} WHERE thread_id = %s AND path = %s", (thread_id, path)
        )
        return str(rows[0]["sha256"]) if rows else None

    def _put_if_changed(self, thread_id: str, run_dir: Path, name: str) -> int:
        try:
            data = (run_dir / name).read_bytes()
        except OSError:
            return 0
        sha = _sha(data)
        with self._lock:
            if self._named(thread_id, name) == sha:
                return 0
            self._put(thread_id, name, sha, data)
        return len(data)

    def stream_video(self, run_dir: Path, thread_id: str) -> int:
        """Send what each video segment of the run grew by since it was last sent (and the
        video index when it changed), while a leg records; the bytes sent."""
        sent = 0
        for path in self._segments(run_dir):
            key = (thread_id, path.name)
            with self._lock:
                if key not in self._streamed:
                    if self._named(thread_id, path.name) is not None:  # a finished segment
                        continue
                    rows = self._all(
                        f"SELECT COALESCE(MAX(start + octet_length(data)), 0) AS n "
                        f"FROM {VIDEO_PARTS} WHERE thread_id = %s AND file = %s",
                        key,
                    )
                    self._streamed[key] = int(rows[0]["n"])
                done = self._streamed[key]
                try:
                    with path.open("rb") as fh:
                        fh.seek(done)
                        grown = fh.read()
                except OSError:
                    continue
                if not grown:
                    continue
                self._all(
                    f"INSERT INTO {VIDEO_PARTS} (thread_id, file, start, data) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (thread_id, path.name, done, grown),
                )
                self._streamed[key] = done + len(grown)
                sent += len(grown)
        return sent + self._put_if_changed(thread_id, run_dir, "video.json")

    @contextlib.contextmanager
    def streaming_video(
        self, run_dir: Path, thread_id: str, every: float = STREAM_SECONDS
    ) -> Iterator[None]:
        """For the block (a leg): :meth:`stream_video` every ``every`` seconds in a thread of
        its own; then :meth:`upload_video`."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every):
                try:
                    self.stream_video(run_dir, thread_id)
                except Exception as exc:  # the database away for a moment: next time
                    log.warning("run %s: could not send its video so far: %s", thread_id, exc)

        thread = threading.Thread(target=loop, daemon=True, name=f"video-{thread_id}")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(every + 30)
        self.upload_video(run_dir, thread_id)

    def upload_video(self, run_dir: Path, thread_id: str) -> int:
        """Store the run's video index and each segment the database lacks whole (at a leg's
        end; a segment's streamed parts are then dropped); the bytes sent."""
        sent = self._put_if_changed(thread_id, run_dir, "video.json")
        for path in self._segments(run_dir):
            sent += self._put_if_changed(thread_id, run_dir, path.name)
            if self._named(thread_id, path.name) is not None:
                self._all(
                    f"DELETE FROM {VIDEO_PARTS} WHERE thread_id = %s AND file = %s",
                    (thread_id, path.name),
                )
                self._streamed.pop((thread_id, path.name), None)
        return sent

    # -- reading ---------------------------------------------------------------------------
    def fetch_screenshot(self, sha: str) -> bytes | None:
        rows = self._all(f"SELECT data FROM {BLOBS} WHERE sha256 = %s", (sha,))
        return bytes(rows[0]["data"]) if rows else None

    def has_run(self, thread_id: str) -> bool:
        """Whether the database holds anything of the run's folder."""
        rows = self._all(
            f"SELECT EXISTS (SELECT 1 FROM {EVENTS} WHERE thread_id = %s) OR EXISTS "
            f"(SELECT 1 FROM {FILES} WHERE thread_id = %s) AS found",
            (thread_id, thread_id),
        )
        return bool(rows and rows[0]["found"])

    def events(self, thread_id: str, since: int = 0) -> list[str]:
        """The lines of the run's ``events.jsonl``, in order (after the first ``since``)."""
        rows = self._all(
            f"SELECT line FROM {EVENTS} WHERE thread_id = %s ORDER BY id OFFSET %s",
            (thread_id, since),
        )
        return [str(r["line"]) for r in rows]

    def event_count(self, thread_id: str) -> int:
        rows = self._all(f"SELECT count(*) AS n FROM {EVENTS} WHERE thread_id = %s", (thread_id,))
        return int(rows[0]["n"])

    def fetch_run(self, runs_dir: Path, thread_id: str, *, media: bool = True) -> FetchStats:
        """Bring ``<runs_dir>/<thread_id>/`` up to what the database holds: the files it lacks
        or holds otherwise, and the events (the database's are the run's). A run the
        database knows nothing of is left as it is. ``media=False``: no screenshot nor video
        (a transcript needs neither)."""
        started = time.perf_counter()
        stats = FetchStats()
        run_dir = runs_dir / thread_id
        lines = self.events(thread_id)
        if lines:
            text = "".join(line + "\n" for line in lines).encode("utf-8")
            path = run_dir / EVENTS_NAME
            if not path.exists() or path.read_bytes() != text:
                _write(path, text)
            stats.events = len(lines)
        rows = self._all(f"SELECT path, sha256 FROM {FILES} WHERE thread_id = %s", (thread_id,))
        wanted: dict[str, list[Path]] = {}
        for row in rows:
            relative, sha = str(row["path"]), str(row["sha256"])
            if _lacks(run_dir, relative, sha, media):
                wanted.setdefault(sha, []).append(run_dir / relative)
        shas = sorted(wanted)
        for n in range(0, len(shas), _FETCH_BATCH):
            batch = shas[n : n + _FETCH_BATCH]
            for row in self._all(
                f"SELECT sha256, data FROM {BLOBS} WHERE sha256 = ANY(%s)", (batch,)
            ):
                data = bytes(row["data"])
                for target in wanted[str(row["sha256"])]:
                    _write(target, data)
                    stats.files += 1
                    stats.bytes += len(data)
        if media:
            self._fetch_streamed(run_dir, thread_id, {str(r["path"]) for r in rows}, stats)
        for sub in ("screenshots", "steps", "model"):  # as a RunFolder has them
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        stats.seconds = time.perf_counter() - started
        return stats

    def _fetch_streamed(
        self, run_dir: Path, thread_id: str, whole: set[str], stats: FetchStats
    ) -> None:
        """The segments a leg streamed and never finished (its host died): their parts, in
        order, as far as they run without a gap."""
        rows = self._all(
            f"SELECT file, start, data FROM {VIDEO_PARTS} WHERE thread_id = %s "
            "ORDER BY file, start",
            (thread_id,),
        )
        found: dict[str, bytearray] = {}
        for row in rows:
            name = str(row["file"])
            if name in whole or not _SEGMENT.match(name):
                continue
            data = found.setdefault(name, bytearray())
            if int(row["start"]) == len(data):
                data.extend(bytes(row["data"]))
        for name, data in found.items():
            target = run_dir / name
            if target.exists() and target.stat().st_size >= len(data):
                continue
            _write(target, bytes(data))
            stats.files += 1
            stats.bytes += len(data)

    # -- growth ----------------------------------------------------------------------------
    def usage(self, thread_id: str | None = None) -> dict[str, int]:
        """Bytes the run (None: every run) holds: screenshots, other files, events."""
        where, params = ("WHERE f.thread_id = %s", (thread_id,)) if thread_id else ("", ())
        rows = self._all(
            "SELECT COALESCE(SUM(b.bytes) FILTER (WHERE d.shot), 0) AS screenshots, "
            "COALESCE(SUM(b.bytes) FILTER (WHERE NOT d.shot), 0) AS files FROM (SELECT "
            f"DISTINCT f.sha256, f.path LIKE 'screenshots/%%' AS shot FROM {FILES} f {where}) d "
            f"JOIN {BLOBS} b USING (sha256)",
            params,
        )
        ev_where = "WHERE thread_id = %s" if thread_id else ""
        events = self._all(
            f"SELECT COALESCE(SUM(octet_length(line)), 0) AS n FROM {EVENTS} {ev_where}", params
        )
        parts = self._all(
            f"SELECT COALESCE(SUM(octet_length(data)), 0) AS n FROM {VIDEO_PARTS} {ev_where}",
            params,
        )
        return {
            "screenshots": int(rows[0]["screenshots"]),
            "files": int(rows[0]["files"]) + int(parts[0]["n"]),
            "events": int(events[0]["n"]),
        }

    def database_size(self) -> int:
        rows = self._all("SELECT pg_database_size(current_database()) AS n")
        return int(rows[0]["n"])

    def prune(self, older_than: float) -> PruneStats:
        """Delete the folder content (files, events, videos) of every fleet run whose status
        is one of :data:`PRUNABLE` and that was last updated more than ``older_than`` seconds
        ago, then the blobs no run names any more."""
        before = self.database_size()
        runs = [
            str(r["thread_id"])
            for r in self._all(
                f"SELECT thread_id FROM {RUNS} WHERE status = ANY(%s) "
                "AND updated <= now() - make_interval(secs => %s) ORDER BY thread_id",
                (list(PRUNABLE), float(older_than)),
            )
        ]
        files = events = blobs = freed = 0
        with self._lock:
            for attempt in range(3):
                try:
                    with self.conn.transaction(), self.conn.cursor() as cur:
                        cur.execute(
                            f"DELETE FROM {FILES} WHERE thread_id = ANY(%s) RETURNING sha256",
                            (runs,),
                        )
                        gone = {str(r["sha256"]) for r in cur.fetchall()}
                        files = cur.rowcount
                        cur.execute(
                            f"DELETE FROM {EVENTS} WHERE thread_id = ANY(%s) "
                            "RETURNING octet_length(line) AS n",
                            (runs,),
                        )
                        lines = cur.fetchall()
                        events, freed = len(lines), sum(int(r["n"]) for r in lines)
                        cur.execute(
                            f"DELETE FROM {VIDEO_PARTS} WHERE thread_id = ANY(%s) "
                            "RETURNING octet_length(data) AS n",
                            (runs,),
                        )
                        freed += sum(int(r["n"]) for r in cur.fetchall())
                        cur.execute(
                            f"DELETE FROM {BLOBS} b WHERE b.sha256 = ANY(%s) AND NOT EXISTS "
                            f"(SELECT 1 FROM {FILES} f WHERE f.sha256 = b.sha256) "
                            "RETURNING bytes",
                            (sorted(gone),),
                        )
                        sizes = cur.fetchall()
                        blobs, freed = len(sizes), freed + sum(int(r["bytes"]) for r in sizes)
                        cur.execute(
                            f"UPDATE {RUNS} SET pruned = now(), report = NULL "
                            "WHERE thread_id = ANY(%s)",
                            (runs,),
                        )
                    break
                except Exception as exc:  # a leg named one of the blobs meanwhile: again
                    if getattr(exc, "sqlstate", None) != _FK_VIOLATION or attempt == 2:
                        raise
            self._known.clear()
            for table in (
                FILES,
                EVENTS,
                VIDEO_PARTS,
                BLOBS,
            ):  # the space is free for new rows at once
                self._all(f"VACUUM {table}")
        return PruneStats(runs, files, events, blobs, freed, before, self.database_size())

    def pruned(self, thread_id: str) -> bool:
        rows = self._all(f"SELECT pruned FROM {RUNS} WHERE thread_id = %s", (thread_id,))
        return bool(rows and rows[0]["pruned"] is not None)
