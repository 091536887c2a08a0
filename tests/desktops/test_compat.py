"""Compatibility with the VNC servers people run: TigerVNC at depth 16 and 24 on sizes that are
not a multiple of 8, x11vnc on Xvfb with and without a password, a screen resized mid-run,
non-ASCII text, and a server that goes away for good (the CLI's exit code and one line).

Each test starts the real server it is about; the probe app records what arrived.
"""

from __future__ import annotations

import io
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.desktops.settle import capture_settled
from vnc_use.desktops.vnc import VNCController
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.video import VideoRecorder
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.x11vnc import X11vncDesktop

from cli_tools import run_cli
from desktop_fixtures import Probe, start_probe
from gemini_fixtures import FAST_RETRY

pytestmark = pytest.mark.desktop

NON_ASCII = "Grüße, café — naïve 😀 日本語"


def _grid(point: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """The grid point (0-999) whose pixel is ``point`` on a screen of ``size``."""
    return (
        round(point[0] * 1000 / size[0]),
        round(point[1] * 1000 / size[1]),
    )


def _check_hands(probe: Probe, vnc: VNCController) -> None:
    """Screenshot size, clicks at the corners and the centre, exact typing."""
    width, height = probe.size
    x, y = probe.canvas_point()

    def background(shot: Image.Image) -> bool:
        # the probe's plain background, whatever the depth (16 bpp keeps 5-6 bits a channel)
        return all(abs(c - 0xF4) <= 8 for c in shot.getpixel((x, y)))

    # x11vnc refreshes its copy of the screen only while a client is connected: the first
    # frame of a connection may still be the old (black) one, so wait for the real one.
    deadline = time.monotonic() + 5
    shot = vnc.screenshot()
    while not background(shot) and time.monotonic() < deadline:
        shot = vnc.screenshot()
    assert shot.size == (width, height)
    assert background(shot), shot.getpixel((x, y))
    for point in ((0, 0), (width - 1, height - 1), (width // 2 + 1, height // 2 + 1)):
        probe.log.clear()
        vnc.click(*point)
        press = probe.log.wait_type("press")
        assert (press["x"], press["y"]) == point
    probe.log.clear()
    vnc.click(*probe.entry_center)
    # as type_text_at does: keys sent in the click's burst may reach the window that had the
    # focus before the click was handled (x11vnc injects both at once; 8 characters were lost)
    vnc.settle_input()
    vnc.type_text("Hello, VNC 0-9 ~!@#$%^&*()_+", clear_first=True, press_enter=True)
    assert probe.log.wait_type("submit")["text"] == "Hello, VNC 0-9 ~!@#$%^&*()_+"


@pytest.mark.parametrize("depth", [16, 24])
def test_tigervnc_at_depth_and_an_odd_size(depth: int, tmp_path: Path) -> None:
    with TestDesktop(1021, 767, depth=depth) as desk:
        probe = start_probe(desk, str(tmp_path / "probe.jsonl"))
        with VNCController().connect(desk.server, desk.password) as vnc:
            assert vnc.screen_size() == (1021, 767)
            _check_hands(probe, vnc)


@pytest.mark.parametrize("password", ["x11-pw", ""], ids=["password", "no-password"])
def test_x11vnc_on_xvfb(password: str, tmp_path: Path) -> None:
    with X11vncDesktop(1001, 701, password=password) as desk:
        probe = start_probe(desk, str(tmp_path / "probe.jsonl"))
        with VNCController().connect(desk.server, desk.password or None) as vnc:
            assert vnc.screen_size() == (1001, 701)
            _check_hands(probe, vnc)


def test_non_ascii_text_arrives_exactly(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    ex, ey = _grid(probe.entry_center, probe.size)
    gemini.script(
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text=NON_ASCII, press_enter=True)),
        Reply.text("typed"),
    )
    with VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=tmp_path,
        planner=GeminiComputerUse(**FAST_RETRY),
    ) as agent:
        result = agent.run(task="Type the greeting")
    assert result.status == "done", result.error
    assert probe.log.wait_type("submit")["text"] == NON_ASCII


@pytest.fixture
def resizable(tmp_path: Path) -> Iterator[Probe]:
    with TestDesktop(1280, 1024) as desk:
        yield start_probe(desk, str(tmp_path / "probe.jsonl"))


def test_a_screen_resized_mid_run_is_used_at_its_new_size(
    resizable: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = resizable.desktop
    resized = threading.Event()

    def script(body: Any, index: int) -> Reply:
        if index == 1:  # the screen changes size while the model thinks (a user, a VM window)
            subprocess.run(["xrandr", "-s", "1024x768"], env=desk.env, check=True, timeout=20)
            resized.set()
        if index < 2:
            return Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
        return Reply.text("clicked twice")

    gemini.script(script)
    with VncUseAgent(
        vnc_server=desk.server,
        vnc_password=desk.password,
        runs_dir=tmp_path,
        planner=GeminiComputerUse(**FAST_RETRY),
    ) as agent:
        result = agent.run(task="Click the middle twice")
    assert resized.is_set()
    assert result.status == "done", result.error
    presses = [(e["x"], e["y"]) for e in resizable.log.events("press")]
    assert presses == [(640, 512), (512, 384)]
    assert [tuple(t["screen_size"]) for t in result.transcript] == [(1280, 1024), (1024, 768)]
    # the model was shown the new size after the resize
    last = gemini.requests[-1].image_parts()[-1]
    assert Image.open(io.BytesIO(last)).size == (1024, 768)


def test_a_resize_while_the_video_records_leaves_every_operation_answered(
    resizable: Probe, tmp_path: Path
) -> None:
    """The video's tap polls the screen as it is now. With the size of the start, its full
    refresh after a shrink never covered the old size, the poll stayed outstanding, and the
    next operation waited for it until the connection's timeout: a run resized while the
    model thought ended with its click unsure (found by a full run under load; it failed
    here every time)."""
    desk = resizable.desktop
    with VNCController(timeout=5.0).connect(desk.server, desk.password) as vnc:
        recorder = VideoRecorder(tmp_path, 10).start()
        vnc.start_recording(recorder)
        try:
            assert vnc.screenshot().size == (1280, 1024)
            subprocess.run(["xrandr", "-s", "1024x768"], env=desk.env, check=True, timeout=20)
            time.sleep(0.5)  # five of the tap's polls: it sees the new size and refreshes
            assert vnc.round_trip() == (1024, 768)
            resizable.log.clear()
            vnc.click(512, 384)
            shot = capture_settled(vnc, min_wait=0.0, max_wait=1.0, quiet=0.06, max_bytes=None)
            assert shot.screen_size == (1024, 768)
            assert Image.open(io.BytesIO(shot.png)).size == (1024, 768)
            press = resizable.log.wait_type("press")
            assert (press["x"], press["y"]) == (512, 384)
        finally:
            vnc.stop_recording()
            recorder.close()
    assert recorder.error is None and recorder.frames > 0


def test_a_server_gone_for_good_exits_1_with_one_line_and_the_run_resumes(
    gemini: GeminiStandIn, tmp_path: Path
) -> None:
    with TestDesktop(800, 600) as desk:

        def script(body: Any, index: int) -> Reply:
            if index == 1:
                desk.kill_server()
            return [
                Reply.calls(FunctionCallSpec("hover_at", x=100, y=100)),
                Reply.calls(FunctionCallSpec("hover_at", x=200, y=200)),
                Reply.text("finished later"),
            ][min(index, 2)]

        gemini.script(script)
        runs = ["--runs-dir", str(tmp_path)]
        proc = run_cli(
            [
                *("run", "--vnc", desk.server, "--task", "Hover twice", "--thread-id", "gone"),
                *("--reconnect-window", "1"),
                *runs,
            ],
            desk,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("vnc-use: ") and "vnc-use resume gone" in lines[0]
        assert str(desk.port) in lines[0]
        assert "status: error" in proc.stdout and "error" not in proc.stdout.split("status:")[0]

        desk.restart_server()
        proc = run_cli(["resume", "gone", *runs], desk)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "finished later" in proc.stdout
        assert not proc.stderr.strip(), proc.stderr
