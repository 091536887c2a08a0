"""The graph's first nodes: ``observe`` (the task and a screenshot), ``propose`` (ask the
model) and ``hitl_gate`` (a person approves a call the model marked for confirmation)."""

from __future__ import annotations

import time
from typing import Any

from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from vnc_use.actions import TABLES, ActionError, call_pixels
from vnc_use.agent import approval as safety
from vnc_use.agent import costs, stall
from vnc_use.agent.context import AgentContext, capture, over_time, screen_size, storable
from vnc_use.agent.human import taken_over
from vnc_use.agent.state import CUAState, FunctionCallRecord, TranscriptEntry
from vnc_use.errors import PlannerError
from vnc_use.providers import history
from vnc_use.providers.base import Proposal, ProposedCall


def _pixels_of(call: FunctionCallRecord, size: tuple[int, int] | None) -> dict[str, int]:
    """Pixel targets of a call's grid coordinates (for approval prompts), where valid."""
    return call_pixels(call["args"], size, TABLES)


def _call_record(ctx: AgentContext, call: ProposedCall) -> FunctionCallRecord:
    """A proposed call, checked against the action table now: an invalid call is answered
    with its error (nothing runs); one marked for confirmation still goes to a person first,
    whose approval is acknowledged with the error. A valid call the approval policy names
    (``confirm_actions``) is marked ``policy``: it waits for a person too."""
    planner = ctx.planner
    record: FunctionCallRecord = {
        "id": call["id"],
        "name": call["name"],
        "args": storable(call["args"]),
        "safety": call["safety"],
        "safety_explanation": call["safety_explanation"],
        "intent": call["intent"],
    }
    if not planner.is_custom(call["name"]):
        checked = planner.validate(call["name"], call["args"])
        if isinstance(checked, ActionError):
            record["error"] = checked.message
    # the approval policy: a call that can run waits for a person (an invalid one is answered
    # with its error and never runs, so there is nothing to approve)
    rule = safety.policy_asks(call["name"], ctx.settings.confirm_actions)
    if rule is not None and not record.get("error"):
        record["policy"] = rule
    return record


def _first_mark(calls: list[FunctionCallRecord]) -> dict[str, Any] | None:
    """The safety mark of the first call the model marked, for state."""
    for c in calls:
        if c["safety"] != "none":
            return {"mark": c["safety"], "explanation": c["safety_explanation"]}
    return None


def blocked_call_reason(call: FunctionCallRecord) -> str:
    """Why a run ends on a call the model marked ``blocked`` (the call and its explanation)."""
    why = call.get("safety_explanation") or "no explanation given"
    return (
        f"the model marked its call {call['name']} blocked: {why}; "
        "no call of that turn was run or acknowledged"
    )


def end_blocked(ctx: AgentContext, node: str, reason: str) -> dict[str, Any]:
    """The update that ends a run with status ``blocked`` (and its ``blocked`` event)."""
    ctx.run.event("blocked", node=node, reason=reason)
    return {"status": "blocked", "done": True, "error": reason, "pending_calls": []}


