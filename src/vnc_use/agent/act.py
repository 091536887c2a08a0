"""The ``act`` node: run the next pending call on the desktop and answer it with a screenshot.

The journal (see :mod:`vnc_use.store.journal`) makes this safe to re-run after a crash: an
action already performed is not performed again, and one that may or may not have been
performed is never silently repeated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from vnc_use.actions import ActionError, ValidatedAction
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.actions.vocabulary import ActionKind
from vnc_use.agent import approval as safety
from vnc_use.agent import stall
from vnc_use.agent.context import AgentContext, capture, over_time, screen_size
from vnc_use.agent.human import taken_over
from vnc_use.agent.nodes import approval_request_for, blocked_call_reason, end_blocked
from vnc_use.agent.state import (
    CUAState,
    FunctionCallRecord,
    FunctionResponseRecord,
    TranscriptEntry,
)
from vnc_use.errors import VncConnectionError, VncError
from vnc_use.providers import history
from vnc_use.replay.compare import GRID, cell_difference, cells, changed_cells
from vnc_use.store.journal import Outcome, call_key


def _uncertain(
    ctx: AgentContext, state: CUAState, call: FunctionCallRecord, key: str, step: int
) -> Outcome:
    """Settle an action that was sent but not confirmed before the process stopped.

    Only reads happen before ``interrupt()``: LangGraph re-runs this node when it resumes.
    """
    explanation = (
        f"vnc-use stopped while performing {call['name']} (step {step}); it may or may not have "
        "happened. Approve to perform it again; deny to not repeat it (the model is told the "
        "outcome is unknown and sees a fresh screenshot)."
    )
    if ctx.settings.hitl_mode:
        request = approval_request_for(ctx, state, call, step)
        request.update(kind="uncertain", explanation=explanation)
        decision = safety.parse_decision(interrupt(request))
    else:
        decision = safety.DENY
    again = decision == safety.APPROVE
    ctx.journal.resolved(key, "again" if again else "unknown", step)
    ctx.run.event(
        "uncertain_action",
        node="act",
        step=step,
        name=call["name"],
        decision="perform again" if again else "not repeated",
        by="person" if ctx.settings.hitl_mode else "policy",
    )
    return Outcome.NEW if again else Outcome.UNKNOWN


def _reveal(action: ValidatedAction, secrets: dict[str, str]) -> ValidatedAction:
    """Put the caller's sensitive values in place of their ``{{name}}`` placeholders.

    Only the desktop ever sees the values: state, events and requests keep the placeholders.
    """
    if not secrets:
        return action
    update = {}
    for field_name, value in action.args:
        if isinstance(value, str) and "{{" in value:
            for name, secret in secrets.items():
                value = value.replace("{{" + name + "}}", secret)
            update[field_name] = value
    if not update:
        return action
    return replace(action, args=action.args.model_copy(update=update))


@dataclass
class _Call:
    """The call this ``act`` runs, and where it stands."""

    call: FunctionCallRecord
    pending: list[FunctionCallRecord]
    """The turn's calls still to run after this one."""
    index: int
    step: int
    key: str
    outcome: Outcome
    approved: bool
    sha: str | None
    """The screenshot the model saw before this call."""
    size: tuple[int, int]


@dataclass
class _Result:
    """What running a call gave: the model's answer and the record for people."""

    error: str | None = None
    note: str | None = None
    pixels: dict[str, int] = field(default_factory=dict)
    output: dict[str, Any] | None = None
    """A custom function's result (custom functions only)."""
    screenshot: str | None = None
    size: tuple[int, int] | None = None
    action_ms: float = 0.0
    started: float | None = None
    """Wall-clock time the action began."""
    pressed_at: float | None = None
    """Wall-clock time of its first button or key press, after the video marked it (the
    report seeks the run's video there: the click's ring is on that frame)."""
    stall_note: str | None = None
    """Stall detection's note to the model (the first stall), sent with the result."""
    model_note: str | None = None
    """What else the model is told about how the action was done (a paste, not typing)."""


