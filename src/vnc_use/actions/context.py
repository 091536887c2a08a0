"""What an action's handler is given: its places on the screen in pixels (:class:`Targets`)
and the executor's context (:class:`ActionContext`).

The lowest module of :mod:`vnc_use.actions`: the vocabulary names these types in a handler's
signature, the grid-to-pixel mapping (:mod:`~vnc_use.actions.pixels`) makes the targets and
the executor (:mod:`~vnc_use.actions.execute`) the context, so neither of those needs the
other to describe a handler.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from vnc_use.desktops.base import Desktop

__all__ = ["DEFAULT_SEARCH_URL", "MAX_WAIT_SECONDS", "ActionContext", "Hands", "Pixel", "Targets"]

Pixel = tuple[int, int]


@dataclass(frozen=True)
class Targets:
    """An action's places on the screen, in pixels (each None when the action has none)."""

    point: Pixel | None = None
    """Where the pointer goes: a click, a hover, a typing field, a scroll, a drag's start."""
    end: Pixel | None = None
    """A drag's end."""
    distance: int | None = None
    """A scroll's distance."""

    @property
    def xy(self) -> Pixel:
        """The point, for an action that has one (``ValueError`` otherwise)."""
        if self.point is None:
            raise ValueError("this action has no point on the screen")
        return self.point

    @property
    def end_xy(self) -> Pixel:
        """The drag's end, for an action that has one (``ValueError`` otherwise)."""
        if self.end is None:
            raise ValueError("this action has no end point on the screen")
        return self.end

    def points(self) -> dict[str, int]:
        """The point and the end as ``x``, ``y``, ``destination_x``, ``destination_y``."""
        out: dict[str, int] = {}
        if self.point is not None:
            out["x"], out["y"] = self.point
        if self.end is not None:
            out["destination_x"], out["destination_y"] = self.end
        return out

    def as_dict(self) -> dict[str, int]:
        """:meth:`points` and the scroll distance as ``magnitude`` (what an action reports)."""
        out = self.points()
        if self.distance is not None:
            out["magnitude"] = self.distance
        return out


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
