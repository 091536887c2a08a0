"""The video's hook on a VNC connection (issue 32): what :class:`~vnc_use.desktops.frametap.
FrameTap` needs from vncdotool's client, in the reactor thread.

:class:`TapChannel` asks the server for changes and copies the client's screen;
:func:`exclusively` starts an operation of the controller only once no poll of the tap is
outstanding, and keeps the tap's polls away until the operation is over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PIL import Image
from twisted.internet.defer import Deferred, maybeDeferred

from vnc_use.desktops.settle import Rect
from vnc_use.desktops.vnc.client import _Client, reactor

__all__ = ["TapChannel", "exclusively"]


class TapChannel:
    """The requests, screen copies and timers :class:`FrameTap` uses (reactor)."""

    def __init__(self, client: _Client, box: Callable[[], tuple[int, int, int, int]]) -> None:
        self._client = client
        # The screen as it is now (never the rest of the framebuffer): a desktop resized
        # during the run is polled, and a full refresh counted, at its new size. With the box
        # of the start, a full refresh after a shrink never covered it, the poll stayed
        # outstanding, and every later operation waited for it until the connection's timeout.
        self._box = box

    def poll(self, *, full: bool) -> None:
        c = self._client
        c.framebufferUpdateRequest(*self._box(), incremental=not full)
        if not full:
            c.framebufferUpdateRequest(0, 0, 1, 1, incremental=False)

    def idle(self) -> bool:
        return bool(self._client.deferred is None and self._client.update_hook is None)

    def _size(self) -> tuple[int, int]:
        return int(self._client.width), int(self._client.height)

    def synced(self) -> bool:
        c = self._client
        return c.synced_size == self._size() and getattr(c, "screen", None) is not None

    def set_synced(self) -> None:
        self._client.synced_size = self._size()

    def covers(self, rects: Sequence[Rect]) -> bool:
        _, _, w, h = self._box()
        return sum(rw * rh for _, _, rw, rh in rects) >= w * h

    def grab(self) -> Image.Image | None:
        screen = getattr(self._client, "screen", None)
        if screen is None:
            return None
        x, y, w, h = self._box()
        image: Image.Image = screen
        if (x, y, w, h) == (0, 0, *image.size):
            return image  # the sink copies what it keeps while offered (see TapFrame)
        return image.crop((x, y, x + w, y + h))

    def to_screen(self, x: int, y: int) -> tuple[int, int]:
        bx, by, _, _ = self._box()
        return x - bx, y - by

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        return reactor.callLater(delay, fn)


def exclusively(client: _Client, fn: Callable[[_Client], Any]) -> Any:
    """Reactor thread: run ``fn(client)`` once no poll of the video's tap is outstanding,
    keeping the tap's polls away until it is over; a Deferred of its result."""
    tap = client.frame_tap
    if tap is None:
        return maybeDeferred(fn, client)
    d: Deferred[Any] = Deferred()

    def go() -> None:
        tap.enter()
        inner = maybeDeferred(fn, client)

        def leave(result: Any) -> Any:
            tap.leave()
            return result

        inner.addBoth(leave)
        inner.chainDeferred(d)

    tap.exclusive(go)
    return d