def act(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Execute the next pending call, capture the screen, and answer the call.

    The journal (see :mod:`vnc_use.store.journal`) makes this safe to re-run after a crash: an
    action already performed is not performed again, and one that may or may not have been
    performed is never silently repeated.
    """
    t0 = time.monotonic()
    ctx = runtime.context
    held = taken_over(ctx, "act")  # a person has the desktop: nothing is sent or captured
    if held is not None:
        return held
    if state.get("step", 0) >= ctx.settings.step_limit:
        return {"status": "step_limit", "done": True}
    if over_time(state, ctx):
        return {"status": "timeout", "done": True}
    first = state["pending_calls"][0]
    if first.get("safety") == "blocked":  # only from a checkpoint of an older version
        return end_blocked(ctx, "act", blocked_call_reason(first))
    c = _begin(ctx, state)
    t_act, started = time.monotonic(), time.time()
    custom = ctx.planner.is_custom(c.call["name"])
    result = _run_custom(ctx, c) if custom else _run_action(ctx, c)
    result.started = round(started, 3)
    result.pressed_at = None if custom else _first_press(ctx, started)
    result.action_ms = round((time.monotonic() - t_act) * 1000, 1)
    check = None
    if not custom:
        _look(ctx, c, result)
        check = _stall_check(ctx, state, c, result)
    entry = _record(ctx, state, c, result)
    update = _answer(state, c, result, entry)
    if check is not None:
        update["stall"] = check.state
    update["active_seconds"] = time.monotonic() - t0
    return update


def _first_press(ctx: AgentContext, since: float) -> float | None:
    """When the action's first button or key press was sent (a desktop that knows)."""
    first = getattr(ctx.desktop, "first_press_since", None)
    at = first(since) if callable(first) else None
    return None if at is None else round(float(at), 3)


def _begin(ctx: AgentContext, state: CUAState) -> _Call:
    """The next pending call, its journal outcome (settled if uncertain) and the screen size."""
    pending = list(state["pending_calls"])
    call = pending.pop(0)
    index = state.get("call_index", 0)
    step = state.get("step", 0) + 1
    sha = state.get("last_screenshot_png")
    key = call_key(state.get("model_calls", 0), index)
    outcome = ctx.journal.outcome(key)
    if outcome is Outcome.UNCERTAIN:
        outcome = _uncertain(ctx, state, call, key, step)
    size = screen_size(ctx, state)
    if size is None:
        sha, size = capture(ctx)
    approved = state.get("approved_call") == index
    return _Call(call, pending, index, step, key, outcome, approved, sha, size)


PASTED_NOTE = "text pasted through the RDP clipboard (--rdp-paste-text), not typed"
"""The note of a step whose text went through the clipboard (see ``desktops.rdp_clipboard``)."""
PASTED_MODEL_NOTE = (
    "The text was pasted through the clipboard (Ctrl+V), not typed: this desktop's keyboard "
    "link cannot type some of its characters."
)
"""What the function response of that step tells the model (every provider carries it)."""

RESTART_NOTE_KEY = "vnc_use_note"
"""The key of the note added to a custom function's recorded result when a resumed run sends
it again (a key of vnc-use's own, so it never hides one of the function's)."""

_CUSTOM_DONE_NOTE = (
    "This function ran before vnc-use restarted; this is its recorded result (it was not run "
    "again)."
)


def _run_custom(ctx: AgentContext, c: _Call) -> _Result:
    """Run one of the caller's own functions, journaled like an action, its result with it; no
    screenshot.

    After a restart it is answered from the journal like a desktop action: one that returned is
    not run again, and the model gets its recorded result with a note saying so; one that may
    or may not have run, and was settled not to repeat, is answered with that error.
    """
    name = c.call["name"]
    if c.outcome is Outcome.DONE:
        recorded = ctx.journal.output(c.key) or {}  # {}: journaled without its result
        output = {**recorded, RESTART_NOTE_KEY: _CUSTOM_DONE_NOTE}
        note = "performed before the agent restarted; not repeated"
        return _Result(error=recorded.get("error"), note=note, output=output, size=c.size)
    if c.outcome is Outcome.UNKNOWN:
        error = (
            "The outcome of this function is unknown: vnc-use stopped while running it and did "
            "not run it again."
        )
        note = "outcome unknown; not repeated"
        return _Result(error=error, note=note, output={"error": error}, size=c.size)
    ctx.journal.dispatched(c.key, name, c.step)
    output = ctx.planner.run_custom_function(c.call)
    ctx.journal.done(c.key, name, c.step, output)
    return _Result(error=output.get("error"), output=output, size=c.size)


def _run_action(ctx: AgentContext, c: _Call) -> _Result:
    """Validate and perform a desktop action as its journal outcome allows."""
    result = _Result(error=c.call.get("error"), size=c.size)
    action = None if result.error else ctx.planner.validate(c.call["name"], c.call["args"])
    if isinstance(action, ActionError):
        result.error = action.message
    elif action is not None and c.outcome is Outcome.NEW:
        pastes = getattr(ctx.desktop, "pastes", 0)
        result.pixels, result.error = _perform(ctx, c, action)
        if getattr(ctx.desktop, "pastes", 0) > pastes:
            result.note, result.model_note = PASTED_NOTE, PASTED_MODEL_NOTE
    elif c.outcome is Outcome.DONE:
        result.note = "performed before the agent restarted; not repeated"
    elif c.outcome is Outcome.UNKNOWN:
        result.error = (
            "The outcome of this action is unknown: vnc-use stopped while performing it and "
            "did not repeat it. Check the screenshot before going on."
        )
        result.note = "outcome unknown; not repeated"
    return result


def _perform(
    ctx: AgentContext, c: _Call, action: ValidatedAction
) -> tuple[dict[str, int], str | None]:
    """Send the action to the desktop; returns its pixel targets and the model's error, if any.

    The journal marks it dispatched just before it is sent.
    """
    if not ctx.desktop.is_connected():  # known lost: nothing is sent, nothing unsure
        raise VncConnectionError(
            f"the connection to the VNC server was lost before {c.call['name']} was sent"
        )
    # The grid spans the screen as it is now: a screen resized since the last
    # screenshot (a user, a VM window) is mapped at its new size, never off target.
    width, height = ctx.desktop.round_trip()
    actx = ActionContext(
        hands=ctx.desktop,
        width=width,
        height=height,
        search_url=ctx.settings.search_url,
        wait_seconds=ctx.settings.wait_seconds,
        stop=ctx.stop,
    )
    ctx.journal.dispatched(c.key, c.call["name"], c.step)
    try:
        return execute(_reveal(action, ctx.secrets), actx), None
    except VncError:
        raise  # the desktop is gone: infrastructure, ends the run (resumable)
    except (ValueError, TypeError) as exc:  # the model asked for something impossible
        return {}, _redact(f"{type(exc).__name__}: {exc}", action, ctx.secrets)


def _redact(message: str, action: ValidatedAction, secrets: dict[str, str]) -> str:
    """``message`` without the sensitive values the action's placeholders stood for, whole or
    as the characters a refusal names (``cannot type 'ж' ...``): it goes to the model and
    the run's records."""
    used = [
        value
        for name, value in secrets.items()
        if value and any(isinstance(v, str) and "{{" + name + "}}" in v for _, v in action.args)
    ]
    for value in used:
        message = message.replace(value, "{{sensitive}}")
        for ch in set(value):
            message = message.replace(repr(ch), "'…'")
    return message


class _DoneBeside:
    """The journal's ``done`` of a new action, written on a thread of its own while the
    screen settles (issue 43).

    The desktop tells (:attr:`~vnc_use.desktops.base.CaptureRule.on_input_handled`) when it has
    handled the action, which is what ``done`` records; the record is then written beside the
    rest of the settle wait instead of after it. :meth:`finish` waits for it, so it is on disk
    before ``act`` returns (before the step's checkpoint), as before. A capture that fails
    before the desktop answered writes nothing (the action stays uncertain, as before); one
    whose desktop never calls the hook gets its ``done`` once the capture returned.
    """

    def __init__(self, ctx: AgentContext, c: _Call) -> None:
        self._ctx, self._c = ctx, c
        self._handled = threading.Event()
        self._write = True
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="vnc-use journal", daemon=True)
        self._thread.start()

    def handled(self) -> None:
        """The desktop has handled the action (any thread)."""
        self._handled.set()

    def _run(self) -> None:
        self._handled.wait()
        if not self._write:
            return
        try:
            self._ctx.journal.done(self._c.key, self._c.call["name"], self._c.step)
        except BaseException as exc:  # raised again on the agent's thread by finish()
            self._error = exc

    def finish(self, *, captured: bool) -> None:
        """Wait until ``done`` is written (``captured``: the capture returned, proving the
        round trip); raise what writing it raised."""
        if not captured and not self._handled.is_set():
            self._write = False
        self._handled.set()
        self._thread.join()
        if self._error is not None:
            raise self._error


