"""Run history: what ``vnc-use runs`` lists and ``vnc-use show`` / ``report`` open.

Everything here reads the run folders only (``run.json``, and ``summary.json`` where it is
current, else ``events.jsonl``: :mod:`vnc_use.record.tally`): listing runs never opens the
checkpoint database, let alone loads a checkpoint, so it stays fast however many and however
long the runs are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.record import run_record
from vnc_use.record.folder import check_thread_id
from vnc_use.record.tally import Tally
from vnc_use.record.tally import load as tally_of

__all__ = ["RunSummary", "list_runs", "read_events", "run_folder", "summarize"]


@dataclass(frozen=True)
class RunSummary:
    """One run as the history lists it."""

    thread_id: str
    task: str
    status: str
    """The status of its last end or pause; ``unfinished`` when it went on after that (it is
    running now, or its process died: ``vnc-use resume ID``)."""
    steps: int
    started: float | None
    """Unix time of its start."""
    last_event: float | None
    """Unix time of its last event."""
    path: Path
    final_text: str = ""
    error: str | None = None
    source_thread: str | None = None
    """For a replay (``vnc-use replay``): the thread id of the run it replays."""
    cost_usd: float | None = None
    """What its model calls cost so far (None: unknown, or a run of an older version)."""
    priced: bool = False
    """True when the run recorded its cost (runs of older versions did not)."""
    provider: str | None = None
    model: str | None = None
    desktop: str | None = None
    """The desktop its record names (a VNC address, an RDP server's label, a class name)."""

    @property
    def duration_s(self) -> float | None:
        """Seconds from the start to the last event (time spent paused included)."""
        if self.started is None or self.last_event is None:
            return None
        return max(0.0, self.last_event - self.started)


def read_events(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The events of a run folder, in order (a line cut short by a crash is skipped)."""
    path = run_dir / "events.jsonl"
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record


def _settings(run_dir: Path) -> dict[str, Any]:
    record = run_record.load(run_dir)
    return record.settings() if record is not None else {}


def summarize(run_dir: Path) -> RunSummary | None:
    """The summary of one run folder, or None if it is not one."""
    settings = _settings(run_dir)
    if not settings and not (run_dir / "events.jsonl").exists():
        return None
    tally = tally_of(run_dir) or Tally()
    task = str(settings.get("task", "")) or tally.task
    started = settings.get("started")
    if not isinstance(started, (int, float)):
        started = tally.started
    cost: Any = tally.cost_usd if tally.priced else settings.get("cost_usd")
    priced = tally.priced or "cost_usd" in settings
    status, steps, final_text, error = tally.status, tally.steps, tally.final_text, tally.error
    last_ts = tally.last_event
    return RunSummary(
        thread_id=str(settings.get("thread_id", run_dir.name)),
        task=task,
        status=status,
        steps=steps,
        started=float(started) if isinstance(started, (int, float)) else None,
        last_event=last_ts,
        path=run_dir,
        final_text=final_text,
        error=str(error) if error else None,
        source_thread=_source_thread(settings),
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
        priced=priced,
        provider=_text(settings.get("provider")),
        model=_text(settings.get("model")),
        desktop=_desktop_of(settings),
    )


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _desktop_of(settings: dict[str, Any]) -> str | None:
    """The desktop a run's record names."""
    rdp = settings.get("rdp")
    if isinstance(rdp, dict) and rdp.get("label"):
        return str(rdp["label"])
    return _text(settings.get("desktop")) or _text(settings.get("vnc_server"))


def _source_thread(settings: dict[str, Any]) -> str | None:
    """The run a replay replays (``run.json``'s ``replay.source_thread``), else None."""
    replay = settings.get("replay")
    source = replay.get("source_thread") if isinstance(replay, dict) else None
    return str(source) if source else None


def list_runs(runs_dir: str | Path) -> list[RunSummary]:
    """Every run under ``runs_dir``, newest first."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = [s for p in root.iterdir() if p.is_dir() and (s := summarize(p)) is not None]
    return sorted(found, key=lambda s: (s.started or 0.0, s.thread_id), reverse=True)


def run_folder(runs_dir: str | Path, thread_id: str) -> Path:
    """The folder of run ``thread_id``; a :class:`ConfigError` when there is none."""
    try:
        check_thread_id(thread_id)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    path = Path(runs_dir) / thread_id
    if not (path / "events.jsonl").exists() and not (path / "run.json").exists():
        raise ConfigError(f"no run {thread_id!r} in {runs_dir} (see 'vnc-use runs')")
    return path
