"""The agent's graph for LangGraph Studio and ``langgraph dev`` (see ``langgraph.json``).

``graph`` is the graph :class:`~vnc_use.VncUseAgent` runs, compiled without a checkpointer
(the LangGraph server brings its own persistence). Studio shows its topology and state schema
from here. Its nodes reach the desktop and the model through the run context
(:class:`~vnc_use.agent.graph.AgentContext`: a live VNC connection, a Gemini client and a run
folder), which only ``VncUseAgent`` builds: run tasks with ``vnc-use run`` or ``VncUseAgent``.
"""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph

from vnc_use.agent.graph import AgentContext, build_graph
from vnc_use.agent.state import CUAState

__all__ = ["graph"]

graph: CompiledStateGraph[CUAState, AgentContext, CUAState, CUAState] = build_graph().compile()
graph.name = "vnc-use"
