"""Runs: what a run is (:class:`~vnc_use.runs.spec.RunSpec`), opening one (lease, folder,
storage, planner, desktop: :mod:`~vnc_use.runs.open`), :class:`~vnc_use.runs.agent.VncUseAgent`
as its face in Python, and the graph LangGraph Server serves (:mod:`~vnc_use.runs.serve`).

Importing this package is light: the agent (LangGraph, the model SDK) loads on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnc_use.runs.agent import VncUseAgent
    from vnc_use.runs.spec import RunSpec

__all__ = ["RunSpec", "VncUseAgent"]


def __getattr__(name: str) -> Any:
    if name == "VncUseAgent":
        from vnc_use.runs.agent import VncUseAgent

        return VncUseAgent
    if name == "RunSpec":
        from vnc_use.runs.spec import RunSpec

        return RunSpec
    raise AttributeError(f"module 'vnc_use.runs' has no attribute {name!r}")
