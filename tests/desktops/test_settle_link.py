"""The settle state machine against a simulated VNC server behind a link of any delay.

:class:`UpdateWatcher` is driven by a discrete-event simulation of the RFB update rules
(TigerVNC's: a request adds its region to what the client asked for; an update is sent as
soon as something asked for has changed, or at once for a non-incremental request; it carries
every pending change inside what was asked for and uses up every request). Each request is
handled on its own, as it arrives, which is the harder case for the watcher.

The property: when the wait ends, the client's copy holds every change the server had made
before it sent the update that ended the wait (the frame is current as of that answer), for
any one-way delay, any mix of cursor-sized and real changes and any timing. The real
counterpart is ``tests/desktops/test_slow_link.py`` (a delaying TCP proxy in front of Xvnc).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import example, given
from hypothesis import strategies as st

from vnc_use.desktops.settle import Rect, SettlePolicy, UpdateWatcher, WatchResult

SCREEN = (800, 600)
MARKER: Rect = (0, 0, 1, 1)
SQUARE: Rect = (100, 100, 12, 12)  # a click's mark: cursor-sized, ignored by the settle rule
PANEL: Rect = (400, 150, 300, 200)  # what the app draws a little later


@dataclass
class _Timer:
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class SimulatedLink:
    """A VNC server's update rules, a link of ``delay`` s each way and a clock (seconds)."""

    delay: float
    now: float = 0.0
    _queue: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    # server side
    pending: dict[int, Rect] = field(default_factory=dict)
    applied: set[int] = field(default_factory=set)
    wants_changes: bool = False
    wants_now: list[Rect] = field(default_factory=list)
    #: Server time the action arrives (TCP keeps order: nothing sent after it arrives
    #: before it); a link that holds the action back and then delivers it together with
    #: requests sent later (jitter, a busy relay) has it later than ``delay``.
    input_at: float = 0.0
    # client side
    received: set[int] = field(default_factory=set)
    last_applied_at_send: set[int] = field(default_factory=set)
    on_update: Callable[[list[Rect]], None] | None = None

    def at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (when, next(self._seq), fn))

    def run(self, until: Callable[[], bool]) -> None:
        while self._queue and not until():
            self.now, _, fn = heapq.heappop(self._queue)
            fn()

    # UpdateChannel (client side) -------------------------------------------------------
    def request(self, *, incremental: bool, marker: bool = False) -> None:
        region = MARKER if marker else (0, 0, *SCREEN)
        arrives = max(self.now + self.delay, self.input_at)
        self.at(arrives, lambda: self._server_request(incremental, region))

    def call_later(self, delay: float, fn: Callable[[], None]) -> _Timer:
        timer = _Timer()
        self.at(self.now + delay, lambda: None if timer.cancelled else fn())
        return timer

    # the server ------------------------------------------------------------------------
    def change(self, when: float, ident: int, rect: Rect) -> None:
        """The app draws ``rect`` at server time ``when``."""

        def draw() -> None:
            self.pending[ident] = rect
            self.applied.add(ident)
            self._maybe_send()

        self.at(when, draw)

    def _server_request(self, incremental: bool, region: Rect) -> None:
        if incremental:  # every request here is incremental over the whole screen
            self.wants_changes = True
        else:
            self.wants_now.append(region)
        self._maybe_send()

    def _maybe_send(self) -> None:
        if not (self.wants_now or (self.wants_changes and self.pending)):
            return
        whole = self.wants_changes or (0, 0, *SCREEN) in self.wants_now
        sent = dict(self.pending) if whole else {}
        rects = list(sent.values()) + [r for r in self.wants_now if r not in sent.values()]
        for ident in sent:
            del self.pending[ident]
        self.wants_changes, self.wants_now = False, []
        applied = set(self.applied)

        def arrive() -> None:
            self.received |= set(sent)
            self.last_applied_at_send = applied
            assert self.on_update is not None
            self.on_update(rects)

        self.at(self.now + self.delay, arrive)


def _wait(
    delay: float, changes: list[tuple[float, Rect]], policy: SettlePolicy, held: float = 0.0
) -> SimulatedLink:
    """One settle wait right after an action sent at time 0 (it reaches the server at
    ``delay + held``); the app draws ``changes`` (offsets after that)."""
    link = SimulatedLink(delay, input_at=delay + held)
    delay += held
    results: list[WatchResult] = []
    watcher = UpdateWatcher(
        link, policy, screen_size=SCREEN, synced=True, done=results.append, clock=lambda: link.now
    )
    link.on_update = watcher.on_update
    for ident, (offset, rect) in enumerate(changes):
        link.change(delay + offset, ident, rect)
    watcher.start()
    link.run(until=lambda: bool(results))
    assert results, "the wait never ended"
    return link


