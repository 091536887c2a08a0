"""The agent's graph, compiled without a checkpointer and without live parts: its topology
and schemas, for drawing and inspection.

``langgraph.json`` names the factory :func:`vnc_use.runs.serve.make_graph`, which builds this
same topology (from the same :func:`~vnc_use.agent.graph.build_graph`) with a run's live parts
bound, so LangGraph Server and Studio can run tasks; :class:`~vnc_use.VncUseAgent` does the
same in-process.
"""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph

from vnc_use.agent.graph import build_graph
from vnc_use.agent.state import CUAState
from vnc_use.runs.spec import RunSpec

__all__ = ["graph"]

graph: CompiledStateGraph[CUAState, RunSpec, CUAState, CUAState] = build_graph(
    context_schema=RunSpec
).compile()
graph.name = "vnc-use"
