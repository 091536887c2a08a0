"""Runs: what a run is (:class:`~vnc_use.runs.spec.RunSpec`), the run rules
(:mod:`~vnc_use.runs.rules`), where it executes behind one set of verbs
(:class:`~vnc_use.runs.executor.Executor`: :class:`LocalExecutor`, :class:`ServedExecutor`;
the fleet's, :class:`vnc_use.fleet.FleetExecutor`, lives in the layer above), opening one
(:mod:`~vnc_use.runs.open`), :class:`~vnc_use.runs.agent.VncUseAgent` as its face in Python,
and the graph LangGraph Server serves (:mod:`~vnc_use.runs.serve`).

Importing this package is light: the agent (LangGraph, the model SDK) loads on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnc_use.runs.agent import VncUseAgent
    from vnc_use.runs.executor import Executor, LocalExecutor, ServedExecutor
    from vnc_use.runs.spec import RunSpec

__all__ = ["Executor", "LocalExecutor", "RunSpec", "ServedExecutor", "VncUseAgent"]


def __getattr__(name: str) -> Any:
    if name == "VncUseAgent":
        from vnc_use.runs.agent import VncUseAgent

        return VncUseAgent
    if name == "RunSpec":
        from vnc_use.runs.spec import RunSpec

        return RunSpec
    if name in ("Executor", "LocalExecutor", "ServedExecutor"):
        from vnc_use.runs import executor

        return getattr(executor, name)
    raise AttributeError(f"module 'vnc_use.runs' has no attribute {name!r}")
