"""A person in the loop beyond approvals: the run waits for one (``awaiting_human``) and goes
on when the desktop is handed back.

The run pauses in its checkpoint (status ``awaiting_human``, the graph ended), never in a
blocked thread: any process continues it. :func:`handed_back` is the state update a
hand-back writes before the next leg starts: the calls of the model's turn that had not run
are answered as not run (a person may have changed the screen they aimed at), and the next
model request carries a person's turn (:func:`vnc_use.agent.nodes.handback_text`, with a fresh
screenshot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnc_use.agent.context import AgentContext
from vnc_use.providers import history
from vnc_use.providers.base import CallResult

__all__ = ["NOT_RUN", "handed_back", "taken_over"]

NOT_RUN = (
    "Not run: a person took control of the desktop before this call ran; look at the new "
    "screenshot before going on."
)
"""The answer of each call a takeover left unrun (the model is asked again afterwards)."""


def handed_back(values: Mapping[str, Any], returned: Mapping[str, Any]) -> dict[str, Any]:
    """The state update of a hand-back (``values``: the run's state; ``returned``: the
    person's note, seconds held, clicks and key presses): running again, the unrun calls
    answered, the person's turn due with the next model request."""
    update: dict[str, Any] = {
        "status": "running",
        "done": False,
        "error": None,
        "human": None,
        "handed_back": dict(returned),
        "pending_calls": [],
        "approved_call": None,
    }
    pending = list(values.get("pending_calls") or [])
    answered: list[CallResult] = list(values.get("responses") or [])
    if pending or answered:
        for call in pending:
            answered.append(
                {
                    "name": call["name"],
                    "id": call.get("id"),
                    "screenshot": None,
                    "error": NOT_RUN,
                }
            )
        update["responses"] = []
        update["call_index"] = int(values.get("call_index") or 0) + len(pending)
        update["contents"] = [history.responses_turn(answered)]
    return update


def taken_over(ctx: AgentContext, node: str) -> dict[str, Any] | None:
    """At a step boundary: the update that pauses the run because a person took its desktop
    over since this leg began (``awaiting_human``; nothing more is sent or captured), or
    None. The calls of the model's turn still pending stay in state: the hand-back answers
    them as not run."""
    if ctx.fence is None:
        return None
    hold = ctx.fence()
    if hold is None:
        return None
    ctx.run.event("taken_over", node=node, **hold)
    return {"status": "awaiting_human", "done": True, "human": {"asked_by": "person", **hold}}
