"""What a run's events say for the runs list, folded as they are written: ``summary.json``.

:class:`Tally` folds events one at a time into what :func:`vnc_use.record.runs.summarize`
shows (status, steps, cost, last event, ...). The run folder keeps its tally up to date as it
appends each event and writes it next to ``events.jsonl`` as ``summary.json``, with the size
of ``events.jsonl`` it covers (``events_bytes``): once a step, and at each event that changes
the run's status (:meth:`vnc_use.record.folder.RunFolder.keep_summary`), so a finished or
paused run's file is current. A reader trusts the file only when that size is the event
file's size now: a run in the middle of a step, a run folder written by an older version (no
``summary.json``), events appended by anything else, a crash between the two writes: all read
the events instead, as before. Listing a run then reads two small files instead of its whole
event file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["EVENTS", "SUMMARY", "Tally", "load"]

EVENTS = "events.jsonl"
SUMMARY = "summary.json"
_VERSION = 1

_END_EVENTS = frozenset({"run_ended", "run_paused"})
# events that mean the run went on after it last ended or paused
_ACTIVITY = frozenset(
    {"resumed", "approved", "denied", "model_request", "action", "observe", "handed_back"}
)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass
class Tally:
    """The events of a run so far, folded (see the module's doc)."""

    task: str = ""
    """The task of the first ``run_started`` event that names one."""
    started: float | None = None
    """The time of the last ``run_started`` event."""
    status: str = "unfinished"
    steps: int = 0
    final_text: str = ""
    error: str | None = None
    last_event: float | None = None
    cost_usd: float | None = None
    priced: bool = False
    """True when an event recorded the run's cost (then ``cost_usd`` is it)."""
    events_bytes: int = 0
    """How much of ``events.jsonl`` the tally covers."""

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event in."""
        kind = event.get("event")
        ts = _number(event.get("ts"))
        if ts is not None:
            self.last_event = ts
        if kind == "run_started":
            self.task = self.task or str(event.get("task", ""))
            self.started = ts
        elif kind == "action":
            self.steps = max(self.steps, _int(event.get("step")))
        if kind == "model_response" and "run_cost_usd" in event:
            self.cost_usd, self.priced = _number(event.get("run_cost_usd")), True
        elif kind in _END_EVENTS:
            self.status = str(event.get("status", "unfinished"))
            self.steps = _int(event.get("steps")) or self.steps
            self.final_text = str(event.get("final_text") or "")
            error = event.get("error")
            self.error = str(error) if error else None
        elif kind in _ACTIVITY:
            self.status = "unfinished"

    def add_lines(self, data: bytes) -> None:
        """Fold the events of a piece of ``events.jsonl`` (a line cut short is skipped)."""
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                self.add(record)
        self.events_bytes += len(data)

    def write(self, run_dir: Path) -> None:
        """Write the tally as the folder's ``summary.json`` (whole, then renamed)."""
        path = run_dir / SUMMARY
        tmp = path.with_name(f".{SUMMARY}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": _VERSION, **asdict(self)}), "utf-8")
        os.replace(tmp, path)

    @classmethod
    def of_file(cls, run_dir: Path, upto: int | None = None) -> Tally:
        """The tally of ``events.jsonl`` (its first ``upto`` bytes if given), read now."""
        tally = cls()
        try:
            with (run_dir / EVENTS).open("rb") as fh:
                data = fh.read() if upto is None else fh.read(upto)
        except OSError:
            return tally
        tally.add_lines(data)
        return tally


def _kept(run_dir: Path, size: int) -> Tally | None:
    """``summary.json`` when it covers exactly ``size`` bytes of events, else None."""
    try:
        with open(os.path.join(run_dir, SUMMARY), "rb") as fh:  # no Path: 10,000 runs list
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("version", None) != _VERSION:
        return None
    known = {f.name for f in fields(Tally)}
    try:
        tally = Tally(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None
    return tally if tally.events_bytes == size else None


def load(run_dir: Path) -> Tally | None:
    """The tally of a run folder's events: its ``summary.json`` when that is current, else
    its events read now; None when it has no ``events.jsonl``."""
    try:
        size = os.stat(os.path.join(run_dir, EVENTS)).st_size
    except OSError:
        return None
    kept = _kept(run_dir, size)
    return kept if kept is not None else Tally.of_file(run_dir)
