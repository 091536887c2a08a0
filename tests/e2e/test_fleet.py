"""A fleet of two workers on one throw-away PostgreSQL (issue 34).

Two ``vnc-use worker`` processes, each owning two desktops with the probe app (whose event
logs are the truth), the Gemini stand-in; 8 runs submitted from other processes with
``run --fleet`` (2 of them ``--confirm``); worker B SIGKILLed while one of its runs acts: its
legs finish on worker A, no action reaches a desktop twice, the interrupted one is not re-sent;
the runs waiting for a person hold no leg and no desktop; ``approve --fleet`` finishes them;
``fleet status`` shows B dead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.runs.leg import RECORD_KEYS
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from fleet_tools import PASSWORD, Host, WorkerProcess, probe_desktops
from fleet_tools import answered as _answered
from fleet_tools import fleet_status as _status
from fleet_tools import presses as _presses

pytestmark = pytest.mark.desktop

CONFIRMED = (6, 7)  # the runs that wait for a person


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Probe]]:
    with probe_desktops(tmp_path_factory, 4, PASSWORD) as found:
        yield found


def _run_number(body: dict[str, Any]) -> int:
    return int(str(body["contents"][0]["parts"][0]["text"]).rsplit("#r", 1)[1].strip())


def _points(run: int) -> list[tuple[int, int]]:
    count = 1 if run in CONFIRMED else 3
    return [(80 + run * 110, 300 + k * 150) for k in range(count)]


def _settled_status(url: str, free: set[str], seconds: float = 30) -> dict[str, Any]:
    """The fleet's status once worker A has released every desktop in ``free``: a submitter
    reads its run's result as soon as the leg records it, a moment before the worker marks the
    desktop free again."""
    deadline = time.monotonic() + seconds
    while True:
        status = _status(url)
        a = next(w for w in status["workers"] if w["worker_id"] == "A")
        if all(a["desktops"].get(d, "") is None for d in free) or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def _running_on(url: str, worker_id: str) -> list[int]:
    """The runs (numbers) whose legs ``worker_id`` drives now, from the fleet's runs table (a
    leg pins its run there before it drives it; the worker's desktops map waits for its next
    heartbeat)."""
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(url, application_name="fleet test")
    try:
        rows = db.runs(limit=1000)
    finally:
        db.close()
    return sorted(
        int(r.thread_id[1:]) for r in rows if r.worker_id == worker_id and r.status == "running"
    )


def _finish_times(procs: list[subprocess.Popen[str]], timeout: float) -> dict[int, float]:
    """When each process ended (monotonic), polled (their output is a few lines: it fits the
    pipes until it is read)."""
    ended: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(procs):
        assert time.monotonic() < deadline, f"submitters still running: {len(procs) - len(ended)}"
        for n, proc in enumerate(procs):
            if n not in ended and proc.poll() is not None:
                ended[n] = time.monotonic()
        time.sleep(0.05)
    return ended


def test_a_fleet_of_two_workers_survives_one_killed_and_waits_for_people(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    def script(body: dict[str, Any], index: int) -> Reply:
        run, done = _run_number(body), _answered(body)
        points = _points(run)
        if done >= len(points):
            return Reply.text(f"clicked for r{run}")
        return Reply.calls(FunctionCallSpec("click_at", x=points[done][0], y=points[done][1]))

    gemini.script(script)
    # each worker a host of its own (HOME, working folder, runs folder, TMPDIR): a recovered
    # leg fetches the run's history from the database; the submitters share nothing either
    a = WorkerProcess("A", probes[:2], pg.url, tmp_path / "hosts")
    b = WorkerProcess("B", probes[2:], pg.url, tmp_path / "hosts")
    submitters: list[subprocess.Popen[str]] = []
    try:
        assert a.ready.wait(90) and b.ready.wait(90), "".join(a.lines + b.lines)
        submit_dir = tmp_path / "submitter"
        submit_dir.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("VNC_PASSWORD",)}
        env.pop("GOOGLE_API_KEY", None)  # the submitter has no model key: the workers do
        for run in range(8):
            argv = [*CLI, "run", "--fleet", pg.url, "--task", f"Click #r{run}"]
            argv += ["--thread-id", f"r{run}"]
            argv += ["--confirm", "click_at"] if run in CONFIRMED else ["--no-hitl"]
            submitters.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    cwd=submit_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        # B is killed the moment a second click of one of its runs reaches its desktop
        second_clicks = [_points(r)[1] for r in range(8) if r not in CONFIRMED]
        deadline = time.monotonic() + 120
        while not any(_presses(probes[2:], p) for p in second_clicks):
            assert time.monotonic() < deadline, (
                "no run reached its second click on B",
                "".join(a.lines + b.lines),
                [p.poll() for p in submitters],
            )
            time.sleep(0.02)
        on_b = _running_on(pg.url, "B")  # the runs whose legs B drives as it dies
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)
        killed_at = time.monotonic()
        finished = _finish_times(submitters, timeout=120)
        outputs = {}
        for run, proc in enumerate(submitters):
            out, err = proc.communicate(timeout=10)
            outputs[run] = (proc.returncode, out, err)
        for run, (code, out, err) in outputs.items():
            if run in CONFIRMED:
                assert code == 3, (run, out, err)
                assert "waiting for approval of click_at" in out
            else:
                assert code == 0, (run, out, err, "".join(a.lines))
                assert f"answer: clicked for r{run}" in out
        # the figure: B's legs finished on A within 30 s of B's death
        assert on_b, "B drove no run when it was killed"
        for run in on_b:
            assert finished[run] - killed_at < 30, (run, finished[run] - killed_at)
            assert "on worker A" in outputs[run][1], outputs[run]
        # while the two wait: no leg runs, no desktop is held, B is dead
        status = _settled_status(pg.url, {p.desktop.server for p in probes[:2]})
        states = {w["worker_id"]: w["state"] for w in status["workers"]}
        assert states == {"A": "alive", "B": "dead"}
        assert status["queues"] == {} or all(
            q == {"queued": 0, "running": 0} for q in status["queues"].values()
        )
        a_desks = next(w["desktops"] for w in status["workers"] if w["worker_id"] == "A")
        assert a_desks == {p.desktop.server: None for p in probes[:2]}
        assert sorted(r["thread_id"] for r in status["awaiting_approval"]) == ["r6", "r7"]
        assert all(_presses(probes, _points(r)[0]) == 0 for r in CONFIRMED)
        # a fourth process approves them
        for run in CONFIRMED:
            approved = run_cli(["approve", "--fleet", pg.url, f"r{run}"], timeout=120, env=env)
            assert approved.returncode == 0, approved.stdout + approved.stderr
            assert f"answer: clicked for r{run}" in approved.stdout
            assert "on worker A" in approved.stdout
        # the probes are the truth: every click of every run landed exactly once
        for run in range(8):
            assert [_presses(probes, p) for p in _points(run)] == [1] * len(_points(run)), run
        assert "worker B is dead" in "".join(a.lines)
        listed = run_cli(["runs", "--fleet", pg.url, "--json"], env=env)
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert {r["thread_id"]: r["status"] for r in rows} == {f"r{n}": "done" for n in range(8)}
        report = run_cli(
            ["report", "--fleet", pg.url, "r0", "--out", str(submit_dir / "r0.html")],
            env=env,
            cwd=submit_dir,
        )
        assert report.returncode == 0, report.stdout + report.stderr
        page = (submit_dir / "r0.html").read_text()
        assert page.startswith("<") and page.count('src="data:image/png;base64,') >= 3
        # a fleet run's run.json: the keys of every run.json, kind fleet, the settings given
        for run in (0, 6):
            path = next((tmp_path / "hosts").rglob(f"r{run}/run.json"))
            saved = json.loads(path.read_text())
            assert set(saved) == set(RECORD_KEYS) and saved["kind"] == "fleet", saved
            assert saved["confirm_actions"] == (["click_at"] if run == 6 else [])
            assert saved["hitl_mode"] is (run == 6)
        assert not gemini.violations
    finally:
        for proc in submitters:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait(10)
        a.stop()
    assert a.proc.returncode == 0, "".join(a.lines)


@pytest.mark.timeout(900)
def test_eval_fleet_runs_the_builtin_suite_over_two_workers_one_killed(
    pg: PostgresServer, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """``eval --suite builtin --fleet``: two workers of two local desktops each; B is killed
    mid-suite; its tasks start again from their setup on A; results complete, oracle 100 %."""
    from vnc_use.evaluation.tasks import load_tasks, suite_path
    from vnc_use.fleet.db import FleetDb

    from eval_oracle import oracle

    suite = load_tasks(suite_path("builtin")).tasks
    gemini.script(oracle(suite))
    hosts = {name: Host.named(tmp_path / "hosts", name) for name in ("EA", "EB")}
    workers = []
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("EA", "EB")}
    for name, host in hosts.items():  # each a host of its own: nothing shared but the DB
        argv = [*CLI, "worker", "--database", pg.url, "--worker-id", name]
        argv += ["--runs-dir", str(host.runs), "--desktops", "2", "--label", "eval"]
        env = {**host.env(), "VNC_PASSWORD": PASSWORD}
        workers.append(
            subprocess.Popen(
                argv,
                env=env,
                cwd=host.work,
                stdin=subprocess.DEVNULL,
                stdout=logs[name],
                stderr=subprocess.STDOUT,
            )
        )
    out = tmp_path / "eval-out"
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    argv = [*CLI, "eval", "--suite", "builtin", "--fleet", pg.url, "--label", "eval"]
    argv += ["--out", str(out), "--quiet"]
    submitter: subprocess.Popen[str] | None = None
    db = FleetDb(pg.url)
    try:
        deadline = time.monotonic() + 120
        while not all("labels" in (tmp_path / f"{n}.log").read_text() for n in logs):
            assert time.monotonic() < deadline, [(tmp_path / f"{n}.log").read_text() for n in logs]
            time.sleep(0.2)
        submitter = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 600
        while True:  # B is killed once it finished two tasks (and is in its next ones)
            legs = {w["worker_id"]: w["legs_done"] for w in db.workers()}
            if legs.get("EB", 0) >= 2:
                break
            if submitter.poll() is not None:
                pytest.fail(f"eval ended early: {submitter.communicate()}")
            assert time.monotonic() < deadline, legs
            time.sleep(0.2)
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait(10)
        stdout, stderr = submitter.communicate(timeout=600)
        assert submitter.returncode == 0, stdout + stderr
        got = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in got) == sorted(t.id for t in suite)
        assert {r["id"]: r["error"] for r in got if not r["success"]} == {}
        summary = json.loads((out / "summary.json").read_text())
        assert summary["complete"] is True and summary["success_rate"] == 1.0
        assert summary["fleet"] == f"postgresql://vnc_use:***@127.0.0.1:{pg.port}/postgres"
        assert (out / "index.html").is_file()
        assert {w["worker_id"]: w["state"] for w in db.workers()}["EB"] == "dead"
        assert not gemini.violations
    finally:
        db.close()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        # the killed worker's local desktops outlived it: stop them
        for host in hosts.values():
            host.down_local_desktops()


def test_fleet_usage_problems_are_one_line(tmp_path: Path) -> None:
    """Options a fleet cannot honour, a worker without desktops, no database: one line, exit 2."""
    url = "postgresql://ann@127.0.0.1:1/fleet"
    cases = [
        (
            ["run", "--fleet", url, "--vnc", "127.0.0.1::5901", "--task", "t"],
            "--vnc cannot go with run --fleet",
        ),
        (["worker", "--database", url], "a worker needs desktops"),
        (["worker", "--database", url, "--rdp", "a host"], "bad RDP address 'a host'"),
        (
            ["worker", "--database", url, "--rdp", "h1", "h2", "--rdp-cert-fingerprint", "ab"],
            "--rdp-cert-fingerprint pins one server's certificate",
        ),
        (["run", "--fleet", url, "--label", "no spaces", "--task", "t"], "label 'no spaces'"),
        (["fleet", "status", "--fleet", "env"], "the fleet's database is not given"),
        (
            [
                "eval",
                "--suite",
                "builtin",
                "--fleet",
                url,
                "--out",
                str(tmp_path / "o"),
                "--desktops",
                "2",
            ],
            "cannot go with --fleet",
        ),
    ]
    env = {"VNC_USE_DATABASE_URL": ""}
    for argv, says in cases:
        done = run_cli(argv, env=env)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_worker_told_to_stop_hands_its_leg_to_the_next_worker(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """SIGTERM: the worker ends its running leg at the step boundary (checkpointed), puts the
    run's next leg on the queue and exits 0; a worker started later finishes the run, and the
    submitter, following the hand-over, prints the outcome."""
    asked = threading.Event()
    drained = threading.Event()
    point = (500, 900)

    def script(body: dict[str, Any], index: int) -> Reply:
        if _answered(body) == 0:
            asked.set()
            assert drained.wait(60)  # the model answers once the worker was told to stop
            return Reply.calls(FunctionCallSpec("click_at", x=point[0], y=point[1]))
        return Reply.text("clicked after the hand-over")

    gemini.script(script)
    runs = tmp_path / "hosts"  # each worker a host of its own: nothing shared but the DB
    first = WorkerProcess("C", probes[:1], pg.url, runs)
    second: WorkerProcess | None = None
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    argv = [*CLI, "run", "--fleet", pg.url, "--task", "Click #r9", "--thread-id", "drain"]
    submitter: subprocess.Popen[str] | None = None
    try:
        assert first.ready.wait(90), "".join(first.lines)
        submitter = subprocess.Popen(
            [*argv, "--no-hitl"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert asked.wait(90), "the run never asked the model"
        first.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while "draining" not in "".join(first.lines):
            assert time.monotonic() < deadline, "".join(first.lines)
            time.sleep(0.05)
        drained.set()
        assert first.proc.wait(60) == 0, "".join(first.lines)
        assert _presses(probes, point) == 0  # the step after the boundary did not run here
        second = WorkerProcess("D", probes[:1], pg.url, runs)
        out, err = submitter.communicate(timeout=120)
        assert submitter.returncode == 0, out + err
        assert "answer: clicked after the hand-over" in out and "on worker D" in out
        assert _presses(probes, point) == 1
        # the report from a third folder: both legs' video, each whole from its own host
        third = Host.named(runs, "third")
        env = {**third.env(env), "VNC_USE_DATABASE_URL": ""}
        report = run_cli(["report", "--fleet", pg.url, "drain"], env=env, cwd=third.work)
        assert report.returncode == 0, report.stdout + report.stderr
        folder = third.work / "runs" / "drain"
        segments = json.loads((folder / "video.json").read_text())["segments"]
        assert [s["file"] for s in segments] == ["video.mp4", "video-2.mp4"], segments
        for segment, worker in zip(segments, (first, second), strict=True):
            made = worker.host.runs / "drain" / segment["file"]
            assert (folder / segment["file"]).read_bytes() == made.read_bytes()
        page = (folder / "report.html").read_text()
        assert '"src": "video.mp4"' in page and '"src": "video-2.mp4"' in page
    finally:
        drained.set()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        for worker in (first, second):
            if worker is not None:
                worker.stop()
