"""Taking a fleet run's desktop over and handing it back (issue 42 item 4): one worker on a
probe desktop, a throw-away PostgreSQL, the Gemini stand-in answering after 1 s, every command
in a process of its own.

A run of six clicks is taken over (``takeover --fleet``) after its second click: the hold goes
into the fleet's database, the worker's leg pauses at its next step boundary, the submitter
exits 3 with ``awaiting_human``, the runs table shows it and the worker holds no desktop for
it; no agent click lands while held; a second takeover names the holder, ``--force`` takes
it and the old holder's hand-back is refused; ``handback --fleet --note`` puts the next leg on
the queue, which goes on from a fresh screenshot with the person's turn and the note in the
model's next request; the remaining clicks land once each and the run ends ``done``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from vnc_use.store.storage import open_storage
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from fleet_tools import PASSWORD, WorkerProcess, fleet_status, presses, probe_desktops
from takeover_tools import clicked, user_texts

pytestmark = pytest.mark.desktop

NOTE = "I closed the dialog myself"
LATENCY = 1.0
TARGETS = [(150 + 120 * i, 700) for i in range(6)]
"""Six points of the model's 0-1000 grid, in a row on the probe's plain canvas."""


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Probe]]:
    with probe_desktops(tmp_path_factory, 1, PASSWORD) as found:
        yield found


def _rows(url: str, env: dict[str, str]) -> dict[str, str]:
    listed = run_cli(["runs", "--fleet", url, "--json"], env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return {r["thread_id"]: r["status"] for r in map(json.loads, listed.stdout.splitlines())}


def test_a_fleet_run_is_taken_over_and_handed_back(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    tid = "fleetheld"
    server = probes[0].desktop.server
    with tempfile.TemporaryDirectory() as nowhere:
        holds = open_storage(pg.url, nowhere).holds(server)

    def script(body: dict[str, Any], index: int) -> Reply:
        done = clicked(body)
        if done == 2:  # the model thinks about click 3 until the takeover is on its way
            deadline = time.monotonic() + 60
            while holds.held_for(tid) is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if done >= len(TARGETS):
            return replace(Reply.text("All six clicked."), latency=LATENCY)
        x, y = TARGETS[done]
        return replace(Reply.calls(FunctionCallSpec("click_at", x=x, y=y)), latency=LATENCY)

    gemini.script(script)
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    fleet = ["--fleet", "env"]  # the URL (with its password) from the environment
    env["VNC_USE_DATABASE_URL"] = pg.url
    worker = WorkerProcess("T", probes, pg.url, tmp_path / "hosts")
    submitter: subprocess.Popen[str] | None = None
    try:
        assert worker.ready.wait(90), worker.output
        submitter = subprocess.Popen(
            [*CLI, "run", *fleet, "--task", "Click six", "--thread-id", tid, "--no-hitl"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 90
        while presses(probes, TARGETS[1]) < 1:
            assert time.monotonic() < deadline and submitter.poll() is None, worker.output
            time.sleep(0.1)
        taken = run_cli(["takeover", *fleet, tid, "--as", "alice"], env=env, timeout=120)
        assert taken.returncode == 0, taken.stdout + taken.stderr
        assert "awaiting_human" in taken.stdout and "alice" in taken.stdout
        assert f"a VNC viewer on {server}" in taken.stdout, taken.stdout
        assert f"handback --fleet URL {tid}" in taken.stdout, taken.stdout
        out, err = submitter.communicate(timeout=60)
        assert submitter.returncode == 3, out + err
        assert "awaiting_human" in out and "Traceback" not in err

        landed = [presses(probes, t) for t in TARGETS]
        assert landed[:2] == [1, 1] and sum(landed) <= 3, landed  # at most the one sent
        assert _rows(pg.url, env)[tid] == "awaiting_human"
        deadline = time.monotonic() + 30  # the leg ended: its worker holds no desktop
        while True:
            desks = next(w for w in fleet_status(pg.url)["workers"] if w["worker_id"] == "T")
            if desks["desktops"] == {server: None}:
                break
            assert time.monotonic() < deadline, desks
            time.sleep(0.2)
        requests = len(gemini.requests)
        clicks = len(probes[0].log.events("press"))
        time.sleep(5)  # held: nothing asks the model, nothing touches the desktop
        assert len(gemini.requests) == requests
        assert len(probes[0].log.events("press")) == clicks

        second = run_cli(["takeover", *fleet, tid, "--as", "bob"], env=env)
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stderr.count("\n") == 1 and "alice since" in second.stderr
        forced = run_cli(["takeover", *fleet, tid, "--as", "bob", "--force"], env=env)
        assert forced.returncode == 0, forced.stdout + forced.stderr
        stale = run_cli(["handback", *fleet, tid, "--as", "alice"], env=env)
        assert stale.returncode == 2, stale.stdout + stale.stderr
        assert stale.stderr.count("\n") == 1 and "bob since" in stale.stderr
        assert len(gemini.requests) == requests

        back = run_cli(
            ["handback", *fleet, tid, "--as", "bob", "--note", NOTE], env=env, timeout=180
        )
        assert back.returncode == 0, back.stdout + back.stderr + worker.output
        assert "status: done" in back.stdout and "on worker T" in back.stdout
    finally:
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.communicate()
        worker.stop()

    said = user_texts(gemini.requests[requests].body)
    assert "A person took control of the desktop" in said and NOTE in said
    assert gemini.requests[requests].image_parts(), "no fresh screenshot after the hand-back"
    assert [presses(probes, t) for t in TARGETS] == [1] * 6  # each remaining click once
    assert not gemini.violations
    assert _rows(pg.url, env)[tid] == "done"
