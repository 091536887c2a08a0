"""A recorded run read back as the actions to replay.

A run says what was performed: its journal (in the checkpoint database) has a ``done`` record
for every action the desktop is known to have received (a denied call never reaches it, a
refused turn never gets there, an action whose outcome is unknown has no ``done``), and
``events.jsonl`` has each step's ``action`` event with the call (0-999 grid coordinates,
sensitive text as its ``{{name}}`` placeholder, never the value), the real screen size and the
screenshot after it. Both are written by every provider alike, so a run replays whoever recorded
it.

The screenshot *before* a step is the one the model saw when it proposed it: the screenshot
after the previous step, or the first observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnc_use.actions import TABLES, ActionError, ValidatedAction
from vnc_use.errors import ConfigError
from vnc_use.record import run_record
from vnc_use.record.runs import read_events
from vnc_use.store.journal import Journal, import_jsonl

__all__ = ["RecordedStep", "Recording", "load_recording", "validate_action"]

_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")


def validate_action(name: str, args: Any) -> ValidatedAction | ActionError:
    """Check a recorded call against every action table (a run of any model family)."""
    result: ValidatedAction | ActionError = ActionError(name, "unknown", f"unknown {name!r}")
    for table in TABLES:
        result = table.validate(name, args)
        if isinstance(result, ValidatedAction):
            return result
    return result


@dataclass(frozen=True)
class RecordedStep:
    """One action the recorded run performed."""

    step: int
    """Its step number in the recorded run."""
    name: str
    args: dict[str, Any]
    before: str | None
    """sha256 of the screenshot the recorded run had just before it (None: none was taken)."""
    after: str | None
    screen_size: tuple[int, int] | None
    model_ms: float | None
    """How long the recorded model took to propose it (first call of its turn), else None."""


@dataclass
class Recording:
    """The recorded run: its task, where it lives and its performed actions in order."""

    thread_id: str
    path: Path
    task: str
    settings: dict[str, Any]
    steps: list[RecordedStep] = field(default_factory=list)

    def screenshot(self, sha: str) -> bytes:
        """A PNG of the recorded run."""
        path = self.path / "screenshots" / f"{sha}.png"
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"run {self.thread_id!r} lacks its screenshot {path} ({exc.strerror}): it cannot "
                "be compared; replay with --tolerance off, or restore the run folder"
            ) from None

    def screenshots(self) -> list[str]:
        """The digests of the screens before and after each step, once each."""
        found = [sha for s in self.steps for sha in (s.before, s.after) if sha]
        return list(dict.fromkeys(found))

    def start_index(self, from_step: int) -> int:
        """Index of the first performed step numbered ``from_step`` or later."""
        for i, s in enumerate(self.steps):
            if s.step >= from_step:
                return i
        last = self.steps[-1].step if self.steps else 0
        raise ConfigError(
            f"--from-step {from_step}: run {self.thread_id!r} performed no step from there "
            f"(its last performed step is {last})"
        )

    def sensitive_names(self, start: int = 0) -> set[str]:
        """The ``{{name}}`` placeholders its typed text uses (from step index ``start``)."""
        found: set[str] = set()
        for s in self.steps[start:]:
            found.update(_PLACEHOLDER.findall(json.dumps(s.args)))
        return found


def _done_steps(path: Path, journal: Journal | None) -> set[int]:
    """The steps the journal marks done: ``journal`` is the recorded run's (where its
    checkpoints are); without one, the default storage of its runs folder
    (``VNC_USE_DATABASE_URL``, else ``vnc-use.sqlite``)."""
    storage = None
    if journal is None:
        from vnc_use import config
        from vnc_use.store.storage import open_storage

        storage = open_storage(config.database_url(), path.parent)
        journal = storage.journal(path.name)
    try:
        import_jsonl(journal, path / "journal.jsonl")  # a run of an older version
        return {
            int(r["step"])
            for r in journal.records()
            if r.get("state") == "done" and isinstance(r.get("step"), int)
        }
    finally:
        if storage is not None:
            storage.close()


def _size(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


class _Reader:
    """Walks the recorded events once."""

    def __init__(self, done: set[int]) -> None:
        self.done = done
        self.shot: str | None = None
        self.new_turn_ms: float | None = None
        self.steps: dict[int, RecordedStep] = {}

    def feed(self, e: dict[str, Any]) -> None:
        kind = e.get("event")
        if kind == "observe":
            self.shot = e.get("screenshot") or self.shot
        elif kind == "model_response":
            latency = e.get("latency_ms")
            self.new_turn_ms = float(latency) if isinstance(latency, (int, float)) else 0.0
        elif kind == "action":
            self.action(e)

    def action(self, e: dict[str, Any]) -> None:
        step, name = e.get("step"), str(e.get("name", ""))
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        before, after = self.shot, e.get("screenshot") or self.shot
        self.shot = after
        model_ms, self.new_turn_ms = self.new_turn_ms, None
        if not isinstance(step, int) or step not in self.done or step in self.steps:
            return  # not performed (denied, refused, an error, outcome unknown) or seen
        if isinstance(validate_action(name, args), ActionError):
            return  # a custom function, or a call that could not run
        self.steps[step] = RecordedStep(
            step, name, dict(args or {}), before, after, _size(e.get("screen_size")), model_ms
        )


def load_recording(
    runs_dir: str | Path, thread_id: str, journal: Journal | None = None
) -> Recording:
    """The run ``thread_id`` of ``runs_dir``, read for replay (``journal``: its action journal,
    see :func:`_done_steps`); a :class:`ConfigError` when it is not there or performed
    nothing."""
    from vnc_use.record.runs import run_folder

    path = run_folder(runs_dir, thread_id).resolve()
    record = run_record.load(path)
    settings = record.settings() if record is not None else {}
    reader = _Reader(_done_steps(path, journal))
    for event in read_events(path):
        reader.feed(event)
    task = str(settings.get("task") or "")
    recording = Recording(thread_id, path, task, settings, sorted_steps(reader.steps))
    if not recording.steps:
        raise ConfigError(f"run {thread_id!r} performed no action: there is nothing to replay")
    return recording


def sorted_steps(steps: dict[int, RecordedStep]) -> list[RecordedStep]:
    """The steps in the order they were performed."""
    return [steps[k] for k in sorted(steps)]
