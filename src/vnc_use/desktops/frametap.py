"""A tap on a VNC connection's framebuffer updates: the frames of a run's video (issue 32).

The connection the run already holds receives every change of the screen; :class:`FrameTap`
turns those updates into timestamped frames for a :class:`FrameSink` (the video encoder,
:mod:`vnc_use.record.video`). It never opens a connection of its own and never grabs the
screen from the desktop.

How it stays out of the agent's way (everything here runs on the connection's event-loop
thread, like :class:`~vnc_use.desktops.settle.UpdateWatcher`):

* **While an operation is in flight** (an action, a screenshot, a settle wait) the tap sends
  nothing: the operation's own requests bring the changes, and the tap sees them as they are
  painted.
* **While the connection is idle** it polls at the recording rate: a whole-screen incremental
  request followed by a 1x1 non-incremental "marker", which the server answers at once with
  whatever changed (one answer absorbs both). So a poll is never left outstanding for long,
  and an operation that starts while one is on its way waits for that answer (one round
  trip) before sending anything: an operation's own request is never answered by a poll's.
* **Frames only when something changed** (a real rectangle, a pointer move, an input mark),
  at most ``fps`` a second; a click is a frame at once (its mark is at the click's moment)
  and another when the mark is gone.
* The sink takes a frame or refuses it (its queue is full); a refused frame is dropped, the
  marks it carried travel with the next one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from PIL import Image

__all__ = ["MARK_SECONDS", "FrameSink", "FrameTap", "InputMark", "TapChannel", "TapFrame"]

log = logging.getLogger(__name__)

Rect = tuple[int, int, int, int]

MARK_SECONDS = 0.5
"""How long a click or key mark stays drawn on the video."""

_MOVE_DELAY = 0.03
"""Seconds a pointer move waits for its frame: a press that follows at once shares it."""

_SCROLL_BUTTONS = {8: "scroll up", 16: "scroll down", 32: "scroll left", 64: "scroll right"}


@dataclass(frozen=True)
class InputMark:
    """One input event worth a mark: a button press, a wheel notch or a key press."""

    t: float
    """When it was sent (the tap's clock, :func:`time.monotonic`)."""
    kind: str
    """``click``, ``scroll`` or ``key``."""
    x: int
    y: int
    """Where the pointer was (screen pixels)."""
    label: str = ""
    """What to show beside the mark (a key's name; never the character typed)."""


@dataclass(frozen=True)
class TapFrame:
    """One frame of the screen as the connection saw it."""

    t: float
    image: Image.Image
    """The screen (RGB) as the client holds it: valid only while :meth:`FrameSink.offer`
    runs (the connection paints into it afterwards); a sink copies what it keeps."""
    pointer: tuple[int, int] | None
    marks: tuple[InputMark, ...]
    """Marks made since the previous frame that was taken."""


class FrameSink(Protocol):
    """Where frames go (the encoder): ``offer`` never blocks; False means dropped."""

    fps: float

    def offer(self, frame: TapFrame) -> bool: ...


class TapChannel(Protocol):
    """What the tap needs from the connection (called on its event-loop thread)."""

    def poll(self, *, full: bool) -> None:
        """Ask for the changes (``full``: the whole screen) plus the 1x1 marker."""

    def idle(self) -> bool:
        """Whether nothing else waits on the connection's updates."""

    def grab(self) -> Image.Image | None:
        """The client's screen, cropped to the screen region (not a copy when the region is
        the whole screen: valid until the next update is painted)."""

    def synced(self) -> bool:
        """Whether the client's copy of the screen is complete."""

    def set_synced(self) -> None:
        """The client's copy was just made complete by a full refresh."""

    def covers(self, rects: Sequence[Rect]) -> bool:
        """Whether ``rects`` cover the whole screen (a full refresh's answer)."""

    def to_screen(self, x: int, y: int) -> tuple[int, int]:
        """Framebuffer pixels to screen pixels."""

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        """Run ``fn`` after ``delay`` seconds; the result has ``cancel()``."""


class FrameTap:
    """Frames from a connection's updates for a sink (see the module docstring)."""

    def __init__(
        self,
        channel: TapChannel,
        sink: FrameSink,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not sink.fps > 0:
            raise ValueError(f"the video's frame rate must be positive, got {sink.fps}")
        self._channel = channel
        self._sink = sink
        self._interval = 1.0 / float(sink.fps)
        self._clock = clock
        self._busy = 0
        self._polling: str | None = None  # "full" / "changes" while a poll is outstanding
        self._waiters: list[Callable[[], None]] = []
        self._marks: list[InputMark] = []
        self._pointer: tuple[int, int] | None = None
        self._buttons = 0
        self._last_emit = float("-inf")
        self._pending: Any = None  # the timer of a frame due later
        self._ticker: Any = None
        self._stopped = False
        self.frames = 0
        self.dropped = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start polling; the first poll makes the client's copy complete if it is not."""
        self._tick()

    def stop(self) -> None:
        """Stop polling and emitting; an operation waiting on a poll goes ahead now."""
        self._stopped = True
        for timer in (self._pending, self._ticker):
            _cancel(timer)
        self._pending = self._ticker = None
        self._release()

    # ------------------------------------------------------------------ operations

    def exclusive(self, go: Callable[[], None]) -> None:
        """Run ``go`` (an operation's start) once no poll of the tap is outstanding."""
        if self._polling is None or self._stopped:
            go()
        else:
            self._waiters.append(go)

    def enter(self) -> None:
        """An operation started: no polls until :meth:`leave`."""
        self._busy += 1

    def leave(self) -> None:
        self._busy = max(0, self._busy - 1)

    # ------------------------------------------------------------------ events

    def on_update(self, rects: Sequence[Rect]) -> None:
        """A framebuffer update was painted into the client's screen."""
        if self._stopped:
            return
        if self._polling == "full":
            if self._channel.covers(rects):
                self._channel.set_synced()
                self._answered()
                self._want_frame()
            elif not rects:  # a cursor shape alone used up the request: ask again
                self._channel.poll(full=True)
            return
        if self._polling == "changes" and not rects and not self._channel.synced():
            # A resize announced on its own: the server may have dropped the poll's requests
            # with it (TigerVNC does), so its marker would never come. Refresh at the new size.
            self._polling = "full"
            self._channel.poll(full=True)
            return
        real = [r for r in rects if r != (0, 0, 1, 1)]
        if self._polling == "changes" and any(x == 0 and y == 0 for x, y, _, _ in rects):
            self._answered()
        if real:
            self._want_frame()

    def on_pointer(self, x: int, y: int, buttons: int) -> None:
        """A pointer event was sent (framebuffer pixels, the button mask)."""
        if self._stopped:
            return
        self._pointer = self._channel.to_screen(x, y)
        pressed = buttons & ~self._buttons
        self._buttons = buttons
        if pressed & 7:
            self._mark("click", "")
        for bit, label in _SCROLL_BUTTONS.items():
            if pressed & bit:
                self._mark("scroll", label)
        if not pressed:  # a move: a frame soon (a press right after it makes that frame)
            self._want_frame(_MOVE_DELAY)

    def on_key(self, label: str, down: bool) -> None:
        """A key event was sent; ``label`` names the key (never a typed character)."""
        if self._stopped or not down:
            return
        x, y = self._pointer or (0, 0)
        self._marks.append(InputMark(self._clock(), "key", x, y, label))
        self._want_frame()

    # ------------------------------------------------------------------ internals

    def _mark(self, kind: str, label: str) -> None:
        """A click or a wheel notch: a frame now (its mark at its moment), one when it fades."""
        x, y = self._pointer or (0, 0)
        self._marks.append(InputMark(self._clock(), kind, x, y, label))
        self._emit()
        self._channel.call_later(MARK_SECONDS + 0.01, self._want_frame)

    def _tick(self) -> None:
        self._ticker = None
        if self._stopped:
            return
        if self._busy == 0 and self._polling is None and self._channel.idle():
            full = not self._channel.synced()
            self._polling = "full" if full else "changes"
            self._channel.poll(full=full)
        self._ticker = self._channel.call_later(self._interval, self._tick)

    def _answered(self) -> None:
        self._polling = None
        if self.frames == 0:  # the video starts with the screen as it is
            self._want_frame()
        self._release()

    def _release(self) -> None:
        waiters, self._waiters = self._waiters, []
        for go in waiters:
            go()

    def _want_frame(self, at_least: float = 0.0) -> None:
        if self._stopped or self._pending is not None:
            return
        delay = max(at_least, self._last_emit + self._interval - self._clock())
        if delay <= 0:
            self._emit()
        else:
            self._pending = self._channel.call_later(delay, self._emit_due)

    def _emit_due(self) -> None:
        self._pending = None
        self._emit()

    def _emit(self) -> None:
        if self._stopped or not self._channel.synced():
            return  # the first full refresh emits once it has arrived
        image = self._channel.grab()
        if image is None:
            return
        _cancel(self._pending)  # this frame is the one a timer was waiting for
        self._pending = None
        now = self._clock()
        frame = TapFrame(now, image, self._pointer, tuple(self._marks))
        self._last_emit = now
        if self._sink.offer(frame):
            self._marks = []
            self.frames += 1
        else:
            self.dropped += 1


def _cancel(timer: Any) -> None:
    if timer is None:
        return
    try:
        timer.cancel()
    except Exception:  # already fired or cancelled
        log.debug("video timer was not pending", exc_info=True)
