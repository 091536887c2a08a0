"""The model boundary: what the agent asks of a planner, and the neutral records it gets back.

The graph depends on :class:`Planner` only. A planner reads vnc-use's own history records
(JSON dicts, screenshots by sha256) and answers with a :class:`Proposal`; nothing of a
provider's SDK crosses this line. History records (built by :mod:`vnc_use.providers.history`):

- ``{"turn": "user", "text": TASK, "screenshot": SHA | None, "screen_size": [W, H]}`` -- the
  task;
- ``{"turn": "model", "content": TURN}`` -- a model turn: ``TURN`` is the planner's own opaque,
  JSON-able record (:attr:`Proposal.turn`), read back by that planner only;
- ``{"turn": "user", "responses": [CallResult, ...]}`` -- the results of every call of the
  previous model turn, in call order;
- ``{"turn": "user", "person": {...}, "text": TEXT, "screenshot": SHA, "screen_size": [W, H]}``
  -- a person's turn: a person answered the model's question or used the desktop (and handed
  it back); ``TEXT`` tells the model so in plain words (with the person's note), with a fresh
  screenshot. Each planner sends it its provider's own way (a user turn).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from typing_extensions import (
    NotRequired,
    TypedDict,  # the server publishes schemas of it on 3.10-3.11
)

from vnc_use.actions import ActionError, ValidatedAction

__all__ = [
    "CallResult",
    "HistoryRecord",
    "LoadPng",
    "Planner",
    "Proposal",
    "ProposedCall",
    "SafetyMark",
    "StopReason",
]

SafetyMark = Literal["none", "needs_confirmation", "blocked"]
"""The model's own safety mark on a call. ``needs_confirmation`` waits for a person's approval
before the call runs; ``blocked`` never runs and is never shown for approval: the turn that
carries it ends the run (status ``blocked``)."""

StopReason = Literal["finished", "calls", "blocked", "error", "diverged", "failed", "asks_person"]
"""Why the model's turn ended: it finished normally, it wants calls run, it (or a filter)
refused, or its answer was empty, cut short or otherwise unexpected; ``diverged``: a replay
(:mod:`vnc_use.replay`) found the screen not as recorded (the run ends ``diverged``);
``failed``: the model ended the task saying it failed (an explicit failure signal of its
dialect; the run ends ``failed``, ``stop_message`` holds the model's words);
``asks_person``: the model asks for a person (its question is the turn's ``text``): the run
waits for one (``awaiting_human``) and the answer comes back as a person's turn."""

HistoryRecord = Mapping[str, Any]
"""One turn of the conversation as stored in state (see the module docstring)."""

LoadPng = Callable[[str], bytes]
"""Loads a stored screenshot's PNG bytes by its sha256."""


class ProposedCall(TypedDict):
    """One call the model proposed, in vnc-use's own terms."""

    id: str | None
    name: str
    args: dict[str, Any]
    """Arguments as the model sent them (0-999 grid coordinates), safety fields removed."""
    safety: SafetyMark
    safety_explanation: str | None
    """The model's reason for its safety mark, if it gave one."""
    intent: str | None
    """What the model says the call is for, if it says (Gemini 3.5 sends an ``intent``)."""


class CallResult(TypedDict):
    """The result of one call, as the history keeps it; the planner turns it into its reply."""

    name: str
    id: str | None
    screenshot: str | None
    """sha256 of the PNG taken after the call (``None`` for custom functions)."""
    screen_size: NotRequired[tuple[int, int] | None]
    """Size of the real screen that PNG shows (the PNG may be downscaled)."""
    error: NotRequired[str]
    """Why the call failed or did not run, written for the model."""
    approved: NotRequired[bool]
    """A person approved the call before it ran and the model had asked for confirmation (an
    approval the policy alone asked for is not set here: nothing to acknowledge)."""
    output: NotRequired[dict[str, Any]]
    """A custom function's JSON-able result (custom functions only)."""
    note: NotRequired[str]
    """A word from vnc-use to the model about this call, in plain words (a stall: the last
    actions changed nothing on the screen); every provider sends it with the result."""


@dataclass(frozen=True)
class Proposal:
    """What the model proposed in one turn.

    - ``calls``: every call of the turn, in order; empty when the model stopped;
    - ``text``: the model's visible text (reasoning summaries excluded);
    - ``stop`` and ``reason``: why the turn ended, and the provider's own words for it (logs);
    - ``usage``: token counts, or None;
    - ``turn``: the model's turn as the planner's opaque JSON-able record (None: nothing to
      keep), stored in the history and read back by the same planner only;
    - ``request_json`` / ``response_json``: the exchange as sent and received, for the run
      folder;
    - ``thoughts``: reasoning-summary text, when the provider sends it;
    - ``stop_message``: for a ``blocked``, ``error``, ``diverged`` or ``failed`` stop, one line
      for people naming the reason (e.g. ``the API blocked the request: SAFETY``);
    - ``notice``: an event the planner asks the run to record before the turn's calls run
      (its name under ``event``, e.g. a replay's ``replay_step`` / ``diverged``), or None.
    """

    calls: list[ProposedCall]
    text: str
    stop: StopReason
    reason: str | None
    usage: dict[str, int] | None
    turn: dict[str, Any] | None
    request_json: dict[str, Any]
    response_json: dict[str, Any]
    thoughts: str = ""
    stop_message: str | None = None
    notice: dict[str, Any] | None = None


class Planner(Protocol):
    """A model that proposes the next calls for the agent (see the module docstring)."""

    @property
    def model(self) -> str:
        """The model's id, for the run record."""
        ...

    def propose(
        self, history: Sequence[HistoryRecord], load_png: LoadPng, keep_screenshots: int
    ) -> Proposal:
        """Ask the model for its next calls, given the whole history; only the screenshots of
        the last ``keep_screenshots`` turns that carry one are sent."""
        ...

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Check a proposed call against this model's actions (never raises)."""
        ...

    def is_custom(self, name: str) -> bool:
        """True when ``name`` is one of the caller's own functions (not a desktop action)."""
        ...

    def run_custom_function(self, call: ProposedCall) -> dict[str, Any]:
        """Run a custom function; its JSON-able result, or ``{"error": ...}`` when it failed."""
        ...

    def check_ready(self) -> None:
        """Raise :class:`~vnc_use.errors.ConfigError` when the planner cannot run (a missing
        API key, say): called before a run records anything."""
        ...

    def run_settings(self) -> dict[str, Any]:
        """What a run keeps (``run.json``, JSON-able, no secret) so that ``approve``, ``deny``
        and ``resume`` rebuild a planner that sends the model the same tools: ``model`` first,
        then the provider's own settings."""
        ...
