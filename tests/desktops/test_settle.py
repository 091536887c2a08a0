"""Settle detection on a real desktop: a static screen, an animated app, a screen that never
settles, and a blinking cursor; through the VNC update stream and through frame polling.

The desktop runs the probe with its click animation: 300 ms of grey frames starting 40 ms
after each left click, then a final colour that is different every time. A screenshot taken
too early shows a grey frame or the previous animation's colour. No test looks at a clock.
The tests use a quiet period of 0.2 s (the default is 0.06 s) so that a loaded CI machine
stalling the probe between two frames cannot end a wait early; ``benchmarks/step_overhead.py``
checks the default over 30 steps.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops

from vnc_use import VncUseAgent
from vnc_use.agent import AgentSettings
from vnc_use.desktops.settle import (
    SettlePolicy,
    UpdateWatcher,
    WatchResult,
    capture_fixed,
    capture_settled,
    is_blink,
)
from vnc_use.desktops.vnc import VNCController
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog, animation_color

from gemini_fixtures import FAST_RETRY

pytestmark = pytest.mark.desktop

QUIET = 0.2
POLICY = SettlePolicy(quiet=QUIET, max_wait=5.0)


def same_but_caret(a: Image.Image, b: Image.Image) -> bool:
    """Equal frames, except maybe for the entry's blinking caret."""
    box = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).getbbox()
    return box is None or is_blink([(box[0], box[1], box[2] - box[0], box[3] - box[1])])


class AnimatedProbe:
    """The probe with ``--animate 300 --animate-delay 40 --ticker`` on a desktop of its own."""

    def __init__(self, desktop: TestDesktop, log: ProbeLog, ready: dict[str, Any]) -> None:
        self.desktop, self.log, self.ready = desktop, log, ready
        x0, y0, x1, y1 = ready["panel"]
        self.panel_centre = ((x0 + x1) // 2, (y0 + y1) // 2)

    def colour(self, frame: Image.Image) -> str:
        """The panel's colour in a frame, as ``#rrggbb``."""
        return "#{:02x}{:02x}{:02x}".format(*frame.convert("RGB").getpixel(self.panel_centre))

    def click_point(self, i: int) -> tuple[int, int]:
        """A canvas point left of the panel, below the entry, different for each ``i``."""
        return 60 + (i * 37) % 300, 200 + (i * 53) % 300


@pytest.fixture(scope="module")
def animated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnimatedProbe]:
    with TestDesktop(1024, 768) as desk:
        out = tmp_path_factory.mktemp("animated") / "probe.jsonl"
        argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out)]
        desk.launch([*argv, "--animate", "300", "--animate-delay", "40", "--ticker"])
        log = ProbeLog(out)
        yield AnimatedProbe(desk, log, log.wait_type("ready", timeout=20))


@pytest.fixture
def avnc(animated: AnimatedProbe) -> Iterator[VNCController]:
    animated.log.clear()
    with VNCController().connect(animated.desktop.server, animated.desktop.password) as vnc:
        yield vnc


class PollingOnly:
    """A real frame source without the update stream: only full frames (polled)."""

    def __init__(self, vnc: VNCController) -> None:
        self.vnc = vnc

    def screenshot(self) -> Image.Image:
        return self.vnc.screenshot()


def _ticker(animated: AnimatedProbe, vnc: VNCController, on: bool) -> None:
    """Switch the probe's ticker (F9 toggles it) into the wanted state."""
    animated.log.clear()
    vnc.key_combo("F9")
    event = animated.log.wait_type("ticker")
    assert event["on"] is on


# ---------------------------------------------------------------------------- the rules


def test_blink_sized_changes() -> None:
    assert is_blink([(360, 94, 8, 23)])  # Tk's caret as TigerVNC reports it
    assert is_blink([(10, 10, 2, 20), (40, 10, 2, 20)])  # a caret that moved
    assert is_blink([(0, 0, 40, 3)])  # an underline cursor
    assert not is_blink([])
    assert not is_blink([(0, 0, 13, 60)])  # taller than a caret
    assert not is_blink([(0, 0, 20, 20)])  # a checkbox tick
    assert not is_blink([(0, 0, 2, 2)] * 3)  # three changes at once
    assert not is_blink([(0, 0, 1024, 768)])


def test_policy_rejects_negative_times() -> None:
    with pytest.raises(ValueError, match="negative"):
        SettlePolicy(quiet=-1)


# ------------------------------------------------------------------- the update stream


