"""Taking a run's desktop over and handing it back (issue 42 items 1 and 2), on the probe
desktop with the Gemini stand-in answering after 1 s, the CLI in subprocesses.

A run of six clicks is taken over after its second click: at most the click already sent
lands, none after; while a person holds the desktop the stand-in gets no request and the probe
no agent input; a second takeover names the holder (``--force`` takes it; the old holder's
hand-back is refused); the test's own VNC client, through the interactive view's recording
port, types into the probe's entry and clicks; ``handback --note`` goes on from a fresh
screenshot that shows what the person typed, the model told of the person's turn and the
note; the remaining clicks land once each and the run ends ``done``. ``events.jsonl`` has the
person's clicks, never their text.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops

from vnc_use.desktops.vnc import VNCController
from vnc_use.store.holds import DesktopHolds
from vnc_use.store.journal import SqliteJournalStore
from vnc_use.store.lease import desktop_key
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from takeover_tools import clicked, six_targets, user_texts

pytestmark = pytest.mark.desktop

TYPED = "typed at the desk by a person"
"""Not the console takeover test's text: both type into a worker's session probe, and the
screenshots below can tell the person's typing apart only from text the entry did not hold."""
NOTE = "I typed the greeting into the field"
LATENCY = 1.0


def _presses_at(probe: Probe, point: tuple[int, int]) -> int:
    return sum(
        1
        for e in probe.log.events("press")
        if abs(e["x"] - point[0]) <= 2 and abs(e["y"] - point[1]) <= 2
    )


def _crop(png: bytes, box: tuple[int, int, int, int]) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB").crop(box)


def _differing(a: Image.Image, b: Image.Image) -> int:
    """Pixels that differ between two crops of the same size."""
    diff = ImageChops.difference(a, b).convert("L")
    return int(diff.point(lambda v: 255 if v > 40 else 0).histogram()[255])


