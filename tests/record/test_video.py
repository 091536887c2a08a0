"""The video of a run (issue 32), on a real TigerVNC desktop with the probe app.

The probe shows a dialog for 300 ms after the run's first click, while the model (the Gemini
stand-in, thinking for a while) has not answered yet: no screenshot of the run holds it, the
video does. The video is decoded with PyAV and compared with the probe's own log; the report
is loaded in headless Chromium, played and sought to step 3; a run killed with SIGKILL leaves a
file that plays; ``--no-video`` records nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.desktops.vnc.controller import VNCController
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.report import write_report
from vnc_use.record.video import read_segments, record_desktop, stop_recording
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)
from vnc_use.testing.probe import DIALOG_COLOR, ProbeLog

from chromium import Browser
from cli_tools import CLI, run_cli
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1440, 900
CLICKS = [(300, 600), (700, 650), (1100, 600)]  # screen pixels of the three clicks
MARK = (230, 30, 60)  # the click ring's colour (vnc_use.record.video)


def grid(x: int, y: int) -> dict[str, int]:
    return {"x": round(x * 1000 / WIDTH), "y": round(y * 1000 / HEIGHT)}


@dataclass
class DialogProbe:
    desktop: TestDesktop
    log: ProbeLog
    entry: tuple[int, int]


@pytest.fixture(scope="module")
def dialog_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DialogProbe]:
    """A desktop of its own whose probe shows a 300 ms dialog 250 ms after the first click."""
    folder = tmp_path_factory.mktemp("dialog")
    desktop = TestDesktop(WIDTH, HEIGHT).start()
    log_path = folder / "probe.jsonl"
    argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(log_path)]
    process = desktop.launch([*argv, "--dialog", "300", "--dialog-delay", "250"])
    try:
        log = ProbeLog(log_path)
        ready = log.wait_type("ready", timeout=20)
        x, y, w, h = ready["entry"]
        yield DialogProbe(desktop, log, (x + w // 2, y + h // 2))
    finally:
        process.terminate()
        process.wait(10)
        desktop.stop()


@dataclass
class Recorded:
    runs: Path
    thread_id: str
    presses: list[dict[str, Any]]
    dialog: tuple[float, float]


@pytest.fixture(scope="module")
def recorded(dialog_probe: DialogProbe, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Four clicks; the second waits for an approval, so the run has two legs (segments)."""
    runs = tmp_path_factory.mktemp("video") / "runs"
    (a, b, c), entry = CLICKS, dialog_probe.entry
    with pytest.MonkeyPatch.context() as mp, GeminiStandIn() as api:
        mp.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
        mp.delenv("GEMINI_API_KEY", raising=False)
        api.script(
            Reply.calls(FunctionCallSpec("click_at", **grid(*a))),
            dataclasses.replace(  # the model thinks while the dialog comes and goes
                Reply.calls(
                    FunctionCallSpec(
                        "click_at", **grid(*b), safety_decision=require_confirmation("Sure?")
                    )
                ),
                latency=1.5,
            ),
            Reply.calls(FunctionCallSpec("click_at", **grid(*c))),
            Reply.calls(FunctionCallSpec("type_text_at", **grid(*entry), text="secret words")),
            Reply.text("Clicked three times and typed."),
        )
        with VncUseAgent(
            vnc_server=dialog_probe.desktop.server,
            vnc_password=dialog_probe.desktop.password,
            runs_dir=runs,
            planner=GeminiComputerUse(**FAST_RETRY),
        ) as agent:
            paused = agent.run(task="Click three times", thread_id="video")
            assert paused.status == "awaiting_approval", paused.error
            result = agent.approve("video")
        assert result.status == "done", result.error
        assert not api.violations
    log = dialog_probe.log
    presses = [e for e in log.events("press") if e["button"] == 1]
    shown, hidden = log.events("dialog")
    assert len(presses) == 4 and shown["on"] and not hidden["on"]
    return Recorded(runs, "video", presses, (shown["t"], hidden["t"]))


def frames(path: Path, started: float) -> list[tuple[float, Image.Image]]:
    """Every frame of a video file with its wall-clock time."""
    with av.open(str(path)) as container:
        return [
            (started + float(f.time), f.to_image())
            for f in container.decode(video=0)
            if f.time is not None
        ]


def all_frames(run_dir: Path) -> list[tuple[float, Image.Image]]:
    out = []
    for seg in read_segments(run_dir):
        out += frames(run_dir / seg.file, seg.started)
    return out