_rects = st.sampled_from([SQUARE, PANEL, (20, 400, 8, 20), (0, 300, 800, 40)])


@given(
    delay=st.floats(0, 0.5),
    changes=st.lists(st.tuples(st.floats(0, 0.4), _rects), max_size=6),
    quiet=st.sampled_from([0.02, 0.06, 0.2]),
)
@example(delay=0.2, changes=[(0.001, SQUARE), (0.02, PANEL)], quiet=0.06)  # issue 15
@example(delay=0.05, changes=[(0.001, SQUARE), (0.02, PANEL)], quiet=0.06)
def test_the_frame_is_current_when_the_wait_ends(
    delay: float, changes: list[tuple[float, Rect]], quiet: float
) -> None:
    link = _wait(delay, changes, SettlePolicy(quiet=quiet, max_wait=2.0))
    missing = link.last_applied_at_send - link.received
    assert not missing, f"changes drawn before the last answer but never fetched: {missing}"


def test_a_cursor_sized_first_update_on_a_slow_link_does_not_end_the_wait() -> None:
    """The measured case: +200 ms each way, the click's square first, the panel 20 ms later."""
    link = _wait(0.2, [(0.001, SQUARE), (0.02, PANEL)], SettlePolicy())
    assert link.received == {0, 1}


def test_no_request_is_left_outstanding_after_a_quiet_wait() -> None:
    link = _wait(0.1, [], SettlePolicy())
    link.run(until=lambda: False)  # deliver whatever is still under way
    assert not link.wants_changes and not link.wants_now


@given(
    delay=st.floats(0, 0.5),
    held=st.floats(0, 0.3),
    changes=st.lists(st.tuples(st.floats(0, 0.06), _rects), min_size=1, max_size=6),
    quiet=st.sampled_from([0.06, 0.2]),
)
@example(delay=0.2, held=0.06, changes=[(0.01, PANEL)], quiet=0.06)  # issue 38, item 8
@example(delay=0.0, held=0.06, changes=[(0.03, PANEL)], quiet=0.06)
def test_what_the_app_draws_within_the_quiet_period_after_the_input_arrives_is_shown(
    delay: float, held: float, changes: list[tuple[float, Rect]], quiet: float
) -> None:
    """The quiet period is counted from the server's answer to the fence, so an app that
    starts drawing up to ``quiet`` after the input reached the server is always in the frame,
    also when the link held the input back and delivered it with the requests sent after it
    (issue 38, item 8: before the fence, the first marker, sent ``quiet`` after the input,
    could reach the server with it, and the frame showed the screen before the input)."""
    changes = [(min(offset, quiet), rect) for offset, rect in changes]
    link = _wait(delay, changes, SettlePolicy(quiet=quiet, max_wait=5.0), held=held)
    assert link.received == set(range(len(changes)))


def test_an_animation_slowed_down_by_a_loaded_machine_is_waited_for_at_its_own_pace() -> None:
    """Frames 50 ms apart, then one 90 ms late (a loaded machine stretches an app's timers):
    the quiet period (60 ms) grows to twice the longest gap seen, so the last frame, drawn
    90 ms after the one before, is still in the screenshot (issue 43)."""
    frames = [(0.0, PANEL), (0.05, (0, 300, 800, 40)), (0.10, PANEL), (0.15, PANEL)]
    link = _wait(0.0, [*frames, (0.24, (400, 150, 300, 200))], SettlePolicy(quiet=0.06))
    assert link.received == set(range(5))


def test_a_screen_that_changed_once_is_captured_a_quiet_period_after_it() -> None:
    """One change, nothing after: no gap to learn from, the wait ends ``quiet`` after it."""
    results: list[WatchResult] = []
    link = SimulatedLink(0.0)
    watcher = UpdateWatcher(
        link,
        SettlePolicy(quiet=0.06),
        screen_size=SCREEN,
        synced=True,
        done=results.append,
        clock=lambda: link.now,
    )
    link.on_update = watcher.on_update
    link.change(0.01, 0, PANEL)
    watcher.start()
    link.run(until=lambda: bool(results))
    assert results[0].settled and results[0].changes == 1
    assert abs(results[0].waited_ms - 70.0) < 1.0  # the change at 10 ms, then 60 ms quiet
