"""Human approval of the actions the model marks for confirmation.

The rule is simple and absolute: a call whose safety mark is ``needs_confirmation`` (see
:data:`~vnc_use.providers.base.SafetyMark`) never runs without a person's approval. The Gemini
API's terms forbid bypassing it, so with ``hitl_mode=False`` the run stops (``denied``) instead
of running it. A call marked ``blocked`` is never shown to a person at all: ``propose`` ends the
run (status ``blocked``) before any call of its turn runs. A marked call with invalid arguments
goes to the gate too (the request carries its ``error``); approved, it is answered with the
error and the acknowledgement, and nothing runs.

The gate is a LangGraph ``interrupt()``; LangGraph re-runs the interrupted node from its top
when the run resumes, so :func:`hitl_gate` in :mod:`vnc_use.agent` does nothing before the
interrupt except read state. A human answers with :data:`APPROVE` or :data:`DENY` through
``VncUseAgent.approve(thread_id)`` / ``deny(thread_id)`` -- from the same process or any other.
"""

from __future__ import annotations

from typing import Any, Literal

from vnc_use.agent.state import FunctionCallRecord

Decision = Literal["approve", "deny"]
APPROVE: Literal["approve"] = "approve"
DENY: Literal["deny"] = "deny"


def needs_confirmation(call: FunctionCallRecord) -> bool:
    """True when the model asked for a human's confirmation before ``call`` runs."""
    return call.get("safety", "none") == "needs_confirmation"


def explanation(call: FunctionCallRecord) -> str:
    """The model's reason for asking, or a generic one."""
    text = call.get("safety_explanation")
    return str(text) if text else "The model asked for confirmation before this action."


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
        "screenshot": screenshot,
    }
    if call.get("error"):
        request["error"] = call["error"]
    return request


def parse_decision(answer: Any) -> Decision:
    """Turn a resume value into a decision; anything but a clear approval is a denial."""
    if isinstance(answer, dict):
        answer = answer.get("decision", answer.get("approved"))
    if answer is True or (
        isinstance(answer, str) and answer.strip().lower() in {APPROVE, "y", "yes"}
    ):
        return APPROVE
    return DENY
