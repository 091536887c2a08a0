"""A run's events as server-sent events: the lines of its ``events.jsonl`` as they are written.

Whoever writes them (a leg this console started, ``vnc-use approve`` in another terminal, a
worker writing into the same folder), the page sees them: the file is read from where the last
read stopped, every ``poll`` seconds (50 ms: well under the half second an event may take to
reach the page). Each SSE message is one event: ``id`` is its line number (a reconnecting
client sends ``Last-Event-ID`` and gets only the later ones), ``event`` its name
(``run_started``, ``action``, ``run_paused``, ``approved``, ``run_ended``, ...), ``data`` the
event's JSON, passed once more through the redactor.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

__all__ = ["sse", "tail"]

Redact = Callable[[Any], Any]


def sse(event: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    """One server-sent event."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, default=str))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


async def tail(
    run_dir: Path,
    redact: Redact,
    *,
    after: int = 0,
    poll: float = 0.05,
    extra: Callable[[], dict[str, Any] | None] | None = None,
    keepalive: float = 15.0,
) -> AsyncIterator[bytes]:
    """The run's events from line ``after`` on, then each new one, for as long as the client
    listens. ``extra`` is asked on every poll for a message of the console's own (a leg
    started or ended, one that failed before it recorded anything), sent as a ``console``
    event."""
    path = run_dir / "events.jsonl"
    offset = 0
    line_no = 0
    pending = b""
    idle = 0.0
    while True:
        chunk = b""
        try:
            with path.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
        except OSError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                if not raw.strip():
                    continue
                line_no += 1
                record = _record(raw) if line_no > after else None
                if record is not None:
                    idle = 0.0
                    yield sse(str(record.get("event", "message")), redact(record), line_no)
        message = extra() if extra is not None else None
        if message is not None:
            idle = 0.0
            yield sse("console", redact(message))
        await asyncio.sleep(poll)
        idle += poll
        if idle >= keepalive:
            idle = 0.0
            yield b": keep-alive\n\n"
