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

The journal is ``journal.jsonl`` in the run folder, one JSON object per line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any


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


def call_key(model_call: int, call_index: int) -> str:
    """The journal key of call ``call_index`` of the answer to model call ``model_call``."""
    return f"{model_call}:{call_index}"


class Journal:
    """An append-only, fsynced record of the actions sent to the desktop."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _append(self, record: dict[str, Any]) -> None:
        # default=str: a custom function's result that is not quite JSON is kept as text
        # rather than failing after the function ran
        line = json.dumps({"ts": round(time.time(), 3), **record}, ensure_ascii=False, default=str)
        line += "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every record (of one call when ``key`` is given), oldest first."""
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a crash mid-write: it never completed
                continue
            if key is None or record.get("key") == key:
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

    def dispatch_count(self, key: str) -> int:
        """How many times the action was sent (more than 1 only after a recorded decision)."""
        return sum(1 for r in self.records(key) if r.get("state") == "dispatched")
