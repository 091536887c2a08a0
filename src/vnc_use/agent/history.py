"""The conversation history as checkpoint-friendly records, and its conversion to Gemini turns.

State keeps the history as plain dicts (see :mod:`vnc_use.agent.state`), with screenshots replaced
by
their sha256. :func:`to_contents` rebuilds the ``google.genai`` turns for a request and loads
only the screenshots of the last ``keep_screenshots`` turns that carry one; older turns keep
their text and ``response`` dict (the url, errors, acknowledgements) but not their image.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from google.genai import types

from vnc_use.agent.state import FunctionResponseRecord

PNG = "image/png"

# Records say who spoke under "turn", not "role": LangGraph treats a dict with a chat "role"
# ("user", ...) in a DeltaChannel as a chat message and rewrites it. Records written before
# (under "role") are still read.


def task_turn(
    task: str, screenshot: str | None, screen_size: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The first user turn: the task and, optionally, the initial screenshot's digest and the
    real screen size it shows."""
    turn: dict[str, Any] = {"turn": "user", "text": task, "screenshot": screenshot}
    if screen_size is not None:
        turn["screen_size"] = list(screen_size)
    return turn


def model_turn(content: types.Content) -> dict[str, Any]:
    """A model turn, kept exactly as the API sent it (thought signatures included)."""
    return {"turn": "model", "content": content.model_dump(mode="json", exclude_none=True)}


def responses_turn(responses: Sequence[FunctionResponseRecord]) -> dict[str, Any]:
    """The user turn that answers every call of the previous model turn, in order."""
    return {"turn": "user", "responses": [dict(r) for r in responses]}


def _screenshot_turns(history: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes of the turns that carry at least one screenshot, oldest first."""
    found = []
    for i, turn in enumerate(history):
        if turn.get("screenshot") or any(r.get("screenshot") for r in turn.get("responses", ())):
            found.append(i)
    return found


def to_contents(
    history: Sequence[dict[str, Any]],
    load_png: Callable[[str], bytes],
    keep_screenshots: int = 3,
) -> list[types.Content]:
    """Rebuild the request's ``contents``: images only in the last ``keep_screenshots`` turns."""
    with_images = set(_screenshot_turns(history)[-keep_screenshots:] if keep_screenshots else [])
    contents: list[types.Content] = []
    for i, turn in enumerate(history):
        inline = i in with_images
        if turn.get("turn", turn.get("role")) == "model":
            contents.append(types.Content.model_validate(turn["content"]))
        elif "responses" in turn:
            parts = []
            for rec in turn["responses"]:
                media = None
                if inline and rec.get("screenshot"):
                    blob = types.FunctionResponseBlob(
                        mime_type=PNG, data=load_png(rec["screenshot"])
                    )
                    media = [types.FunctionResponsePart(inline_data=blob)]
                fr = types.FunctionResponse(
                    id=rec.get("id"), name=rec["name"], response=rec["response"], parts=media
                )
                parts.append(types.Part(function_response=fr))
            contents.append(types.Content(role="user", parts=parts))
        else:
            parts = [types.Part(text=turn["text"])]
            if inline and turn.get("screenshot"):
                parts.append(
                    types.Part.from_bytes(data=load_png(turn["screenshot"]), mime_type=PNG)
                )
            contents.append(types.Content(role="user", parts=parts))
    return contents
