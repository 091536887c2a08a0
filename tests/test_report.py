"""The run report as a person sees it: a scripted run on the test desktop, rendered by headless
Chromium (driven over the DevTools protocol), and its animated GIF.

Chromium runs with no network features, on a ``file://`` page; the test collects every console
message, script exception, failed load and network request the page makes, and asks the page
itself (``document.images``, the markers' bounding boxes) what a person would see.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from websockets.sync.client import ClientConnection, connect

from vnc_use import VncUseAgent
from vnc_use.logging_utils import RunFolder
from vnc_use.planners.gemini import GeminiComputerUse
from vnc_use.report import write_gif, write_report
from vnc_use.report_markers import COLORS
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    make_png,
    require_confirmation,
)

from desktop_fixtures import Probe
from gemini_fixtures import DUMMY_API_KEY, FAST_RETRY

CLI = [sys.executable, "-m", "vnc_use.cli"]
INSTALL_HINT = "install it with: sudo apt-get install -y chromium (scripts/install.sh does)"


# ------------------------------------------------------------- headless Chromium over CDP


def chromium_binary() -> str:
    """Debian's Chromium; its absence fails the test with the install command."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"headless Chromium is not installed: {INSTALL_HINT}")


class Page:
    """One tab, with everything it logged since :meth:`open` was called."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def open(self, url: str, timeout: float = 30) -> None:
        """Navigate and wait for the load event (all images included)."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.browser.wait_for(self, "Page.loadEventFired", timeout)

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in reply, reply
        return reply["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, exceptions, failed loads: all must be absent."""
        out = []
        for e in self.events:
            method, params = e["method"], e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
            ):
                out.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                out.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                out.append(f"failed load: {params}")
        return out

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path, width: int = 1280) -> Image.Image:
        """A screenshot of the whole page, ``width`` CSS pixels wide."""
        height = 800
        for _ in range(2):  # lay the page out at this width, then fit the height to it
            self.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            height = int(self.evaluate("document.documentElement.scrollHeight"))
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return Image.open(path)


class Browser:
    """Headless Chromium on 127.0.0.1, driven over its DevTools WebSocket (no network use)."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.stderr = (profile.parent / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [
                chromium_binary(),
                *("--headless", "--no-sandbox", "--disable-gpu"),
                *("--disable-background-networking", "--disable-component-update"),
                *("--disable-sync", "--no-first-run", "--no-default-browser-check"),
                "--hide-scrollbars",
                *("--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"),
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            stdin=subprocess.DEVNULL,
        )
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(self._ws_url(), max_size=None, open_timeout=20)
        )
        self._id = 0
        self._pages: dict[str, Page] = {}

    def _ws_url(self, timeout: float = 30) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.profile.parent / "chromium.log").read_text(errors="replace")
                pytest.fail(f"chromium exited with {self.proc.returncode}: {log[-2000:]}")
            lines = port_file.read_text().split() if port_file.exists() else []
            if len(lines) == 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        pytest.fail("chromium did not open its DevTools port")

    def send(self, method: str, params: dict[str, Any], session: str | None = None) -> Any:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = self._receive(30)
            if reply.get("id") == self._id:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})

    def _receive(self, timeout: float) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.ws.recv(timeout=timeout))
        page = self._pages.get(reply.get("sessionId", ""))
        if page is not None and "method" in reply:
            page.events.append(reply)
        return reply

    def wait_for(self, page: Page, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in page.events):
            left = deadline - time.monotonic()
            assert left > 0, f"no {method} within {timeout} s"
            self._receive(left)

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, session["sessionId"])
        self._pages[page.session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        return page

    def close(self) -> None:
        with contextlib.suppress(Exception):  # it may close the socket before answering
            self.send("Browser.close", {})
        self._stack.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()


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
    assert "<script" not in html.lower() and "http://" not in html.replace(
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
    from vnc_use.report import write_report_safely

    folder = RunFolder(tmp_path, "broken")
    (folder.path / "report.html").mkdir()  # writing the report will fail
    folder.event("run_ended", status="done", steps=0, final_text="", error=None)
    assert write_report_safely(folder) is None


def test_png_size_reads_the_header_only(tmp_path: Path) -> None:
    from vnc_use.report_model import png_size

    path = tmp_path / "x.png"
    path.write_bytes(make_png(37, 21))
    assert png_size(path) == (37, 21)
    path.write_bytes(b"not a png")
    assert png_size(path) is None
    buf = io.BytesIO()
    Image.new("RGB", (5, 6)).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())
    assert png_size(path) == (5, 6)
