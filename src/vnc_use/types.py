"""State, call records and results shared by the agent's parts.

Screenshots never live in checkpointed state: each PNG is written once to the run folder under
its sha256 (see :mod:`vnc_use.logging_utils`) and state holds that hex digest. The history
(``contents``) is kept as plain JSON-able dicts, so checkpoints need no custom serializer:

- ``{"role": "user", "text": TASK, "screenshot": SHA | None}`` -- the first turn;
- ``{"role": "model", "content": <google.genai Content as JSON>}`` -- a model turn, unchanged
  (it carries ``thought_signature`` bytes that Gemini 3 models need echoed back);
- ``{"role": "user", "responses": [FunctionResponseRecord, ...]}`` -- one function response per
  call of the previous model turn, in order.

The planner turns this into ``google.genai`` ``Content`` objects when it builds a request, and
loads only the last N screenshots from disk.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

RunStatus = Literal[
    "running", "done", "awaiting_approval", "denied", "step_limit", "timeout", "error"
]
"""How a run stands: ``running`` only inside the graph; every other value is final or a pause."""


class FunctionCallRecord(TypedDict):
    """One function call proposed by the model, as parsed from its answer."""

    name: str
    args: dict[str, Any]
    """Arguments as the model sent them (0-999 grid coordinates), ``safety_decision`` removed."""
    safety_decision: dict[str, Any] | None
    id: str | None


class FunctionResponseRecord(TypedDict):
    """The answer to one function call: what goes back to the model, with a screenshot reference."""

    name: str
    id: str | None
    response: dict[str, Any]
    screenshot: str | None
    """sha256 of the PNG taken after the action (``None`` for custom functions)."""


class TranscriptEntry(TypedDict, total=False):
    """One executed (or refused) call, for people and for :class:`RunResult`."""

    step: int
    name: str
    args: dict[str, Any]
    pixels: dict[str, int]
    """Pixel coordinates the grid values became (``x``, ``y``, ``destination_x``, ...)."""
    screen_size: tuple[int, int]
    result: str
    """``ok`` or ``error``."""
    error: str
    approved: bool
    screenshot: str
    duration_ms: float


class CUAState(TypedDict, total=False):
    """The checkpointed state of one run (one LangGraph thread).

    The brief's fields are all here; ``last_screenshot_png`` holds the sha256 of the last PNG,
    never its bytes.
    """

    task: str
    contents: Annotated[list[dict[str, Any]], operator.add]
    pending_calls: list[FunctionCallRecord]
    responses: list[FunctionResponseRecord]
    """Function responses of the current model turn, collected until all its calls have run."""
    last_screenshot_png: str | None
    step: int
    done: bool
    safety: dict[str, Any] | None
    approved_call: int | None
    """Index (in the model turn) of the call a human approved, until it has run."""
    call_index: int
    """Index of the next pending call within its model turn."""
    status: RunStatus
    final_text: str
    error: str | None
    transcript: Annotated[list[TranscriptEntry], operator.add]
    active_seconds: Annotated[float, operator.add]
    """Time spent in the graph's nodes (waiting for a human does not count against the budget)."""
    model_calls: int


@dataclass
class RunResult:
    """What :meth:`vnc_use.VncUseAgent.run` (and ``approve``/``deny``/``resume``) returns."""

    status: RunStatus
    thread_id: str
    run_dir: str
    final_text: str = ""
    transcript: list[TranscriptEntry] = field(default_factory=list)
    steps: int = 0
    error: str | None = None
    pending_call: dict[str, Any] | None = None
    """When ``status == "awaiting_approval"``: the call, its pixel target and the explanation."""

    @property
    def ok(self) -> bool:
        """True when the model finished the task."""
        return self.status == "done"
