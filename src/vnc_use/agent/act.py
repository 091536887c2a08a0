"""The ``act`` node: run the next pending call on the desktop and answer it with a screenshot.

The journal (see :mod:`vnc_use.agent.journal`) makes this safe to re-run after a crash: an
action already performed is not performed again, and one that may or may not have been
performed is never silently repeated.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from vnc_use.actions import ActionError, ValidatedAction
from vnc_use.actions.execute import ActionContext, execute
from vnc_use.agent import approval as safety
from vnc_use.agent import history
from vnc_use.agent.context import AgentContext, capture, over_time, screen_size
from vnc_use.agent.journal import Outcome, call_key
from vnc_use.agent.nodes import approval_request_for
from vnc_use.agent.state import (
    CUAState,
    FunctionCallRecord,
    FunctionResponseRecord,
    TranscriptEntry,
)
from vnc_use.errors import VncConnectionError, VncError


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


def act(state: CUAState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Execute the next pending call, capture the screen, and answer the call.

    The journal (see :mod:`vnc_use.agent.journal`) makes this safe to re-run after a crash: an
    action already performed is not performed again, and one that may or may not have been
    performed is never silently repeated.
    """
    t0 = time.monotonic()
    ctx = runtime.context
    step = state.get("step", 0)
    if step >= ctx.settings.step_limit:
        return {"status": "step_limit", "done": True}
    if over_time(state, ctx):
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
    size = screen_size(ctx, state)
    if size is None:
        sha, size = capture(ctx)

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
            if not ctx.desktop.is_connected():  # known lost: nothing is sent, nothing unsure
                raise VncConnectionError(
                    f"the connection to the VNC server was lost before {call['name']} was sent"
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
            new_sha, size = capture(ctx)
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
