"""The LangGraph agent: observe -> propose -> (hitl_gate) -> act, durable in SQLite.

::

    START -+-> observe -> propose -+-> act -+-> act        (the turn's next call)
           |               ^       |        +-> hitl_gate  (the next call needs approval)
           +---------------+       |        +-> propose    (every call of the turn answered)
                                   +-> hitl_gate -+- approve -> act
                                   |              +- deny ----> END
                                   +-> END  (no calls: done; or a step/time budget is spent)

Node functions live at module level and reach the desktop, the model and the run folder
through LangGraph's runtime context (:class:`AgentContext`), which is never checkpointed.
State (:class:`~vnc_use.types.CUAState`) holds only JSON-able values and screenshot digests.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from vnc_use import history, safety
from vnc_use.actions import ActionError, ValidatedAction, denorm
from vnc_use.backends.vnc import VNCController
from vnc_use.errors import VncConnectionError, VncError
from vnc_use.executor import DEFAULT_SEARCH_URL, ActionContext, execute
from vnc_use.journal import Journal, Outcome, call_key
from vnc_use.logging_utils import RunFolder
from vnc_use.planners.gemini import GeminiComputerUse
from vnc_use.png import DEFAULT_MAX_PNG_BYTES, screen_size_of
from vnc_use.settle import SettlePolicy, capture_fixed, capture_settled
from vnc_use.types import (
    CUAState,
    FunctionCallRecord,
    FunctionResponseRecord,
    TranscriptEntry,
)

log = logging.getLogger(__name__)

FINAL = frozenset({"done", "denied", "step_limit", "timeout", "error"})


@dataclass
class AgentSettings:
    """Budgets and behaviour of a run (everything but the connections)."""

    step_limit: int = 40
    seconds_timeout: float = 300.0
    hitl_mode: bool = True
    include_initial_screenshot: bool = True
    keep_screenshots: int = 3
    search_url: str = DEFAULT_SEARCH_URL
    settle_min_s: float = 0.0
    settle_max_s: float = 1.0
    settle_quiet_s: float = SettlePolicy.quiet
    """After an action, the screen has settled once it did not change for this long."""
    settle_fixed_s: float | None = None
    """Sleep this long and take one frame instead of detecting the settle (for comparisons)."""
    screenshot_max_size: tuple[int, int] | None = None
    """Downscale screenshots to fit this size (coordinates still map to the real screen)."""
    screenshot_max_bytes: int | None = DEFAULT_MAX_PNG_BYTES
    """Downscale a screenshot whose PNG is bigger than this (huge images fail at the API)."""
    wait_seconds: float = 5.0


@dataclass
class AgentContext:
    """What the nodes use besides state; lives in memory only (never checkpointed)."""

    controller: VNCController
    planner: GeminiComputerUse
    run: RunFolder
    settings: AgentSettings
    journal: Journal
    secrets: dict[str, str] = field(default_factory=dict)
    """Sensitive values by placeholder name: ``{{name}}`` in typed text becomes the value."""
    stop: threading.Event = field(default_factory=threading.Event)


# ---------------------------------------------------------------------------------- helpers


def _png_size(ctx: AgentContext, sha: str | None) -> tuple[int, int] | None:
    """The real screen size a stored screenshot shows (not its image size: it may be
    downscaled)."""
    if not sha:
        return None
    return screen_size_of(ctx.run.load_screenshot(sha))


def _screen_size(ctx: AgentContext, state: CUAState) -> tuple[int, int] | None:
    """The real screen size of the last screenshot the model saw (kept next to it in state)."""
    size = state.get("last_screen_size")
    if size:
        return int(size[0]), int(size[1])
    return _png_size(ctx, state.get("last_screenshot_png"))


def _capture(ctx: AgentContext) -> tuple[str, tuple[int, int]]:
    """A settled screenshot, stored in the run folder; returns its digest and the real screen
    size (what grid coordinates scale to, even when the PNG is downscaled)."""
    s = ctx.settings
    size_rule: dict[str, Any] = {
        "max_size": s.screenshot_max_size,
        "max_bytes": s.screenshot_max_bytes,
    }
    if s.settle_fixed_s is not None:
        shot = capture_fixed(ctx.controller, s.settle_fixed_s, stop=ctx.stop.wait, **size_rule)
    else:
        shot = capture_settled(
            ctx.controller,
            min_wait=s.settle_min_s,
            max_wait=s.settle_max_s,
            quiet=s.settle_quiet_s,
            **size_rule,
        )
    sha = ctx.run.put_screenshot(shot.png)
    ctx.run.event(
        "screenshot",
        screenshot=sha,
        settled=shot.settled,
        waited_ms=shot.waited_ms,
        updates=shot.frames,
        changes=shot.changes,
        encode_ms=shot.encode_ms,
        bytes=len(shot.png),
        size=list(shot.size),
        screen_size=list(shot.screen_size),
    )
    if not shot.settled:
        ctx.run.event("screen_not_settled", waited_ms=shot.waited_ms, frames=shot.frames)
    return sha, shot.screen_size


def _pixels_of(call: FunctionCallRecord, size: tuple[int, int] | None) -> dict[str, int]:
    """Pixel targets of a call's grid coordinates (for approval prompts), where valid."""
    if size is None:
        return {}
    args = call["args"]
    out: dict[str, int] = {}
    # (Gemini 3.5 drags name their ends start_x/start_y and end_x/end_y; reported as 2.5 keys)
    pairs = (
        ("x", "y", "x", "y"),
        ("destination_x", "destination_y", "destination_x", "destination_y"),
        ("start_x", "start_y", "x", "y"),
        ("end_x", "end_y", "destination_x", "destination_y"),
    )
    for kx, ky, ox, oy in pairs:
        x, y = args.get(kx), args.get(ky)
        if isinstance(x, int) and isinstance(y, int) and 0 <= x <= 999 and 0 <= y <= 999:
            out[ox], out[oy] = denorm(x, y, *size)
    return out


