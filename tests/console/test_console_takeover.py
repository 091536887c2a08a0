"""The console's "Take over" and "Hand back" (issue 42, the console's part), in real headless
Chromium against the probe desktop and the Gemini stand-in answering after 1 s.

A run of six clicks is taken over from its page after its second click: it waits for a person
(``awaiting_human``); the page's live view then takes real mouse and key events (dispatched
over DevTools onto noVNC's canvas) that land on the probe; another browser (its own cookies,
the same token) sees the run view-only, its input (even with the page's flag forced off)
never reaches the probe, and its hand-back is refused naming the holder; "Hand back" with a
Note goes on to ``done``, the model told the note (a script forcing the run from the page's
person turns the page's view view-only; the page's person forces it back); the run's events
have the person's clicks and a count of key presses, never the typed text; the video has the
person's part.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.test_console import TOKEN, console_env, start_console
from vnc_use.store.holds import DesktopHolds
from vnc_use.store.journal import SqliteJournalStore
from vnc_use.store.lease import desktop_key
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from chromium import Browser, Page
from console_page import (
    click_desktop,
    fill,
    live_socket,
    press,
    type_keys,
    wait,
    wait_live,
    wait_status,
)
from desktop_fixtures import Probe
from takeover_tools import clicked, six_targets, user_texts

pytestmark = pytest.mark.desktop

TYPED = "hello from a person"
NOTE = "I typed the greeting into the field"
LATENCY = 1.0


@dataclass
class Setup:
    base: str
    runs: Path
    api: GeminiStandIn
    probe: Probe
    browser: Browser


@pytest.fixture
def setup(probe: Probe, tmp_path: Path) -> Iterator[Setup]:
    runs = tmp_path / "runs"
    with GeminiStandIn() as api:
        process, base = start_console(runs, probe, console_env(api, probe))
        browser = Browser(tmp_path / "profile")
        try:
            yield Setup(base, runs, api, probe, browser)
        finally:
            browser.close()
            process.terminate()
            process.wait(20)


NEAR = 4
"""Pixels a click through the page may be off: the page shows the desktop scaled down (one
CSS pixel is about two of the desktop's)."""


def _presses_at(probe: Probe, point: tuple[int, int], near: int = 2) -> int:
    return sum(
        1
        for e in probe.log.events("press")
        if abs(e["x"] - point[0]) <= near and abs(e["y"] - point[1]) <= near
    )


def _raw_input(setup: Setup, thread_id: str, point: tuple[int, int], holder_id: str) -> None:
    """A live view asked for with input (``?input=1``) by a client that does not hold the
    run: its pointer and key messages are sent, and must be dropped by the console."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Cookie": f"vnc_use_holder={holder_id}"}
    with live_socket(setup.base, thread_id, headers, "?input=1") as live:
        ws = live.ws
        x, y = point
        ws.send(struct.pack(">BBHH", 5, 1, x, y) + struct.pack(">BBHH", 5, 0, x, y))
        ws.send(struct.pack(">BBxxI", 4, 1, 0x61) + struct.pack(">BBxxI", 4, 0, 0x61))
        ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, 8, 8))
        ws.recv(timeout=10)  # the stream goes on: the messages were read, the input dropped


def _visible(page: Page, verb: str) -> bool:
    return not page.evaluate(f"document.getElementById('do-{verb}').hidden")


def test_take_over_in_the_page_the_live_view_takes_input_and_hand_back_goes_on(
    setup: Setup,
) -> None:
    probe, api = setup.probe, setup.api
    w, h = probe.size
    targets = six_targets(probe)
    holds = DesktopHolds(
        SqliteJournalStore(setup.runs / "vnc-use.sqlite"), desktop_key(probe.desktop.server)
    )
    tid: list[str] = []

    def script(body: Any, index: int) -> Reply:
        done = clicked(body)
        if index == 2:  # the model thinks about click 3 until the takeover is on its way
            deadline = time.monotonic() + 60
            while not (tid and holds.held_for(tid[0])) and time.monotonic() < deadline:
                time.sleep(0.05)
        if done >= len(targets):
            return replace(Reply.text("All six clicked."), latency=LATENCY)
        x, y = targets[done]
        spec = FunctionCallSpec("click_at", x=round(x * 1000 / w), y=round(y * 1000 / h))
        return replace(Reply.calls(spec), latency=LATENCY)

    api.script(script)
    page = setup.browser.new_page()
    page.open(f"{setup.base}/?token={TOKEN}")
    fill(page, "Task", "Click six points")
    press(page, "Start")
    wait("the run's page", lambda: "/runs/" in page.evaluate("location.pathname"))
    tid.append(str(page.evaluate("location.pathname")).split("/")[2])
    run_dir = setup.runs / tid[0]
    probe.log.wait_for(lambda e: _presses_at(probe, targets[1]) >= 1, timeout=60)
    wait_live(page, "view only")
    press(page, "Take over")
    wait_status(page, "awaiting_human")
    landed = [_presses_at(probe, t) for t in targets]
    assert landed[:2] == [1, 1] and sum(landed) <= 3, landed  # at most the click already sent
    requests = len(api.requests)
    hold = holds.held_for(tid[0])
    assert hold is not None and hold.holder and hold.holder.startswith("console ")
    wait("the holder's controls", lambda: _visible(page, "handback"))
    assert not _visible(page, "takeover") and not _visible(page, "stop")
    assert not page.evaluate("document.getElementById('note-box').hidden")

    # another browser (its own cookies, the same token): the run is not its to use
    other = setup.browser.new_page(isolated=True)
    other.open(f"{setup.base}/runs/{tid[0]}/?token={TOKEN}")
    wait_status(other, "awaiting_human")
    assert _visible(other, "takeover") and not _visible(other, "handback")
    wait_live(other, "view only")
    wait_live(page, "interactive")

    # the holder, through the page's live view: real mouse and key events on noVNC's canvas
    person_click = (w // 10, h // 3)
    click_desktop(page, probe.size, *probe.entry_center)
    probe.log.wait_for(lambda e: _presses_at(probe, probe.entry_center, NEAR) >= 1, timeout=20)
    type_keys(page, TYPED, clear_first=True)
    probe.log.wait_type("text", text=TYPED, timeout=30)
    keys = len(probe.log.events("key"))
    # the other browser's page, made to believe it holds the run, asks for an interactive
    # view: the console, which checks its cookie against the hold, still drops its input
    intruder = (w * 9 // 10, h // 3)
    other.evaluate(
        "document.body.dataset.yours = '1'; window.dispatchEvent(new Event('vnc-use-live'))"
    )
    wait_live(other, "interactive")
    click_desktop(other, probe.size, *intruder)
    type_keys(other, "zz")
    _raw_input(setup, tid[0], intruder, "an-id-of-another-browser")  # a script, not a page
    click_desktop(page, probe.size, *person_click)
    probe.log.wait_for(lambda e: _presses_at(probe, person_click, NEAR) >= 1, timeout=20)
    time.sleep(0.5)  # the intruder's input was sent first; none of it may have landed
    assert _presses_at(probe, intruder, 3 * NEAR) == 0
    assert len(probe.log.events("key")) == keys
    assert probe.log.events("text")[-1]["text"] == TYPED
    assert len(api.requests) == requests  # held: the model was not asked

    with httpx.Client(
        base_url=setup.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    ) as http:
        taken = http.post(f"/api/runs/{tid[0]}/takeover", json={})
        assert taken.status_code == 409, taken.text
        assert f"held by {hold.holder} since" in taken.json()["error"]
        back = http.post(f"/api/runs/{tid[0]}/handback", json={"note": "not mine"})
        assert back.status_code == 409 and hold.holder in back.json()["error"], back.text
        # a script with a holder cookie of its own forces it: the page's view goes view only
        http.cookies.set("vnc_use_holder", "a-script-that-forces-it")
        forced = http.post(f"/api/runs/{tid[0]}/takeover", json={"force": True})
        assert forced.status_code == 200 and forced.json()["holder"] != hold.holder, forced.text
        wait_live(page, "view only")
        wait("the page's Take over", lambda: _visible(page, "takeover"))
        assert not _visible(page, "handback")
    # the page's person forces it back (the API, with the page's own cookie)
    again = page.send(
        "Runtime.evaluate",
        expression=f"fetch('/api/runs/{tid[0]}/takeover', {{method: 'POST', headers: "
        "{'Content-Type': 'application/json'}, body: JSON.stringify({force: true})})"
        ".then((r) => r.status)",
        awaitPromise=True,
        returnByValue=True,
    )
    assert again["result"]["value"] == 200, again
    wait("the holder's controls again", lambda: _visible(page, "handback"))
    wait_live(page, "interactive")

    fill(page, "Note", NOTE)
    press(page, "Hand back")
    wait_live(page, "view only")  # at once
    wait_status(page, "done", timeout=120)

    first_after = api.requests[requests]
    said = user_texts(first_after.body)
    assert "A person took control of the desktop" in said and NOTE in said, said
    assert "not mine" not in said
    assert [_presses_at(probe, t) for t in targets] == [1] * 6  # each remaining click once
    assert not api.violations

    events = [json.loads(line) for line in (run_dir / "events.jsonl").open()]
    person = [e for e in events if e["event"] == "person_input"]
    clicks = [(e["x"], e["y"]) for e in person if e["kind"] == "click"]
    assert len(clicks) == 2, person
    for (x, y), (px, py) in zip(clicks, [probe.entry_center, person_click], strict=True):
        assert abs(x - px) <= NEAR and abs(y - py) <= NEAR, (
            clicks,
            probe.entry_center,
            person_click,
        )
    assert sum(e["count"] for e in person if e["kind"] == "keys") >= len(TYPED)
    assert all(set(e) <= {"event", "ts", "kind", "x", "y", "button", "count"} for e in person)
    kinds = [e["event"] for e in events]
    assert kinds.index("taken_over") < kinds.index("handed_back")
    segments = json.loads((run_dir / "video.json").read_text())["segments"]
    theirs = [s for s in segments if s.get("person")]  # the video has the person's part:
    assert len(theirs) == 2, segments  # one per hold of the page's person
    assert theirs[0]["frames"] > 0 and (run_dir / theirs[0]["file"]).stat().st_size > 0
    assert segments.index(theirs[-1]) not in (0, len(segments) - 1)  # between the run's legs
    for path in [*run_dir.rglob("*"), *(setup.runs / ".console").rglob("*")]:
        if path.is_file():
            assert TYPED.encode() not in path.read_bytes(), path
