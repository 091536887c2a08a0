"""Runs kept in a real PostgreSQL, and one run per desktop (issue 20 items 5 and 6).

The suite starts a throw-away PostgreSQL cluster (Debian's ``postgresql`` package, 127.0.0.1, a
free port, a password login: :mod:`vnc_use.testing.postgres`) and drives the ``vnc-use`` CLI
with ``--checkpointer postgresql://...`` on the real desktop with the probe app (whose event
log is the truth) and the Gemini stand-in: a run paused for approval is approved from a second
process in another working directory; a run killed with SIGKILL while it acts is resumed from
another working directory without any action performed twice; two runs on one desktop do not
interleave (the second waits, then fails with the lease message naming the first). The
database password is looked for in every byte written: files, output and database rows.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use import VncUseAgent
from vnc_use.store import postgres
from vnc_use.store.journal import Outcome, import_jsonl
from vnc_use.store.lease import LeaseBusy
from vnc_use.store.storage import PostgresStorage, open_storage, storage_for_checkpointer
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


def _answered(body: dict[str, Any]) -> int:
    """How many function responses the request's history carries (the run's progress)."""
    parts = [p for c in body.get("contents", []) for p in c.get("parts", [])]
    return sum(1 for p in parts if "functionResponse" in p or "function_response" in p)


def _task_tag(body: dict[str, Any]) -> str:
    return str(body["contents"][0]["parts"][0]["text"]).rsplit("#", 1)[1].strip()


def _presses_near(probe: Probe, grid: tuple[int, int]) -> int:
    """How many presses the probe saw at the pixel the 0-999 grid point ``grid`` maps to."""
    w, h = probe.size
    x, y = grid[0] / 1000 * w, grid[1] / 1000 * h
    return sum(1 for e in probe.log.events("press") if math.hypot(e["x"] - x, e["y"] - y) <= 2)


def _result(url: str | None, runs: Path, thread: str) -> Any:
    with VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=runs, checkpointer=url) as agent:
        return agent.result(thread)


def _assert_password_nowhere(pg: PostgresServer, folders: list[Path], outputs: list[str]) -> None:
    """Not in any file, any output, nor any row of the database (checkpoints, journal)."""
    secret = pg.password.encode()
    for folder in folders:
        leaked = [p for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()]
        assert leaked == [], leaked
    assert all(pg.password not in text for text in outputs)
    conn = postgres.connect(pg.url)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
            tables = [str(row["table_name"]) for row in cur.fetchall()]
            assert {"checkpoints", "checkpoint_blobs", "vnc_use_journal"} <= set(tables)
            for table in tables:
                cur.execute(f"SELECT t::text AS row FROM {table} t")
                rows = [str(r["row"]) for r in cur.fetchall()]
                assert rows or table == "checkpoint_writes"
                assert not any(pg.password in r for r in rows), table
                # bytea columns print as hex: look for the hex of the password too
                assert not any(secret.hex() in r for r in rows), table
    finally:
        conn.close()


def test_a_run_awaiting_approval_is_approved_from_a_second_process(
    pg: PostgresServer, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = probe.desktop
    target = (640, 520)

    def script(body: dict[str, Any], index: int) -> Reply:
        if _answered(body) == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=target[0], y=target[1]))
        return Reply.text("clicked after approval")

    gemini.script(script)
    runs = tmp_path / "shared-runs"  # shared storage in real life: screenshots live here
    first_cwd, second_cwd = tmp_path / "machine-a", tmp_path / "machine-b"
    first_cwd.mkdir(), second_cwd.mkdir()
    # the first process finds the database in VNC_USE_DATABASE_URL ...
    started = run_cli(
        [
            *("run", "--vnc", desk.server, "--task", "Click the canvas #approve"),
            *("--thread-id", "pg-approve", "--runs-dir", str(runs), "--confirm", "click_at"),
        ],
        desktop=desk,
        cwd=first_cwd,
        env={"VNC_USE_DATABASE_URL": pg.url},
    )
    assert started.returncode == 3, started.stdout + started.stderr
    assert _presses_near(probe, target) == 0
    assert not (runs / "vnc-use.sqlite").exists()  # the checkpoints are in Postgres
    run_json = json.loads((runs / "pg-approve" / "run.json").read_text())
    assert run_json["checkpointer"] == f"postgresql://vnc_use:***@127.0.0.1:{pg.port}/postgres"

    # ... approving without saying where the checkpoints are: one line naming the fix
    lost = run_cli(["approve", "pg-approve", "--runs-dir", str(runs)], desktop=desk)
    assert lost.returncode == 2
    assert "--checkpointer postgresql://" in lost.stderr and "***" in lost.stderr
    assert len(lost.stderr.strip().splitlines()) == 1 and "Traceback" not in lost.stderr

    # ... the second process, elsewhere, is given it on the command line
    approved = run_cli(
        ["approve", "pg-approve", "--runs-dir", str(runs), "--checkpointer", pg.url],
        desktop=desk,
        cwd=second_cwd,
    )
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "answer: clicked after approval" in approved.stdout
    assert "visible to other users" in approved.stderr  # the password on argv is warned about
    probe.log.wait_for(lambda e: e["type"] == "press", what="the approved click")
    assert _presses_near(probe, target) == 1
    journal = open_storage(pg.url, runs).journal("pg-approve")
    assert [r["state"] for r in journal.records()] == ["dispatched", "done"]
    assert _result(pg.url, runs, "pg-approve").status == "done"
    assert not gemini.violations
    outputs = [started.stdout, started.stderr, approved.stdout, approved.stderr, lost.stderr]
    _assert_password_nowhere(pg, [runs, first_cwd, second_cwd], outputs)


POINTS = [(560, 420), (660, 420), (760, 420), (860, 420)]


def test_a_run_killed_mid_step_resumes_elsewhere_without_repeating_an_action(
    pg: PostgresServer, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = probe.desktop

    def script(body: dict[str, Any], index: int) -> Reply:
        done = _answered(body)
        if done >= len(POINTS):
            return Reply.text("all clicked")
        return Reply.calls(FunctionCallSpec("click_at", x=POINTS[done][0], y=POINTS[done][1]))

    gemini.script(script)
    runs = tmp_path / "shared-runs"
    first_cwd, second_cwd = tmp_path / "machine-a", tmp_path / "machine-b"
    first_cwd.mkdir(), second_cwd.mkdir()
    argv = [*CLI, "run", "--vnc", desk.server, "--task", "Click four times #kill"]
    argv += ["--thread-id", "pg-kill", "--runs-dir", str(runs), "--checkpointer", pg.url]
    argv += ["--no-hitl", "--quiet"]  # an uncertain action is never re-sent: told to the model
    env = {**os.environ, "VNC_PASSWORD": desk.password}
    proc = subprocess.Popen(
        argv, env=env, cwd=first_cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    try:
        # killed the moment its second click reaches the desktop: inside the act step, before
        # or while its journal entry is closed and long before the step's checkpoint
        probe.log.wait_for(
            lambda e: e["type"] == "press" and _presses_near(probe, POINTS[1]) == 1,
            timeout=60,
            what="the second click",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    # the other machine has the password in PGPASSWORD (libpq's own), not in the URL
    no_password = f"postgresql://{pg.user}@127.0.0.1:{pg.port}/postgres"
    resumed = run_cli(
        ["resume", "pg-kill", "--runs-dir", str(runs), "--checkpointer", no_password, "--quiet"],
        desktop=desk,
        cwd=second_cwd,
        env={"PGPASSWORD": pg.password},
    )
    assert "visible to other users" not in resumed.stderr
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = _result(pg.url, runs, "pg-kill")
    assert result.status == "done" and result.final_text == "all clicked"
    # the probe is the truth: every click landed exactly once
    assert [_presses_near(probe, p) for p in POINTS] == [1, 1, 1, 1]
    # a run resumed on "another machine" read the journal from the database
    journal = open_storage(pg.url, runs).journal("pg-kill")
    sent = sorted(r["key"] for r in journal.records() if r["state"] == "dispatched")
    assert sent == ["1:0", "2:0", "3:0", "4:0"]  # each sent once
    assert not (runs / "vnc-use.sqlite").exists()
    assert not gemini.violations
    _assert_password_nowhere(pg, [runs, first_cwd, second_cwd], [resumed.stdout, resumed.stderr])


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_a_second_run_on_a_leased_desktop_waits_then_fails_naming_the_holder(
    where: str, pg: PostgresServer, probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    desk = probe.desktop
    holder_thinking = threading.Event()
    second_finished = threading.Event()
    first_point, second_point = (600, 300), (800, 300)

    def script(body: dict[str, Any], index: int) -> Reply:
        tag, done = _task_tag(body), _answered(body)
        if tag == "second":  # must never happen: the second run never gets the desktop
            return Reply.calls(FunctionCallSpec("click_at", x=second_point[0], y=second_point[1]))
        if done == 0:
            holder_thinking.set()
            # the holder's model call lasts until the second run gave up (the lease covers
            # model calls)
            assert second_finished.wait(60)
            return Reply.calls(FunctionCallSpec("click_at", x=first_point[0], y=first_point[1]))
        return Reply.text("first run done")

    gemini.script(script)
    runs = tmp_path / "runs"
    env = {**os.environ, "VNC_PASSWORD": desk.password}
    env.pop("VNC_USE_DATABASE_URL", None)
    if where == "postgres":
        env["VNC_USE_DATABASE_URL"] = pg.url

    def start(tag: str, *extra: str) -> subprocess.Popen[str]:
        argv = [*CLI, "run", "--vnc", desk.server, "--task", f"Click #{tag}"]
        argv += ["--thread-id", f"lease-{where}-{tag}", "--runs-dir", str(runs), *extra]
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start("first", "--no-hitl")
    try:
        assert holder_thinking.wait(60), "the first run never asked the model"
        second = start("second", "--no-hitl", "--lease-timeout", "1.5")
        out, err = second.communicate(timeout=60)
        second_finished.set()
        first_out, first_err = first.communicate(timeout=60)
    finally:
        second_finished.set()
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert second.returncode == 1, out + err
    assert err.strip() == (
        f"vnc-use: the desktop 127.0.0.1::{desk.port} is in use by run lease-{where}-first "
        "(waited 1.5 s for it); wait until that run ends or pauses for approval, or give a "
        "longer --lease-timeout"
    )
    assert f"waiting_for_desktop: the desktop 127.0.0.1::{desk.port} is in use by run " in out
    assert not (runs / f"lease-{where}-second").exists()  # nothing recorded for it
    assert first.returncode == 0, first_out + first_err
    assert _presses_near(probe, first_point) == 1
    assert _presses_near(probe, second_point) == 0  # no interleaved action reached the desktop
    assert [_task_tag(r.body) for r in gemini.requests] == ["first", "first"]
    if where == "postgres":
        _assert_password_nowhere(pg, [runs], [out, err, first_out, first_err])


def test_leases_are_per_desktop_and_free_again_when_given_back(
    pg: PostgresServer, tmp_path: Path
) -> None:
    for storage in (open_storage(None, tmp_path), open_storage(pg.url, tmp_path)):
        held = storage.lease("127.0.0.1:3", "holder")
        held.acquire(timeout=0)
        other_desktop = storage.lease("127.0.0.1::5904", "elsewhere")
        other_desktop.acquire(timeout=0)  # another desktop: free
        other_desktop.release()
        with pytest.raises(LeaseBusy, match="in use by run holder"):
            storage.lease("127.0.0.1::5903", "waiter").acquire(timeout=0)  # :3 is ::5903
        held.release()
        with storage.lease("127.0.0.1::5903", "waiter").hold(timeout=0):
            pass
        storage.close()


def test_checkpointer_urls_are_redacted_and_bad_ones_are_one_line(tmp_path: Path) -> None:
    assert (
        postgres.redact("postgresql://ann:s3cr%40t@db.example:5433/runs?sslmode=require")
        == "postgresql://ann:***@db.example:5433/runs?sslmode=require"
    )
    assert postgres.redact("host=db user=ann password=s3cr3t dbname=runs") == (
        "postgresql://ann:***@db/runs"
    )
    assert postgres.password_of("postgresql://ann:s3cr%40t@db/runs") == "s3cr@t"
    base = ["run", "--vnc", "127.0.0.1::1", "--task", "t", "--runs-dir", str(tmp_path)]
    bad = run_cli([*base, "--checkpointer", "mysql://a@b/c"])
    assert bad.returncode == 2
    assert bad.stderr.startswith("vnc-use: unknown checkpointer mysql://")
    assert len(bad.stderr.strip().splitlines()) == 1
    # nobody listens on port 1: one line with the address, never the password
    down = run_cli([*base, "--checkpointer", "postgresql://ann:pw-never-shown@127.0.0.1:1/runs"])
    assert down.returncode == 1
    assert (
        down.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "vnc-use: cannot connect to the checkpoint database postgresql://ann:***@127.0.0.1:1/runs"
        )
    )
    assert "pw-never-shown" not in down.stdout + down.stderr
    assert len(down.stderr.strip().splitlines()) == 2  # the warning about argv, then the error


def test_a_postgres_saver_of_your_own_brings_its_database_for_journal_and_leases(
    pg: PostgresServer, tmp_path: Path
) -> None:
    conn, saver = postgres.open_saver(pg.url)
    try:
        storage = storage_for_checkpointer(saver, tmp_path)
        assert isinstance(storage, PostgresStorage) and storage.checkpointer is saver
        assert storage.secrets == (pg.password,)
        assert storage.described.startswith(
            f"postgresql://vnc_use:***@127.0.0.1:{pg.port}/postgres"
        )
        storage.journal("own-saver").dispatched("1:0", "click_at", 1)
        again = open_storage(pg.url, tmp_path)
        assert again.journal("own-saver").outcome("1:0") == Outcome.UNCERTAIN
        with (
            storage.lease("127.0.0.1::5905", "own-saver").hold(timeout=0),
            pytest.raises(LeaseBusy, match="run own-saver"),
        ):
            again.lease("127.0.0.1::5905", "other").acquire(timeout=0)
        again.close()
        storage.close()
        assert not conn.closed  # a saver given stays open
    finally:
        conn.close()
    assert not list(tmp_path.iterdir())  # nothing went to the runs folder


def test_an_older_runs_journal_file_is_taken_into_the_database(tmp_path: Path) -> None:
    """A run started before the journal moved into the database, resumed after: its
    ``journal.jsonl`` is read in, so what it performed is not performed again."""
    old = tmp_path / "old-run" / "journal.jsonl"
    old.parent.mkdir()
    lines = [
        {"ts": 1.0, "key": "1:0", "state": "dispatched", "name": "click_at", "step": 1},
        {"ts": 1.1, "key": "1:0", "state": "done", "name": "click_at", "step": 1},
        {"ts": 2.0, "key": "2:0", "state": "dispatched", "name": "type_text_at", "step": 2},
    ]
    old.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"cut short')
    journal = open_storage(None, tmp_path).journal("old-run")
    assert import_jsonl(journal, old) == 3
    assert journal.outcome("1:0") == Outcome.DONE
    assert journal.outcome("2:0") == Outcome.UNCERTAIN
    assert import_jsonl(journal, old) == 0  # once only
