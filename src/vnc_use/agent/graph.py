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

One builder serves every use: :func:`build_graph` with the run's live parts bound
(``VncUseAgent`` per invocation, the LangGraph Server factory per run) or without them (state
reads, Studio, drawing). The graph's published context schema is the one its host gives
(the served graph: the JSON-only :class:`~vnc_use.runs.spec.RunSpec`, what a server client
sends); the nodes are handed the bound :class:`AgentContext` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from vnc_use.agent import approval as safety
from vnc_use.agent.act import act
from vnc_use.agent.context import AgentContext, AgentSettings
from vnc_use.agent.nodes import hitl_gate, observe, propose
from vnc_use.agent.state import CUAState
from vnc_use.errors import ConfigError
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


_R = TypeVar("_R")


def _bound(
    fn: Callable[[CUAState, Runtime[AgentContext]], _R], live: AgentContext | None
) -> Callable[..., _R]:
    """``fn`` handed the run's live parts as its runtime context (``live``, else a context
    that already is an :class:`AgentContext`)."""

    def node(state: CUAState, runtime: Runtime[Any]) -> _R:
        ctx: Any = live if live is not None else runtime.context
        if not isinstance(ctx, AgentContext):
            raise ConfigError(
                "this graph has no desktop or model bound: run it with VncUseAgent, or serve "
                "it with langgraph.json (vnc_use.runs.serve:make_graph)"
            )
        bound: Runtime[AgentContext] = replace(runtime, context=ctx)
        return fn(state, bound)

    node.__name__ = getattr(fn, "__name__", "node")
    node.__doc__ = fn.__doc__
    return node


Graph = StateGraph[CUAState, Any, CUAState, CUAState]


def build_graph(
    live: AgentContext | None = None,
    on_start: Callable[[CUAState], None] | None = None,
    context_schema: type[Any] | None = None,
) -> Graph:
    """The agent's graph, uncompiled; its nodes act with ``live`` (the run's desktop, model,
    run folder and journal). Without it, the same topology for state reads and drawing.

    ``on_start(state)`` is called once when a new run's input (its task) enters the graph,
    before any node: a host that does not see the input itself (the LangGraph Server factory)
    records the run's start there. It changes nothing in the topology. ``context_schema`` is
    the schema the graph publishes for its context (the served graph's: the run spec)."""
    g: Graph = StateGraph(CUAState, context_schema=context_schema)
    start = _bound(route_start, live)
    if on_start is not None:
        routed = start

        def start(state: CUAState, runtime: Runtime[Any]) -> str:
            on_start(state)
            return routed(state, runtime)

        start.__name__ = "route_start"  # the same branch as without a hook

    g.add_node("observe", _bound(observe, live))
    g.add_node("propose", _bound(propose, live))
    g.add_node("hitl_gate", _bound(hitl_gate, live), destinations=("act", END))
    g.add_node("act", _bound(act, live))
    g.add_conditional_edges(START, start, ["observe", "propose"])
    g.add_edge("observe", "propose")
    g.add_conditional_edges("propose", route_next, ["hitl_gate", "act", "propose", END])
    g.add_conditional_edges("act", route_next, ["hitl_gate", "act", "propose", END])
    return g
