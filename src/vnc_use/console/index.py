"""The runs list of a runs folder, kept fresh cheaply: a summary per run folder, re-read only
when its ``events.jsonl`` or ``run.json`` changed.

:func:`vnc_use.record.runs.summarize` reads a run's ``run.json`` and its ``summary.json``
(kept by the run folder as it writes each event; a run of an older version has its whole event
file read: :mod:`vnc_use.record.tally`), so a never-indexed folder of 10,000 runs lists in under
a second. :class:`RunIndex` keeps each summary with the size and modification time of the two
files it came from, so a refresh costs two ``stat`` calls per run and one read
per run that changed since. A refresh runs at most every ``fresh_for`` seconds; a page of the
list is then a slice of the sorted summaries. The summaries are kept between starts of the
console in ``<runs_dir>/.console/index.json`` (each with its stamp, so a run that changed
meanwhile is read again), and :meth:`RunIndex.warm` reads the folder once in the background
when the console starts: the first page a person asks for is as quick as the later ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vnc_use.record.runs import RunSummary, summarize

__all__ = ["Page", "RunIndex"]

log = logging.getLogger(__name__)

CACHE = ".console/index.json"

_Stamp = tuple[int, int, int, int]
_KEPT = tuple(f.name for f in dataclasses.fields(RunSummary) if f.name != "path")


def _stamp(folder: str) -> _Stamp | None:
    """(size, mtime) of ``events.jsonl`` and ``run.json`` (0, 0 for a missing one); None when
    the folder has neither (not a run)."""
    found = False
    out: list[int] = []
    for name in ("events.jsonl", "run.json"):
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            out += [0, 0]
            continue
        found = True
        out += [st.st_size, st.st_mtime_ns]
    return (out[0], out[1], out[2], out[3]) if found else None


@dataclass(frozen=True)
class Page:
    """One page of the runs list."""

    runs: list[RunSummary]
    total: int
    """Runs that pass the filter (all pages)."""
    offset: int
    limit: int
    counts: dict[str, int]
    """Runs by status (before the filter)."""


class RunIndex:
    """The summaries of the runs under ``runs_dir``, newest first (see the module's doc)."""

    def __init__(self, runs_dir: str | Path, *, fresh_for: float = 0.5) -> None:
        self.runs_dir = Path(runs_dir)
        self.fresh_for = fresh_for
        self._entries: dict[str, tuple[_Stamp, RunSummary]] = {}
        self._sorted: list[RunSummary] = []
        self._checked = 0.0
        self._unsorted = True
        self._lock = threading.Lock()
        self._saving = threading.Lock()

    # -- kept between starts ---------------------------------------------------------------
    def _load(self) -> None:
        try:
            data = json.loads((self.runs_dir / CACHE).read_text("utf-8"))
        except (OSError, ValueError):
            return
        for name, item in (data.get("runs") or {}).items() if isinstance(data, dict) else ():
            try:
                stamp: _Stamp = tuple(item["stamp"])
                fields = {**item["summary"], "path": self.runs_dir / name}
                self._entries[name] = (stamp, RunSummary(**fields))
            except (KeyError, TypeError, ValueError):
                continue

    def _save(self, entries: dict[str, tuple[_Stamp, RunSummary]]) -> None:
        runs: dict[str, Any] = {}
        for name, (stamp, summary) in entries.items():
            fields = {key: getattr(summary, key) for key in _KEPT}
            runs[name] = {"stamp": list(stamp), "summary": fields}
        path = self.runs_dir / CACHE
        tmp = path.with_name(f".index.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"runs": runs}), "utf-8")
            os.replace(tmp, path)
        except OSError as exc:  # a read-only runs folder: the console still lists it
            log.debug("cannot keep the runs index: %s", exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def warm(self) -> threading.Thread:
        """Read the kept index and the folder in a background thread (the console's start)."""

        def work() -> None:
            with self._lock:
                if not self._entries:
                    self._load()
            self.refresh(force=True)

        thread = threading.Thread(target=work, name="vnc-use-console-index", daemon=True)
        thread.start()
        return thread

    def refresh(self, *, force: bool = False) -> list[RunSummary]:
        """The summaries, newest first, re-read where a run changed (the index is kept on disk
        after the answer: whoever waits for the list does not wait for that)."""
        runs, changed = self._refresh(force)
        if changed is not None:
            with self._saving:
                self._save(changed)
        return runs

    def _refresh(
        self, force: bool
    ) -> tuple[list[RunSummary], dict[str, tuple[_Stamp, RunSummary]] | None]:
        with self._lock:
            if not force and time.monotonic() - self._checked < self.fresh_for:
                return self._sorted, None
            entries: dict[str, tuple[_Stamp, RunSummary]] = {}
            changed = False
            try:
                listing = list(os.scandir(self.runs_dir))
            except OSError:
                listing = []
            for item in listing:
                if not item.is_dir(follow_symlinks=False):
                    continue
                stamp = _stamp(item.path)
                if stamp is None:
                    continue
                kept = self._entries.get(item.name)
                if kept is not None and kept[0] == stamp:
                    entries[item.name] = kept
                    continue
                summary = summarize(Path(item.path))
                if summary is not None:
                    entries[item.name] = (stamp, summary)
                    changed = True
            changed = changed or len(entries) != len(self._entries)
            if changed or self._unsorted:
                self._unsorted = False
                self._sorted = sorted(
                    (s for _, s in entries.values()),
                    key=lambda s: (s.started or 0.0, s.thread_id),
                    reverse=True,
                )
            self._entries = entries
            self._checked = time.monotonic()
            return self._sorted, (entries if changed else None)

    def get(self, thread_id: str) -> RunSummary | None:
        """The summary of one run, read now (None: no such run)."""
        path = self.runs_dir / thread_id
        return summarize(path) if path.is_dir() else None

    def page(self, *, status: str | None = None, offset: int = 0, limit: int = 50) -> Page:
        """``limit`` runs from ``offset``, newest first, only those of ``status`` if given."""
        runs = self.refresh()
        counts: dict[str, int] = {}
        for s in runs:
            counts[s.status] = counts.get(s.status, 0) + 1
        chosen = [s for s in runs if s.status == status] if status else runs
        return Page(chosen[offset : offset + limit], len(chosen), offset, limit, counts)