@contextlib.contextmanager
def _interactive_view(tid: str, base: list[str], env: dict[str, str]) -> Iterator[str]:
    """``vnc-use view --interactive ID`` running; yields its recording relay's address."""
    view = subprocess.Popen(
        [*CLI, "view", "--interactive", tid, "--port", "0", *base],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert view.stdout is not None
        relay = None
        for line in view.stdout:
            if "VNC clients:" in line:
                relay = line.split("VNC clients:")[1].split()[0]
                break
        assert relay, view.stderr.read() if view.stderr else ""
        yield relay
    finally:
        view.send_signal(signal.SIGTERM)
        try:
            view.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            view.kill()
            view.communicate()


def test_takeover_pauses_the_run_and_handback_goes_on(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    w, h = probe.size
    targets = six_targets(probe)

    holds = DesktopHolds(
        SqliteJournalStore(tmp_path / "vnc-use.sqlite"), desktop_key(probe.desktop.server)
    )

    def script(body: Any, index: int) -> Reply:
        done = clicked(body)
        if index == 2:  # the model thinks about click 3 until the takeover is on its way
            deadline = time.monotonic() + 60
            while holds.held_for(tid) is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if done >= len(targets):
            return replace(Reply.text("All six clicked."), latency=LATENCY)
        x, y = targets[done]
        spec = FunctionCallSpec("click_at", x=round(x * 1000 / w), y=round(y * 1000 / h))
        return replace(Reply.calls(spec), latency=LATENCY)

    gemini.script(script)
    tid = "held"
    base = ["--runs-dir", str(tmp_path)]
    env = {**os.environ, "VNC_PASSWORD": probe.desktop.password}
    run = subprocess.Popen(
        [
            *(*CLI, "run", "--vnc", probe.desktop.server, "--task", "Click six"),
            *("--thread-id", tid, *base),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        probe.log.wait_for(lambda e: _presses_at(probe, targets[1]) >= 1, timeout=60)
        taken = run_cli(["takeover", tid, "--as", "alice", *base], probe.desktop)
        assert taken.returncode == 0, taken.stdout + taken.stderr
        assert "alice" in taken.stdout and f"vnc-use view --interactive {tid}" in taken.stdout
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 3, out + err
    assert "status: awaiting_human" in out and "Traceback" not in err

    landed = [_presses_at(probe, t) for t in targets]
    assert landed[:2] == [1, 1] and sum(landed) <= 3, landed  # at most the click already sent
    requests, events = len(gemini.requests), len(probe.log.events())
    time.sleep(10)  # held: the agent neither asks the model nor touches the desktop
    assert len(gemini.requests) == requests
    assert len(probe.log.events()) == events

    second = run_cli(["takeover", tid, "--as", "bob", *base], probe.desktop)
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.count("\n") == 1 and "alice since" in second.stderr
    forced = run_cli(["takeover", tid, "--as", "bob", "--force", *base], probe.desktop)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    stale = run_cli(["handback", tid, "--as", "alice", *base], probe.desktop)
    assert stale.returncode == 2 and "bob since" in stale.stderr, stale.stdout + stale.stderr
    other = run_cli(  # no other run takes the held desktop
        [
            *("run", "--vnc", probe.desktop.server, "--task", "Click", "--thread-id", "other"),
            *("--lease-timeout", "1", *base),
        ],
        probe.desktop,
    )
    assert other.returncode == 1 and "held by bob" in other.stderr, other.stdout + other.stderr
    again = run_cli(["resume", tid, *base], probe.desktop)  # nor the run itself
    assert again.returncode == 2 and "handback" in again.stderr, again.stderr
    assert len(gemini.requests) == requests
    assert len(probe.log.events()) == events

    # the person, with their own VNC client
    ex, ey, ew, eh = probe.ready["entry"]
    entry_box = (ex, ey, ex + ew, ey + eh)
    before = gemini.requests[requests - 1]
    person_click = (w // 10, h // 3)
    with (
        _interactive_view(tid, base, env) as relay,
        VNCController(timeout=10.0, connect_timeout=5.0).connect(
            relay, probe.desktop.password
        ) as person,
    ):
        person.click(*probe.entry_center)
        person.type_text(TYPED, clear_first=True)  # the session probe keeps earlier tests' text
        person.click(*person_click)
        probe.log.wait_type("text", text=TYPED)
        probe.log.wait_for(lambda e: _presses_at(probe, person_click) >= 1)
        after_png = person.screenshot_png()

    back = run_cli(["handback", tid, "--as", "bob", "--note", NOTE, *base], probe.desktop)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "status: done" in back.stdout

    first_after = gemini.requests[requests]
    said = user_texts(first_after.body)
    assert "A person took control of the desktop" in said and NOTE in said
    assert "2 clicks" in said
    shown = first_after.image_parts()[-1]  # the fresh screenshot, with what the person typed
    old = before.image_parts()[-1]
    now, then = _crop(shown, entry_box), _crop(old, entry_box)
    mine = _crop(after_png, entry_box)
    assert _differing(now, then) > 4 * max(1, _differing(now, mine)), "the typing is not shown"
    assert [_presses_at(probe, t) for t in targets] == [1] * 6  # each remaining click once
    assert not gemini.violations

    record = json.loads((tmp_path / tid / "run.json").read_text())
    assert record["status"] == "done"
    events = [json.loads(line) for line in (tmp_path / tid / "events.jsonl").open()]
    person = [e for e in events if e["event"] == "person_input"]
    clicks = [(e["x"], e["y"]) for e in person if e["kind"] == "click"]
    assert clicks == [probe.entry_center, person_click]
    assert sum(e["count"] for e in person if e["kind"] == "keys") >= len(TYPED)
    assert all(set(e) <= {"event", "ts", "kind", "x", "y", "button", "count"} for e in person)
    kinds = [e["event"] for e in events]
    assert kinds.index("taken_over") < kinds.index("handed_back")
    assert "a person had control" in back.stdout and "2 clicks" in back.stdout
    shown = run_cli(["show", tid, *base])
    assert "a person had control" in shown.stdout, shown.stdout
    assert "a person had control" in (tmp_path / tid / "report.html").read_text()
    segments = json.loads((tmp_path / tid / "video.json").read_text())["segments"]
    theirs = [s for s in segments if s.get("person")]  # the video has the person's part
    assert len(theirs) == 1 and (tmp_path / tid / theirs[0]["file"]).stat().st_size > 0
    assert theirs[0]["frames"] > 0 and len(segments) == 3  # the run, the person, the hand-back
    for path in (tmp_path / tid).rglob("*"):
        if path.is_file():
            assert TYPED.encode() not in path.read_bytes(), path
