"""State, call records and results shared by the agent's parts.

Screenshots never live in checkpointed state: each PNG is written once to the run folder under
its sha256 (see :mod:`vnc_use.record.folder`) and state holds that hex digest. The history
(``contents``) is kept as plain JSON-able dicts, so checkpoints need no custom serializer:

- ``{"turn": "user", "text": TASK, "screenshot": SHA | None, "screen_size": [W, H]}`` -- the
  first turn;
- ``{"turn": "model", "content": TURN}`` -- a model turn: the planner's own opaque JSON record,
  unchanged (Gemini's carries the ``thought_signature`` bytes its models need echoed back);
- ``{"turn": "user", "responses": [FunctionResponseRecord, ...]}`` -- the result of every call
  of the previous model turn, in order.

(Records written by older versions say ``"role"`` instead of ``"turn"``; both are read.)

The planner (:class:`~vnc_use.providers.base.Planner`) turns this into its model's request,
and loads only the last N screenshots from disk.

The two append-only channels, ``contents`` and ``transcript``, are LangGraph ``DeltaChannel``s
(beta in langgraph 1.2): a checkpoint stores only each step's new items, and the lists are
rebuilt from the writes on load, so the checkpoint database grows by the size of one step per
step. With a plain ``operator.add`` reducer the SQLite saver rewrites the whole list in every
checkpoint (quadratic growth). A full snapshot is written every
:data:`HISTORY_SNAPSHOT_EVERY` updates, which bounds the replay on load.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from langgraph.channels import DeltaChannel
from typing_extensions import NotRequired, TypedDict  # the server publishes its schemas

from vnc_use.providers.base import CallResult, ProposedCall
from vnc_use.status import RunStatus

_T = TypeVar("_T")

HISTORY_SNAPSHOT_EVERY = 1000
"""Updates of a history channel between two full snapshots in the checkpoint database."""


def extend_history(current: list[_T], writes: Sequence[list[_T]]) -> list[_T]:
    """Reducer of the append-only channels: the items of every write, in order, appended.

    Deterministic and batching-invariant, as ``DeltaChannel`` requires.
    """
    out = list(current)
    for items in writes:
        out.extend(items)
    return out


class FunctionCallRecord(ProposedCall):
    """One call proposed by the model (see :class:`~vnc_use.providers.base.ProposedCall`),
    checked against the action table when it was proposed."""

    error: NotRequired[str | None]
    """Why the call cannot run (unknown name, bad arguments), found when it was proposed."""
    policy: NotRequired[str]
    """The approval policy's entry (an action name or ``all``; ``confirm_actions``,
    ``--confirm``) that makes the call wait for a person, whatever the model's own mark says."""


FunctionResponseRecord = CallResult
"""The result of one call, as the history keeps it (with a screenshot reference)."""


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
    note: str
    """How a call was settled after a restart (``not repeated``, ``outcome unknown``)."""
    approved: bool
    screenshot: str
    duration_ms: float
    stall: str
    """Stall detection's note, on the step where a stall was detected (sent to the model)."""


class CUAState(TypedDict, total=False):
    """The checkpointed state of one run (one LangGraph thread).

    The brief's fields are all here; ``last_screenshot_png`` holds the sha256 of the last PNG,
    never its bytes.
    """

    task: str
    contents: Annotated[
        list[dict[str, Any]],
        DeltaChannel(extend_history, snapshot_frequency=HISTORY_SNAPSHOT_EVERY),
    ]
    pending_calls: list[FunctionCallRecord]
    responses: list[FunctionResponseRecord]
    """Function responses of the current model turn, collected until all its calls have run."""
    last_screenshot_png: str | None
    last_screen_size: tuple[int, int] | None
    """The real screen size of ``last_screenshot_png``: grid coordinates scale to this."""
    step: int
    done: bool
    safety: dict[str, Any] | None
    """The safety mark of the turn's first marked call (``mark``, ``explanation``), or None."""
    approved_call: int | None
    """Index (in the model turn) of the call a human approved, until it has run."""
    call_index: int
    """Index of the next pending call within its model turn."""
    status: str
    """A :class:`~vnc_use.status.RunStatus` value (kept as its plain string)."""
    final_text: str
    error: str | None
    transcript: Annotated[
        list[TranscriptEntry],
        DeltaChannel(extend_history, snapshot_frequency=HISTORY_SNAPSHOT_EVERY),
    ]
    active_seconds: Annotated[float, operator.add]
    """Time spent in the graph's nodes (waiting for a human does not count against the budget)."""
    model_calls: int
    model_ms: float
    """How long the model took to answer the turn whose calls are being run (shown with each
    step, also by a process that resumed or approved the run)."""
    cost_usd: float
    """What the run's model calls cost so far, of those whose cost is known."""
    cost_unknown: bool
    """True once a model call's cost could not be known (no price for the model): the run's
    cost is then unknown, never a partial sum shown as the total."""
    stall: dict[str, Any]
    """Stall detection's record of the last actions (:mod:`vnc_use.agent.stall`)."""
    human: dict[str, Any] | None
    """While ``awaiting_human``: who asked for the person (``asked_by``: ``model`` or
    ``person``), the model's ``question``, the person who holds the desktop (``holder``),
    ``since`` (epoch seconds) and the desktop's hold ``epoch``."""
    handed_back: dict[str, Any] | None
    """Set by a hand-back until the next model request: the person's note, how long they
    held the desktop and their clicks and key presses (counts); the request then tells the
    model, with a fresh screenshot (:func:`vnc_use.agent.nodes.handback_text`)."""


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
    cost_usd: float | None = None
    """What the run's model calls cost, in USD; None: unknown (no price for the model)."""
    human: dict[str, Any] | None = None
    """When ``status == "awaiting_human"``: who asked (``asked_by``), the model's
    ``question``, the person holding the desktop (``holder``) and ``since`` when."""

    @property
    def ok(self) -> bool:
        """True when the model finished the task."""
        return self.status == RunStatus.DONE
