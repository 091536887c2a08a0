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

import io
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from PIL import Image

from vnc_use import history, safety
from vnc_use.actions import ActionError, denorm
from vnc_use.backends.vnc import VNCController
from vnc_use.errors import VncError
from vnc_use.executor import DEFAULT_SEARCH_URL, ActionContext, execute
from vnc_use.logging_utils import RunFolder
from vnc_use.planners.gemini import GeminiComputerUse
from vnc_use.settle import capture_settled
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
    wait_seconds: float = 5.0


@dataclass
class AgentContext:
    """What the nodes use besides state; lives in memory only (never checkpointed)."""

    controller: VNCController
    planner: GeminiComputerUse
    run: RunFolder
    settings: AgentSettings
    stop: threading.Event = field(default_factory=threading.Event)


# ---------------------------------------------------------------------------------- helpers


def _png_size(ctx: AgentContext, sha: str | None) -> tuple[int, int] | None:
    if not sha:
        return None
    with Image.open(io.BytesIO(ctx.run.load_screenshot(sha))) as img:
        width, height = img.size
    return width, height


def _capture(ctx: AgentContext) -> tuple[str, tuple[int, int]]:
    """A settled screenshot, stored in the run folder; returns its digest and size."""
    s = ctx.settings
    shot = capture_settled(ctx.controller, min_wait=s.settle_min_s, max_wait=s.settle_max_s)
    if not shot.settled:
        ctx.run.event("screen_not_settled", waited_ms=shot.waited_ms, frames=shot.frames)
    return ctx.run.put_screenshot(shot.png), shot.size


def _pixels_of(call: FunctionCallRecord, size: tuple[int, int] | None) -> dict[str, int]:
    """Pixel targets of a call's grid coordinates (for approval prompts), where valid."""
    if size is None:
        return {}
    args = call["args"]
    out: dict[str, int] = {}
    for kx, ky in (("x", "y"), ("destination_x", "destination_y")):
        x, y = args.get(kx), args.get(ky)
        if isinstance(x, int) and isinstance(y, int) and 0 <= x <= 999 and 0 <= y <= 999:
            out[kx], out[ky] = denorm(x, y, *size)
    return out


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
        "contents": [history.task_turn(state["task"], sha)],
        "last_screenshot_png": sha,
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
    if proposal.model_content is not None and proposal.model_content.parts:
        update["contents"] = [
            *update.get("contents", []),
            history.model_turn(proposal.model_content),
        ]
    if not proposal.calls:
        update.update(status="done", done=True, final_text=proposal.text, pending_calls=[])
    else:
        calls: list[FunctionCallRecord] = [
            {
                "name": c["name"],
                "args": c["args"],
                "safety_decision": c.get("safety_decision"),
                "id": c.get("id"),
            }
            for c in proposal.calls
        ]
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
    sha = state.get("last_screenshot_png")
    size = _png_size(ctx, sha)
    request = safety.approval_request(
        call,
        thread_id=ctx.run.thread_id,
        step=step,
        pixels=_pixels_of(call, size),
        screen_size=size,
        screenshot=sha,
    )
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
        decision + "d",
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


def act(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Execute the next pending call, capture the screen, and answer the call."""
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
    size = _png_size(ctx, sha)
    if size is None:
        sha, size = _capture(ctx)

    error: str | None = None
    pixels: dict[str, int] = {}
    response: dict[str, Any]
    planner = ctx.planner
    t_act = time.monotonic()
    if planner.is_custom(call["name"]):
        fr = planner.run_custom_function(dict(call))
        action_ms = round((time.monotonic() - t_act) * 1000, 1)
        response = dict(fr.response or {})
        error = response.get("error")
        new_sha: str | None = None
    else:
        action = planner.action_table.validate(
            call["name"], call["args"], excluded=planner.excluded_actions
        )
        if isinstance(action, ActionError):
            error = action.message
        else:
            actx = ActionContext(
                hands=ctx.controller,
                width=size[0],
                height=size[1],
                search_url=ctx.settings.search_url,
                wait_seconds=ctx.settings.wait_seconds,
                stop=ctx.stop,
            )
            try:
                pixels = execute(action, actx)
            except VncError:
                raise  # the desktop is gone: infrastructure, ends the run (resumable)
            except (ValueError, TypeError) as exc:  # the model asked for something impossible
                error = f"{type(exc).__name__}: {exc}"
        action_ms = round((time.monotonic() - t_act) * 1000, 1)
        if error is None:
            new_sha, size = _capture(ctx)
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
        approved=approved,
        screenshot=new_sha,
    )
    responses = [*state.get("responses", []), record]
    update: dict[str, Any] = {
        "pending_calls": pending,
        "call_index": index + 1,
        "approved_call": None,
        "step": step,
        "transcript": [entry],
        "last_screenshot_png": new_sha or sha,
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
    if safety.needs_confirmation(pending[0]) and state.get("approved_call") != state.get(
        "call_index", 0
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
