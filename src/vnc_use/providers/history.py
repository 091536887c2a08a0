"""The conversation history as checkpoint-friendly records (provider-neutral).

State keeps the history as plain JSON dicts (see :mod:`vnc_use.providers.base` for their
shapes), with screenshots replaced by their sha256. The planner turns them into its model's
request and loads only the screenshots it sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vnc_use.providers.base import CallResult

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


def model_turn(record: dict[str, Any]) -> dict[str, Any]:
    """A model turn: the planner's own opaque record of it (:attr:`Proposal.turn`), kept
    unchanged for the planner to read back (Gemini's thought signatures included)."""
    return {"turn": "model", "content": record}


def responses_turn(results: Sequence[CallResult]) -> dict[str, Any]:
    """The user turn that answers every call of the previous model turn, in order."""
    return {"turn": "user", "responses": [dict(r) for r in results]}


def person_turn(
    text: str,
    screenshot: str | None,
    screen_size: tuple[int, int] | None,
    person: dict[str, Any],
) -> dict[str, Any]:
    """A person's turn: ``text`` tells the model in plain words what a person did (answered
    its question, used the desktop and handed it back, with their note), with a fresh
    screenshot; ``person`` keeps the facts (seconds held, clicks, key presses: never text)."""
    turn = task_turn(text, screenshot, screen_size)
    turn["person"] = dict(person)
    return turn
