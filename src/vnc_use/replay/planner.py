"""The replay planner: the recorded run's actions in the model's place, one per turn.

A replay is a run like any other: the same graph, journal, checkpoints, events and report;
only the planner differs. :class:`ReplayPlanner` answers each turn with the next recorded
action, after comparing the screen the last step left (the settled screenshot in the history)
with the screenshot the recorded run had at that point (:mod:`vnc_use.replay.compare`). Beyond
the tolerance it stops the run (``diverged``) before that action; with a ``healer`` (``--heal``)
it hands the rest of the task to that model instead.

It keeps no state of its own: which step comes next is read from the history (each of its
turns records the index it replayed), so a replay resumed in another process, after Ctrl-C or a
crash, goes on from the right step; the journal sees that no action runs twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vnc_use.actions import ActionError, ValidatedAction
from vnc_use.errors import ConfigError
from vnc_use.providers import history as records
from vnc_use.providers.base import HistoryRecord, LoadPng, Planner, Proposal, ProposedCall
from vnc_use.replay.compare import DEFAULT_TOLERANCE, Mask, difference, parse_tolerance
from vnc_use.replay.recording import RecordedStep, Recording, load_recording, validate_action

__all__ = [
    "PROVIDER",
    "SPEEDS",
    "ReplayOptions",
    "ReplayPlanner",
    "planner_from_run",
    "replay_planner_from_settings",
]

PROVIDER = "replay"
"""``run.json``'s ``provider`` of a replay."""
SPEEDS = ("fast", "recorded")

