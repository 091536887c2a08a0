"""The graph as LangGraph's tools see it: ``langgraph.json`` and the pinned topology.

``langgraph dev`` loads each ``graphs`` entry of ``langgraph.json`` (``./path/file.py:name``)
by importing the file; this test does the same. The Mermaid drawing of the compiled graph is
pinned in ``tests/graph.mermaid`` (and shown in the README): a change of nodes or edges must be
a deliberate change of the snapshot. Regenerate it with::

    VNC_USE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_studio.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

from vnc_use.agent.graph import build_graph

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).resolve().parent / "graph.mermaid"


def test_langgraph_json_points_at_the_compiled_graph() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    assert config["dependencies"] == ["."]
    ((name, target),) = config["graphs"].items()
    assert name == "vnc_use"
    path, _, attr = target.partition(":")
    spec = importlib.util.spec_from_file_location("studio_as_loaded", ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as langgraph dev does: by file path
    graph = getattr(module, attr)
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None  # the LangGraph server brings its own
    assert set(graph.get_graph().nodes) == set(build_graph().compile().get_graph().nodes)
    assert graph.get_graph().draw_mermaid() == SNAPSHOT.read_text("utf-8")


def test_topology_snapshot() -> None:
    drawn = build_graph().compile().get_graph().draw_mermaid()
    if os.environ.get("VNC_USE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(drawn, "utf-8")
    assert drawn == SNAPSHOT.read_text("utf-8"), (
        "the graph's topology changed; if that is intended, regenerate the snapshot with "
        "VNC_USE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_studio.py, and update the README"
    )
    for node in ("observe", "propose", "hitl_gate", "act"):
        assert re.search(rf"^\s*{node}\({node}\)$", drawn, re.M), node


def test_readme_shows_the_pinned_topology() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)```", readme, re.S)
    assert blocks == [SNAPSHOT.read_text("utf-8").rstrip("\n") + "\n"]