_INT64 = 2**63


def _storable(value: Any) -> Any:
    """The model's arguments as the checkpoint can hold them: integers beyond 64 bits (which
    msgpack cannot encode) become floats. No valid argument is that large."""
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return float(value)
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _call_record(ctx: AgentContext, call: dict[str, Any]) -> FunctionCallRecord:
    """A proposed call, checked against the action table now: an invalid call is answered
    with its error and never needs a person's approval (nothing would run)."""
    planner = ctx.planner
    record: FunctionCallRecord = {
        "name": call["name"],
        "args": _storable(call["args"]),
        "safety_decision": _storable(call.get("safety_decision")),
        "id": call.get("id"),
    }
    if not planner.is_custom(call["name"]):
        checked = planner.action_table.validate(
            call["name"], call["args"], excluded=planner.excluded_actions
        )
        if isinstance(checked, ActionError):
            record["error"] = checked.message
    return record


def _over_time(state: CUAState, ctx: AgentContext) -> bool:
    return state.get("active_seconds", 0.0) >= ctx.settings.seconds_timeout


# ------------------------------------------------------------------------------------ nodes


def observe(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """First turn: the task with a screenshot of the desktop as it is now."""
    t0 = time.monotonic()
    ctx = runtime.context
    sha, size = _capture(ctx)
    ctx.run.event("observe", node="observe", screenshot=sha, width=size[0], height=size[1])
    return {
        "contents": [history.task_turn(state["task"], sha, size)],
        "last_screenshot_png": sha,
        "last_screen_size": size,
        "active_seconds": time.monotonic() - t0,
    }


def propose(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Ask the model for the next actions, given the history (last N screenshots inline)."""
    t0 = time.monotonic()
    ctx = runtime.context
    if _over_time(state, ctx):
        return {"status": "timeout", "done": True}
    if state.get("step", 0) >= ctx.settings.step_limit:
        return {"status": "step_limit", "done": True}
    update: dict[str, Any] = {}
    turns = list(state.get("contents", []))
    if not turns:  # no initial screenshot: the first turn is the task alone
        first = history.task_turn(state["task"], None)
        turns.append(first)
        update["contents"] = [first]
    n = state.get("model_calls", 0) + 1
    contents = history.to_contents(turns, ctx.run.load_screenshot, ctx.settings.keep_screenshots)
    ctx.run.event("model_request", node="propose", n=n, turns=len(contents))
    t_model = time.monotonic()
    proposal = ctx.planner.propose(contents)
    latency_ms = round((time.monotonic() - t_model) * 1000, 1)
    ctx.run.write_model_exchange(
        n,
        {
            "model": ctx.planner.model,
            "contents": [c.model_dump(mode="json", exclude_none=True) for c in contents],
            "config": ctx.planner.config.model_dump(mode="json", exclude_none=True),
        },
        proposal.response_json,
    )
    ctx.run.event(
        "model_response",
        node="propose",
        n=n,
        latency_ms=latency_ms,
        finish_reason=proposal.finish_reason,
        text=proposal.text,
        calls=[{"name": c["name"], "args": c["args"]} for c in proposal.calls],
        usage=proposal.usage,
    )
    update["model_calls"] = n
    update["model_ms"] = latency_ms
    if proposal.model_content is not None and proposal.model_content.parts:
        update["contents"] = [
            *update.get("contents", []),
            _storable(history.model_turn(proposal.model_content)),
        ]
    if not proposal.calls:
        update.update(status="done", done=True, final_text=proposal.text, pending_calls=[])
    else:
        calls = [_call_record(ctx, c) for c in proposal.calls]
        update.update(
            pending_calls=calls,
            responses=[],
            call_index=0,
            final_text=proposal.text,
            safety=next((c["safety_decision"] for c in calls if c["safety_decision"]), None),
        )
    update["active_seconds"] = time.monotonic() - t0
    return update


def hitl_gate(state: CUAState, runtime: Runtime[AgentContext]) -> Command[str]:
    """Pause for a human before a call the model marked ``require_confirmation``.

    Nothing happens before ``interrupt()`` but reading state: LangGraph re-runs this node from
    its top when the run resumes.
    """
    ctx = runtime.context
    call = state["pending_calls"][0]
    index = state.get("call_index", 0)
    step = state.get("step", 0) + 1
    request = _approval_request(ctx, state, call, step)
    if not ctx.settings.hitl_mode:
        reason = (
            f"{call['name']} requires human confirmation ({request['explanation']}) and "
            "hitl_mode is off; it was not executed (the API's terms forbid bypassing it)."
        )
        ctx.run.event(
            "denied", node="hitl_gate", step=step, name=call["name"], reason=reason, by="policy"
        )
        return Command(goto=END, update={"status": "denied", "done": True, "error": reason})
    decision = safety.parse_decision(interrupt(request))
    ctx.run.event(
        "approved" if decision == safety.APPROVE else "denied",
        node="hitl_gate",
        step=step,
        name=call["name"],
        explanation=request["explanation"],
        by="person",
    )
    if decision == safety.APPROVE:
        return Command(goto="act", update={"approved_call": index})
    entry: TranscriptEntry = {
        "step": step,
        "name": call["name"],
        "args": call["args"],
        "pixels": request["pixels"],
        "result": "denied",
        "approved": False,
    }
    return Command(
        goto=END,
        update={
            "status": "denied",
            "done": True,
            "error": f"A person denied {call['name']}: {request['explanation']}",
            "transcript": [entry],
        },
    )


def _approval_request(
    ctx: AgentContext, state: CUAState, call: FunctionCallRecord, step: int
) -> dict[str, Any]:
    """What a person is shown before ``call`` runs: the call, its real pixel target, why."""
    size = _screen_size(ctx, state)
    return safety.approval_request(
        call,
        thread_id=ctx.run.thread_id,
        step=step,
        pixels=_pixels_of(call, size),
        screen_size=size,
        screenshot=state.get("last_screenshot_png"),
    )


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
        request = _approval_request(ctx, state, call, step)
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


def act(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Execute the next pending call, capture the screen, and answer the call.

    The journal (see :mod:`vnc_use.journal`) makes this safe to re-run after a crash: an
    action already performed is not performed again, and one that may or may not have been
    performed is never silently repeated.
    """
    t0 = time.monotonic()
    ctx = runtime.context
    step = state.get("step", 0)
    if step >= ctx.settings.step_limit:
        return {"status": "step_limit", "done": True}
    if _over_time(state, ctx):
        return {"status": "timeout", "done": True}
    pending = list(state["pending_calls"])
    call = pending.pop(0)
    index = state.get("call_index", 0)
    approved = state.get("approved_call") == index
    step += 1
    sha = state.get("last_screenshot_png")
    key = call_key(state.get("model_calls", 0), index)
    outcome = ctx.journal.outcome(key)
    if outcome is Outcome.UNCERTAIN:
        outcome = _uncertain(ctx, state, call, key, step)
    size = _screen_size(ctx, state)
    if size is None:
        sha, size = _capture(ctx)

    error: str | None = call.get("error")
    note: str | None = None
    pixels: dict[str, int] = {}
    response: dict[str, Any]
    planner = ctx.planner
    t_act = time.monotonic()
    if planner.is_custom(call["name"]) and outcome is Outcome.NEW:
        ctx.journal.dispatched(key, call["name"], step)
        fr = planner.run_custom_function(dict(call))
        ctx.journal.done(key, call["name"], step)
        action_ms = round((time.monotonic() - t_act) * 1000, 1)
        response = dict(fr.response or {})
        error = response.get("error")
        new_sha: str | None = None
    else:
        action = (
            None
            if error
            else planner.action_table.validate(
                call["name"], call["args"], excluded=planner.excluded_actions
            )
        )
        if isinstance(action, ActionError):
            error = action.message
        elif action is not None and outcome is Outcome.NEW:
            if not ctx.controller.is_connected():  # known lost: nothing is sent, nothing unsure
                raise VncConnectionError(
                    f"the connection to the VNC server was lost before {call['name']} was sent"
                )
            # The grid spans the screen as it is now: a screen resized since the last
            # screenshot (a user, a VM window) is mapped at its new size, never off target.
            width, height = ctx.controller.round_trip()
            actx = ActionContext(
                hands=ctx.controller,
                width=width,
                height=height,
                search_url=ctx.settings.search_url,
                wait_seconds=ctx.settings.wait_seconds,
                stop=ctx.stop,
            )
            ctx.journal.dispatched(key, call["name"], step)
            try:
                pixels = execute(_reveal(action, ctx.secrets), actx)
            except VncError:
                raise  # the desktop is gone: infrastructure, ends the run (resumable)
            except (ValueError, TypeError) as exc:  # the model asked for something impossible
                error = f"{type(exc).__name__}: {exc}"
        elif outcome is Outcome.DONE:
            note = "performed before the agent restarted; not repeated"
        elif outcome is Outcome.UNKNOWN:
            error = (
                "The outcome of this action is unknown: vnc-use stopped while performing it and "
                "did not repeat it. Check the screenshot before going on."
            )
            note = "outcome unknown; not repeated"
        action_ms = round((time.monotonic() - t_act) * 1000, 1)
        if error is None or outcome is not Outcome.NEW:
            # the screenshot round trip also proves the server received the action
            new_sha, size = _capture(ctx)
            if outcome is Outcome.NEW and error is None:
                ctx.journal.done(key, call["name"], step)
        else:  # nothing happened on screen: answer with the screenshot the model saw
            new_sha = sha
        response = {"url": ""}
        if error is not None:
            response["error"] = error
    if approved:
        response.update(safety.ACKNOWLEDGEMENT)

    record: FunctionResponseRecord = {
        "name": call["name"],
        "id": call.get("id"),
        "response": response,
        "screenshot": new_sha,
        "screen_size": size,
    }
    entry: TranscriptEntry = {
        "step": step,
        "name": call["name"],
        "args": call["args"],
        "pixels": pixels,
        "screen_size": size,
        "result": "error" if error else "ok",
        "approved": approved,
        "duration_ms": action_ms,
    }
    if error:
        entry["error"] = error
    if note:
        entry["note"] = note
    if new_sha:
        entry["screenshot"] = new_sha
    ctx.run.write_step(step, call["name"], dict(entry), new_sha)
    ctx.run.event(
        "action",
        node="act",
        step=step,
        name=call["name"],
        args=call["args"],
        pixels=pixels,
        screen_size=list(size),
        duration_ms=action_ms,
        error=error,
        note=note,
        approved=approved,
        screenshot=new_sha,
        model_ms=state.get("model_ms"),
    )
    responses = [*state.get("responses", []), record]
    update: dict[str, Any] = {
        "pending_calls": pending,
        "call_index": index + 1,
        "approved_call": None,
        "step": step,
        "transcript": [entry],
        "last_screenshot_png": new_sha or sha,
        "last_screen_size": size,
    }
    if pending:
        update["responses"] = responses
    else:  # every call of the model's turn is answered: they go back together, in order
        update["responses"] = []
        update["contents"] = [history.responses_turn(responses)]
    update["active_seconds"] = time.monotonic() - t0
    return update


# ----------------------------------------------------------------------------------- routing


def route_start(state: CUAState, runtime: Runtime[AgentContext]) -> str:
    """Take an initial screenshot only when asked to, and only on the first turn."""
    if runtime.context.settings.include_initial_screenshot and not state.get("contents"):
        return "observe"
    return "propose"


def route_next(state: CUAState) -> str:
    """After ``propose`` or ``act``: the next call, its approval, the model again, or the end."""
    if state.get("status") in FINAL or state.get("done"):
        return END
    pending = state.get("pending_calls") or []
    if not pending:
        return "propose"
    call = pending[0]
    if (
        safety.needs_confirmation(call)
        and not call.get("error")
        and state.get("approved_call") != state.get("call_index", 0)
    ):
        return "hitl_gate"
    return "act"


def build_graph() -> StateGraph[CUAState, AgentContext, CUAState, CUAState]:
    """The agent's graph, uncompiled (for inspection and drawing)."""
    g: StateGraph[CUAState, AgentContext, CUAState, CUAState] = StateGraph(
        CUAState, context_schema=AgentContext
    )
    g.add_node("observe", observe)
    g.add_node("propose", propose)
    g.add_node("hitl_gate", hitl_gate, destinations=("act", END))
    g.add_node("act", act)
    g.add_conditional_edges(START, route_start, ["observe", "propose"])
    g.add_edge("observe", "propose")
    g.add_conditional_edges("propose", route_next, ["hitl_gate", "act", "propose", END])
    g.add_conditional_edges("act", route_next, ["hitl_gate", "act", "propose", END])
    return g
