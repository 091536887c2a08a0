"""Human approval of the actions the model marks for confirmation, or the policy names.

Two things send a call to a person: the model (its own mark) and the approval policy
(``confirm_actions`` / ``--confirm NAME``: these actions always wait, for every provider, also
for models that send no safety decision). A call the policy stops is marked ``policy`` when it
is proposed (:func:`policy_asks`), so the mark is in the checkpoint and the gate is durable.
On approval only a call the *model* marked is acknowledged to the model (Gemini's
``safety_acknowledgement``; the API rejects it for a call it did not mark).

The rule for the model's own mark is simple and absolute: a call whose safety mark is
``needs_confirmation`` (see :data:`~vnc_use.providers.base.SafetyMark`) never runs without a
person's approval. The Gemini API's terms forbid bypassing it, so with ``hitl_mode=False`` the
run stops (``denied``) instead of running it (a policy-only call too: no person, no run). A
call marked ``blocked`` is never shown to a person at all: ``propose`` ends the run (status
``blocked``) before any call of its turn runs. A marked call with invalid arguments goes to the
gate too (the request carries its ``error``); approved, it is answered with the
error and the acknowledgement, and nothing runs.

The gate is a LangGraph ``interrupt()``; LangGraph re-runs the interrupted node from its top
when the run resumes, so :func:`hitl_gate` in :mod:`vnc_use.agent` does nothing before the
interrupt except read state. A human answers with :data:`APPROVE` or :data:`DENY` through
``VncUseAgent.approve(thread_id)`` / ``deny(thread_id)`` -- from the same process or any other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from vnc_use.actions import TABLES
from vnc_use.errors import ConfigError

if TYPE_CHECKING:  # a type only: checking a run's settings needs no LangGraph
    from vnc_use.agent.state import FunctionCallRecord

Decision = Literal["approve", "deny"]
APPROVE: Literal["approve"] = "approve"
DENY: Literal["deny"] = "deny"


CONFIRM_ALL = "all"
"""``--confirm all``: every call waits for a person."""


def confirmable_actions() -> tuple[str, ...]:
    """The names ``--confirm`` accepts besides ``all``: every action of the vocabulary."""
    return tuple(sorted({name for table in TABLES for name in table.names}))


def check_confirm_actions(names: Iterable[str]) -> tuple[str, ...]:
    """The approval policy's action names, checked (duplicates dropped, order kept)."""
    valid = confirmable_actions()
    chosen: list[str] = []
    for name in names:
        if name != CONFIRM_ALL and name not in valid:
            raise ConfigError(
                f"--confirm / confirm_actions: unknown action {name!r}; use {CONFIRM_ALL} or "
                f"action names: {', '.join(valid)}"
            )
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def policy_asks(name: str, confirm_actions: Iterable[str]) -> str | None:
    """The policy entry (``name`` or ``all``) that makes a call of ``name`` wait for a
    person, or None."""
    chosen = set(confirm_actions)
    if name in chosen:
        return name
    return CONFIRM_ALL if CONFIRM_ALL in chosen else None


def model_asks(call: FunctionCallRecord) -> bool:
    """True when the model itself asked for a human's confirmation before ``call`` runs (only
    then is an approval acknowledged to the model)."""
    return call.get("safety", "none") == "needs_confirmation"


def needs_confirmation(call: FunctionCallRecord) -> bool:
    """True when ``call`` waits for a person: the model asked, or the approval policy does."""
    return model_asks(call) or bool(call.get("policy"))


def asked_by(call: FunctionCallRecord) -> str:
    """Who sent the call to a person: ``model``, ``policy`` or ``model and policy``."""
    if model_asks(call):
        return "model and policy" if call.get("policy") else "model"
    return "policy"


def explanation(call: FunctionCallRecord) -> str:
    """The model's reason for asking, the approval policy's, or a generic one."""
    text = call.get("safety_explanation")
    if model_asks(call) or not call.get("policy"):
        return str(text) if text else "The model asked for confirmation before this action."
    return (
        f"The approval policy asks before {call['name']} (--confirm {call['policy']}); "
        "the model did not ask."
    )


def approval_request(
    call: FunctionCallRecord,
    *,
    thread_id: str,
    step: int,
    pixels: dict[str, int],
    screen_size: tuple[int, int] | None,
    screenshot: str | None,
) -> dict[str, Any]:
    """The payload shown to the person who decides (the ``interrupt()`` value); ``error``
    when the call is invalid and would not run even if approved."""
    request: dict[str, Any] = {
        "thread_id": thread_id,
        "step": step,
        "name": call["name"],
        "args": call["args"],
        "pixels": pixels,
        "screen_size": list(screen_size) if screen_size else None,
        "explanation": explanation(call),
        "asked_by": asked_by(call),
        "screenshot": screenshot,
    }
    if call.get("error"):
        request["error"] = call["error"]
    request.update(inbox_request(request))
    return request


def inbox_request(request: dict[str, Any]) -> dict[str, Any]:
    """The Agent Inbox fields of an approval request (``action_request``, ``config``,
    ``description``): what an inbox shows, next to vnc-use's own fields."""
    pixels = request.get("pixels") or {}
    where = f" at pixels ({pixels['x']}, {pixels['y']})" if "x" in pixels and "y" in pixels else ""
    text = f"**{request['name']}**{where} (step {request['step']}, asked by {request['asked_by']})"
    text += f"\n\n{request['explanation']}"
    if request.get("error"):
        text += f"\n\nThe call is invalid and will not run even if accepted: {request['error']}"
    return {
        "action_request": {
            "action": request["name"],
            "args": {**request["args"], "pixels": pixels},
        },
        "config": {
            "allow_accept": True,
            "allow_ignore": True,
            "allow_respond": False,
            "allow_edit": False,
        },
        "description": text,
    }


_APPROVING = frozenset({APPROVE, "y", "yes", "accept"})


def parse_decision(answer: Any) -> Decision:
    """Turn a resume value into a decision; anything but a clear approval is a denial.

    Approvals: ``"approve"`` / ``"yes"`` / ``True``; ``{"decision": "approve"}``;
    Agent Inbox's ``[{"type": "accept", ...}]``; LangChain HITL middleware's
    ``{"decisions": [{"type": "approve"}]}``. Ignore, respond, edit, reject, a list of
    several answers or anything unclear: a denial.
    """
    if isinstance(answer, list):  # Agent Inbox: one HumanResponse per interrupt
        return _typed(answer[0]) if len(answer) == 1 else DENY
    if isinstance(answer, dict):
        if "decisions" in answer:  # HITL middleware: one decision per action request
            found = answer["decisions"]
            return _typed(found[0]) if isinstance(found, list) and len(found) == 1 else DENY
        if "type" in answer:
            return _typed(answer)
        answer = answer.get("decision", answer.get("approved"))
    if answer is True or (isinstance(answer, str) and answer.strip().lower() in _APPROVING):
        return APPROVE
    return DENY


def reason_of(answer: Any) -> str | None:
    """The reason a person gave with an answer (``{"decision": "deny", "reason": ...}``)."""
    if isinstance(answer, dict) and isinstance(answer.get("reason"), str):
        return answer["reason"].strip() or None
    return None


def _typed(response: Any) -> Decision:
    """``{"type": "accept" | "approve"}`` approves; every other response denies."""
    if isinstance(response, dict) and response.get("type") in ("accept", APPROVE):
        return APPROVE
    return DENY
