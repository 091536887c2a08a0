# compat-alias: VncUseAgent moved up to vnc_use.runs.agent; `from vnc_use.agent import ...` works
"""The agent: a LangGraph graph (observe -> propose -> approve -> act) around a model and a desktop.

- :class:`VncUseAgent` -- re-exported for old imports from :mod:`vnc_use.runs.agent` (the
  layer above: nothing inside the package imports it from here);
- :mod:`~vnc_use.agent.graph` -- the graph, its nodes and routes;
- :mod:`~vnc_use.agent.state` -- the checkpointed state and the records in it;
- :mod:`~vnc_use.agent.approval` -- approvals of the actions a model marks for confirmation.

The conversation as JSON records lives beside the providers (:mod:`vnc_use.providers.history`);
the journal, checkpoints and leases in :mod:`vnc_use.store`, below the agent.

Importing this package is light: :class:`VncUseAgent` (LangGraph, the model SDK) loads on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnc_use.agent.context import AgentSettings
    from vnc_use.runs.agent import VncUseAgent

__all__ = ["AgentSettings", "VncUseAgent"]


def __getattr__(name: str) -> Any:
    if name == "VncUseAgent":
        from vnc_use.runs.agent import VncUseAgent

        return VncUseAgent
    if name == "AgentSettings":
        from vnc_use.agent.context import AgentSettings

        return AgentSettings
    raise AttributeError(f"module 'vnc_use.agent' has no attribute {name!r}")