def close(pixel: Any, color: tuple[int, int, int], tolerance: int = 50) -> bool:
    return all(abs(p - q) <= tolerance for p, q in zip(pixel[:3], color, strict=True))


def has_ring(image: Image.Image, x: int, y: int) -> bool:
    """The click mark around (x, y): its colour on at least two sides of the ring."""
    sides = [(x + 12, y), (x - 12, y), (x, y + 12), (x, y - 12)]
    return sum(close(image.getpixel(p), MARK, 60) for p in sides) >= 2


def test_the_dialog_between_two_screenshots_is_in_the_video(recorded: Recorded) -> None:
    run_dir = recorded.runs / recorded.thread_id
    segments = read_segments(run_dir)
    assert [s.file for s in segments] == ["video.mp4", "video-2.mp4"]
    assert all(s.ended is not None and s.dropped == 0 for s in segments)
    with av.open(str(run_dir / "video.mp4")) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.pix_fmt) == ("h264", "yuv420p")
        assert (stream.width, stream.height) == (WIDTH, HEIGHT)
    centre = (WIDTH // 2, HEIGHT // 2)
    video = frames(run_dir / "video.mp4", segments[0].started)
    showing = [t for t, image in video if close(image.getpixel(centre), DIALOG_COLOR)]
    assert showing, "the dialog is in no frame of the video"
    shown, hidden = recorded.dialog
    assert abs(showing[0] - shown) <= 0.2, (showing[0] - shown, showing)
    gone = next(t for t, image in video if t > showing[-1])
    assert abs(gone - hidden) <= 0.2, (gone - hidden, showing)
    # ... and in none of the run's screenshots: only the video saw it
    for png in (run_dir / "screenshots").glob("*.png"):
        with Image.open(png) as shot:
            assert not close(shot.convert("RGB").getpixel(centre), DIALOG_COLOR), png.name


def test_every_click_is_marked_at_its_moment(recorded: Recorded) -> None:
    video = all_frames(recorded.runs / recorded.thread_id)
    for press in recorded.presses:
        x, y = press["x"], press["y"]
        marked = [t for t, image in video if t >= press["t"] - 0.5 and has_ring(image, x, y)]
        assert marked, f"no mark for the click at ({x}, {y})"
        assert abs(marked[0] - press["t"]) <= 0.1, (marked[0] - press["t"], press)


def test_the_report_plays_the_video_and_seeks_to_step_3(
    recorded: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run_dir = recorded.runs / recorded.thread_id
    proc = run_cli(["report", recorded.thread_id, "--video", "--runs-dir", str(recorded.runs)])
    assert proc.returncode == 0, proc.stderr
    assert f"video: {run_dir / 'video.mp4'}" in proc.stdout
    assert f"video: {run_dir / 'video-2.mp4'}" in proc.stdout
    write_report(run_dir)
    browser = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        page = _report_page(browser, run_dir)
        page.evaluate("document.getElementById('run-video').play(), 1")
        _wait(page, "document.getElementById('run-video').currentTime > 0.3")
        marks = page.evaluate("[...document.querySelectorAll('.timeline a.mark')].length")
        assert marks == 1  # step 1 is in the first segment; the others in the second
        shown = _seek_step(page, run_dir, 3)
        assert page.evaluate("document.querySelectorAll('.timeline a.mark').length") == 3
        assert page.problems() == []
    finally:
        browser.close()
    # what the player shows is step 3's click: the 2nd click's square, not yet the 3rd's (the
    # probe paints it after the click), and the 3rd click's ring
    scale = shown.width / WIDTH
    (bx, by), (cx, cy) = CLICKS[1], CLICKS[2]
    second = shown.getpixel((round((bx - 4) * scale), round((by - 4) * scale)))
    third = shown.getpixel((round((cx - 4) * scale), round((cy - 4) * scale)))
    assert close(second, (0x20, 0xA0, 0x20)), second  # the probe's 2nd colour
    assert close(third, (0xF4, 0xF4, 0xF4), 30), third  # still the background
    assert _has_scaled_ring(shown, cx, cy, scale)


def test_each_step_button_pauses_the_video_on_its_click_ring(
    recorded: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 38: a step's button seeks to its click, not a few milliseconds before it: the
    paused frame has the click's ring at the click's point, for every step (both segments)."""
    run_dir = recorded.runs / recorded.thread_id
    write_report(run_dir)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    actions = {e["step"]: e for e in events if e["event"] == "action"}
    browser = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        page = _report_page(browser, run_dir)
        for step, press in enumerate(recorded.presses, 1):
            at = float(
                page.evaluate(
                    f"document.querySelector('section.step[data-step=\"{step}\"] button.seek')"
                    ".dataset.at"
                )
            )
            shown = _seek_step(page, run_dir, step)
            scale = shown.width / WIDTH
            assert _has_scaled_ring(shown, press["x"], press["y"], scale), (step, press)
            # at the press vnc-use sent (the probe's time of it is later: the server's hop)
            assert actions[step]["started"] <= actions[step]["pressed_at"] <= at, step
            assert at < press["t"] + 0.5, (at, press)  # while its ring is drawn
        assert page.problems() == []
    finally:
        browser.close()


def test_the_player_shows_a_poster_and_reads_a_sub_second_length(
    recorded: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 38: before it plays, the player shows the first step's screenshot, not black;
    under it, the segment's position and length read in tenths of a second (the browser's own
    m:ss display, which reads a 0.8 s segment as 0:00 / 0:00, is hidden)."""
    run_dir = recorded.runs / recorded.thread_id
    write_report(run_dir)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    first_shot = next(e["screenshot"] for e in events if e["event"] == "observe")
    browser = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        page = _report_page(browser, run_dir)
        poster = page.evaluate("document.getElementById('run-video').poster")
        assert poster == (run_dir / "screenshots" / f"{first_shot}.png").as_uri()
        before = _video_pixels(page).convert("L").resize((1, 1), Image.Resampling.BOX)
        assert before.getpixel((0, 0)) > 150, before.getpixel((0, 0))  # not black: the poster
        shown = _seek_step(page, run_dir, 3)  # the second segment, under a second long
        length = float(page.evaluate("document.getElementById('run-video').duration"))
        position = float(page.evaluate("document.getElementById('run-video').currentTime"))
        clock = page.evaluate("document.getElementById('run-clock').textContent")
        assert clock == f"{_tenths(position)} / {_tenths(length)} \u00b7 segment 2 of 2", clock
        assert length >= 0.1 and clock.split(" / ")[1] != "0:00.0"
        controls = _controls_pixels(page)
        page.evaluate(
            "document.head.appendChild(Object.assign(document.createElement('style'), {"
            "textContent: 'section.video video::-webkit-media-controls-current-time-display"
            " { display: block !important; }'})), 1"
        )
        deadline = time.monotonic() + 10  # shown again, it changes the controls: it was hidden
        while _controls_pixels(page) == controls:
            assert time.monotonic() < deadline, "the browser's own time display was not hidden"
            time.sleep(0.05)
        assert shown.width > 0 and page.problems() == []
    finally:
        browser.close()


def _tenths(t: float) -> str:
    """m:ss.s, rounded half up like the page's script (Math.round)."""
    d = math.floor(t * 10 + 0.5)
    return f"{d // 600}:{(d % 600) / 10:04.1f}"


def _controls_pixels(page: Any) -> bytes:
    """A PNG of the bottom 60 pixels of the player (its controls, shown while paused)."""
    x, y, w, h = page.evaluate(
        "(() => { window.scrollTo(0, 0); const r ="
        " document.getElementById('run-video').getBoundingClientRect();"
        " return [r.x, r.y, r.width, r.height]; })()"
    )
    clip = {"x": x, "y": y + h - 60, "width": w, "height": 60, "scale": 1}
    data = page.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
    return base64.b64decode(data["data"])


def _has_scaled_ring(image: Image.Image, x: int, y: int, scale: float) -> bool:
    """The click mark around (x, y) on a picture of the video shown at ``scale``."""
    r = 12 * scale
    sides = [(x * scale + r, y * scale), (x * scale - r, y * scale)]
    sides += [(x * scale, y * scale + r), (x * scale, y * scale - r)]
    return sum(close(image.getpixel((round(a), round(b))), MARK, 70) for a, b in sides) >= 2


def _report_page(browser: Browser, run_dir: Path) -> Any:
    page = browser.new_page()
    page.send(
        "Emulation.setDeviceMetricsOverride",
        width=1200,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.open((run_dir / "report.html").as_uri())
    _wait(page, "document.getElementById('run-video').readyState >= 1")
    return page


def _seek_step(page: Any, run_dir: Path, step: int) -> Image.Image:
    """Pause, press step ``step``'s video button, wait for the seek; what the player shows."""
    button = f"document.querySelector('section.step[data-step=\"{step}\"] button.seek')"
    page.evaluate(f"document.getElementById('run-video').pause(), {button}.click(), 1")
    at = float(page.evaluate(f"{button}.dataset.at"))
    segments = read_segments(run_dir)
    index = max(i for i, s in enumerate(segments) if s.started <= at)
    expected = at - segments[index].started
    _wait(
        page,
        "(() => { const v = document.getElementById('run-video');"
        f" return v.dataset.segment === '{index}' && !v.seeking && v.readyState >= 2"
        f" && Math.abs(v.currentTime - {expected}) < 0.01; }})()",
    )
    return _video_pixels(page)


def _wait(page: Any, condition: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    state = (
        "(() => { const v = document.getElementById('run-video'); return [v.dataset.segment,"
        " v.seeking, v.readyState, v.currentTime, v.src, v.error && v.error.message]; })()"
    )
    while not page.evaluate(condition):
        assert time.monotonic() < deadline, f"timed out: {condition}: {page.evaluate(state)}"
        time.sleep(0.05)


def _video_pixels(page: Any) -> Image.Image:
    """What the page's video element shows: a screenshot of its picture (the element keeps
    the video's aspect ratio, letterboxed)."""
    x, y, w, h = page.evaluate(
        "(() => { window.scrollTo(0, 0); const r ="
        " document.getElementById('run-video').getBoundingClientRect();"
        " return [r.x, r.y, r.width, r.height]; })()"
    )
    pw, ph = min(w, h * WIDTH / HEIGHT), min(h, w * HEIGHT / WIDTH)
    clip = {"x": x + (w - pw) / 2, "y": y + (h - ph) / 2, "width": pw, "height": ph, "scale": 1}
    data = page.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)[
        "data"
    ]
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")


def test_a_killed_run_leaves_a_playable_video(
    dialog_probe: DialogProbe, recorded: Recorded, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    a, b = CLICKS[0], CLICKS[2]
    log = dialog_probe.log
    log.clear()
    with GeminiStandIn() as api:
        api.script(
            Reply.calls(FunctionCallSpec("click_at", **grid(*a))),
            Reply.calls(FunctionCallSpec("click_at", **grid(*b))),
            dataclasses.replace(Reply.text("never sent"), latency=60),
        )
        env = {"GOOGLE_API_KEY": DUMMY_API_KEY, "VNC_PASSWORD": dialog_probe.desktop.password}
        proc = subprocess.Popen(
            [
                *(*CLI, "run", "--vnc", dialog_probe.desktop.server, "--task", "Click twice"),
                *("--thread-id", "killed", "--runs-dir", str(runs), "--no-hitl", "--json"),
                *("--video-fps", "8"),
            ],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        try:
            first = log.wait_type("press", timeout=30)
            second = log.wait_for(
                lambda e: e["type"] == "press" and e["seq"] > first["seq"], timeout=30
            )
            # the agent now waits for the model; once the file holds the second click, kill
            deadline = time.monotonic() + 20
            while not _holds(runs / "killed", second["t"]):
                assert time.monotonic() < deadline, "the video never held the second click"
                time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
    run_dir = runs / "killed"
    (segment,) = read_segments(run_dir)
    assert segment.ended is None  # never closed: the process died
    video = frames(run_dir / "video.mp4", segment.started)
    assert video[-1][0] >= second["t"]
    assert any(has_ring(image, second["x"], second["y"]) for _, image in video)


def test_sigterm_stops_a_run_at_a_step_boundary_with_its_video_and_report_closed(
    dialog_probe: DialogProbe, tmp_path: Path
) -> None:
    """A service manager's SIGTERM is a stop request: the run ends `interrupted` (exit 130,
    resumable) with its video segment closed and its report written, not killed mid-file."""
    runs = tmp_path / "runs"
    log = dialog_probe.log
    log.clear()
    with GeminiStandIn() as api:
        api.script(
            Reply.calls(FunctionCallSpec("click_at", **grid(*CLICKS[0]))),
            dataclasses.replace(Reply.calls(FunctionCallSpec("hover_at", x=500, y=500)), latency=2),
            Reply.text("never asked"),
        )
        env = {"GOOGLE_API_KEY": DUMMY_API_KEY, "VNC_PASSWORD": dialog_probe.desktop.password}
        proc = subprocess.Popen(
            [
                *(*CLI, "run", "--vnc", dialog_probe.desktop.server, "--task", "Click"),
                *("--thread-id", "termed", "--runs-dir", str(runs), "--no-hitl"),
            ],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            log.wait_type("press", timeout=30)
            deadline = time.monotonic() + 30
            while len(api.requests) < 2:  # the model is thinking about step 2
                assert time.monotonic() < deadline, "the second request never came"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert len(api.requests) == 2  # stopped before asking again
    assert proc.returncode == 130, out + err
    assert "SIGTERM: stopping after this step" in err and "Traceback" not in err
    assert "status: interrupted" in out
    run_dir = runs / "termed"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert (run_dir / "report.html").exists()
    (segment,) = read_segments(run_dir)
    assert segment.ended is not None  # closed, not cut off
    assert frames(run_dir / segment.file, segment.started)


def _holds(run_dir: Path, t: float) -> bool:
    """Whether the run's video decodes and reaches time ``t`` (wall clock)."""
    segments = read_segments(run_dir)
    if not segments:
        return False
    try:
        video = frames(run_dir / segments[0].file, segments[0].started)
    except (av.error.FFmpegError, OSError):
        return False
    return bool(video) and video[-1][0] >= t


def test_no_video_records_none(dialog_probe: DialogProbe, tmp_path: Path) -> None:
    """`--no-video` holds for the whole run: its approval leg (no flag repeated) records
    nothing either."""
    runs = tmp_path / "runs"
    env = {"GOOGLE_API_KEY": DUMMY_API_KEY}
    with GeminiStandIn() as api:
        api.script(
            Reply.calls(FunctionCallSpec("click_at", **grid(*CLICKS[0]))),
            Reply.text("Clicked."),
        )
        proc = run_cli(
            [
                *("run", "--vnc", dialog_probe.desktop.server, "--task", "Click once"),
                *("--no-video", "--thread-id", "quiet", "--runs-dir", str(runs)),
                *("--confirm", "click_at"),
            ],
            dialog_probe.desktop,
            env=env,
        )
        assert "awaiting_approval" in proc.stdout, proc.stdout + proc.stderr
        proc = run_cli(["approve", "quiet", "--runs-dir", str(runs)], dialog_probe.desktop, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = runs / "quiet"
    assert (run_dir / "report.html").exists()
    assert not list(run_dir.glob("video*"))
    proc = run_cli(["report", "quiet", "--video", "--runs-dir", str(runs)])
    assert proc.returncode == 0 and "video: none" in proc.stdout, proc.stdout
    assert "<video" not in (run_dir / "report.html").read_text("utf-8")


def test_the_video_shows_one_pointer_the_desktops_own(tmp_path: Path) -> None:
    """Issue 38: the server draws the desktop's own cursor into the screen it sends (an
    xterm's I-beam here); vnc-use drew an arrow of its own beside it: two pointers. Now the
    video shows the screen around the pointer as the screenshots do: the I-beam alone."""
    desktop = TestDesktop(800, 600).start()
    try:
        desktop.launch(["xterm", "-geometry", "132x50+0+0", "-bg", "white", "-fg", "black"])
        with VNCController().connect(desktop.server, desktop.password) as vnc:
            _wait_for(lambda: vnc.screenshot().getpixel((600, 400))[:3] == (255, 255, 255))
            recorder = record_desktop(vnc, tmp_path, 10.0)
            assert recorder is not None
            try:
                _wait_for(lambda: recorder.frames >= 1)  # the tap is on the connection
                vnc.move(400, 300)
                _wait_for(lambda: _dark(vnc.screenshot(), 400, 300) >= 6)  # the I-beam
                frames = recorder.frames
                screen = vnc.screenshot()  # a full refresh: the video takes a frame of it
                _wait_for(lambda: recorder.frames > frames)
            finally:
                stop_recording(vnc, recorder)
    finally:
        desktop.stop()
    (segment,) = read_segments(tmp_path)
    last = frames_of(tmp_path / segment.file)[-1]
    mine, theirs = _dark(last, 400, 300), _dark(screen, 400, 300)
    assert theirs >= 6 and abs(mine - theirs) <= 4, (mine, theirs)


def _dark(image: Image.Image, x: int, y: int) -> int:
    """Dark pixels around (x, y) (a pointer's lines on the xterm's white)."""
    box = image.convert("L").crop((x - 16, y - 16, x + 24, y + 28)).point(lambda v: v < 128)
    return sum(box.histogram()[1:])


def frames_of(path: Path) -> list[Image.Image]:
    with av.open(str(path)) as container:
        return [f.to_image() for f in container.decode(video=0)]


def _wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
