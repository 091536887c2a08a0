"""A fleet run whose local desktop died with its worker (issue 34, item 3).

Worker B owns one local desktop it started (``--desktops 1``); a run submitted with
``run --fleet`` from another process starts there. While B waits for the model, worker A
(owning a probe desktop by ``--vnc``) starts and B is SIGKILLed: A declares B dead and recovers
the leg, which must not connect to B's loopback desktop: the run ends ``error`` with one line
naming ``resume --fleet URL --vnc ADDR``. That command continues the run from its checkpoint on
the probe, where each remaining click lands exactly once.

The approvals of runs on a live worker's local desktop go to that worker (its own queue),
never to another worker of the label; a dead worker's queued legs go back to the label's queue.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe
from fleet_tools import FleetWorker, Host, answered, fleet_status, presses

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


def _down_local_desktops(hosts: Path) -> None:
    """The killed worker's local desktop outlives it: stop its processes by the PIDs its
    state file records (on every host)."""
    for root in hosts.glob("*"):
        Host(root).down_local_desktops()


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
    runs = tmp_path / "hosts"  # a folder of its own for each worker: nothing shared but the DB
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
            f"vnc-use: run {TID} is a fleet run (the fleet keeps its history and outcome): "
            f"continue it through the fleet: vnc-use resume {TID} --fleet URL --vnc "
            f"{probe.desktop.server}"
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
    """``run``/``approve``/``deny``/``resume --fleet`` with a desktop option a worker cannot
    take: one line, exit 2, before any database is reached (never silently dropped)."""
    url = "postgresql://ann@127.0.0.1:1/fleet"
    cases = [
        (["resume", "t1", "--fleet", url, "--rdp", "host"], "--rdp cannot go with resume"),
        (["approve", "t1", "--fleet", url, "--vnc-password", "x"], "--vnc-password cannot"),
        (["resume", "t1", "--fleet", url, "--vnc", "no::port::x"], "bad VNC address"),
        (["deny", "t1", "--fleet", url, "--reconnect-window", "5"], "--reconnect-window cannot"),
        (["resume", "t1", "--fleet", url, "--no-video", "--vnc-ca", "x"], "--vnc-ca, --video"),
        # run --fleet: the connection options of a run on a desktop it does not choose
        (["run", "--task", "t", "--fleet", url, "--vnc-user", "bob"], "--vnc-user cannot go"),
        (
            [
                "run",
                "--task",
                "t",
                "--fleet",
                url,
                "--connect-timeout",
                "5",
                "--screen-region",
                "0,0,9,9",
            ],
            "--connect-timeout, --screen-region cannot go with run --fleet",
        ),
        (["run", "--task", "t", "--fleet", url, "--vnc-password-env", "P"], "--vnc-password-env"),
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


ROUTED = ["ra1", "ra2", "ra3"]
STRANDED = ["rs1", "rs2"]


def _new_database(pg: PostgresServer, name: str) -> str:
    """A database of its own on the module's server (no worker of another test in it)."""
    from vnc_use.store import postgres

    admin = postgres.connect(pg.url)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
    finally:
        admin.close()
    return pg.url.rsplit("/", 1)[0] + f"/{name}"


