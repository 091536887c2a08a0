"""The web console (issue 41) in real headless Chromium, against the probe desktop and the
Gemini stand-in: `vnc-use console` runs as a person starts it, the page is driven by its
controls' accessible names, every click is checked on the probe's own log.

One console serves the whole module (its legs run as processes of their own); each test
scripts the stand-in for its run. The last test fetches again every URL the pages loaded, and
the API, and scans every byte for the model key and the desktop password.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from chromium import Browser, Page
from cli_tools import CLI, run_cli
from console_page import fill, live_socket, press, value_of, wait, wait_status
from desktop_fixtures import Probe
from gemini_fixtures import DUMMY_API_KEY

pytestmark = pytest.mark.desktop

TOKEN = "console-test-token-5d1c0a9b7e"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ConsoleUnderTest:
    base: str
    runs: Path
    process: subprocess.Popen[str]
    api: GeminiStandIn
    probe: Probe
    browser: Browser
    env: dict[str, str]
    seen_urls: set[str] = field(default_factory=set)

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )

    def page(self) -> Page:
        page = self.browser.new_page()
        page.open(f"{self.base}/?token={TOKEN}")
        return page


def grid(probe: Probe, x: int, y: int) -> dict[str, int]:
    width, height = probe.size
    return {"x": round(x * 1000 / width), "y": round(y * 1000 / height)}


def console_env(api: GeminiStandIn, probe: Probe) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"}
    env.update(
        GOOGLE_API_KEY=DUMMY_API_KEY,
        GOOGLE_GEMINI_BASE_URL=api.base_url,
        VNC_PASSWORD=probe.desktop.password,
        VNC_USE_CONSOLE_TOKEN=TOKEN,
    )
    return env


def start_console(
    runs: Path, probe: Probe, env: dict[str, str]
) -> tuple[subprocess.Popen[str], str]:
    """``vnc-use console`` as a person starts it; the process and its base URL."""
    argv = ["console", "--port", "0", "--runs-dir", str(runs)]
    process = subprocess.Popen(
        [*CLI, *argv, "--vnc", probe.desktop.server, "--step-limit", "20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith("vnc-use console: http://127.0.0.1:"), (
        first,
        process.stderr.read() if process.poll() is not None else "",
    )
    url = first.split(": ", 1)[1].strip()
    assert url.endswith(f"/?token={TOKEN}")
    return process, url.split("/?")[0]


@pytest.fixture(scope="module")
def console(
    session_probe: Probe, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleUnderTest]:
    folder = tmp_path_factory.mktemp("console")
    runs = folder / "runs"
    with GeminiStandIn() as api:
        env = console_env(api, session_probe)
        process, base = start_console(runs, session_probe, env)
        browser = Browser(folder / "profile")
        try:
            yield ConsoleUnderTest(base, runs, process, api, session_probe, browser, env)
        finally:
            browser.close()
            process.terminate()
            process.wait(20)


def start_from_form(console: ConsoleUnderTest, page: Page, task: str, **fields: str) -> str:
    """Fill the start form and press Start; the run's thread id (the page it went to)."""
    page.open(f"{console.base}/")
    fill(page, "Task", task)
    fill(page, "Model", fields.get("model", ""))
    if "confirm" in fields:
        fill(page, "Actions that need approval", fields["confirm"])
    desktop = value_of(page, "Desktop", "combobox")
    assert desktop == console.probe.desktop.server
    assert value_of(page, "Provider", "textbox") == ""
    press(page, "Start")
    path = wait(
        "the run's page",
        lambda: (
            "/runs/" in page.evaluate("location.pathname") and page.evaluate("location.pathname")
        ),
    )
    console.seen_urls.update(page.requested_urls())
    return str(path).split("/")[2]


def events(console: ConsoleUnderTest, thread_id: str) -> list[dict[str, Any]]:
    path = console.runs / thread_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def presses(probe: Probe) -> list[dict[str, Any]]:
    return [e for e in probe.log.events("press") if e["button"] == 1]