def observe(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """First turn: the task with a screenshot of the desktop as it is now."""
    t0 = time.monotonic()
    ctx = runtime.context
    sha, size = capture(ctx)
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
    stop = taken_over(ctx, "propose") or _stopped_before_call(ctx, state)
    if stop is not None:
        return stop
    update: dict[str, Any] = {}
    turns = _turns(ctx, state, update)
    n = state.get("model_calls", 0) + 1
    ctx.run.event("model_request", node="propose", n=n, turns=len(turns))
    ctx.run.keep_summary()  # once a step: the runs list reads it while the model thinks
    t_model = time.monotonic()
    proposal = ctx.planner.propose(turns, ctx.run.load_screenshot, ctx.settings.keep_screenshots)
    latency_ms = round((time.monotonic() - t_model) * 1000, 1)
    ctx.run.write_model_exchange(n, proposal.request_json, proposal.response_json)
    cost = costs.call_cost(proposal.usage, costs.planner_price(ctx), costs.provider_of(ctx))
    total = costs.run_total(state, cost)
    ctx.run.event(
        "model_response",
        node="propose",
        n=n,
        latency_ms=latency_ms,
        finish_reason=proposal.reason,
        stop=proposal.stop,
        text=proposal.text,
        calls=[{"name": c["name"], "args": c["args"]} for c in proposal.calls],
        usage=proposal.usage,
        cost_usd=cost,
        run_cost_usd=total,
    )
    update["cost_usd"] = state.get("cost_usd", 0.0) + (cost or 0.0)
    update["cost_unknown"] = total is None
    update["model_calls"] = n
    update["model_ms"] = latency_ms
    update["active_seconds"] = time.monotonic() - t0
    if proposal.notice:
        notice = dict(proposal.notice)
        ctx.run.event(str(notice.pop("event", "notice")), node="propose", n=n, **notice)
    if proposal.stop == "diverged":  # a replay: the screen is not the recorded one
        update.update(status="diverged", done=True, error=proposal.stop_message, pending_calls=[])
        return update
    if proposal.stop == "error" and not proposal.calls:  # a planner that does not retry
        raise PlannerError(proposal.stop_message or f"unexpected answer: {proposal.reason}")
    # A turn the API refused, or one with a call the model marked blocked, ends the run before
    # any of its calls runs (even the ones before the blocked call): nothing is executed,
    # shown for approval or acknowledged, and the turn is not added to the history.
    calls = [_call_record(ctx, c) for c in proposal.calls]
    blocked = [c for c in calls if c["safety"] == "blocked"]
    if proposal.stop == "blocked" or blocked:
        reason = (
            blocked_call_reason(blocked[0])
            if blocked
            else proposal.stop_message or f"the API blocked the turn: {proposal.reason}"
        )
        update.update(end_blocked(ctx, "propose", reason), final_text=proposal.text)
        return update
    if proposal.turn is not None:
        update["contents"] = [
            *update.get("contents", []),
            storable(history.model_turn(proposal.turn)),
        ]
    update.update(_end_of_turn(ctx, proposal, calls, n))
    return update


def _end_of_turn(
    ctx: AgentContext, proposal: Proposal, calls: list[FunctionCallRecord], n: int
) -> dict[str, Any]:
    """How the model's turn goes on: its calls to run, else a request for a person
    (``awaiting_human``), a failure it reports (``failed``), or the end (``done``)."""
    if calls:
        return {
            "pending_calls": calls,
            "responses": [],
            "call_index": 0,
            "final_text": proposal.text,
            "safety": _first_mark(calls),
        }
    if proposal.stop == "asks_person":
        return _asks_person(ctx, proposal.text, n)
    if proposal.stop == "failed":  # the model itself says the task failed
        why = proposal.stop_message or "the model reported that the task failed"
        ctx.run.event("model_failed", node="propose", reason=why)
        return {
            "status": "failed",
            "done": True,
            "error": why,
            "final_text": proposal.text,
            "pending_calls": [],
        }
    return {"status": "done", "done": True, "final_text": proposal.text, "pending_calls": []}


def _turns(ctx: AgentContext, state: CUAState, update: dict[str, Any]) -> list[dict[str, Any]]:
    """The history the request is built from: the task alone when there was no initial
    screenshot; after a hand-back, the person's turn (what they did, a fresh screenshot).
    New turns go into ``update`` for the history too."""
    turns = list(state.get("contents", []))
    if not turns:  # no initial screenshot: the first turn is the task alone
        first = history.task_turn(state["task"], None)
        turns.append(first)
        update["contents"] = [first]
    returned = state.get("handed_back")
    if returned:
        turn = _person_turn(ctx, returned)
        turns.append(turn)
        update["contents"] = [*update.get("contents", []), turn]
        update["handed_back"] = None
    return turns


def _asks_person(ctx: AgentContext, question: str, n: int) -> dict[str, Any]:
    """The update that pauses the run for a person the model asked for (``awaiting_human``,
    its question kept): a durable pause in the checkpoint, never ``done``."""
    asked = {"asked_by": "model", "question": question, "since": time.time()}
    ctx.run.event("asks_person", node="propose", n=n, question=question)
    return {
        "status": "awaiting_human",
        "done": True,
        "final_text": "",
        "pending_calls": [],
        "human": asked,
    }


def _person_turn(ctx: AgentContext, returned: dict[str, Any]) -> dict[str, Any]:
    """The person's turn the model gets after a hand-back: what happened, in plain words, and
    a fresh screenshot (taken now: the person may have changed everything)."""
    sha, size = capture(ctx)
    text = handback_text(returned)
    facts: dict[str, Any] = {
        k: returned[k] for k in ("asked_by", "seconds", "clicks", "keys") if k in returned
    }
    ctx.run.event("person_turn", node="propose", screenshot=sha, text=text, **facts)
    return history.person_turn(text, sha, size, facts)


def handback_text(returned: dict[str, Any]) -> str:
    """What the model is told when a person hands the desktop back (or answers it)."""
    note = str(returned.get("note") or "").strip()
    if returned.get("asked_by") == "model":
        said = (
            f"A person answered your request: {note}"
            if note
            else ("A person looked at your request and handed the desktop back without a note.")
        )
        return f"{said} The screen now is in the screenshot; continue the task."
    seconds = float(returned.get("seconds") or 0.0)
    clicks, keys = int(returned.get("clicks") or 0), int(returned.get("keys") or 0)
    did = f"{clicks} click{'s' if clicks != 1 else ''}, {keys} key press{'es' if keys != 1 else ''}"
    text = (
        f"A person took control of the desktop for {seconds:.0f} s ({did}) and handed it "
        "back; what you asked for before that and had not run yet was not run. "
    )
    if note:
        text += f"Their note: {note} "
    return text + "The screen now is in the screenshot; continue the task from here."


def _stopped_before_call(ctx: AgentContext, state: CUAState) -> dict[str, Any] | None:
    """The update that ends the run before the model is asked again: a budget spent (time,
    steps), a stall that went on after the model was told (``stuck``), or the run's cost at
    its cap (``cost_limit``)."""
    if over_time(state, ctx):
        return {"status": "timeout", "done": True}
    if state.get("step", 0) >= ctx.settings.step_limit:
        return {"status": "step_limit", "done": True}
    why = stall.stuck_reason(state.get("stall"))
    if why is not None:
        ctx.run.event("stuck", node="propose", step=state.get("step", 0), reason=why)
        return {"status": "stuck", "done": True, "error": why, "pending_calls": []}
    cap = ctx.settings.max_cost
    if cap is None:
        return None
    total = costs.run_total(state, 0.0)
    if total is not None and total < cap:
        return None
    why = (
        f"the run's cost reached its cap of ${cap:g} (spent {costs.format_cost(total)}) before "
        "the next model call; continue with resume --max-cost HIGHER"
        if total is not None
        else "the run's cost is unknown, so --max-cost cannot be kept; give the model's price "
        "with --price INPUT/OUTPUT"
    )
    ctx.run.event("cost_limit", node="propose", cost_usd=total, max_cost=cap, reason=why)
    return {"status": "cost_limit", "done": True, "error": why, "pending_calls": []}


def hitl_gate(state: CUAState, runtime: Runtime[AgentContext]) -> Command[str]:
    """Pause for a human before a call the model marked for confirmation (its safety mark) or
    the approval policy names (``confirm_actions``).

    Nothing happens before ``interrupt()`` but reading state: LangGraph re-runs this node from
    its top when the run resumes.
    """
    ctx = runtime.context
    call = state["pending_calls"][0]
    if call.get("safety") == "blocked":  # a checkpoint of an older version paused here
        return Command(goto=END, update=end_blocked(ctx, "hitl_gate", blocked_call_reason(call)))
    index = state.get("call_index", 0)
    step = state.get("step", 0) + 1
    request = approval_request_for(ctx, state, call, step)
    if not ctx.settings.hitl_mode:
        reason = (
            f"{call['name']} requires human confirmation ({request['explanation']}) and "
            "hitl_mode is off; it was not executed"
            + (
                " (the API's terms forbid bypassing it)."
                if safety.model_asks(call)
                else " (the approval policy asks a person first)."
            )
        )
        ctx.run.event(
            "denied", node="hitl_gate", step=step, name=call["name"], reason=reason, by="policy"
        )
        return Command(goto=END, update={"status": "denied", "done": True, "error": reason})
    answer = interrupt(request)
    decision = safety.parse_decision(answer)
    ctx.run.event(
        "approved" if decision == safety.APPROVE else "denied",
        node="hitl_gate",
        step=step,
        name=call["name"],
        explanation=request["explanation"],
        asked_by=request["asked_by"],
        by="person",
        **({"reason": safety.reason_of(answer)} if safety.reason_of(answer) else {}),
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


def approval_request_for(
    ctx: AgentContext, state: CUAState, call: FunctionCallRecord, step: int
) -> dict[str, Any]:
    """What a person is shown before ``call`` runs: the call, its real pixel target, why."""
    size = screen_size(ctx, state)
    return safety.approval_request(
        call,
        thread_id=ctx.run.thread_id,
        step=step,
        pixels=_pixels_of(call, size),
        screen_size=size,
        screenshot=state.get("last_screenshot_png"),
    )