Speed = Literal["fast", "recorded"]


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay: ``tolerance`` in percent of the screen (None: never stop), ``speed``
    (``fast``: no waiting; ``recorded``: wait as long as the recorded model took before each
    of its turns), the first recorded step, masks (``WxH+X+Y`` in recorded pixels), heal."""

    tolerance: float | None = DEFAULT_TOLERANCE
    speed: Speed = "fast"
    from_step: int = 1
    masks: tuple[str, ...] = field(default_factory=tuple)
    heal: bool = False

    @classmethod
    def make(
        cls,
        tolerance: float | str | None = DEFAULT_TOLERANCE,
        speed: str = "fast",
        from_step: int = 1,
        masks: Sequence[str] = (),
        heal: bool = False,
    ) -> ReplayOptions:
        """Checked options; a one-line :class:`ConfigError` for a bad one."""
        if speed not in SPEEDS:
            raise ConfigError(f"speed {speed!r}: use fast or recorded")
        if from_step < 1:
            raise ConfigError(f"from_step must be 1 or more, got {from_step}")
        chosen: Speed = "recorded" if speed == "recorded" else "fast"
        return cls(parse_tolerance(tolerance), chosen, from_step, tuple(masks), heal)


def _turns(history: Sequence[HistoryRecord]) -> list[dict[str, Any]]:
    """The planner's own records among the history's model turns."""
    return [
        dict(t["content"])
        for t in history
        if t.get("turn", t.get("role")) == "model" and isinstance(t.get("content"), dict)
    ]


def _last_screen(history: Sequence[HistoryRecord]) -> tuple[str | None, Any]:
    """The last screenshot in the history (the settled screen now) and its screen size."""
    for turn in reversed(history):
        for r in reversed(turn.get("responses") or []):
            if r.get("screenshot"):
                return r["screenshot"], r.get("screen_size")
        if turn.get("screenshot"):
            return turn["screenshot"], turn.get("screen_size")
    return None, None


def _call_text(s: RecordedStep) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in s.args.items())
    return f"{s.name}({args})"


class ReplayPlanner:
    """A :class:`~vnc_use.providers.base.Planner` that replays a recorded run."""

    def __init__(
        self, recording: Recording, options: ReplayOptions, healer: Planner | None = None
    ) -> None:
        if options.heal and healer is None:
            raise ConfigError("heal needs a model to hand the task to")
        self.recording = recording
        self.options = options
        self.healer = healer if options.heal else None
        self.start = recording.start_index(options.from_step)
        screen = recording.steps[0].screen_size or (1000, 1000)
        self.masks = [Mask.parse(m, screen) for m in options.masks]

    # -- the Planner protocol ---------------------------------------------------------------
    @property
    def model(self) -> str:
        return PROVIDER

    def propose(
        self, history: Sequence[HistoryRecord], load_png: LoadPng, keep_screenshots: int
    ) -> Proposal:
        """The next recorded action, or the end of the replay (done, diverged, healed)."""
        turns = _turns(history)
        if any("healed" in t for t in turns):
            return self._heal(history, load_png, keep_screenshots)
        done = [t["replay"] for t in turns if isinstance(t.get("replay"), dict)]
        index = int(done[-1]["index"]) + 1 if done else self.start
        steps = self.recording.steps
        if index >= len(steps):
            text = f"Replayed {index - self.start} steps of run {self.recording.thread_id}."
            return _proposal([], text, "finished", None, None)
        step = steps[index]
        sha, size = _last_screen(history)
        diff = self._difference(step, sha, load_png)
        notice: dict[str, Any] = {
            "event": "replay_step",
            "original_step": step.step,
            "original_before": step.before,
            "original_after": step.after,
            "difference": None if diff is None else round(diff, 2),
            "tolerance": self.options.tolerance,
        }
        tolerance = self.options.tolerance
        if diff is not None and tolerance is not None and diff > tolerance:
            message = (
                f"the screen differs from the recording before original step {step.step} "
                f"({step.name}): {diff:.1f}% of the screen changed, tolerance {tolerance:g}%"
            )
            notice.update(event="diverged", expected=step.before, actual=sha)
            if self.healer is not None:
                notice["message"] = f"{message}; the rest of the task goes to the model"
                return self._begin_heal(index, notice, sha, size, load_png, keep_screenshots)
            message += "; nothing was performed from that step on"
            notice["message"] = message
            return _proposal([], "", "diverged", message, None, notice)
        if self.options.speed == "recorded" and step.model_ms:
            time.sleep(step.model_ms / 1000)
        call: ProposedCall = {
            "id": f"replay-{step.step}",
            "name": step.name,
            "args": dict(step.args),
            "safety": "none",
            "safety_explanation": None,
            "intent": None,
        }
        turn = {"replay": {"index": index, "step": step.step}}
        return _proposal([call], "", "calls", None, turn, notice)

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Recorded calls are checked against every action table (any model family); after
        healing, against the healer's."""
        if self.healer is not None:
            checked = self.healer.validate(name, args)
            if isinstance(checked, ValidatedAction):
                return checked
        return validate_action(name, args)

    def is_custom(self, name: str) -> bool:
        return self.healer.is_custom(name) if self.healer is not None else False

    def run_custom_function(self, call: ProposedCall) -> dict[str, Any]:
        if self.healer is not None:
            return self.healer.run_custom_function(call)
        return {"error": f"{call['name']} is not an action a replay can perform"}

    def check_ready(self) -> None:
        """Ready when the recording is there (and the healer is, with ``heal``)."""
        if self.healer is not None:
            self.healer.check_ready()

    def run_settings(self) -> dict[str, Any]:
        """What ``run.json`` keeps so that ``resume`` rebuilds this planner."""
        o = self.options
        return {
            "model": PROVIDER,
            "provider": PROVIDER,
            "replay": {
                "source_thread": self.recording.thread_id,
                "source_dir": str(self.recording.path),
                "tolerance": "off" if o.tolerance is None else o.tolerance,
                "speed": o.speed,
                "from_step": o.from_step,
                "masks": list(o.masks),
                "heal": o.heal,
                "heal_planner": self.healer.run_settings() if self.healer is not None else None,
            },
        }

    # -- healing -----------------------------------------------------------------------------
    def _difference(self, step: RecordedStep, sha: str | None, load_png: LoadPng) -> float | None:
        if self.options.tolerance is None or sha is None or step.before is None:
            return None
        return difference(self.recording.screenshot(step.before), load_png(sha), self.masks)

    def heal_text(self, index: int) -> str:
        """The task as handed to the model: the recorded task and the steps done so far."""
        done = self.recording.steps[self.start : index]
        lines = [f"{n}. {_call_text(s)}" for n, s in enumerate(done, 1)] or ["(none)"]
        return (
            f"{self.recording.task}\n\n"
            "A recording of this task was being replayed, and the screen no longer looks as "
            "recorded. Steps already done (0-999 grid coordinates):\n"
            + "\n".join(lines)
            + "\n\nContinue the task from the screen as it is now."
        )

    def _begin_heal(
        self,
        index: int,
        notice: dict[str, Any],
        sha: str | None,
        size: Any,
        load_png: LoadPng,
        keep_screenshots: int,
    ) -> Proposal:
        assert self.healer is not None
        start = {"index": index, "text": self.heal_text(index), "screenshot": sha, "size": size}
        first = records.task_turn(start["text"], sha, tuple(size) if size else None)
        proposal = self.healer.propose([first], load_png, keep_screenshots)
        notice.update(event="healed", model=self.healer.model)
        return _healed(proposal, start, notice)

    def _heal(
        self, history: Sequence[HistoryRecord], load_png: LoadPng, keep_screenshots: int
    ) -> Proposal:
        """A turn of the model after healing: its own history since it took over."""
        assert self.healer is not None
        at = next(
            i
            for i, t in enumerate(history)
            if isinstance(t.get("content"), dict) and "healed" in t["content"]
        )
        start = history[at]["content"]["healed"]
        size = start.get("size")
        own: list[HistoryRecord] = [
            records.task_turn(start["text"], start.get("screenshot"), tuple(size) if size else None)
        ]
        for t in history[at:]:
            content = t.get("content")
            if isinstance(content, dict) and "healed" in content:
                if content.get("content") is not None:
                    own.append(records.model_turn(content["content"]))
            else:
                own.append(t)
        return _healed(self.healer.propose(own, load_png, keep_screenshots), start, None)


