"""The desktop boundary: what the agent needs from a screen, a pointer and a keyboard.

The graph and the executor talk to a :class:`Desktop` and nothing else. It has one method per
primitive. Coordinates are pixels of the screen as :meth:`Desktop.screen_size` reports it,
``(0, 0)`` at the top left; buttons are 1 (left), 2 (middle), 3 (right); key names are
xdotool-style and combinations join them with ``+`` (``"control+l"``, ``"Return"``).
An impossible request (a point off the screen, an unknown key name) raises ``ValueError``;
a desktop that is gone raises :class:`~vnc_use.errors.VncConnectionError` or
:class:`~vnc_use.errors.VncTimeoutError` (the run ends and can be resumed).

Implementations: :class:`~vnc_use.desktops.vnc.VNCController` (a VNC server) and
:class:`~vnc_use.testing.fake.FakeDesktop` (in memory, for tests).

This module imports nothing heavy (no Twisted, no vncdotool).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from vnc_use.desktops.png import DEFAULT_MAX_PNG_BYTES

__all__ = ["DEFAULT_QUIET_S", "CaptureRule", "Desktop", "Recordable", "Settled", "recordable"]

DEFAULT_QUIET_S = 0.06
"""After an action, the screen has settled once it did not change for this long (seconds)."""


@dataclass(frozen=True)
class CaptureRule:
    """How :meth:`Desktop.capture` takes a screenshot: when the screen counts as settled,
    and how big the PNG may be (see :mod:`vnc_use.desktops.settle`)."""

    min_wait: float = 0.0
    """Never capture earlier than this after the action (seconds)."""
    max_wait: float = 1.0
    """Capture anyway after this long, on a screen that never settles (seconds)."""
    quiet: float = DEFAULT_QUIET_S
    """No change for this long means settled (seconds)."""
    fixed_s: float | None = None
    """Sleep this long and take one frame instead of detecting the settle (for comparisons)."""
    max_size: tuple[int, int] | None = None
    """Downscale the PNG to fit this size (coordinates still map to the real screen)."""
    max_bytes: int | None = DEFAULT_MAX_PNG_BYTES
    """Downscale a PNG bigger than this."""
    sleep: Callable[[float], Any] = time.sleep
    """The sleep of ``fixed_s`` (an ``Event.wait`` cuts it short when a run is stopped)."""


@dataclass(frozen=True)
class Settled:
    """A captured screenshot, encoded for the model, and how it was obtained."""

    png: bytes
    size: tuple[int, int]
    """Size of the PNG image."""
    settled: bool
    frames: int
    """Frames (polling) or framebuffer updates (VNC) seen while waiting."""
    waited_ms: float
    """From the start of the wait to the frame."""
    screen_size: tuple[int, int] = (0, 0)
    """Size of the real screen (grid coordinates scale to this, even when downscaled)."""
    encode_ms: float = 0.0
    changes: int = 0
    """Changes that restarted the quiet period."""


class Desktop(Protocol):
    """A screen with a pointer and a keyboard, as the agent uses it.

    Capabilities beyond these a desktop may have, each a protocol of its own: a desktop that
    is :class:`Recordable` feeds a run's video (``video.mp4``) from its connection; one that
    is not (a :class:`~vnc_use.testing.FakeDesktop`, say) runs with no video."""

    # -- screen and connection -------------------------------------------------------------

    def screen_size(self) -> tuple[int, int]:
        """The screen's ``(width, height)`` in pixels, as last known (cheap)."""
        ...

    def round_trip(self) -> tuple[int, int]:
        """Wait until every input sent so far has been processed; return the screen size as
        it is now (a resize since the last screenshot included)."""
        ...

    def is_connected(self) -> bool:
        """Whether the desktop is reachable now (cheap; no round trip)."""
        ...

    def capture(self, rule: CaptureRule) -> Settled:
        """Wait until the screen has settled (see :class:`CaptureRule`), then return it as a
        PNG with how the wait went."""
        ...

    def settle_input(self) -> object:
        """Return once the input so far has taken effect and the screen has settled (between
        a click and keys that depend on it: the click may move the keyboard focus)."""
        ...

    # -- pointer ---------------------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        """Move the pointer to ``(x, y)`` without pressing a button."""
        ...

    def click(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and press and release ``button`` once."""
        ...

    def double_click(self, x: int, y: int) -> None:
        """Move to ``(x, y)`` and click the left button twice."""
        ...

    def triple_click(self, x: int, y: int) -> None:
        """Move to ``(x, y)`` and click the left button three times."""
        ...

    def mouse_down(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and press ``button`` (held until :meth:`mouse_up`)."""
        ...

    def mouse_up(self, x: int, y: int, button: int = 1) -> None:
        """Move to ``(x, y)`` and release ``button``."""
        ...

    def drag_and_drop(self, x0: int, y0: int, x1: int, y1: int, steps: int = 10) -> None:
        """Press the left button at ``(x0, y0)``, move in ``steps`` steps to ``(x1, y1)`` and
        release it there."""
        ...

    def scroll(self, direction: str, magnitude: int = 800) -> None:
        """Scroll the focused view ``"up"``, ``"down"``, ``"left"`` or ``"right"`` by about
        ``magnitude`` pixels."""
        ...

    def scroll_at(self, x: int, y: int, direction: str, magnitude: int = 800) -> None:
        """Scroll the view under ``(x, y)`` in ``direction`` by about ``magnitude`` pixels."""
        ...

    # -- keyboard --------------------------------------------------------------------------

    def type_text(self, text: str, press_enter: bool = False, clear_first: bool = False) -> None:
        """Type ``text`` exactly; ``clear_first`` selects all and deletes before,
        ``press_enter`` presses Return after."""
        ...

    def key_combo(self, keys: str) -> None:
        """Press the keys of ``keys`` (``"control+shift+t"``) in order, release in reverse."""
        ...

    def key_down(self, key: str) -> None:
        """Press one key and hold it (until :meth:`key_up`)."""
        ...

    def key_up(self, key: str) -> None:
        """Release one key."""
        ...


@runtime_checkable
class Recordable(Protocol):
    """A desktop whose connection feeds a run's video: it sends the frames it receives to a
    sink (:class:`~vnc_use.desktops.frametap.FrameSink`, the video encoder) until stopped.
    A VNC connection (:class:`~vnc_use.desktops.vnc.VNCController`) is one."""

    def start_recording(self, sink: Any) -> None:
        """Feed ``sink`` frames from this connection until :meth:`stop_recording`."""
        ...

    def stop_recording(self) -> None:
        """Stop feeding the video (idempotent)."""
        ...


def recordable(desktop: object) -> Recordable | None:
    """``desktop`` as a :class:`Recordable`, or None when it cannot be recorded."""
    return desktop if isinstance(desktop, Recordable) else None
