"""The runs list of a runs folder, kept fresh cheaply: a summary per run folder, re-read only
when its ``events.jsonl`` or ``run.json`` changed.

:func:`vnc_use.record.runs.summarize` reads a run's whole event file; a folder of 10,000 runs
takes seconds that way. :class:`RunIndex` keeps each summary with the size and modification
time of the two files it came from, so a refresh costs two ``stat`` calls per run and one read
per run that changed since. A refresh runs at most every ``fresh_for`` seconds; a page of the
list is then a slice of the sorted summaries.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vnc_use.record.runs import RunSummary, summarize

__all__ = ["Page", "RunIndex"]

_Stamp = tuple[int, int, int, int]


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
        self._lock = threading.Lock()

    def refresh(self, *, force: bool = False) -> list[RunSummary]:
        """The summaries, newest first, re-read where a run changed."""
        with self._lock:
            if not force and time.monotonic() - self._checked < self.fresh_for:
                return self._sorted
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
            if changed or len(entries) != len(self._entries):
                self._sorted = sorted(
                    (s for _, s in entries.values()),
                    key=lambda s: (s.started or 0.0, s.thread_id),
                    reverse=True,
                )
            self._entries = entries
            self._checked = time.monotonic()
            return self._sorted

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