def _healed(proposal: Proposal, start: dict[str, Any], notice: dict[str, Any] | None) -> Proposal:
    """The healer's proposal, its turn wrapped so the history says the model took over."""
    return Proposal(
        calls=proposal.calls,
        text=proposal.text,
        stop=proposal.stop,
        reason=proposal.reason,
        usage=proposal.usage,
        turn={"healed": start, "content": proposal.turn},
        request_json=proposal.request_json,
        response_json=proposal.response_json,
        thoughts=proposal.thoughts,
        stop_message=proposal.stop_message,
        notice=notice,
    )


def _proposal(
    calls: list[ProposedCall],
    text: str,
    stop: Any,
    message: str | None,
    turn: dict[str, Any] | None,
    notice: dict[str, Any] | None = None,
) -> Proposal:
    return Proposal(
        calls=calls,
        text=text,
        stop=stop,
        reason=stop,
        usage=None,
        turn=turn,
        request_json={"replay": True},
        response_json={"replay": turn, "stop": stop},
        stop_message=message,
        notice=notice,
    )


def replay_planner_from_settings(
    settings: Mapping[str, Any], healer: Planner | None = None
) -> ReplayPlanner:
    """The planner of a replay, rebuilt from its ``run.json`` (for ``resume``); the healer
    from the settings kept there unless one is given."""
    saved = settings.get("replay") or {}
    source = str(saved.get("source_dir") or "")
    if not source:
        raise ConfigError("this run's run.json does not say which run it replays")
    from pathlib import Path

    path = Path(source)
    recording = load_recording(path.parent, path.name)
    options = ReplayOptions.make(
        saved.get("tolerance"),
        str(saved.get("speed") or "fast"),
        int(saved.get("from_step") or 1),
        tuple(saved.get("masks") or ()),
        bool(saved.get("heal")),
    )
    if options.heal and healer is None:
        from vnc_use.providers.registry import planner_from_settings

        healer = planner_from_settings(saved.get("heal_planner") or {})
    return ReplayPlanner(recording, options, healer)


def planner_from_run(settings: Mapping[str, Any]) -> Planner:
    """The planner a run used, rebuilt from its ``run.json`` settings (``approve``, ``deny``,
    ``resume``): a replay's (``provider: replay``) here, any model's by the providers'
    registry, which knows nothing of replays."""
    if settings.get("provider") == PROVIDER:
        return replay_planner_from_settings(settings)
    from vnc_use.providers.registry import planner_from_settings

    return planner_from_settings(settings)