def test_static_screen_settles_and_matches_a_full_refresh(
    animated: AnimatedProbe, avnc: VNCController
) -> None:
    first, result = avnc.settled_frame(SettlePolicy())
    assert result.settled and result.full_refresh  # a connection's first wait syncs once
    assert first.size == (1024, 768)
    again, result = avnc.settled_frame(SettlePolicy())
    assert result.settled and not result.full_refresh and result.changes == 0
    assert same_but_caret(again, avnc.screenshot())


def test_frames_follow_every_change(animated: AnimatedProbe, avnc: VNCController) -> None:
    """The client's copy, kept up to date by incremental updates only, equals a full refresh
    after typing and after clicks (no update is lost between waits)."""
    avnc.settled_frame(POLICY)
    avnc.type_text("settle", clear_first=True)
    animated.log.wait_type("text", text="settle")
    frame, result = avnc.settled_frame(POLICY)
    assert result.settled
    assert same_but_caret(frame, avnc.screenshot())
    for i in range(3):
        avnc.click(*animated.click_point(100 + i))
        frame, result = avnc.settled_frame(POLICY)
        assert result.settled and result.changes >= 1
        animated.log.wait_type("animated")
        assert same_but_caret(frame, avnc.screenshot())


def test_animation_is_captured_in_its_final_state(
    animated: AnimatedProbe, avnc: VNCController
) -> None:
    """An app that starts redrawing 40 ms after the click and animates for 300 ms: every
    screenshot shows the end of the animation it caused."""
    avnc.settled_frame(POLICY)
    for i in range(6):
        animated.log.clear()
        avnc.click(*animated.click_point(i))
        shot = capture_settled(avnc, quiet=QUIET, max_wait=5.0)
        done = animated.log.wait_type("animated")
        assert shot.settled
        assert shot.changes >= 2  # the click's marker, then the animation frames
        frame = Image.open(io.BytesIO(shot.png))
        assert (
            animated.colour(frame)
            == done["color"]
            == "#{:02x}{:02x}{:02x}".format(*animation_color(done["n"]))
        )


def _hog() -> None:  # pragma: no cover - runs in a child process until killed
    while True:
        pass


@pytest.fixture
def two_cpu_hogs() -> Iterator[None]:
    """Two CPU-bound processes beside the test for its duration (issue 43)."""
    ctx = multiprocessing.get_context("spawn")
    hogs = [ctx.Process(target=_hog, daemon=True) for _ in range(2)]
    for hog in hogs:
        hog.start()
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.join(timeout=10)


def test_animation_is_captured_in_its_final_state_beside_two_cpu_hogs(
    animated: AnimatedProbe, avnc: VNCController, two_cpu_hogs: None
) -> None:
    """The same with two busy processes beside it: the probe's frames come later and further
    apart, and every screenshot still shows the end of the animation it caused (the quiet
    period starts at the fence's answer and grows with the gaps between the frames)."""
    avnc.settled_frame(POLICY)
    for i in range(6):
        animated.log.clear()
        avnc.click(*animated.click_point(i))
        shot = capture_settled(avnc, quiet=QUIET, max_wait=5.0)
        done = animated.log.wait_type("animated", timeout=20)
        assert shot.settled
        frame = Image.open(io.BytesIO(shot.png))
        assert animated.colour(frame) == done["color"], f"click {i}: the animation's end missed"


def test_never_settling_screen_is_capped(animated: AnimatedProbe, avnc: VNCController) -> None:
    avnc.settled_frame(POLICY)
    _ticker(animated, avnc, on=True)
    try:
        frame, result = avnc.settled_frame(SettlePolicy(quiet=QUIET, max_wait=0.6))
        assert not result.settled
        assert result.changes >= 2
        assert frame.size == (1024, 768)
        shot = capture_settled(avnc, quiet=QUIET, max_wait=0.6)
        assert not shot.settled
    finally:
        _ticker(animated, avnc, on=False)
    _, result = avnc.settled_frame(POLICY)
    assert result.settled


def test_blinking_cursor_does_not_hold_up_the_settle(
    animated: AnimatedProbe, avnc: VNCController
) -> None:
    """The entry's caret blinks (about every 300-600 ms); with a quiet period longer than
    that, the caret changes are seen and ignored, and the screen still settles."""
    avnc.settled_frame(POLICY)
    _, result = avnc.settled_frame(SettlePolicy(quiet=0.9, max_wait=5.0))
    assert result.settled
    assert result.blinks >= 1 and result.changes == 0


