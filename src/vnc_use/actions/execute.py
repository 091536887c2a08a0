"""Where a validated model action becomes pointer and keyboard events on the desktop.

:func:`execute` maps the action's grid points to pixels of the current screen
(:func:`vnc_use.actions.pixels.action_pixels`, the one grid-to-pixel mapping) and runs the
handler of the action's own spec with them; it returns those pixels for the transcript and the
events, under the keys ``x``, ``y`` (the point), ``destination_x``, ``destination_y`` (a drag's
end) and ``magnitude`` (a scroll's distance in pixels), whatever the model family calls its
arguments. The handlers are in :mod:`vnc_use.actions.handlers`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from vnc_use.actions.pixels import action_pixels
from vnc_use.actions.vocabulary import ValidatedAction
from vnc_use.desktops.base import Desktop

__all__ = [
    "DEFAULT_SEARCH_URL",
    "MAX_WAIT_SECONDS",
    "ActionContext",
    "Hands",
    "execute",
]

DEFAULT_SEARCH_URL = "https://www.google.com"

MAX_WAIT_SECONDS = 60.0
"""Longest single ``wait(seconds)`` of Gemini 3.5 that is honoured (longer ones are cut)."""


Hands = Desktop
"""What the executor needs from a backend: a :class:`~vnc_use.desktops.base.Desktop`."""


@dataclass
class ActionContext:
    """What a handler may use: the hands, the screenshot size the model saw, a few settings."""

    hands: Hands
    width: int
    height: int
    search_url: str = DEFAULT_SEARCH_URL
    wait_seconds: float = 5.0
    stop: threading.Event | None = None
    """Set to cut a wait short (the run is being stopped)."""
    max_wait_seconds: float = MAX_WAIT_SECONDS
    """Cap on a model-chosen ``wait(seconds)``."""


def execute(action: ValidatedAction, ctx: ActionContext) -> dict[str, int]:
    """Run one validated action; returns the pixel targets it used (see the module's doc).

    Raises whatever the backend raises: the caller decides which errors are the model's (sent
    back as ``"error"``) and which end the run (a lost connection).
    """
    targets = action_pixels(action, ctx.width, ctx.height)
    action.spec.run(action.args, targets, ctx)
    return targets.as_dict()
