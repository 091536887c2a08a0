"""Run events on LangGraph's custom stream, for remote clients.

Every event the run folder writes (redacted, as ``events.jsonl`` has it) also goes to
LangGraph's stream writer, so a client that follows a run with ``stream_mode="custom"`` (through
LangGraph Server, or ``graph.stream``) sees what the terminal shows. Outside a node (no runnable
context) and under plain ``invoke`` there is no stream: the event is only written.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer


def to_custom_stream(event: dict[str, Any]) -> None:
    """A run-folder listener: pass ``event`` to the current run's custom stream, if any."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # not inside a node: nobody follows this event live
        return
    writer(event)