# -- the tests ---------------------------------------------------------------------------------
def test_a_run_started_from_the_form_shows_each_step_within_a_second(
    console: ConsoleUnderTest,
) -> None:
    probe = console.probe
    probe.log.clear()
    a, b = probe.canvas_point(), (probe.size[0] // 4, probe.size[1] // 2)
    console.api.script(
        dataclasses.replace(
            Reply.calls(FunctionCallSpec("click_at", **grid(probe, *a))), latency=0.8
        ),
        dataclasses.replace(
            Reply.calls(FunctionCallSpec("click_at", **grid(probe, *b))), latency=0.8
        ),
        dataclasses.replace(Reply.text("Clicked twice."), latency=0.8),
    )
    page = console.browser.new_page()
    page.open(f"{console.base}/?token={TOKEN}")
    thread_id = start_from_form(console, page, "Click twice on the canvas")
    # the live desktop shows while the run goes on (view only, through the console)
    wait_status(page, "done")
    live = page.evaluate(f"sessionStorage.getItem('vnc-use-live-{thread_id}')")
    assert live == "connected"
    seen = wait("the page's record of events", lambda: page.evaluate("window.vncUseSeen"))
    recorded = events(console, thread_id)
    actions = [(i, e) for i, e in enumerate(recorded, 1) if e["event"] == "action"]
    assert len(actions) == 2
    for line, event in actions:
        shown = seen.get(str(line))
        assert shown is not None, f"step {event['step']} never showed ({seen})"
        assert shown / 1000 - event["ts"] < 1.0, (event["step"], shown / 1000 - event["ts"])
    assert [(p["x"], p["y"]) for p in presses(probe)] == [a, b]
    steps = page.evaluate("document.querySelectorAll('#steps section.step').length")
    assert steps == 2
    # after the end: the report's video, with a seek button per step, served in pieces
    assert page.evaluate("!!document.getElementById('run-video')")
    assert page.evaluate("document.querySelectorAll('#steps button.seek').length") == 2
    with console.http() as http:
        piece = http.get(f"/runs/{thread_id}/video.mp4", headers={"Range": "bytes=0-99"})
    assert piece.status_code == 206 and len(piece.content) == 100
    assert page.evaluate("!!document.querySelector('svg.marker circle.crosshair')")
    console.seen_urls.update(page.requested_urls())
    assert not [p for p in page.problems() if "favicon" not in p], page.problems()


def _pending_run(console: ConsoleUnderTest, page: Page) -> tuple[str, tuple[int, int]]:
    probe = console.probe
    probe.log.clear()
    target = probe.canvas_point()
    console.api.script(
        Reply.calls(FunctionCallSpec("click_at", **grid(probe, *target))),
        Reply.text("Clicked once."),
    )
    thread_id = start_from_form(console, page, "Click the canvas once", confirm="click_at")
    wait_status(page, "awaiting_approval")
    return thread_id, target


def test_approve_in_the_page_lands_the_click_once_and_a_late_second_tab_is_told(
    console: ConsoleUnderTest,
) -> None:
    page = console.browser.new_page()
    page.open(f"{console.base}/?token={TOKEN}")
    thread_id, target = _pending_run(console, page)
    # the pending click, with its target marked on the screenshot the model saw
    marker = page.evaluate(
        "(() => { const s = document.querySelector('section.step.kind-pending');"
        " const c = s.querySelector('svg.marker circle.crosshair');"
        " return [Number(c.getAttribute('cx')), Number(c.getAttribute('cy'))]; })()"
    )
    assert abs(marker[0] - target[0]) <= 2 and abs(marker[1] - target[1]) <= 2, marker
    assert "awaiting approval" in page.evaluate("document.querySelector('#steps').textContent")
    assert presses(console.probe) == []
    if os.environ.get("VNC_USE_DOCS_IMAGES"):  # the docs' screenshot, taken here
        page.screenshot(ROOT / "docs" / "images" / "console.png", width=1280)
    late = console.browser.new_page()
    late.open(f"{console.base}/runs/{thread_id}/")
    wait_status(late, "awaiting_approval")
    late.evaluate("window.vncUseEvents.close()")  # this tab hears nothing more: it is late
    press(page, "Approve")
    press(late, "Approve")
    told = wait(
        "the late tab's answer",
        lambda: (
            late.evaluate("document.getElementById('message').textContent").startswith("run ")
            and late.evaluate("document.getElementById('message').textContent")
        ),
    )
    assert "already answered" in told, told
    wait_status(page, "done")
    clicks = presses(console.probe)
    assert [(p["x"], p["y"]) for p in clicks] == [target]
    approved = [e for e in events(console, thread_id) if e["event"] == "approved"]
    assert len(approved) == 1
    console.seen_urls.update(page.requested_urls() + late.requested_urls())


def test_deny_in_the_page_ends_the_run_denied_with_nothing_clicked(
    console: ConsoleUnderTest,
) -> None:
    page = console.browser.new_page()
    page.open(f"{console.base}/?token={TOKEN}")
    thread_id, _ = _pending_run(console, page)
    fill(page, "Reason", "not that one")
    press(page, "Deny")
    wait_status(page, "denied")
    assert presses(console.probe) == []
    denied = [e for e in events(console, thread_id) if e["event"] == "denied"]
    assert len(denied) == 1 and denied[0]["reason"] == "not that one"
    with console.http() as http:
        again = http.post(f"/api/runs/{thread_id}/approve")
    assert again.status_code == 409 and "already answered" in again.json()["error"]
    console.seen_urls.update(page.requested_urls())


def test_an_approval_from_the_cli_in_another_process_shows_in_the_open_page(
    console: ConsoleUnderTest,
) -> None:
    page = console.browser.new_page()
    page.open(f"{console.base}/?token={TOKEN}")
    thread_id, target = _pending_run(console, page)
    proc = run_cli(
        ["approve", thread_id, "--runs-dir", str(console.runs)],
        env={
            k: console.env[k] for k in ("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "VNC_PASSWORD")
        },
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    wait_status(page, "done", timeout=20)
    assert [(p["x"], p["y"]) for p in presses(console.probe)] == [target]
    assert page.evaluate("!!document.querySelector('#steps [data-kind=action]')")


def test_stop_ends_the_run_interrupted_and_resume_finishes_it(console: ConsoleUnderTest) -> None:
    probe = console.probe
    probe.log.clear()
    points = [(probe.size[0] * (i + 2) // 10, probe.size[1] // 2) for i in range(6)]
    console.api.script(
        *[
            dataclasses.replace(
                Reply.calls(FunctionCallSpec("click_at", **grid(probe, *p))), latency=0.7
            )
            for p in points
        ],
        Reply.text("Six clicks."),
    )
    page = console.browser.new_page()
    page.open(f"{console.base}/?token={TOKEN}")
    thread_id = start_from_form(console, page, "Click six times")
    wait(
        "a first step",
        lambda: (
            any(e["event"] == "action" for e in events(console, thread_id))
            if (console.runs / thread_id / "events.jsonl").exists()
            else False
        ),
    )
    press(page, "Stop")
    wait_status(page, "interrupted")
    done_before = len(presses(probe))
    assert 1 <= done_before < 6
    press(page, "Resume")
    wait_status(page, "done", timeout=90)
    assert [(p["x"], p["y"]) for p in presses(probe)] == points
    console.seen_urls.update(page.requested_urls())


def test_a_run_goes_on_when_its_console_stops_and_another_stops_and_resumes_it(
    console: ConsoleUnderTest, tmp_path: Path
) -> None:
    """Console A starts a run and is stopped; the run goes on. Console B (a new start over the
    same runs folder) shows it, and its Stop reaches the run A's leg runs (through the run's
    journal), and its Resume finishes it."""
    probe = console.probe
    probe.log.clear()
    points = [(probe.size[0] * (i + 2) // 14, probe.size[1] // 3) for i in range(10)]
    console.api.script(
        *[
            dataclasses.replace(
                Reply.calls(FunctionCallSpec("click_at", **grid(probe, *p))), latency=1.2
            )
            for p in points
        ],
        Reply.text("Ten clicks."),
    )
    runs = tmp_path / "runs"
    first, base = start_console(runs, probe, console.env)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        started = httpx.post(
            f"{base}/api/runs", json={"task": "Click six times"}, headers=headers, timeout=10
        )
        assert started.status_code == 201, started.text
        thread_id = started.json()["thread_id"]
        wait("a first click", lambda: presses(probe), 60)
    finally:
        first.terminate()
        first.wait(20)
    assert first.returncode is not None
    second, base = start_console(runs, probe, console.env)
    try:
        page = console.browser.new_page()
        page.open(f"{base}/?token={TOKEN}")
        page.open(f"{base}/runs/{thread_id}/")
        wait("a second click", lambda: len(presses(probe)) >= 2, 60)
        wait(
            "the Stop control",
            lambda: page.evaluate(
                "!!document.getElementById('do-stop') && !document.getElementById('do-stop').hidden"
                " || (document.body && document.body.dataset.status === 'unfinished')"
            ),
        )
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            stopped = http.post(f"/api/runs/{thread_id}/stop")
        assert stopped.status_code == 202, stopped.text
        wait_status(page, "interrupted", timeout=60)
        assert 2 <= len(presses(probe)) < 10
        press(page, "Resume")
        wait_status(page, "done", timeout=90)
        clicks = [(p["x"], p["y"]) for p in presses(probe)]
        assert len(clicks) == len(points), clicks  # each once: none lost, none twice
        assert all(
            abs(a - c) <= 2 and abs(b - d) <= 2
            for (a, b), (c, d) in zip(clicks, points, strict=True)
        )
    finally:
        second.terminate()
        second.wait(20)


def test_the_live_view_is_view_only_and_never_sees_a_password(console: ConsoleUnderTest) -> None:
    """The page's end of the live view: RFB with no password (the console logged in), a
    framebuffer that arrives, and a click and a key that never reach the desktop (the console
    has only the full password here, so it drops the page's input itself)."""
    probe = console.probe
    runs = [p.name for p in console.runs.iterdir() if (p / "run.json").exists()]
    assert runs
    probe.log.clear()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with live_socket(console.base, runs[0], headers) as live:
        ws = live.ws
        assert live.size == probe.size
        width, height = live.size
        x, y = probe.canvas_point()
        ws.send(struct.pack(">BBHH", 5, 1, x, y) + struct.pack(">BBHH", 5, 0, x, y))
        ws.send(struct.pack(">BBxxI", 4, 1, 0x61) + struct.pack(">BBxxI", 4, 0, 0x61))
        ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))
        assert live.read(1) == b"\0"  # a FramebufferUpdate: the stream goes on
        every = ws.recv(timeout=5)
        assert every
    time.sleep(1)  # the probe logs what reached it within a few ms; nothing may have
    assert presses(probe) == [] and probe.log.events("key") == []
    assert probe.log.events("motion") == []


def test_nothing_is_served_without_the_token(console: ConsoleUnderTest) -> None:
    runs = sorted(p.name for p in console.runs.iterdir() if not p.name.startswith("."))
    some = runs[0] if runs else "nothing"
    shot = next((console.runs / some / "screenshots").glob("*.png"), None)
    paths = [
        "/",
        "/fragments/runs",
        f"/runs/{some}/",
        f"/runs/{some}/fragment",
        f"/runs/{some}/video.mp4",
        "/static/console.js",
        "/static/live.js",
        "/novnc/core/rfb.js",
        "/api/runs",
        f"/api/runs/{some}",
        f"/api/runs/{some}/events",
        "/api/desktops",
        "/no/such/page",
    ]
    if shot is not None:
        paths.append(f"/runs/{some}/screenshots/{shot.name}")
    with httpx.Client(base_url=console.base, timeout=10) as http:
        for path in paths:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Cookie": "vnc_use_console=wrong"},
            ):
                answer = http.get(path, headers=headers)
                assert answer.status_code == 401, (path, headers, answer.status_code)
                assert TOKEN not in answer.text
        for verb in ("approve", "deny", "stop", "resume"):
            assert http.post(f"/api/runs/{some}/{verb}").status_code == 401
        assert http.post("/api/runs", json={"task": "x"}).status_code == 401
        # a cross-site form cannot use the cookie
        cross = http.post(
            "/api/runs",
            json={"task": "x"},
            headers={"Cookie": f"vnc_use_console={TOKEN}", "Origin": "http://elsewhere.example"},
        )
        assert cross.status_code == 403
    ws_url = console.base.replace("http://", "ws://") + f"/runs/{some}/websockify"
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url, open_timeout=10).close()
    assert refused.value.response.status_code == 401


def test_a_run_that_cannot_start_says_why(console: ConsoleUnderTest) -> None:
    """The console has no Anthropic key: the run's leg fails, and the API (and the page) say
    why in one line."""
    with console.http() as http:
        started = http.post("/api/runs", json={"task": "Click", "provider": "anthropic"})
        assert started.status_code == 201, started.text
        thread_id = started.json()["thread_id"]

        def failed() -> Any:
            found = http.get(f"/api/runs/{thread_id}").json()
            return found if found["status"] == "error" and found["error"] else None

        found = wait("the run's error", failed, 90)
    assert "ANTHROPIC_API_KEY" in found["error"] and "\n" not in found["error"], found


def test_the_api_answers_bad_input_and_states_in_one_line(console: ConsoleUnderTest) -> None:
    with console.http() as http:
        assert http.post("/api/runs", json={}).json() == {
            "error": "task: required: what to do, in plain words"
        }
        bad = http.post("/api/runs", json={"task": "x", "step_limit": "ten"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("step_limit:")
        bad = http.post("/api/runs", json={"task": "x", "desktop": "nowhere::1"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("desktop:")
        bad = http.post("/api/runs", json={"task": "x", "runs_dir": "/tmp"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("runs_dir:")
        assert http.get("/api/runs/nosuchrun").status_code == 404
        assert http.post("/api/runs/nosuchrun/approve").status_code == 404
        listed = http.get("/api/runs", params={"status": "done", "limit": 2}).json()
        assert listed["limit"] == 2 and all(r["status"] == "done" for r in listed["runs"])
        assert listed["total"] >= 2
        desktops = http.get("/api/desktops").json()["desktops"]
        assert desktops == [{"name": console.probe.desktop.server, "kind": "vnc"}]
        done = listed["runs"][0]["thread_id"]
        for verb in ("approve", "stop", "resume"):
            refused = http.post(f"/api/runs/{done}/{verb}")
            assert refused.status_code == 409, (verb, refused.text)
            assert "\n" not in refused.json()["error"]


def test_nothing_the_console_serves_holds_a_key_or_a_password(console: ConsoleUnderTest) -> None:
    secrets = [DUMMY_API_KEY.encode(), console.probe.desktop.password.encode()]
    urls = {u for u in console.seen_urls if u.startswith(console.base)}
    assert len(urls) > 5, urls
    with console.http() as http:
        listed = http.get("/api/runs", params={"limit": 500}).json()["runs"]
        for run in listed:
            tid = run["thread_id"]
            urls |= {
                f"{console.base}/api/runs/{tid}",
                f"{console.base}/runs/{tid}/",
                f"{console.base}/runs/{tid}/fragment",
            }
        urls |= {f"{console.base}/api/runs", f"{console.base}/api/desktops", f"{console.base}/"}
        scanned = 0
        for url in sorted(urls):
            if url.endswith("/events") or "websockify" in url:
                continue
            body = http.get(url).content
            scanned += len(body)
            for secret in secrets:
                assert secret not in body, url
        for run in listed:  # the event streams: what is there now, read for a moment
            with http.stream("GET", f"/api/runs/{run['thread_id']}/events") as stream:
                got = b""
                for chunk in stream.iter_bytes():
                    got += chunk
                    if got.count(b"\n\n") >= 5:
                        break
            for secret in secrets:
                assert secret not in got
    assert scanned > 10_000
