"""A fleet run whose local desktop died with its worker (issue 34, item 3).

Worker B owns one local desktop it started (``--desktops 1``); a run submitted with
``run --fleet`` from another process starts there. While B waits for the model, worker A
(owning a probe desktop by ``--vnc``) starts and B is SIGKILLed: A declares B dead and recovers
the leg, which must not connect to B's loopback desktop: the run ends ``error`` with one line
naming ``resume --fleet URL --vnc ADDR``. That command continues the run from its checkpoint on
the probe, where each remaining click lands exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe
from fleet_tools import FleetWorker, answered, presses

pytestmark = pytest.mark.desktop

PASSWORD = "fleetlo1"
SIZE = (1280, 800)  # a worker's local desktops' size: a click scales the same on the probe
POINTS = [(300, 400), (700, 600)]
TID = "lost1"


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Probe]:
    with TestDesktop(*SIZE, password=PASSWORD) as desk:
        yield start_probe(desk, str(tmp_path / "probe.jsonl"))


def _fleet_runs(url: str, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = run_cli(["runs", "--fleet", url, "--json"], env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    return {r["thread_id"]: r for r in rows}


def _down_local_desktops(runs: Path) -> None:
    """The killed worker's local desktop outlives it: stop its processes by the PIDs its
    state file records."""
    from vnc_use.desktops.local import LocalDesktop

    for folder in (runs / ".fleet-desktops").glob("*/desktop-*"):
        LocalDesktop(folder).down()


def test_a_run_whose_local_desktop_died_ends_error_and_resumes_on_another_desktop(
    pg: PostgresServer, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    asked = threading.Event()  # B's leg is waiting for the model: mid-step
    killed = threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        if not killed.is_set():
            asked.set()
            assert killed.wait(60)  # this reply goes to a dead process
        done = answered(body)
        if done >= len(POINTS):
            return Reply.text("clicked twice")
        return Reply.calls(FunctionCallSpec("click_at", x=POINTS[done][0], y=POINTS[done][1]))

    gemini.script(script)
    runs = tmp_path / "fleet-runs"  # the workers' (the screenshots a later leg reads)
    b = FleetWorker("B", ["--desktops", "1"], pg.url, runs, PASSWORD)
    a: FleetWorker | None = None
    env = {k: v for k, v in os.environ.items() if k not in ("VNC_PASSWORD", "GOOGLE_API_KEY")}
    env["VNC_USE_DATABASE_URL"] = ""
    argv = [*CLI, "run", "--fleet", pg.url, "--task", "Click twice", "--thread-id", TID]
    submitter: subprocess.Popen[str] | None = None
    try:
        assert b.ready.wait(90), b.output
        submitter = subprocess.Popen(
            [*argv, "--no-hitl"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert asked.wait(90), ("B never asked the model", b.output)
        a = FleetWorker("A", ["--vnc", probe.desktop.server], pg.url, runs, PASSWORD)
        assert a.ready.wait(90), a.output
        b.kill()
        killed.set()
        out, err = submitter.communicate(timeout=60)
        line = (
            f"vnc-use: run {TID}'s desktop was a local desktop of worker B, which is gone; "
            f"continue it on another desktop: vnc-use resume {TID} --fleet URL --vnc ADDR"
        )
        assert submitter.returncode == 1, (out, err, a.output)
        warning = "vnc-use: warning: a password in the database URL"  # pg.url has one
        assert [x for x in err.splitlines() if not x.startswith(warning)] == [line], err
        assert f"status: error (thread {TID} on worker A, 0 steps)" in out
        assert "worker B is dead" in a.output
        row = _fleet_runs(pg.url, env)[TID]
        assert (row["status"], row["worker"], row["desktop_kind"]) == ("error", "B", "local")
        assert row["desktop"] != probe.desktop.server  # B's own, still
        # nothing was clicked anywhere: the model's one answer went to the dead worker
        assert len(gemini.requests) == 1 and probe.log.events("press") == []

        # a local resume of a fleet run: one line pointing at the fleet
        elsewhere = str(tmp_path / "elsewhere")
        local_argv = ["resume", TID, "--vnc", probe.desktop.server, "--checkpointer", pg.url]
        local = run_cli([*local_argv, "--runs-dir", elsewhere], env=env)
        assert local.returncode == 2, local.stdout + local.stderr
        assert local.stderr.strip() == (
            f"vnc-use: run {TID} is a fleet run (its run folder is on the workers): continue "
            f"it through the fleet: vnc-use resume {TID} --fleet URL --vnc {probe.desktop.server}"
        )

        resumed = run_cli(
            ["resume", TID, "--fleet", pg.url, "--vnc", probe.desktop.server],
            env=env,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr + a.output
        assert "answer: clicked twice" in resumed.stdout and "on worker A" in resumed.stdout
        assert [presses([probe], p) for p in POINTS] == [1, 1]
        assert len(probe.log.events("press")) == 2
        row = _fleet_runs(pg.url, env)[TID]
        assert (row["status"], row["worker"], row["desktop"], row["desktop_kind"]) == (
            "done",
            "A",
            probe.desktop.server,
            "vnc",
        )
        for text in (out, err, resumed.stdout, resumed.stderr, row["task"]):
            assert PASSWORD not in text and pg.password not in text
        assert not gemini.violations
    finally:
        killed.set()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        b.kill()
        if a is not None:
            a.stop()
        _down_local_desktops(runs)


def test_resume_fleet_refuses_what_a_leg_cannot_honour() -> None:
    """``approve``/``deny``/``resume --fleet`` with a desktop option a worker cannot take:
    one line, exit 2, before any database is reached."""
    url = "postgresql://ann@127.0.0.1:1/fleet"
    cases = [
        (["resume", "t1", "--fleet", url, "--rdp", "host"], "--rdp cannot go with resume"),
        (["approve", "t1", "--fleet", url, "--vnc-password", "x"], "--vnc-password cannot"),
        (["resume", "t1", "--fleet", url, "--vnc", "no::port::x"], "bad VNC address"),
        (["deny", "t1", "--fleet", url, "--reconnect-window", "5"], "--reconnect-window cannot"),
        (["resume", "t1", "--fleet", url, "--no-video", "--vnc-ca", "x"], "--vnc-ca, --video"),
    ]
    for argv, says in cases:
        done = run_cli(argv, env={"VNC_USE_DATABASE_URL": ""})
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_fleet_database_of_before_desktop_kinds_upgrades_in_place(pg: PostgresServer) -> None:
    """A runs table made before the fleet kept desktop kinds gains the column when a worker
    or a submitter opens it; a run pinned then reads as what its address says."""
    from vnc_use.fleet.db import FleetDb
    from vnc_use.store import postgres

    admin = postgres.connect(pg.url)
    try:
        with admin.cursor() as cur:
            cur.execute("CREATE DATABASE fleet_before")
    finally:
        admin.close()
    url = pg.url.rsplit("/", 1)[0] + "/fleet_before"
    old = postgres.connect(url)
    try:
        with old.cursor() as cur:
            cur.execute(
                "CREATE TABLE vnc_use_fleet_runs (thread_id TEXT PRIMARY KEY, label TEXT NOT NULL,"
                " task TEXT NOT NULL, spec JSONB NOT NULL, desktop TEXT, worker_id TEXT,"
                " status TEXT NOT NULL, legs INTEGER NOT NULL DEFAULT 1, result JSONB, report TEXT,"
                " created TIMESTAMPTZ NOT NULL DEFAULT now(),"
                " updated TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            cur.execute(
                "INSERT INTO vnc_use_fleet_runs (thread_id, label, task, spec, desktop, status) "
                "VALUES ('v1', 'default', 't', '{}', 'desk-01::5901', 'error'), "
                "('w1', 'default', 't', '{}', 'rdp://win-01:3389', 'error'), "
                "('q1', 'default', 't', '{}', NULL, 'queued')"
            )
    finally:
        old.close()
    db = FleetDb(url)
    try:
        assert {r.thread_id: r.kind for r in db.runs()} == {"v1": "vnc", "w1": "rdp", "q1": None}
        db.pin("q1", "127.0.0.1::5902", "local", "B")
        row = db.run("q1")
        assert row is not None and (row.desktop_kind, row.worker_id) == ("local", "B")
        db.repin("q1", "desk-02::5901", "vnc")
        row = db.run("q1")
        assert row is not None and (row.desktop, row.kind, row.worker_id) == (
            "desk-02::5901",
            "vnc",
            "B",
        )
    finally:
        db.close()
    FleetDb(url).close()  # a second opening finds the column there
