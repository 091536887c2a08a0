"""The web console over LangGraph Server (issue 41): ``vnc-use console --server URL`` against a
real ``langgraph dev`` (one for the module: it is slow to start) with the probe desktop and the
Gemini stand-in inside the server, driven in headless Chromium.

The console shares its runs folder with the server (the same machine): a run it starts writes
its folder there, so its page shows the steps as they are written. The console's environment
holds no model key and no desktop password: the server has them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.langgraph_dev import LangGraphDev

from chromium import Browser, Page
from cli_tools import CLI, run_cli
from console_page import fill, press, value_of, wait, wait_status
from desktop_fixtures import Probe
from gemini_fixtures import DUMMY_API_KEY

pytestmark = pytest.mark.desktop

TOKEN = "console-server-test-token-71c3"


@dataclass
class Served:
    base: str
    runs: Path
    api: GeminiStandIn
    probe: Probe
    browser: Browser
    server: LangGraphDev

    def page(self) -> Page:
        page = self.browser.new_page()
        page.open(f"{self.base}/?token={TOKEN}")
        return page

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def served(session_probe: Probe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("console-server")
    runs = folder / "runs"
    with GeminiStandIn() as api:
        server_env = {
            "GOOGLE_API_KEY": DUMMY_API_KEY,
            "GOOGLE_GEMINI_BASE_URL": api.base_url,
            "VNC_PASSWORD": session_probe.desktop.password,
        }
        with LangGraphDev(server_env, jobs=2) as dev:
            env = {
                k: v
                for k, v in os.environ.items()
                if k not in ("VNC_PASSWORD", "GOOGLE_API_KEY", "GEMINI_API_KEY")
            }
            env["VNC_USE_CONSOLE_TOKEN"] = TOKEN
            argv = ["console", "--port", "0", "--server", dev.url, "--runs-dir", str(runs)]
            argv += ["--vnc", session_probe.desktop.server, "--provider", "gemini"]
            process = subprocess.Popen(
                [*CLI, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            browser = None
            try:
                assert process.stdout is not None
                first = process.stdout.readline()
                assert first.startswith("vnc-use console: http://127.0.0.1:"), (
                    first,
                    process.stderr.read() if process.poll() is not None else "",
                )
                base = first.split(": ", 1)[1].strip().split("/?")[0]
                browser = Browser(folder / "profile")
                yield Served(base, runs, api, session_probe, browser, dev)
            finally:
                if browser is not None:
                    browser.close()
                process.terminate()
                process.wait(20)


def grid(probe: Probe, x: int, y: int) -> dict[str, int]:
    width, height = probe.size
    return {"x": round(x * 1000 / width), "y": round(y * 1000 / height)}


def presses(probe: Probe) -> list[tuple[int, int]]:
    return [(e["x"], e["y"]) for e in probe.log.events("press") if e["button"] == 1]


def start_from_form(served: Served, page: Page, task: str, confirm: str = "") -> str:
    page.open(f"{served.base}/")
    fill(page, "Task", task)
    if confirm:
        fill(page, "Actions that need approval", confirm)
    assert value_of(page, "Desktop", "combobox") == served.probe.desktop.server
    press(page, "Start")
    path = wait(
        "the run's page",
        lambda: (
            "/runs/" in page.evaluate("location.pathname") and page.evaluate("location.pathname")
        ),
    )
    return str(path).split("/")[2]


def test_a_served_run_from_the_form_is_approved_in_the_page_and_clicks_once(
    served: Served,
) -> None:
    probe = served.probe
    probe.log.clear()
    target = probe.canvas_point()
    served.api.script(
        dataclasses.replace(
            Reply.calls(FunctionCallSpec("click_at", **grid(probe, *target))), latency=0.5
        ),
        Reply.text("Clicked once."),
    )
    page = served.page()
    thread_id = start_from_form(served, page, "Click the canvas once", confirm="click_at")
    wait_status(page, "awaiting_approval", timeout=120)
    assert presses(probe) == []
    # the pending click with its target marked: the folder the server's leg writes, shared
    assert page.evaluate(
        "!!document.querySelector('section.step.kind-pending svg.marker circle.crosshair')"
    )
    assert (served.runs / thread_id / "events.jsonl").exists()
    press(page, "Approve")
    wait_status(page, "done", timeout=120)
    clicks = presses(probe)
    assert len(clicks) == 1 and abs(clicks[0][0] - target[0]) <= 2, clicks
    assert page.evaluate("document.querySelectorAll('#steps section.step').length") >= 1
    with served.http() as http:
        again = http.post(f"/api/runs/{thread_id}/approve")
        assert again.status_code == 409 and "already answered" in again.json()["error"]
        taken = http.post(f"/api/runs/{thread_id}/takeover")
        assert taken.status_code == 409 and "vnc-use takeover --server" in taken.json()["error"]
        listed = {r["thread_id"]: r for r in http.get("/api/runs").json()["runs"]}
    row = listed[thread_id]
    assert row["status"] == "done" and row["task"] == "Click the canvas once"
    assert (row["provider"], row["desktop"]) == ("gemini", probe.desktop.server)
    assert row["steps"] >= 1 and row["started"] is not None and row["duration_s"] is not None
    # the server has the run: its own thread state says so
    from langgraph_sdk import get_sync_client

    state = get_sync_client(url=served.server.url, api_key=None).threads.get_state(thread_id)
    assert state["values"]["status"] == "done"


@contextlib.contextmanager
def _console_events(served: Served, thread_id: str) -> Iterator[list[dict[str, Any]]]:
    """The ``console`` events of the run's event stream, the one its page listens to, read on a
    connection of the test's own from now on: the page reloads when the run ends, and the
    reloaded page's stream starts watching the server's thread afresh, so a change the old
    page had not heard yet is never told to it (the page shows it by the reload)."""
    heard: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = httpx.Timeout(30, read=None)
    client = httpx.Client(base_url=served.base, headers=headers, timeout=timeout)

    def read() -> None:
        kind = ""
        with (
            contextlib.suppress(Exception),  # closed at the end of the block
            client.stream("GET", f"/api/runs/{thread_id}/events") as response,
        ):
            for line in response.iter_lines():
                if line.startswith("event:"):
                    kind = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and kind in ("console", "action"):
                    (heard if kind == "console" else actions).append(
                        json.loads(line.split(":", 1)[1])
                    )
                elif not line:
                    kind = ""

    before = len(presses(served.probe))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # the stream replays the run's events, then a new step comes: by then it watches the
        # server's thread (a change is told only after a first look)
        wait("a new step on the test's stream", lambda: len(actions) > before, 120)
        yield heard
    finally:
        client.close()
        reader.join(timeout=10)


def test_stop_ends_a_served_run_interrupted_and_resume_finishes_it(served: Served) -> None:
    probe = served.probe
    probe.log.clear()
    points = [(probe.size[0] * (i + 2) // 10, probe.size[1] // 2) for i in range(6)]

    def model(request: dict[str, Any], index: int) -> Reply:
        """The next click by the turns the model has had: a stop cancels the server's run
        mid-call, and the resumed run asks again for the same step."""
        turns = sum(1 for c in request.get("contents") or [] if c.get("role") == "model")
        if turns >= len(points):
            return Reply.text("Six clicks.")
        call = FunctionCallSpec("click_at", **grid(probe, *points[turns]))
        return dataclasses.replace(Reply.calls(call), latency=0.8)

    served.api.script(model)
    page = served.page()
    thread_id = start_from_form(served, page, "Click six times")
    wait("a first click", lambda: presses(probe), 120)
    with _console_events(served, thread_id) as heard:
        wait(
            "the Stop control",
            lambda: page.evaluate(
                "!!document.getElementById('do-stop') && !document.getElementById('do-stop').hidden"
            ),
        )
        press(page, "Stop")
        wait_status(page, "interrupted", timeout=60)
        # the server's thread, watched for the event stream: its change came as a console event
        statuses = wait(
            "the server's status as an event",
            lambda: [h["status"] for h in heard if h.get("status") == "interrupted"],
        )
    assert "interrupted" in statuses, heard
    before = len(presses(probe))
    assert 1 <= before < 6
    press(page, "Resume")
    wait_status(page, "done", timeout=120)
    clicks = presses(probe)
    assert len(clicks) == len(points), clicks  # each once: none lost, none twice
    assert all(
        abs(a - c) <= 2 and abs(b - d) <= 2 for (a, b), (c, d) in zip(clicks, points, strict=True)
    )
    with served.http() as http:
        late = http.post(f"/api/runs/{thread_id}/stop")
    assert late.status_code == 409 and "not running" in late.json()["error"]


def test_a_cli_approval_shows_in_the_open_page_and_a_cli_run_is_listed(
    served: Served, tmp_path: Path
) -> None:
    """``vnc-use approve --server`` in another process: the open page shows the run going on
    (its events, and the server's status watched for the event stream). A run started with
    ``vnc-use run --server`` into another runs folder is listed with its provider and model
    (the spec the server keeps); with that folder gone from here, its page shows what the
    server's thread holds."""
    probe = served.probe
    probe.log.clear()
    target = probe.canvas_point()
    served.api.script(
        Reply.calls(FunctionCallSpec("click_at", **grid(probe, *target))),
        Reply.text("Clicked once."),
    )
    page = served.page()
    thread_id = start_from_form(served, page, "Click the canvas once", confirm="click_at")
    wait_status(page, "awaiting_approval", timeout=120)
    approved = run_cli(["approve", "--server", served.server.url, thread_id], timeout=120)
    assert approved.returncode == 0, approved.stderr
    wait_status(page, "done", timeout=20)
    assert len(presses(probe)) == 1
    # a run of the CLI, in a runs folder of its own
    served.api.script(Reply.text("Nothing to do."))
    other = tmp_path / "cli-runs"
    argv = ["run", "--server", served.server.url, "--vnc", probe.desktop.server]
    argv += ["--provider", "gemini"]
    ran = run_cli([*argv, "--runs-dir", str(other), "--task", "Look only"], timeout=120)
    assert ran.returncode == 0, ran.stderr
    with served.http() as http:
        rows = [r for r in http.get("/api/runs").json()["runs"] if r["task"] == "Look only"]
        assert len(rows) == 1 and rows[0]["status"] == "done", rows
        tid = rows[0]["thread_id"]
        assert rows[0]["provider"] == "gemini" and rows[0]["desktop"] == probe.desktop.server
        shown = http.get(f"/runs/{tid}/fragment").json()
        assert "Nothing to do." in shown["main"] or "Nothing to do." in shown["header"]
        (other / tid).rename(other / "moved")
        http.get(f"/api/runs/{tid}")  # the cached answer expires
        bare = wait(
            "the page without the folder",
            lambda: (
                "does not share" in (found := http.get(f"/runs/{tid}/fragment").json())["main"]
                and found
            ),
            10,
        )
    assert "Nothing to do." in bare["header"] and bare["status"] == "done"


def test_nothing_without_the_token_and_no_cross_site_post(served: Served) -> None:
    secrets = [DUMMY_API_KEY.encode(), served.probe.desktop.password.encode()]
    with served.http() as http:
        runs: list[dict[str, Any]] = http.get("/api/runs").json()["runs"]
        # what the console serves of the server's runs carries none of the server's secrets
        paths = ["/", "/api/runs", "/api/desktops"]
        for run in runs:
            tid = run["thread_id"]
            paths += [f"/runs/{tid}/", f"/runs/{tid}/fragment", f"/api/runs/{tid}"]
        for path in paths:
            answer = http.get(path)
            assert answer.status_code == 200, (path, answer.status_code)
            assert not [s for s in secrets if s in answer.content], path
    some = runs[0]["thread_id"] if runs else "00000000-0000-0000-0000-000000000000"
    with httpx.Client(base_url=served.base, timeout=10) as http:
        for path in ("/", "/api/runs", f"/api/runs/{some}", f"/runs/{some}/", "/api/desktops"):
            assert http.get(path).status_code == 401, path
        for verb in ("approve", "deny", "stop", "resume"):
            assert http.post(f"/api/runs/{some}/{verb}").status_code == 401
        assert http.post("/api/runs", json={"task": "x"}).status_code == 401
        # a cookie alone from another site: refused too
        cross = http.post(
            "/api/runs",
            json={"task": "x"},
            headers={"Origin": "http://evil.example", "Cookie": f"vnc_use_console={TOKEN}"},
        )
        assert cross.status_code == 403, cross.status_code
