"""A run folder read back as a story: the steps a person reads in the report and the GIF.

:func:`load_run` turns ``run.json`` and ``events.jsonl`` into a :class:`RunView`: for every
executed, denied or pending call, the screenshot the model saw when it proposed the call (the
previous action's screenshot, or the first observation), the screenshot after it, the model's
turn that proposed it, the person's decision, timings and the marker to draw.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vnc_use.actions import TABLES, call_pixels
from vnc_use.desktops.png import screen_size_of
from vnc_use.record import run_record
from vnc_use.record.report.describe import is_sensitive
from vnc_use.record.runs import read_events
from vnc_use.status import RunStatus

__all__ = [
    "Decision",
    "Divergence",
    "ModelTurn",
    "Note",
    "Original",
    "RunView",
    "StepView",
    "load_run",
    "png_size",
]

StepKind = Literal["action", "denied", "pending"]
_BARE_NOTES = frozenset({"resumed", "reconnected", "interrupted"})
"""Events worth a line in the report even without a message (others need one)."""


def png_size(path: Path) -> tuple[int, int] | None:
    """Width and height from a PNG's header (without decoding it), or None."""
    try:
        with path.open("rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


@dataclass
class ModelTurn:
    """One answer of the model."""

    n: int
    ts: float | None
    latency_ms: float | None
    text: str
    calls: list[dict[str, Any]]
    usage: dict[str, Any] | None
    finish_reason: str | None
    replayed: bool = False
    """A replay's turn (the recorded action, no model asked)."""
    cost_usd: float | None = None
    """What this call cost (None: unknown, or not recorded)."""
    run_cost_usd: float | None = None
    """The run's cost after this call (None: unknown, or not recorded)."""
    priced: bool = False
    """True when the run recorded the call's cost (runs of older versions did not)."""

    @property
    def total_tokens(self) -> int | None:
        """Total tokens of the call, when the API reported them (every provider's names)."""
        usage = self.usage or {}
        for key in ("total_token_count", "totalTokenCount", "total_tokens"):
            total = usage.get(key)
            if isinstance(total, (int, float)):
                return int(total)
        parts = [
            usage.get(k)
            for k in (
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            )
        ]
        counted = [int(p) for p in parts if isinstance(p, (int, float))]
        return sum(counted) if counted else None


@dataclass
class Decision:
    """A person's (or the policy's) answer to an action the model asked to have confirmed."""

    approved: bool
    by: str
    ts: float | None
    explanation: str


@dataclass
class Original:
    """A replayed step's original: the recorded run's step and its screenshot after it."""

    step: int
    after: str | None
    difference: float | None
    """Percent of the screen that differed from the recording before the step (None: not
    compared)."""


@dataclass
class Divergence:
    """Where a replay found the screen not as recorded: both screens, side by side."""

    step: int
    """The replay's step that was not performed."""
    original_step: int
    expected: str | None
    actual: str | None
    difference: float | None
    tolerance: float | None
    ts: float | None
    healed_by: str | None = None
    """The model the rest of the task went to (``--heal``), else None: the replay stopped."""


@dataclass
class StepView:
    """One call: executed (``action``), refused (``denied``) or waiting (``pending``)."""

    kind: StepKind
    step: int
    name: str
    args: dict[str, Any]
    pixels: dict[str, int]
    before: str | None
    """sha256 of the screenshot the model saw when it proposed this call."""
    after: str | None = None
    """sha256 of the screenshot taken after it ran."""
    size: tuple[int, int] | None = None
    """The size of the screenshot image (markers are drawn in its pixels)."""
    screen_size: tuple[int, int] | None = None
    """The real screen size ``pixels`` refer to; larger than ``size`` when the screenshot was
    downscaled for the model."""
    ts: float | None = None
    duration_ms: float | None = None
    started: float | None = None
    """Wall-clock time the action began."""
    pressed_at: float | None = None
    """Wall-clock time of the action's first button or key press (where the video shows it:
    the frame with its click's ring); None for an action without one and for older runs."""
    error: str | None = None
    note: str | None = None
    stall: str | None = None
    """Stall detection's note, on the step where a stall was detected (sent to the model)."""
    sensitive: bool = False
    turn: ModelTurn | None = None
    first_of_turn: bool = True
    """False for the 2nd, 3rd ... call of one model answer (its text is shown once)."""
    decision: Decision | None = None
    explanation: str | None = None
    """Why the model asked for confirmation (pending and denied calls)."""
    original: Original | None = None
    """For a replayed step: the recorded step it repeats."""


@dataclass
class Note:
    """Anything else worth a line in the story: errors, resumes, pauses, the final answer."""

    kind: str
    ts: float | None
    text: str
    turn: ModelTurn | None = None


@dataclass
class RunView:
    """Everything the report shows about one run."""

    path: Path
    thread_id: str
    task: str
    settings: dict[str, Any]
    status: str = "unfinished"
    started: float | None = None
    ended: float | None = None
    final_text: str = ""
    error: str | None = None
    steps_done: int = 0
    pending_call: dict[str, Any] | None = None
    human: dict[str, Any] | None = None
    """While ``awaiting_human``: who asked for a person, the model's question, the holder."""
    last_shot: str | None = None
    """sha256 of the last screenshot of the run (what the screen showed at its end)."""
    items: list[StepView | Note | Divergence] = field(default_factory=list)
    turns: list[ModelTurn] = field(default_factory=list)

    @property
    def steps(self) -> list[StepView]:
        """The calls, in order."""
        return [i for i in self.items if isinstance(i, StepView)]

    @property
    def model_turns(self) -> list[ModelTurn]:
        """The answers of a model (a replay's own turns left out)."""
        return [t for t in self.turns if not t.replayed]

    @property
    def total_tokens(self) -> int | None:
        """Tokens over all model calls, when the API reported them."""
        counts = [t.total_tokens for t in self.model_turns if t.total_tokens is not None]
        return sum(counts) if counts else None

    @property
    def cost_usd(self) -> float | None:
        """What the run cost (None: unknown or not recorded): run.json's figure, else the
        last model answer's running total."""
        recorded = self.settings.get("cost_usd")
        if isinstance(recorded, (int, float)):
            return float(recorded)
        priced = [t for t in self.turns if t.priced]
        return priced[-1].run_cost_usd if priced else None

    @property
    def priced(self) -> bool:
        """True when the run recorded its cost (runs of older versions did not)."""
        return "cost_usd" in self.settings or any(t.priced for t in self.turns)

    @property
    def model_ms(self) -> float:
        """Time spent waiting for the model, over all calls."""
        return sum(t.latency_ms or 0.0 for t in self.model_turns)

    def screenshot(self, sha: str | None) -> Path | None:
        """The file of a screenshot digest, if it is there."""
        if not sha:
            return None
        path = self.path / "screenshots" / f"{sha}.png"
        return path if path.exists() else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


class _Reader:
    """Walks the events once, keeping what the next step needs to know."""

    def __init__(self, view: RunView) -> None:
        self.view = view
        self.shot: str | None = None
        self.size: tuple[int, int] | None = None
        self.turn: ModelTurn | None = None
        self.used = 0  # calls of the current turn already accounted for
        self.decision: Decision | None = None
        self.paused: dict[str, Any] | None = None
        self.original: Original | None = None
        self.stall: str | None = None  # stall detection's note for the next action
        # a replay's turns are its own until the model takes over (--heal)
        self.replaying = isinstance(view.settings.get("replay"), dict)

    def _size_of(self, sha: str | None) -> tuple[int, int] | None:
        path = self.view.screenshot(sha)
        return (png_size(path) if path else None) or self.size

    def _screen_of(self, sha: str | None) -> tuple[int, int] | None:
        """The real screen size a screenshot shows (its ``Screen-Size`` chunk)."""
        path = self.view.screenshot(sha)
        try:
            return screen_size_of(path.read_bytes()) if path else None
        except (OSError, ValueError):
            return None

    def _next_call(self) -> dict[str, Any]:
        calls = self.turn.calls if self.turn else []
        call = calls[self.used] if self.used < len(calls) else {}
        self.used += 1
        return call

    def feed(self, e: dict[str, Any]) -> None:
        kind = str(e.get("event", ""))
        handler: Callable[[dict[str, Any]], None] | None = getattr(self, "on_" + kind, None)
        if handler is not None:
            handler(e)
        else:
            text = str(e.get("message") or e.get("reason") or e.get("decision") or "")
            if text or kind in _BARE_NOTES:
                self.view.items.append(Note(kind, _num(e.get("ts")), text))

    def on_run_started(self, e: dict[str, Any]) -> None:
        v = self.view
        v.task = v.task or str(e.get("task", ""))
        v.started = v.started or _num(e.get("ts"))

    def on_observe(self, e: dict[str, Any]) -> None:
        self.shot = e.get("screenshot") or self.shot
        w, h = e.get("width"), e.get("height")
        if isinstance(w, int) and isinstance(h, int):
            self.size = (w, h)

    def on_model_response(self, e: dict[str, Any]) -> None:
        turn = ModelTurn(
            n=int(e.get("n") or len(self.view.turns) + 1),
            ts=_num(e.get("ts")),
            latency_ms=_num(e.get("latency_ms")),
            text=str(e.get("text") or ""),
            calls=[c for c in e.get("calls") or [] if isinstance(c, dict)],
            usage=e.get("usage") if isinstance(e.get("usage"), dict) else None,
            finish_reason=e.get("finish_reason"),
            replayed=self.replaying,
            cost_usd=_num(e.get("cost_usd")),
            run_cost_usd=_num(e.get("run_cost_usd")),
            priced="cost_usd" in e,
        )
        self.view.turns.append(turn)
        self.turn, self.used = turn, 0
        if turn.replayed and not turn.calls:  # the replay's end (diverged: its own item)
            if e.get("stop") != "diverged":
                self.view.items.append(Note("replay", turn.ts, turn.text))
        elif not turn.calls:
            self.view.items.append(Note("answer", turn.ts, turn.text, turn))

    def on_replay_step(self, e: dict[str, Any]) -> None:
        step = e.get("original_step")
        self.original = Original(
            int(step) if isinstance(step, int) else 0,
            e.get("original_after"),
            _num(e.get("difference")),
        )

    def on_diverged(self, e: dict[str, Any]) -> None:
        self._divergence(e, None)

    def on_healed(self, e: dict[str, Any]) -> None:
        self.replaying = False
        if self.turn is not None:  # the turn that took over was the model's
            self.turn.replayed = False
        self._divergence(e, str(e.get("model") or "the model"))

    def _divergence(self, e: dict[str, Any], healed_by: str | None) -> None:
        done = len([i for i in self.view.items if isinstance(i, StepView)])
        step = e.get("original_step")
        self.view.items.append(
            Divergence(
                step=done + 1,
                original_step=int(step) if isinstance(step, int) else 0,
                expected=e.get("expected"),
                actual=e.get("actual"),
                difference=_num(e.get("difference")),
                tolerance=_num(e.get("tolerance")),
                ts=_num(e.get("ts")),
                healed_by=healed_by,
            )
        )

    def on_stall_detected(self, e: dict[str, Any]) -> None:
        self.stall = str(e.get("note") or "a stall")

    def on_approved(self, e: dict[str, Any]) -> None:
        self.decision = Decision(
            True, str(e.get("by", "person")), _num(e.get("ts")), str(e.get("explanation", ""))
        )

    def on_action(self, e: dict[str, Any]) -> None:
        call = self._next_call()
        before = self.shot
        after = e.get("screenshot")
        size = e.get("screen_size")
        reported = (
            (int(size[0]), int(size[1])) if isinstance(size, list) and len(size) == 2 else None
        )
        args = e.get("args") if isinstance(e.get("args"), dict) else call.get("args", {})
        self.view.items.append(
            StepView(
                kind="action",
                step=int(e.get("step") or 0),
                name=str(e.get("name", call.get("name", "?"))),
                args=dict(args or {}),
                pixels=dict(e.get("pixels") or {}),
                before=before,
                after=after,
                size=self._size_of(before) or reported,
                screen_size=reported or self._screen_of(before),
                ts=_num(e.get("ts")),
                duration_ms=_num(e.get("duration_ms")),
                started=_num(e.get("started")),
                pressed_at=_num(e.get("pressed_at")),
                error=e.get("error"),
                note=e.get("note"),
                stall=self.stall,
                sensitive=is_sensitive(e),
                turn=self.turn,
                first_of_turn=self.used == 1,
                decision=self.decision if e.get("approved") else None,
                original=self.original,
            )
        )
        self.stall = None
        self.decision = None
        self.original = None
        self.shot = after or self.shot
        self.size = reported or self.size

    def on_run_paused(self, e: dict[str, Any]) -> None:
        self._end(e)
        pending = e.get("pending_call")
        self.paused = pending if isinstance(pending, dict) else None
        name = self.paused.get("name", "an action") if self.paused else "an action"
        human = e.get("human") if isinstance(e.get("human"), dict) else None
        self.view.human = human
        if human and human.get("asked_by") == "model":
            text = f"paused: the model asks for a person: {human.get('question') or ''}"
        elif human:
            text = f"paused: a person has the desktop ({human.get('holder') or 'a person'})"
        else:
            text = f"paused: waiting for a person to approve {name}"
        self.view.items.append(Note("paused", _num(e.get("ts")), text))

    def on_taken_over(self, e: dict[str, Any]) -> None:
        who = e.get("holder") or "a person"
        self.view.items.append(Note("person", _num(e.get("ts")), f"{who} took the desktop over"))

    def on_person_input(self, e: dict[str, Any]) -> None:
        where = f"({e.get('x')}, {e.get('y')})"
        self.view.items.append(Note("person", _num(e.get("ts")), f"the person clicked at {where}"))

    def on_handed_back(self, e: dict[str, Any]) -> None:
        note = f"; their note: {e['note']}" if e.get("note") else ""
        if e.get("asked_by") == "model":
            text = f"a person answered the model{note}"
        else:
            seconds = float(e.get("seconds") or 0)
            clicks, keys = int(e.get("clicks") or 0), int(e.get("keys") or 0)
            text = (
                f"a person had control, {seconds:.0f} s ({clicks} clicks, {keys} key presses; "
                f"typed text is never recorded){note}"
            )
        self.view.items.append(Note("person", _num(e.get("ts")), text))

    def on_denied(self, e: dict[str, Any]) -> None:
        call = self._next_call()
        pending = self.paused or {}
        args = dict(pending.get("args") or call.get("args") or {})
        before = pending.get("screenshot") or self.shot
        size = self._size_of(before)
        screen = _size_pair(pending.get("screen_size")) or self._screen_of(before) or size
        self.view.items.append(
            StepView(
                kind="denied",
                step=int(e.get("step") or pending.get("step") or 0),
                name=str(e.get("name") or pending.get("name") or call.get("name", "?")),
                args=args,
                pixels=dict(pending.get("pixels") or call_pixels(args, screen, TABLES)),
                before=before,
                size=size,
                screen_size=screen,
                ts=_num(e.get("ts")),
                sensitive=is_sensitive(pending) or is_sensitive(call),
                turn=self.turn,
                first_of_turn=self.used == 1,
                decision=Decision(
                    False,
                    str(e.get("by", "person")),
                    _num(e.get("ts")),
                    str(e.get("explanation") or e.get("reason") or ""),
                ),
                explanation=str(e.get("explanation") or e.get("reason") or "") or None,
            )
        )
        self.paused = None

    def on_run_ended(self, e: dict[str, Any]) -> None:
        self._end(e)
        self.paused = None

    def _end(self, e: dict[str, Any]) -> None:
        v = self.view
        v.status = str(e.get("status", v.status))
        v.ended = _num(e.get("ts"))
        v.final_text = str(e.get("final_text") or "")
        v.error = e.get("error")
        v.steps_done = int(e.get("steps") or v.steps_done)
        v.pending_call = e.get("pending_call") if isinstance(e.get("pending_call"), dict) else None

    def finish(self) -> None:
        v = self.view
        if v.status == RunStatus.AWAITING_APPROVAL and v.pending_call:
            p = v.pending_call
            args = dict(p.get("args") or {})
            before = p.get("screenshot") or self.shot
            size = self._size_of(before)
            screen = _size_pair(p.get("screen_size")) or self._screen_of(before) or size
            v.items.append(
                StepView(
                    kind="pending",
                    step=int(p.get("step") or 0),
                    name=str(p.get("name", "?")),
                    args=args,
                    pixels=dict(p.get("pixels") or call_pixels(args, screen, TABLES)),
                    before=before,
                    size=size,
                    screen_size=screen,
                    sensitive=is_sensitive(p),
                    turn=self.turn,
                    first_of_turn=self.used == 0,
                    explanation=str(p.get("explanation") or "") or None,
                )
            )


def _size_pair(value: Any) -> tuple[int, int] | None:
    """``[w, h]`` from an event or an approval request, as a pair of ints."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        w, h = value
        if isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0:
            return w, h
    return None


def load_run(run_dir: Path, redact: Callable[[Any], Any] | None = None) -> RunView:
    """Read a run folder into a :class:`RunView` (every value passed through ``redact``)."""
    record = run_record.load(run_dir)
    settings = record.settings() if record is not None else {}
    events: Iterable[dict[str, Any]] = read_events(run_dir)
    if redact is not None:
        settings = redact(settings)
        events = (redact(e) for e in events)
    view = RunView(
        path=run_dir,
        thread_id=str(settings.get("thread_id", run_dir.name)),
        task=str(settings.get("task", "")),
        settings=settings if isinstance(settings, dict) else {},
        started=_num(settings.get("started")),
    )
    reader = _Reader(view)
    for event in events:
        reader.feed(event)
    reader.finish()
    view.last_shot = reader.shot
    return view
