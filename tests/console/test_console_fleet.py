"""The web console over a fleet (issue 41): ``vnc-use console --fleet URL`` with a worker of the
fleet's test set-up (PostgreSQL, ``vnc-use worker`` over a probe desktop, the Gemini
stand-in), driven in headless Chromium: a run started from the form goes to the worker, its
pending click is approved in the page and lands once, and the runs list reads the fleet's
table."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import httpx
import pytest

from vnc_use.console.fleet import FleetRuns
from vnc_use.console.holding import FleetEvents
from vnc_use.fleet.blobs import RunStore
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from chromium import Browser
from cli_tools import CLI
from console_page import click_desktop, fill, press, value_of, wait, wait_live, wait_status
from fleet_tools import PASSWORD, WorkerProcess, probe_desktops

pytestmark = pytest.mark.desktop

TOKEN = "console-fleet-test-token-8e2f"


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


def test_the_console_over_a_fleet_starts_approves_and_lists_the_fleets_runs(
    pg: PostgresServer,
    gemini: GeminiStandIn,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with probe_desktops(tmp_path_factory, 1, PASSWORD) as probes:
        probe = probes[0]
        target = probe.canvas_point()
        width, height = probe.size
        spot = {"x": round(target[0] * 1000 / width), "y": round(target[1] * 1000 / height)}
        gemini.script(
            dataclasses.replace(Reply.calls(FunctionCallSpec("click_at", **spot)), latency=0.3),
            Reply.text("Clicked once."),
        )
        runs = tmp_path / "fleet-runs"  # the worker's runs folder, on this host
        worker = WorkerProcess("A", probes, pg.url, runs)
        console = None
        browser = None
        try:
            assert worker.ready.wait(90), worker.output
            env = {k: v for k, v in os.environ.items() if k not in ("VNC_PASSWORD",)}
            env.pop("GOOGLE_API_KEY", None)  # the console has no model key: the worker does
            env["VNC_USE_CONSOLE_TOKEN"] = TOKEN
            # the console on a host of its own: the run's folder comes from the fleet's database
            mine = tmp_path / "console-runs"
            argv = ["console", "--port", "0", "--fleet", pg.url, "--runs-dir", str(mine)]
            console = subprocess.Popen(
                [*CLI, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            assert console.stdout is not None
            first = console.stdout.readline()
            assert first.startswith("vnc-use console: http://127.0.0.1:"), (
                first,
                console.stderr.read() if console.poll() is not None else "",
            )
            base = first.split(": ", 1)[1].strip().split("/?")[0]
            browser = Browser(tmp_path / "profile")
            page = browser.new_page()
            page.open(f"{base}/?token={TOKEN}")
            fill(page, "Task", "Click the canvas once")
            fill(page, "Actions that need approval", "click_at")
            assert value_of(page, "Desktop", "combobox") == "default"  # the worker's label
            press(page, "Start")
            path = wait(
                "the run's page",
                lambda: (
                    "/runs/" in page.evaluate("location.pathname")
                    and page.evaluate("location.pathname")
                ),
            )
            thread_id = str(path).split("/")[2]
            wait_status(page, "awaiting_approval", timeout=120)
            assert [e for e in probe.log.events("press") if e["button"] == 1] == []
            assert page.evaluate(
                "!!document.querySelector('section.step.kind-pending svg.marker circle.crosshair')"
            )
            assert (mine / thread_id / ".fleet-run").exists()  # fetched, not the worker's
            press(page, "Approve")
            wait_status(page, "done", timeout=120)
            clicks = [(e["x"], e["y"]) for e in probe.log.events("press") if e["button"] == 1]
            assert len(clicks) == 1 and abs(clicks[0][0] - target[0]) <= 2, clicks
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
                listed = http.get("/api/runs").json()
                assert [(r["thread_id"], r["status"]) for r in listed["runs"]] == [
                    (thread_id, "done")
                ]
                desktops = http.get("/api/desktops").json()["desktops"]
                assert desktops == [{"name": "default", "kind": "label"}]
                again = http.post(f"/api/runs/{thread_id}/approve")
                assert again.status_code == 409 and "already answered" in again.json()["error"]
        finally:
            if browser is not None:
                browser.close()
            if console is not None:
                console.terminate()
                console.wait(20)
            worker.stop()


def test_take_over_and_hand_back_in_a_fleet_consoles_page(
    pg: PostgresServer,
    gemini: GeminiStandIn,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Over a fleet: Take over pauses the worker's leg (``awaiting_human``, through the
    fleet's executor); the console, which has the desktop's password here, turns the holder's
    live view interactive and writes the person's click into the fleet's events (where the
    worker's next leg reads it); another browser's takeover is refused naming the holder and
    its hand-back too; Hand back with a Note puts the next leg on the queue: the model is told
    the note and the click, and the run ends ``done``."""
    note = "I checked the canvas myself"
    with probe_desktops(tmp_path_factory, 1, PASSWORD) as probes:
        probe = probes[0]
        width, height = probe.size
        points = [(width * (i + 3) // 10, height * 3 // 4) for i in range(3)]

        def script(body: Any, index: int) -> Reply:
            if index >= len(points):
                return Reply.text("All clicked.")
            x, y = points[index]
            spot = {"x": round(x * 1000 / width), "y": round(y * 1000 / height)}
            return dataclasses.replace(
                Reply.calls(FunctionCallSpec("click_at", **spot)), latency=1.0
            )

        gemini.script(script)
        worker = WorkerProcess("A", probes, pg.url, tmp_path / "fleet-runs")
        console = None
        browser = None
        try:
            assert worker.ready.wait(90), worker.output
            env = {k: v for k, v in os.environ.items() if k not in ("VNC_PASSWORD",)}
            env.pop("GOOGLE_API_KEY", None)
            env["VNC_USE_CONSOLE_TOKEN"] = TOKEN
            env["VNC_PASSWORD"] = PASSWORD  # the live view: the workers' desktops' password
            mine = tmp_path / "console-runs"
            argv = ["console", "--port", "0", "--fleet", pg.url, "--runs-dir", str(mine)]
            console = subprocess.Popen(
                [*CLI, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            assert console.stdout is not None
            first = console.stdout.readline()
            assert first.startswith("vnc-use console: http://127.0.0.1:"), first
            base = first.split(": ", 1)[1].strip().split("/?")[0]
            browser = Browser(tmp_path / "profile")
            page = browser.new_page()
            page.open(f"{base}/?token={TOKEN}")
            fill(page, "Task", "Click three points")
            press(page, "Start")
            wait("the run's page", lambda: "/runs/" in page.evaluate("location.pathname"))
            thread_id = str(page.evaluate("location.pathname")).split("/")[2]
            probe.log.wait_for(lambda e: e.get("type") == "press", timeout=120)
            press(page, "Take over")
            wait_status(page, "awaiting_human", timeout=120)
            wait(
                "the holder's Hand back",
                lambda: page.evaluate("!document.getElementById('do-handback').hidden"),
            )
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                held_by = http.get(f"/api/runs/{thread_id}").json()["held_by"]
                assert held_by and held_by.startswith("console ")
                taken = http.post(f"/api/runs/{thread_id}/takeover", json={"force": False})
                assert taken.status_code == 409 and f"held by {held_by} since" in taken.text
                back = http.post(f"/api/runs/{thread_id}/handback", json={"note": "not mine"})
                assert back.status_code == 409 and held_by in back.json()["error"], back.text
            wait_live(page, "interactive")
            mark = len(probe.log.events("press"))
            spot = (width // 10, height // 3)
            click_desktop(page, probe.size, *spot)
            probe.log.wait_for(
                lambda e: e.get("type") == "press" and abs(e["x"] - spot[0]) <= 4, timeout=30
            )
            assert len(probe.log.events("press")) == mark + 1
            asked = len(gemini.requests)
            fill(page, "Note", note)
            press(page, "Hand back")
            wait_status(page, "done", timeout=180)
            said = json.dumps(gemini.requests[asked].body)
            assert note in said and "not mine" not in said and "1 click" in said, said[-2000:]
            store = RunStore(pg.url)
            try:
                lines = [json.loads(line) for line in store.events(thread_id)]
            finally:
                store.close()
            person = [e for e in lines if e["event"] == "person_input"]
            assert [e["kind"] for e in person] == ["click"], person
            assert abs(person[0]["x"] - spot[0]) <= 4 and abs(person[0]["y"] - spot[1]) <= 4
            # the video has the person's part, from the fleet's database (as report --fleet
            # and another host's leg read it): between the agent's two legs' segments
            fetched = tmp_path / "fetched"
            store = RunStore(pg.url)
            try:
                store.fetch_run(fetched, thread_id)
            finally:
                store.close()
            segments = json.loads((fetched / thread_id / "video.json").read_text())["segments"]
            marks = [bool(s.get("person")) for s in segments]
            assert marks == [False, True, False], segments
            theirs = segments[1]
            assert theirs["frames"] > 0, segments
            assert segments[0]["started"] <= theirs["started"] <= segments[2]["started"]
            with av.open(str(fetched / thread_id / theirs["file"])) as container:
                frames = [f for f in container.decode(video=0)]
            assert frames and frames[0].width == width and frames[0].height == height
            # the console's run page plays it too (its copy of the folder, from the database)
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:

                def copied() -> bool:
                    http.get(f"/runs/{thread_id}/fragment")  # the page's refresh fetches
                    try:
                        index = json.loads((mine / thread_id / "video.json").read_text())
                    except (OSError, ValueError):
                        return False
                    return [bool(s.get("person")) for s in index["segments"]] == marks

                wait("the console's copy with the person's part", copied)
                played = http.get(f"/runs/{thread_id}/{theirs['file']}")
                assert played.status_code == 200, played.text
                assert played.content == (fetched / thread_id / theirs["file"]).read_bytes()
        finally:
            if browser is not None:
                browser.close()
            if console is not None:
                console.terminate()
                console.wait(20)
            worker.stop()


def test_a_fleet_runs_person_video_that_cannot_connect_is_told_in_the_fleets_events(
    pg: PostgresServer, tmp_path: Path
) -> None:
    """The console's recording of a fleet run's person's part fetches the run's folder from
    the fleet's database first; a desktop it cannot connect to is told in the run's events
    there (not in a folder of the console's), never with the password, and the view goes on."""
    thread_id = "person-video-unreachable"
    store = RunStore(pg.url)
    try:
        store.put_file(thread_id, "run.json", json.dumps({"thread_id": thread_id}).encode())
        store.put_event(thread_id, json.dumps({"ts": 1.0, "event": "run_started"}))
    finally:
        store.close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runs = FleetRuns(pg.url, tmp_path / "console-runs")
    events = FleetEvents(pg.url, thread_id)
    secret = "pw-of-the-desktop-71c3"
    entered = False
    try:
        with runs.person_video(thread_id, f"127.0.0.1::{port}", secret, events):
            entered = True
    finally:
        events.close()
    assert entered
    assert (tmp_path / "console-runs" / thread_id / "run.json").exists()  # fetched first
    store = RunStore(pg.url)
    try:
        lines = store.events(thread_id)
    finally:
        store.close()
    failed = [json.loads(line) for line in lines if '"video_failed"' in line]
    assert len(failed) == 1 and "person's part is not in the video" in failed[0]["message"]
    assert not any(secret in line for line in lines)
    local = (tmp_path / "console-runs" / thread_id / "events.jsonl").read_text()
    assert "video_failed" not in local  # not into the console's copy of the folder