def _look(ctx: AgentContext, c: _Call, result: _Result) -> None:
    """Take the screenshot that answers the call, and close the journal entry of a new action
    (beside the settle wait, :class:`_DoneBeside`).

    When nothing happened on screen, the answer is the screenshot the model saw.
    """
    if result.error is not None and c.outcome is Outcome.NEW:
        result.screenshot = c.sha
        return
    if c.outcome is not Outcome.NEW:
        result.screenshot, result.size = capture(ctx)
        return
    # the screenshot round trip also proves the server received the action
    done = _DoneBeside(ctx, c)
    try:
        result.screenshot, result.size = capture(ctx, done.handled)
    except BaseException:
        done.finish(captured=False)
        raise
    done.finish(captured=True)


_CELLS_KEPT = 16
"""Screenshots whose cells a run keeps for stall detection (it compares the newest with up to
about ten recent ones)."""


def _grid(ctx: AgentContext, sha: str) -> Any:
    """A stored screenshot's cells, decoded once per run (issue 43: decoding the PNGs again
    for every comparison was the largest part of a step's bookkeeping)."""
    kept = ctx.screen_cells
    found = kept.pop(sha, None)
    if found is None:
        found = cells(ctx.run.load_screenshot(sha))
    kept[sha] = found  # the most recently used last
    while len(kept) > _CELLS_KEPT:
        kept.pop(next(iter(kept)))
    return found


