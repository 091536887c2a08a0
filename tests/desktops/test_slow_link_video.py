"""Screenshots behind a slow link stay current while the run's video records (issue 38,
item 8).

Behind :class:`~vnc_use.testing.delay_proxy.DelayProxy` (200 ms each way), with the video's
tap on the same connection (:class:`~vnc_use.record.video.VideoRecorder`, as a run records by
default), each round clicks the probe's text field, types a line (clearing the field first),
takes the screenshot the agent would return, selects all with Ctrl+A, takes another, and
submits with Return. Each screenshot's text field must be what a direct connection sees once
the probe has handled the keys and the screen is quiet: the whole line, then the whole line
selected (measured on main 1dca59a: 5 of 40 stale, the selection half drawn, with video on;
0 of 20 with ``--no-video``).

The probe runs ``--static --no-status``: nothing else on its screen changes, and the entry's
cursor does not blink, so the two screenshots can be compared pixel for pixel.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from vnc_use.agent import AgentSettings
from vnc_use.desktops.settle import capture_settled
from vnc_use.desktops.vnc import VNCController
from vnc_use.record.video import VideoRecorder
from vnc_use.testing.delay_proxy import DelayProxy
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.probe import ProbeLog

pytestmark = pytest.mark.desktop

ROUNDS = 10
LINES = ["the quick brown fox", "jumps over the lazy dog", "pack my box with five dozen"]


@dataclass
class EntryProbe:
    desktop: TestDesktop
    log: ProbeLog
    entry: tuple[int, int, int, int]  # x, y, width, height


@pytest.fixture(scope="module")
def entry_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EntryProbe]:
    with TestDesktop(1024, 640) as desk:
        out = tmp_path_factory.mktemp("slow-link-video") / "probe.jsonl"
        argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out)]
        desk.launch([*argv, "--static", "--no-status"])
        log = ProbeLog(out)
        ready = log.wait_type("ready", timeout=20)
        yield EntryProbe(desk, log, tuple(ready["entry"]))


def _shot(vnc: VNCController) -> Image.Image:
    """The screenshot the agent would answer with (its default settle policy)."""
    s = AgentSettings()
    shot = capture_settled(
        vnc,
        min_wait=s.settle_min_s,
        max_wait=s.settle_max_s,
        quiet=s.settle_quiet_s,
        max_bytes=None,
    )
    return Image.open(io.BytesIO(shot.png)).convert("RGB")


def _entry(image: Image.Image, box: tuple[int, int, int, int]) -> Image.Image:
    x, y, w, h = box
    return image.crop((x, y, x + w, y + h))


def _differs(a: Image.Image, b: Image.Image) -> int:
    """Pixels that differ between two crops."""
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v else 0)
    return diff.histogram()[255]


def _stale_screenshots(probe: EntryProbe, tmp: Path, video: bool) -> list[str]:
    stale: list[str] = []
    x, y, w, h = probe.entry
    centre = (x + w // 2, y + h // 2)
    with (
        DelayProxy(probe.desktop.port, 200) as proxy,
        VNCController(timeout=20.0).connect(proxy.server, probe.desktop.password) as vnc,
        VNCController(timeout=20.0).connect(probe.desktop.server, probe.desktop.password) as ref,
    ):
        recorder = VideoRecorder(tmp, 10).start() if video else None
        if recorder is not None:
            vnc.start_recording(recorder)
        try:
            _shot(vnc)  # the run's first screenshot (a full refresh)
            for n in range(ROUNDS):
                line = f"{n} {LINES[n % len(LINES)]}"
                probe.log.clear()
                vnc.click(*centre)
                vnc.settle_input()
                vnc.type_text(line, clear_first=True)
                typed = _shot(vnc)
                probe.log.wait_type("text", text=line, timeout=20)
                want = _entry(_shot(ref), probe.entry)
                if (d := _differs(_entry(typed, probe.entry), want)) > 0:
                    stale.append(f"round {n}, after typing: {d} pixels differ")
                vnc.key_combo("control+a")
                selected = _shot(vnc)
                probe.log.wait_type("keyup", keysym="a", timeout=20)
                want = _entry(_shot(ref), probe.entry)
                if (d := _differs(_entry(selected, probe.entry), want)) > 0:
                    stale.append(f"round {n}, after Ctrl+A: {d} pixels differ")
                vnc.key_combo("enter")
                probe.log.wait_type("submit", text=line, timeout=20)
        finally:
            if recorder is not None:
                vnc.stop_recording()
                recorder.close()
    return stale


@pytest.mark.parametrize("video", [True, False], ids=["video", "no-video"])
def test_screenshots_after_typing_and_select_all_are_current_behind_a_slow_link(
    entry_probe: EntryProbe, tmp_path: Path, video: bool
) -> None:
    stale = _stale_screenshots(entry_probe, tmp_path, video)
    assert stale == [], f"{len(stale)} of {2 * ROUNDS} screenshots stale: {stale}"
