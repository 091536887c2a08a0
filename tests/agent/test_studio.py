"""The graph as LangGraph's tools see it: ``langgraph.json`` and the pinned topology.

``langgraph dev`` loads each ``graphs`` entry of ``langgraph.json`` (``module:name``, a graph
factory) by importing the module; this test does the same and asks the factory for the graph
as the server does for schemas and Studio (no run: nothing is opened). The Mermaid drawing of
the compiled graph is pinned in ``tests/agent/graph.mermaid`` (and shown in the docs, on the
LangGraph Server page): a change of
nodes or edges must be a deliberate change of the snapshot. Regenerate it with::

    VNC_USE_UPDATE_SNAPSHOTS=1 python -m pytest tests/agent/test_studio.py
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.store.memory import InMemoryStore
from langgraph_sdk.runtime import _ReadRuntime  # what the server passes for schema reads

from vnc_use.agent.graph import build_graph

from doc_pages import all_pages, blocks

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).resolve().parent / "graph.mermaid"


def test_langgraph_json_points_at_the_graph_factory() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    assert config["dependencies"] == ["."]
    ((name, target),) = config["graphs"].items()
    assert name == "vnc_use"
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)  # as langgraph dev does
    runtime = _ReadRuntime(access_context="assistants.read", user=None, store=InMemoryStore())
    graph = asyncio.run(_enter(factory({"configurable": {}}, runtime)))
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None  # the LangGraph server brings its own
    assert set(graph.get_graph().nodes) == set(build_graph().compile().get_graph().nodes)
    assert graph.get_graph().draw_mermaid() == SNAPSHOT.read_text("utf-8")


async def _enter(factory: Any) -> Any:
    async with factory as graph:
        return graph


def test_topology_snapshot() -> None:
    drawn = build_graph().compile().get_graph().draw_mermaid()
    if os.environ.get("VNC_USE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(drawn, "utf-8")
    assert drawn == SNAPSHOT.read_text("utf-8"), (
        "the graph's topology changed; if that is intended, regenerate the snapshot with "
        "VNC_USE_UPDATE_SNAPSHOTS=1 python -m pytest tests/agent/test_studio.py, and update the "
        "docs"
    )
    for node in ("observe", "propose", "hitl_gate", "act"):
        assert re.search(rf"^\s*{node}\({node}\)$", drawn, re.M), node


def test_readme_shows_the_pinned_topology() -> None:
    """The one Mermaid drawing of the docs (docs/deployment/langgraph-server.md) is the
    snapshot."""
    drawings = [b for path in all_pages() for b in blocks(path.read_text("utf-8"), "mermaid")]
    assert drawings == [SNAPSHOT.read_text("utf-8").rstrip("\n") + "\n"]