def _same_screen(ctx: AgentContext) -> stall.SameScreen:
    """Whether two stored screenshots show the same screen by the stall measure."""

    def grid(sha: str) -> Any:
        return _grid(ctx, sha)

    def same(a: str | None, b: str | None) -> bool:
        if a == b:
            return True
        if not a or not b:
            return False
        return cell_difference(grid(a), grid(b), neighbours=False) <= stall.STALL_TOLERANCE

    return same


def _small_change(ctx: AgentContext) -> stall.Incidental:
    """Whether what differs between two stored screenshots is a small region that toggles on
    its own, away from the given targets (:func:`vnc_use.agent.stall.incidental`)."""

    def small(a: str | None, b: str | None, targets: Sequence[Sequence[int]]) -> bool:
        if not a or not b or a == b:
            return False
        _, box = changed_cells(_grid(ctx, a), _grid(ctx, b))
        return stall.incidental(box, GRID, targets)

    return small


def _kind(ctx: AgentContext, c: _Call) -> ActionKind:
    """How the call works on the desktop, as its action table says (``pointer`` when the
    planner's table does not know it)."""
    checked = ctx.planner.validate(c.call["name"], c.call["args"])
    return checked.spec.kind if isinstance(checked, ValidatedAction) else "pointer"


def _stall_check(
    ctx: AgentContext, state: CUAState, c: _Call, result: _Result
) -> stall.StallCheck | None:
    """Stall detection's verdict on an action performed now (not one settled after a
    restart, nor one refused or failed: its error already tells the model); a first stall
    puts its note in the result the model gets."""
    if c.outcome is not Outcome.NEW or ctx.settings.stall_after <= 0:
        return None
    if result.error is not None:  # refused or failed: the error is the model's feedback
        return None
    check = stall.observe(
        ctx.settings.stall_after,
        state.get("stall"),
        c.call["name"],
        c.call["args"],
        c.sha,
        result.screenshot,
        _same_screen(ctx),
        kind=_kind(ctx, c),
        small=_small_change(ctx),
    )
    if check.note is not None:
        result.stall_note = check.note
        ctx.run.event("stall_detected", node="act", step=c.step, note=check.note)
    elif check.stuck:
        ctx.run.event("stall_continued", node="act", step=c.step, what=check.state.get("stuck"))
    return check