# ----------------------------------------------------------------------------- polling


def test_polling_source_follows_the_same_rules(
    animated: AnimatedProbe, avnc: VNCController
) -> None:
    source = PollingOnly(avnc)
    shot = capture_settled(source, quiet=QUIET, max_wait=5.0)
    assert shot.settled and shot.screen_size == (1024, 768)

    animated.log.clear()
    avnc.click(*animated.click_point(30))
    shot = capture_settled(source, quiet=QUIET, max_wait=5.0, interval=0.01)
    done = animated.log.wait_type("animated")
    assert shot.settled and shot.changes >= 1
    assert animated.colour(Image.open(io.BytesIO(shot.png))) == done["color"]

    _ticker(animated, avnc, on=True)
    try:
        assert not capture_settled(source, quiet=QUIET, max_wait=0.6).settled
    finally:
        _ticker(animated, avnc, on=False)


def test_fixed_sleep_variant_takes_one_frame(animated: AnimatedProbe, avnc: VNCController) -> None:
    shot = capture_fixed(avnc, 0.01, stop=lambda s: None)
    assert shot.frames == 1 and shot.settled
    assert Image.open(io.BytesIO(shot.png)).size == (1024, 768)


# ---------------------------------------------------------------------------- the agent


def test_agent_reports_a_screen_that_never_settles(
    animated: AnimatedProbe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """With the ticker running the agent still answers every call, after max_wait, and the
    event log says the screen did not settle; with it stopped, it does not say so."""
    desk = animated.desktop
    gemini.script(
        Reply.calls(FunctionCallSpec("key_combination", keys="F9")),  # ticker on
        Reply.calls(FunctionCallSpec("hover_at", x=100, y=400)),
        Reply.calls(FunctionCallSpec("key_combination", keys="F9")),  # ticker off
        Reply.calls(FunctionCallSpec("hover_at", x=150, y=400)),
        Reply.text("done"),
    )
    settings = AgentSettings(settle_quiet_s=QUIET, settle_max_s=0.8)
    with VncUseAgent(
        vnc_server=desk.server,
        vnc_password=desk.password,
        runs_dir=tmp_path,
        planner=GeminiComputerUse(**FAST_RETRY),
        settings=settings,
    ) as agent:
        result = agent.run(task="Start and stop the ticker")
    assert result.status == "done", result.error
    events = [
        json.loads(line)
        for line in (Path(result.run_dir) / "events.jsonl").read_text().splitlines()
    ]
    shots = [e for e in events if e["event"] == "screenshot"]
    assert [e["settled"] for e in shots] == [True, False, False, True, True]
    unsettled = [e for e in events if e["event"] == "screen_not_settled"]
    assert len(unsettled) == 2
    assert all(e["frames"] >= 2 for e in unsettled)
    assert len(gemini.requests) == 5 and not gemini.violations


class RecordingChannel:
    """The watcher's requests, recorded; timers run when the test says so."""

    def __init__(self) -> None:
        self.requests: list[tuple[bool, bool]] = []
        self.timers: list[Any] = []

    def request(self, *, incremental: bool, marker: bool = False) -> None:
        self.requests.append((incremental, marker))

    def call_later(self, delay: float, fn: Any) -> None:
        self.timers.append(fn)


def test_a_sync_answered_without_rectangles_asks_for_the_full_frame_again() -> None:
    """On a fresh connection TigerVNC may answer the first full request with a cursor shape
    only (an update with no rectangles); the wait must not hang on it."""
    channel = RecordingChannel()
    results: list[WatchResult] = []
    now = [0.0]
    watcher = UpdateWatcher(
        channel,
        SettlePolicy(),
        screen_size=(100, 50),
        synced=False,
        done=results.append,
        clock=lambda: now[0],
    )
    watcher.start()
    assert channel.requests == [(False, False)]
    watcher.on_update([])  # the cursor-only answer
    assert channel.requests[-1] == (False, False)  # asked again, in full
    watcher.on_update([(0, 0, 100, 30), (0, 30, 100, 20)])  # the whole screen, in two parts
    assert channel.requests[-1] == (True, False)  # now watching for changes
    now[0] = 1.0  # the quiet period is over
    channel.timers.pop(0)()
    assert channel.requests[-1] == (False, True)  # the closing marker request
    watcher.on_update([(0, 0, 1, 1)])  # the marker's answer, nothing changed
    assert results and results[0].full_refresh
