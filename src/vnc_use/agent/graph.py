"""The LangGraph agent: observe -> propose -> (hitl_gate) -> act, durable in SQLite.

::

    START -+-> observe -> propose -+-> act -+-> act        (the turn's next call)
           |               ^       |        +-> hitl_gate  (the next call needs approval)
           +---------------+       |        +-> propose    (every call of the turn answered)
                                   +-> hitl_gate -+- approve -> act
                                   |              +- deny ----> END
                                   +-> END  (no calls: done; a refused turn or a call marked
                                             blocked: blocked; a step/time budget spent)

Node functions live at module level and reach the desktop, the model and the run folder
through LangGraph's runtime context (:class:`AgentContext`), which is never checkpointed.
State (:class:`~vnc_use.agent.state.CUAState`) holds only JSON-able values and screenshot digests.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from vnc_use.agent import approval as safety
from vnc_use.agent.act import act
from vnc_use.agent.context import AgentContext, AgentSettings
from vnc_use.agent.nodes import hitl_gate, observe, propose
from vnc_use.agent.state import CUAState
from vnc_use.status import FINAL

__all__ = ["FINAL", "AgentContext", "AgentSettings", "build_graph", "route_next", "route_start"]


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
    # a call marked blocked never gets here from propose; from an older checkpoint it goes to
    # act, which ends the run without running it (never to a person)
    if safety.needs_confirmation(call) and state.get("approved_call") != state.get("call_index", 0):
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