def _transcript_entry(c: _Call, result: _Result) -> TranscriptEntry:
    """The step as people read it (the run record, :class:`RunResult`)."""
    entry: TranscriptEntry = {
        "step": c.step,
        "name": c.call["name"],
        "args": c.call["args"],
        "pixels": result.pixels,
        "screen_size": result.size or c.size,
        "result": "error" if result.error else "ok",
        "approved": c.approved,
        "duration_ms": result.action_ms,
    }
    if result.error:
        entry["error"] = result.error
    if result.note:
        entry["note"] = result.note
    if result.screenshot:
        entry["screenshot"] = result.screenshot
    if result.stall_note:
        entry["stall"] = result.stall_note
    return entry


def _record(ctx: AgentContext, state: CUAState, c: _Call, result: _Result) -> TranscriptEntry:
    """Write the step to the run folder and its ``action`` event."""
    entry = _transcript_entry(c, result)
    name = c.call["name"]
    ctx.run.write_step(c.step, name, dict(entry), result.screenshot)
    ctx.run.event(
        "action",
        node="act",
        step=c.step,
        name=name,
        args=c.call["args"],
        pixels=result.pixels,
        screen_size=list(result.size or c.size),
        duration_ms=result.action_ms,
        started=result.started,
        pressed_at=result.pressed_at,
        error=result.error,
        note=result.note,
        approved=c.approved,
        screenshot=result.screenshot,
        model_ms=state.get("model_ms"),
    )
    return entry


def _call_result(c: _Call, result: _Result) -> FunctionResponseRecord:
    """The neutral result the planner answers the call with (see ``providers.base``)."""
    record: FunctionResponseRecord = {
        "name": c.call["name"],
        "id": c.call.get("id"),
        "screenshot": result.screenshot,
        "screen_size": result.size or c.size,
        # acknowledged to the model only when the model asked (not for the approval policy)
        "approved": c.approved and safety.model_asks(c.call),
    }
    if result.output is not None:
        record["output"] = result.output
    elif result.error is not None:
        record["error"] = result.error
    notes = [n for n in (result.model_note, result.stall_note) if n]
    if notes:
        record["note"] = " ".join(notes)
    return record


def _answer(state: CUAState, c: _Call, result: _Result, entry: TranscriptEntry) -> dict[str, Any]:
    """The state update: the call answered; every call of the turn answered goes back at once."""
    responses = [*state.get("responses", []), _call_result(c, result)]
    update: dict[str, Any] = {
        "pending_calls": c.pending,
        "call_index": c.index + 1,
        "approved_call": None,
        "step": c.step,
        "transcript": [entry],
        "last_screenshot_png": result.screenshot or c.sha,
        "last_screen_size": result.size or c.size,
    }
    if c.pending:
        update["responses"] = responses
    else:  # every call of the model's turn is answered: they go back together, in order
        update["responses"] = []
        update["contents"] = [history.responses_turn(responses)]
    return update