def _popen(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _legs_on(url: str, worker_id: str) -> list[dict[str, Any]]:
    """The legs queued or running on worker ``worker_id``'s own queue (DBOS's view)."""
    from vnc_use.fleet.queue import Enqueuer, worker_queue_name

    enqueuer = Enqueuer(url)
    try:
        return [x for x in enqueuer.pending() if x["queue"] == worker_queue_name(worker_id)]
    finally:
        enqueuer.destroy()


def test_approvals_of_a_local_desktop_run_go_to_its_worker(
    pg: PostgresServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """Worker B (``--desktops 1``) starts five ``--confirm`` runs; worker A (``--desktops 1``,
    same label) starts once they wait. Three approvals sent at once all run on B, which alone
    reaches its local desktop: without routing they would go to the label's queue, where each
    worker holds one leg at a time, so B takes one and A, idle and polling every 0.2 s, takes
    a second while B's runs for seconds (connect, screenshot, model) and ends it ``error``:
    this part fails unless A never polls during B's leg, next to never. Then B is SIGKILLed
    while it drives one approved leg (waiting for the model) and the other waits on B's own
    queue: A moves both to the label's queue and each ends with the one-line error of a run
    whose local desktop is gone; no leg stays on B's queue."""
    url = _new_database(pg, "fleet_route")
    held, release = threading.Event(), threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        tid = str(body["contents"][0]["parts"][0]["text"]).rsplit("#", 1)[1].strip()
        if answered(body) == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=500, y=500))
        if tid in STRANDED:  # B dies waiting for this answer
            held.set()
            assert release.wait(90)
        return Reply.text(f"clicked for {tid}")

    gemini.script(script)
    runs = tmp_path / "hosts"
    env = {k: v for k, v in os.environ.items() if k not in ("VNC_PASSWORD", "GOOGLE_API_KEY")}
    env["VNC_USE_DATABASE_URL"] = ""
    b = FleetWorker("B", ["--desktops", "1"], url, runs, PASSWORD)
    a: FleetWorker | None = None
    procs: list[subprocess.Popen[str]] = []
    try:
        assert b.ready.wait(90), b.output
        for tid in ROUTED + STRANDED:
            argv = ["run", "--fleet", url, "--task", f"Click once #{tid}", "--thread-id", tid]
            procs.append(_popen([*argv, "--confirm", "click_at"], env))
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 3, (out, err, b.output)  # awaiting approval
        rows = _fleet_runs(url, env)
        assert {t: (r["status"], r["worker"], r["desktop_kind"]) for t, r in rows.items()} == {
            t: ("awaiting_approval", "B", "local") for t in ROUTED + STRANDED
        }
        a = FleetWorker("A", ["--desktops", "1"], url, runs, PASSWORD)
        assert a.ready.wait(90), a.output

        procs = [_popen(["approve", "--fleet", url, tid], env) for tid in ROUTED]
        for tid, proc in zip(ROUTED, procs, strict=True):
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, (tid, out, err, a.output, b.output)
            assert f"answer: clicked for {tid}" in out and "on worker B" in out, out
        rows = _fleet_runs(url, env)
        assert {t: (rows[t]["status"], rows[t]["worker"]) for t in ROUTED} == {
            t: ("done", "B") for t in ROUTED
        }
        legs = {w["worker_id"]: w["legs_done"] for w in fleet_status(url)["workers"]}
        assert legs == {"A": 0, "B": 8}  # five first legs and three approvals, all on B

        procs = [_popen(["approve", "--fleet", url, tid], env) for tid in STRANDED]
        deadline = time.monotonic() + 120
        while not (held.is_set() and [x["status"] for x in _legs_on(url, "B")].count("ENQUEUED")):
            assert time.monotonic() < deadline, ("B never held one leg, queued the other", b.output)
            time.sleep(0.1)
        b.kill()
        release.set()
        for tid, proc in zip(STRANDED, procs, strict=True):
            out, err = proc.communicate(timeout=120)
            line = (
                f"vnc-use: run {tid}'s desktop was a local desktop of worker B, which is gone; "
                f"continue it on another desktop: vnc-use resume {tid} --fleet URL --vnc ADDR"
            )
            assert proc.returncode == 1, (tid, out, err, a.output)
            assert line in err.splitlines(), err
            assert f"status: error (thread {tid} on worker A" in out, out
        assert _legs_on(url, "B") == []  # nothing stranded on the dead worker's queue
        assert "worker B is dead" in a.output and "moved from its own queue" in a.output
        assert {t: r["status"] for t, r in _fleet_runs(url, env).items() if t in STRANDED} == {
            t: "error" for t in STRANDED
        }
        assert not gemini.violations
    finally:
        release.set()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        b.kill()
        if a is not None:
            a.stop()
        _down_local_desktops(runs)


def test_the_fleet_executor_stops_a_run_between_steps_and_its_eval_runner_runs_a_task(
    pg: PostgresServer, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The fleet's executor from Python: ``stop`` asked for from another executor while the
    worker's leg waits for the model ends the run ``interrupted`` after that step (its stop
    request is in the fleet's database, where the leg looks between steps); ``resume`` does
    the rest, each click once. Then eval's FleetRunner runs a task's agent on the fleet."""
    from vnc_use.evaluation.desktops import EvalDesktop
    from vnc_use.evaluation.tasks import Task
    from vnc_use.fleet.evaluate import FleetRunner
    from vnc_use.fleet.executor import FleetExecutor
    from vnc_use.runs.spec import RunSpec

    held, release = threading.Event(), threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        done = answered(body)
        if done == 1 and not release.is_set():  # the second turn: held until stopped
            held.set()
            assert release.wait(60)
        if done >= len(POINTS):
            return Reply.text("clicked twice")
        return Reply.calls(FunctionCallSpec("click_at", x=POINTS[done][0], y=POINTS[done][1]))

    gemini.script(script)
    runs = tmp_path / "fleet-runs"
    a = FleetWorker("A", ["--vnc", probe.desktop.server], pg.url, runs, PASSWORD)
    out: dict[str, Any] = {}
    try:
        assert a.ready.wait(90), a.output
        spec = RunSpec(hitl_mode=False)
        leg = threading.Thread(
            target=lambda: out.update(r=FleetExecutor(pg.url).start(spec, "Click twice", "stop1"))
        )
        leg.start()
        try:
            assert held.wait(90), ("the leg never asked the model again", a.output)
            FleetExecutor(pg.url).stop("stop1")
            deadline = time.monotonic() + 60
            while not any(  # the worker's runs folder (a host's cache of the run)
                "stop_requested" in path.read_text() for path in runs.rglob("stop1/events.jsonl")
            ):
                assert time.monotonic() < deadline, ("the leg never saw the stop", a.output)
                time.sleep(0.1)
        finally:
            release.set()
            leg.join(120)
        assert out["r"].status == "interrupted", out["r"]
        assert [presses([probe], p) for p in POINTS] == [1, 0]
        resumed = FleetExecutor(pg.url).resume("stop1")
        assert resumed.status == "done", resumed
        assert [presses([probe], p) for p in POINTS] == [1, 1]
        # eval's fleet runner: the task's agent on a worker of the label
        task = Task(id="twice", task="Click twice again", check="true")
        desk = EvalDesktop(name="here", server="unused::1", password=None, env={})
        runner = FleetRunner(pg.url, RunSpec(hitl_mode=False))
        ran = runner.run(task, desk, "twice-1", lambda _line: None)
        assert ran.status == "done" and ran.steps == 2, ran
        assert [presses([probe], p) for p in POINTS] == [2, 2]
    finally:
        a.stop()
