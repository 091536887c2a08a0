"""The run report as a person sees it: a scripted run on the test desktop, rendered by headless
Chromium (driven over the DevTools protocol), and its animated GIF.

Chromium runs with no network features, on a ``file://`` page; the test collects every console
message, script exception, failed load and network request the page makes, and asks the page
itself (``document.images``, the markers' bounding boxes) what a person would see.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vnc_use import VncUseAgent
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.record.folder import RunFolder
from vnc_use.record.report import write_gif, write_report
from vnc_use.record.report.markers import COLORS
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    make_png,
    require_confirmation,
)

from chromium import Browser
from desktop_fixtures import Probe
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

CLI = [sys.executable, "-m", "vnc_use.cli"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the module."""
    b = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        yield b
    finally:
        b.close()


# ------------------------------------------------------------------------- the scripted run


def grid(probe: Probe, x: int, y: int) -> tuple[int, int]:
    w, h = probe.size
    return round(x * 1000 / w), round(y * 1000 / h)


@dataclass
class ScriptedRun:
    """The folder of the scripted run, and its report as written while it waited."""

    runs: Path
    thread_id: str
    paused_page: str
    screen: tuple[int, int]


@pytest.fixture(scope="module")
def scripted(session_probe: Probe, tmp_path_factory: pytest.TempPathFactory) -> ScriptedRun:
    """The scripted run, made once for the module (copy its folder before changing it)."""
    runs = tmp_path_factory.mktemp("scripted") / "runs"
    with pytest.MonkeyPatch.context() as mp, GeminiStandIn() as api:
        mp.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
        mp.delenv("GEMINI_API_KEY", raising=False)
        thread_id, paused_page = scripted_run(session_probe, api, runs)
    return ScriptedRun(runs, thread_id, paused_page, session_probe.size)


def scripted_run(probe: Probe, gemini: GeminiStandIn, runs: Path) -> tuple[str, str]:
    """A run with every kind of marker and an approval; returns its id and the paused page."""
    ex, ey = grid(probe, *probe.entry_center)
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=ex, y=ey), text="I'll click the text field."),
        Reply.calls(FunctionCallSpec("type_text_at", x=ex, y=ey, text="hello <report> & co")),
        Reply.calls(
            FunctionCallSpec("drag_and_drop", x=200, y=600, destination_x=700, destination_y=850)
        ),
        Reply.calls(
            FunctionCallSpec("scroll_at", x=750, y=500, direction="down", magnitude=300),
            FunctionCallSpec("scroll_document", direction="up"),
            text="Scrolling both ways.",
        ),
        Reply.calls(FunctionCallSpec("key_combination", keys="control+a")),
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=600, y=600, safety_decision=require_confirmation("Submits the form.")
            ),
            text="Submitting needs your approval.",
        ),
        Reply.text("All done: typed, dragged, scrolled and submitted."),
    )

    with VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=runs,
        planner=GeminiComputerUse(**FAST_RETRY),
    ) as agent:
        paused = agent.run(task="Show every kind of marker", thread_id="report-e2e")
        assert paused.status == "awaiting_approval", paused.error
        paused_page = (runs / "report-e2e" / "report.html").read_text("utf-8")
        result = agent.approve("report-e2e")
    assert result.status == "done", result.error
    assert result.steps == 7
    assert not gemini.violations
    return result.thread_id, paused_page


STEP_FACTS = """
[...document.querySelectorAll('section.step')].map(s => {
  const img = s.querySelector('.shot img'), svg = s.querySelector('svg.marker');
  const box = img.getBoundingClientRect();
  const dot = s.querySelector('svg.marker circle.dot');
  const d = dot ? dot.getBoundingClientRect() : null;
  return {
    kind: s.dataset.kind, name: s.dataset.name, step: +s.dataset.step,
    imgs: [...s.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0),
    natural: [img.naturalWidth, img.naturalHeight], shown: [box.width, box.height],
    dot: d ? [(d.x + d.width / 2 - box.x) / box.width * img.naturalWidth,
              (d.y + d.height / 2 - box.y) / box.height * img.naturalHeight] : null,
    shapes: svg ? [...svg.querySelectorAll('[class]')].map(e => e.getAttribute('class')) : [],
    label: svg ? svg.querySelector('g.label text').textContent : null,
    visible: box.width > 300 && box.height > 150,
    text: s.innerText,
  };
})
"""


