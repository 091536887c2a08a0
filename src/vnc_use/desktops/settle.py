"""Wait for the screen to stop changing before showing it to the model, without fixed sleeps.

**The rule.** After an action the screen counts as *settled* once no change has been seen for
a quiet period (:attr:`SettlePolicy.quiet`, measured from the last change, or from the start
of the wait when nothing changed yet), and at least ``min_wait`` has passed. ``max_wait`` caps
the wait for a screen that never settles (a clock, a video); the caller is told so. Changes
that fit a blinking text cursor (:attr:`SettlePolicy.blink_box`) do not restart the quiet
period. Measuring quiet time from the *last change* rather than comparing two frames is what
catches an app that starts redrawing a little after the click: two identical frames taken
right after the action may both show the old state; a quiet period of ``quiet`` seconds
still catches a change that starts up to ``quiet`` seconds late, and every frame of an
animation whose frames come faster than that. Within one wait the quiet period also grows to
:data:`GAP_FACTOR` times the longest gap seen between two changes: an animation that a loaded
machine slows down (frames 15 ms apart becoming 70 ms apart) is waited for at its own pace,
while a screen that changed once is still captured ``quiet`` after that change.

**How changes are seen (VNC).** :class:`UpdateWatcher` drives the framebuffer updates the
connection receives anyway. It starts with a *fence*: an incremental request and the 1x1
marker (below) at once. The server answers the marker only after it has handled every input
event sent before it, so the quiet period starts when that answer arrives, never earlier:
the app always has the whole quiet period, counted at the server, to start redrawing after
the input reached it, however the link or this process delays bytes (a loaded machine, a
link that delivers the keys and a later request together: issue 38, item 8). On a local
link the fence costs one round trip (about a millisecond). Then it keeps one *incremental*
update request outstanding: the
server answers it only when something changed, with just the changed rectangles, which the
client paints into its copy of the screen. So "no change in the last T ms" costs nothing but
a timer. When the quiet period is over, a whole-screen incremental request followed by one
tiny *non-incremental* request (a 1x1 "marker" at the origin) makes the server answer at once
with that pixel plus everything changed since it last sent an update (one answer absorbs all
outstanding requests, so none is left behind): if the answer holds no real change, the screen
has settled and the client's copy *is* the current frame, with no full refresh. The
incremental request matters on a slow link: without it, an update already on its way when
the marker is sent would use up the outstanding request, and the marker's answer would hold
the pixel alone. The first wait on a connection starts with one full refresh so the
client's copy is complete.

Any other frame source (anything with ``screenshot()``) is polled instead with the same rule.
:func:`capture_fixed` is the peers' fixed sleep, kept for comparison benchmarks;
:func:`capture` takes either, as a :class:`~vnc_use.desktops.base.CaptureRule` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from PIL import Image, ImageChops

from vnc_use.desktops.base import DEFAULT_QUIET_S, CaptureRule, Settled
from vnc_use.desktops.png import DEFAULT_MAX_PNG_BYTES, encode_screenshot

__all__ = [
    "GAP_FACTOR",
    "CaptureRule",
    "FrameSource",
    "SettlePolicy",
    "Settled",
    "UpdateChannel",
    "UpdateSource",
    "UpdateWatcher",
    "WatchResult",
    "capture",
    "capture_fixed",
    "capture_settled",
    "is_blink",
]

log = logging.getLogger(__name__)

Rect = tuple[int, int, int, int]
"""``(x, y, width, height)`` of a changed screen area."""

GAP_FACTOR = 2.0
"""Within one wait, the quiet period is at least this many times the longest gap between two
changes seen so far (see :meth:`UpdateWatcher._quiet`)."""

_MARKER: Rect = (0, 0, 1, 1)
_EMPTY_RETRY = 0.01  # seconds before asking again after an update with nothing in it


@dataclass(frozen=True)
class SettlePolicy:
    """When the screen counts as settled (seconds)."""

    quiet: float = DEFAULT_QUIET_S
    """No change for this long (measured from the last change) means settled."""
    min_wait: float = 0.0
    """Never capture earlier than this after the action."""
    max_wait: float = 1.0
    """Capture anyway after this long (the screen did not settle)."""
    blink_box: tuple[int, int] = (16, 48)
    """A change of at most two rectangles, each within ``short x long`` pixels (either way
    round), is a blinking cursor or a small spinner: it does not restart the quiet period."""

    def __post_init__(self) -> None:
        if min(self.quiet, self.min_wait, self.max_wait) < 0:
            raise ValueError(f"settle times must not be negative: {self}")


def is_blink(rects: Sequence[Rect], box: tuple[int, int] = SettlePolicy.blink_box) -> bool:
    """Whether a change is no bigger than a blinking text cursor (see ``blink_box``)."""
    short, long = box
    return 0 < len(rects) <= 2 and all(
        min(w, h) <= short and max(w, h) <= long for _, _, w, h in rects
    )


# ------------------------------------------------------------------------- update-driven


class UpdateChannel(Protocol):
    """What :class:`UpdateWatcher` needs from a connection, called on its event-loop thread."""

    def request(self, *, incremental: bool, marker: bool = False) -> None:
        """Ask for a framebuffer update: incremental (whole screen, answered on the next
        change) or not (answered at once); ``marker``: only the 1x1 pixel at the origin."""

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        """Run ``fn`` after ``delay`` seconds; the result has ``cancel()``."""


@dataclass(frozen=True)
class WatchResult:
    """How a wait over framebuffer updates ended."""

    settled: bool
    waited_ms: float
    updates: int
    """Framebuffer updates received during the wait."""
    changes: int
    """Updates that restarted the quiet period."""
    blinks: int
    """Updates ignored as cursor-sized."""
    full_refresh: bool
    """Whether the wait began with a full refresh (the client's copy was not complete)."""


class UpdateWatcher:
    """The settle rule over a stream of framebuffer updates (see the module docstring).

    Create it on the connection's event-loop thread, pass every update's rectangles to
    :meth:`on_update` (in order) until ``done`` is called once with the :class:`WatchResult`;
    afterwards no request of the watcher is left unanswered.
    """

    def __init__(
        self,
        channel: UpdateChannel,
        policy: SettlePolicy,
        *,
        screen_size: tuple[int, int],
        synced: bool,
        done: Callable[[WatchResult], None],
        clock: Callable[[], float] = time.monotonic,
        fenced: Callable[[], object] | None = None,
    ) -> None:
        self._channel = channel
        self._fenced = fenced
        self._policy = policy
        self._screen = screen_size
        self._done = done
        self._clock = clock
        self._state = "watch" if synced else "sync"
        self._full_refresh = not synced
        self._t0 = 0.0
        self._last_change = 0.0
        self._first_change: float | None = None
        self._longest_gap = 0.0  # between two changes of this wait (an animation's pace)
        self._changed_since_marker = False
        self._expired = False
        self._timer: Any = None
        self.updates = self.changes = self.blinks = 0

    def start(self) -> None:
        """Send the first request: a full refresh when the client's copy is incomplete, else
        the *fence* (the changes and the marker at once), whose answer proves that the
        server has handled every input sent before; the quiet period starts there."""
        self._t0 = self._last_change = self._clock()
        if self._state == "sync":
            self._channel.request(incremental=False)
        else:
            self._state = "fence"
            self._channel.request(incremental=True)
            self._channel.request(incremental=False, marker=True)

    def on_update(self, rects: Sequence[Rect]) -> None:
        """One framebuffer update arrived (already painted into the client's screen)."""
        if self._state == "done":
            return
        now = self._clock()
        self.updates += 1
        if self._state == "sync":
            self._on_sync(rects, now)
            return
        marker_answer = self._state in ("fence", "marker") and any(
            x == 0 and y == 0 for x, y, _, _ in rects
        )
        real = [r for r in rects if r != _MARKER] if marker_answer else list(rects)
        if real and not is_blink(real, self._policy.blink_box):
            self._changed(now)
        elif real:
            self.blinks += 1
        if self._state == "watch":
            if rects:
                self._channel.request(incremental=True)
            else:  # a server that answers at once when nothing changed: do not spin
                self._channel.call_later(_EMPTY_RETRY, self._ask_again)
        elif not marker_answer:
            return
        elif self._state == "fence":  # the server has handled the input: quiet starts now
            self._last_change = now
            self._handled()
            self._watch()
        elif self._expired or not self._changed_since_marker:  # the marker is answered
            self._finish(settled=not self._expired)
        else:
            self._watch()

    def _handled(self) -> None:
        """Tell ``fenced`` (once) that the server has handled the input sent before."""
        fenced, self._fenced = self._fenced, None
        if fenced is not None:
            try:
                fenced()
            except Exception:  # the caller's hook must not break the wait
                log.exception("the settle's input-handled hook failed")

    def _changed(self, now: float) -> None:
        """A real change arrived: it restarts the quiet period, its gap may lengthen it."""
        if self._first_change is not None:
            self._longest_gap = max(self._longest_gap, now - self._last_change)
        else:
            self._first_change = now
        self._last_change = now
        self._changed_since_marker = True
        self.changes += 1

    def _on_sync(self, rects: Sequence[Rect], now: float) -> None:
        if self._covers_screen(rects):
            self._last_change = now  # what changed before is unknown: count it as a change
            self._handled()  # a full refresh asked after the input answers after it too
            self._watch()
        else:
            # An update that is not the whole screen answered the request: on a fresh
            # connection TigerVNC may first send only a cursor shape (no rectangles at
            # all). Ask for the full frame again, or the wait would never end.
            self._channel.request(incremental=False)

    def _watch(self) -> None:
        """No request of ours is outstanding: keep one incremental request, arm the timer."""
        self._state = "watch"
        self._channel.request(incremental=True)
        self._arm()

    def cancel(self) -> None:
        """Stop without calling ``done`` (the connection failed)."""
        self._state = "done"
        self._cancel_timer()

    # -------------------------------------------------------------------- internals

    def _ask_again(self) -> None:
        if self._state == "watch":
            self._channel.request(incremental=True)

    def _covers_screen(self, rects: Sequence[Rect]) -> bool:
        width, height = self._screen
        return sum(w * h for _, _, w, h in rects) >= width * height

    def _quiet(self) -> float:
        """The quiet period of this wait: the policy's, or longer for a screen whose changes
        came further apart (an animation slowed down by a loaded machine: its next frame is
        expected within about the longest gap seen so far, times :data:`GAP_FACTOR`)."""
        return max(self._policy.quiet, GAP_FACTOR * self._longest_gap)

    def _due(self) -> float:
        p = self._policy
        quiet = self._quiet()
        return min(max(self._last_change + quiet, self._t0 + p.min_wait), self._t0 + p.max_wait)

    def _arm(self) -> None:
        self._cancel_timer()
        self._timer = self._channel.call_later(max(0.0, self._due() - self._clock()), self._check)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            try:
                timer.cancel()
            except Exception:  # already fired or cancelled
                log.debug("settle timer was not pending", exc_info=True)

    def _check(self) -> None:
        self._timer = None
        if self._state != "watch":
            return
        now = self._clock()
        if now < self._due():
            self._arm()
            return
        p = self._policy
        # (a timer fires at its due time; the nanosecond spares float rounding at exactly it)
        quiet_for, waited = now - self._last_change + 1e-9, now - self._t0 + 1e-9
        self._expired = quiet_for < self._quiet() or waited < p.min_wait
        self._state = "marker"
        self._changed_since_marker = False
        # The whole screen, incrementally, *then* the marker: the marker's answer then carries
        # everything changed up to it. On a link whose round trip is longer than the quiet
        # period, the update answering the outstanding request may still be on its way; it
        # uses up that request, and when it holds only a cursor-sized change, what the app
        # drew after it would otherwise stay at the server, never fetched, while the marker's
        # 1x1 answer ended the wait as "settled" (issue 15). A server that answers the two
        # requests one by one sends the changes first: they count before the marker's answer.
        self._channel.request(incremental=True)
        self._channel.request(incremental=False, marker=True)

    def _finish(self, *, settled: bool) -> None:
        self._state = "done"
        self._cancel_timer()
        waited = round((self._clock() - self._t0) * 1000, 1)
        self._done(
            WatchResult(
                settled, waited, self.updates, self.changes, self.blinks, self._full_refresh
            )
        )


# ------------------------------------------------------------------------------ capture


class FrameSource(Protocol):
    """Anything that returns the current frame as a Pillow image."""

    def screenshot(self) -> Image.Image: ...


@runtime_checkable
class UpdateSource(Protocol):
    """A frame source that can wait for the screen to settle itself (``VNCController``)."""

    def screenshot(self) -> Image.Image: ...

    def settled_frame(
        self, policy: SettlePolicy, fenced: Callable[[], object] | None = None
    ) -> tuple[Image.Image, WatchResult]: ...


def _encode(
    image: Image.Image,
    result: WatchResult,
    max_size: tuple[int, int] | None,
    max_bytes: int | None,
) -> Settled:
    t0 = time.perf_counter()
    enc = encode_screenshot(image, max_size=max_size, max_bytes=max_bytes)
    encode_ms = round((time.perf_counter() - t0) * 1000, 1)
    return Settled(
        enc.png,
        enc.size,
        result.settled,
        result.updates,
        result.waited_ms,
        enc.screen_size,
        encode_ms,
        result.changes,
    )


def capture_settled(
    source: FrameSource,
    *,
    min_wait: float = 0.0,
    max_wait: float = 1.0,
    quiet: float = SettlePolicy.quiet,
    interval: float = 0.02,
    max_size: tuple[int, int] | None = None,
    max_bytes: int | None = DEFAULT_MAX_PNG_BYTES,
    on_input_handled: Callable[[], object] | None = None,
) -> Settled:
    """Wait until the screen has settled (see the module docstring), then encode the frame.

    A source with ``settled_frame`` (a :class:`VNCController`) waits on framebuffer updates;
    any other is polled every ``interval`` seconds with the same rule. ``max_size`` and
    ``max_bytes`` are the downscale rule of :func:`vnc_use.desktops.png.encode_screenshot`.
    """
    policy = SettlePolicy(quiet=quiet, min_wait=min_wait, max_wait=max_wait)
    if isinstance(source, UpdateSource):
        image, result = source.settled_frame(policy, on_input_handled)
    else:
        image, result = _poll_settled(source, policy, interval, on_input_handled)
    return _encode(image, result, max_size, max_bytes)


def _poll_settled(
    source: FrameSource,
    policy: SettlePolicy,
    interval: float,
    on_input_handled: Callable[[], object] | None = None,
) -> tuple[Image.Image, WatchResult]:
    """The settle rule for a source that can only take full frames."""
    start = time.monotonic()
    frame = source.screenshot()
    if on_input_handled is not None:  # a frame asked after the input came back
        on_input_handled()
    last_change = start
    frames, changes, blinks = 1, 0, 0
    while True:
        now = time.monotonic()
        due = max(last_change + policy.quiet, start + policy.min_wait)
        if now >= due or now - start >= policy.max_wait:
            break
        time.sleep(max(0.0, min(interval, due - now, start + policy.max_wait - now)))
        nxt = source.screenshot()
        frames += 1
        if nxt.size != frame.size or nxt.tobytes() != frame.tobytes():
            box = ImageChops.difference(nxt, frame).getbbox() if nxt.size == frame.size else None
            x0, y0, x1, y1 = box or (0, 0, *nxt.size)
            rect = (x0, y0, x1 - x0, y1 - y0)
            if is_blink([rect], policy.blink_box):
                blinks += 1
            else:
                last_change = time.monotonic()
                changes += 1
        frame = nxt
    now = time.monotonic()
    settled = now - last_change >= policy.quiet and now - start >= policy.min_wait
    waited = round((now - start) * 1000, 1)
    return frame, WatchResult(settled, waited, frames, changes, blinks, True)


def capture_fixed(
    source: FrameSource,
    delay: float,
    *,
    max_size: tuple[int, int] | None = None,
    max_bytes: int | None = DEFAULT_MAX_PNG_BYTES,
    stop: Callable[[float], Any] = time.sleep,
) -> Settled:
    """Sleep ``delay`` seconds, then take one full frame (what other agents do; compare with it).

    ``stop`` is the sleep (an ``Event.wait`` cuts it short).
    """
    start = time.monotonic()
    stop(delay)
    image = source.screenshot()
    waited = round((time.monotonic() - start) * 1000, 1)
    return _encode(image, WatchResult(True, waited, 1, 0, 0, True), max_size, max_bytes)


def capture(source: FrameSource, rule: CaptureRule) -> Settled:
    """A screenshot of ``source`` as ``rule`` says: after a fixed sleep (``rule.fixed_s``),
    else once the screen has settled (:func:`capture_settled`)."""
    size_rule: dict[str, Any] = {"max_size": rule.max_size, "max_bytes": rule.max_bytes}
    if rule.fixed_s is not None:
        return capture_fixed(source, rule.fixed_s, stop=rule.sleep, **size_rule)
    return capture_settled(
        source,
        min_wait=rule.min_wait,
        max_wait=rule.max_wait,
        quiet=rule.quiet,
        on_input_handled=rule.on_input_handled,
        **size_rule,
    )