def marker_pixels(img: Image.Image, color: str, tolerance: int = 40) -> int:
    """How many pixels of ``img`` have (nearly) the marker colour."""
    target = tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
    rgb = img.convert("RGB").resize((img.width // 2, img.height // 2), Image.Resampling.NEAREST)
    data = rgb.tobytes()
    return sum(
        1
        for p in zip(data[0::3], data[1::3], data[2::3], strict=True)
        if all(abs(a - b) <= tolerance for a, b in zip(p, target, strict=True))
    )


@pytest.mark.desktop
def test_report_of_a_scripted_run_in_headless_chromium(
    scripted: ScriptedRun, tmp_path: Path, browser: Browser
) -> None:
    thread_id, paused_page = scripted.thread_id, scripted.paused_page
    run_dir = scripted.runs / thread_id
    report = run_dir / "report.html"
    assert report.exists(), "the agent writes the report when a run ends"
    html = report.read_text("utf-8")
    # the only scripts are the video player's (its data and its code, inline; issue 32)
    assert html.lower().count("<script") == 2 and 'id="video-data"' in html
    assert "<script src" not in html.lower() and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )

    page = browser.new_page()
    page.open(report.as_uri())
    assert page.problems() == []
    assert all(u.startswith(("file://", "data:")) for u in page.requested_urls())
    steps = page.evaluate(STEP_FACTS)
    assert [s["name"] for s in steps] == [
        "click_at",
        "type_text_at",
        "drag_and_drop",
        "scroll_at",
        "scroll_document",
        "key_combination",
        "click_at",
    ]
    assert [s["step"] for s in steps] == list(range(1, 8))
    for s in steps:
        assert all(s["imgs"]) and len(s["imgs"]) == 2, s  # what the model saw, and after
        assert s["natural"] == list(scripted.screen) and s["visible"], s
        assert s["label"], s
    by_step = {s["step"]: s for s in steps}
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    actions = {e["step"]: e for e in events if e["event"] == "action"}
    # the crosshair's centre lands on the pixel the action went to (within a pixel or two)
    for n in (1, 2, 3, 4, 7):
        px = actions[n]["pixels"]
        dot = by_step[n]["dot"]
        assert dot is not None and abs(dot[0] - px["x"]) <= 3 and abs(dot[1] - px["y"]) <= 3
    assert "drag" in by_step[3]["shapes"] and "drag-head" in by_step[3]["shapes"]
    assert "scroll" in by_step[4]["shapes"] and "scroll" in by_step[5]["shapes"]
    assert by_step[5]["dot"] is None and by_step[6]["dot"] is None  # no point: caption only
    assert "control+a" in by_step[6]["label"]
    assert "hello <report> & co" in by_step[2]["label"]  # typed text, escaped, shown as typed
    assert "Approved by a person" in by_step[7]["text"]
    assert "I'll click the text field." in by_step[1]["text"]
    assert "Scrolling both ways." in by_step[4]["text"]
    assert "the same answer as the previous step" in by_step[5]["text"]
    head = page.evaluate("document.querySelector('header').innerText")
    assert "Done" in head and "All done: typed, dragged, scrolled and submitted." in head
    assert "tokens" in page.evaluate("document.body.innerText")

    shot = page.screenshot(tmp_path / "report-page.png")  # look at it: pytest --basetemp=DIR
    assert shot.width == 1280 and shot.height > 3000
    assert marker_pixels(shot, COLORS["action"]) > 500  # the markers are really drawn

    # the page written while the run waited for approval shows the pending action
    paused = run_dir / "paused.html"
    paused.write_text(paused_page, "utf-8")
    page.open(paused.as_uri())
    assert page.problems() == []
    pending = page.evaluate(STEP_FACTS)[-1]
    assert pending["kind"] == "pending" and pending["name"] == "click_at"
    assert pending["label"].startswith("awaiting approval")
    assert "vnc-use approve report-e2e" in pending["text"]
    assert page.evaluate("document.querySelector('.status').dataset.status") == (
        "awaiting_approval"
    )


@pytest.mark.desktop
def test_gif_and_embedded_report_from_the_command_line(
    scripted: ScriptedRun, tmp_path: Path, browser: Browser
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(scripted.runs, runs)
    thread_id = scripted.thread_id
    proc = subprocess.run(
        [*CLI, "report", thread_id, "--gif", "--embed", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gif_path = runs / thread_id / "report.gif"
    assert f"gif: {gif_path}" in proc.stdout

    gif = Image.open(gif_path)
    assert gif.format == "GIF" and gif.n_frames == 8  # 7 steps and the final screen
    assert gif.info["loop"] == 0
    scale = gif.width / scripted.screen[0]
    events = [
        json.loads(line) for line in (runs / thread_id / "events.jsonl").read_text().splitlines()
    ]
    actions = [e for e in events if e["event"] == "action"]
    for frame, action in enumerate(actions):
        gif.seek(frame)
        rgb = gif.convert("RGB")
        if "x" in action["pixels"]:  # the crosshair is centred on the click point
            x, y = (round(action["pixels"][k] * scale) for k in ("x", "y"))
            near = [rgb.getpixel((x + dx, y + dy)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
            assert any(_close(p, COLORS["action"]) for p in near), (frame, near)
        assert marker_pixels(rgb, COLORS["action"]) > 20, frame

    # the embedded page works alone: copied away from the run folder, every image still loads
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(runs / thread_id / "report.html", alone / "report.html")
    page = browser.new_page()
    page.open((alone / "report.html").as_uri())
    assert page.problems() == []
    loaded = page.evaluate("[...document.images].map(i => i.complete && i.naturalWidth > 0)")
    assert len(loaded) == 14 and all(loaded)


def _close(pixel: Any, color: str, tolerance: int = 60) -> bool:
    target = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, target, strict=True))


# ------------------------------------------------------------- details, on a made-up folder


def test_intent_sensitive_text_and_secrets(tmp_path: Path, browser: Browser) -> None:
    """A Gemini 3.5 style call with an intent, a sensitive action and a secret in the text."""
    secret = "hunter2-secret"
    folder = RunFolder(tmp_path, "made-up", secrets=[secret])
    shot = folder.put_screenshot(make_png(400, 300))
    folder.write_json("run.json", {"thread_id": "made-up", "task": f"log in with {secret}"})
    folder.event("run_started", thread_id="made-up", task="log in", vnc_server="h::1")
    folder.event("observe", screenshot=shot, width=400, height=300)
    folder.event(
        "model_response",
        n=1,
        latency_ms=5.0,
        text="",
        calls=[{"name": "click", "args": {"x": 500, "y": 500, "intent": "open the login form"}}],
        usage=None,
    )
    folder.event(
        "action",
        step=1,
        name="click",
        args={"x": 500, "y": 500, "intent": "open the login form"},
        pixels={"x": 200, "y": 150},
        screen_size=[400, 300],
        duration_ms=1.0,
        error=None,
        approved=False,
        screenshot=shot,
    )
    folder.event(
        "action",
        step=2,
        name="type",
        args={"text": "s3cr3t-typed", "intent": "type the password"},
        pixels={},
        screen_size=[400, 300],
        duration_ms=1.0,
        error=None,
        approved=False,
        screenshot=shot,
        sensitive=True,
    )
    folder.event("run_ended", status="done", steps=2, final_text=f"used {secret}", error=None)
    path = write_report(folder.path)
    html = path.read_text("utf-8")
    assert secret not in html and "[REDACTED]" in html
    assert "s3cr3t-typed" not in html  # the sensitive action's text is never shown
    page = browser.new_page()
    page.open(path.as_uri())
    assert page.problems() == []
    steps = page.evaluate(STEP_FACTS)
    assert steps[0]["label"] == "click — open the login form"
    assert "Intent" in steps[0]["text"] and "open the login form" in steps[0]["text"]
    assert steps[1]["label"] == "type [REDACTED] — type the password"
    assert write_gif(folder.path) is not None
    with Image.open(folder.path / "report.gif") as gif:
        assert gif.n_frames == 3


def test_a_report_failure_never_breaks_a_run(tmp_path: Path) -> None:
    from vnc_use.record.report import write_report_safely

    folder = RunFolder(tmp_path, "broken")
    (folder.path / "report.html").mkdir()  # writing the report will fail
    folder.event("run_ended", status="done", steps=0, final_text="", error=None)
    assert write_report_safely(folder) is None


def test_png_size_reads_the_header_only(tmp_path: Path) -> None:
    from vnc_use.record.report.model import png_size

    path = tmp_path / "x.png"
    path.write_bytes(make_png(37, 21))
    assert png_size(path) == (37, 21)
    path.write_bytes(b"not a png")
    assert png_size(path) is None
    buf = io.BytesIO()
    Image.new("RGB", (5, 6)).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())
    assert png_size(path) == (5, 6)


@pytest.mark.desktop
def test_markers_land_on_a_downscaled_screenshot(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path, browser: Browser
) -> None:
    """Issue 17 item 11: with screenshots downscaled for the model, markers were drawn in
    screen pixels on the smaller image, off target. They land where the click went."""
    from vnc_use.agent import AgentSettings

    width, height = probe.size
    small = (width // 2, height // 2)
    cx, cy = probe.canvas_point()
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=cx * 1000 // width, y=cy * 1000 // height)),
        Reply.calls(
            FunctionCallSpec(
                "click_at", x=850, y=850, safety_decision=require_confirmation("Clicks again.")
            )
        ),
    )
    runs = tmp_path / "runs"
    with VncUseAgent(
        vnc_server=probe.desktop.server,
        vnc_password=probe.desktop.password,
        runs_dir=runs,
        planner=GeminiComputerUse(**FAST_RETRY),
        settings=AgentSettings(screenshot_max_size=small),
    ) as agent:
        paused = agent.run(task="Click the canvas", thread_id="small")
    assert paused.status == "awaiting_approval", paused.error
    clicked = probe.log.wait_type("press")
    page = browser.new_page()
    page.open((runs / "small" / "report.html").as_uri())
    assert page.problems() == []
    done, pending = page.evaluate(STEP_FACTS)
    assert done["natural"][0] <= small[0] and pending["kind"] == "pending"
    scale_x, scale_y = done["natural"][0] / width, done["natural"][1] / height
    assert done["dot"] is not None
    assert abs(done["dot"][0] - clicked["x"] * scale_x) <= 3, (done["dot"], clicked)
    assert abs(done["dot"][1] - clicked["y"] * scale_y) <= 3, (done["dot"], clicked)
    # the pending click's marker too: grid 850 of the real screen, drawn on the small image
    px = paused.pending_call["pixels"] if paused.pending_call else {}
    assert abs(pending["dot"][0] - px["x"] * scale_x) <= 3, (pending["dot"], px)
    assert abs(pending["dot"][1] - px["y"] * scale_y) <= 3, (pending["dot"], px)
