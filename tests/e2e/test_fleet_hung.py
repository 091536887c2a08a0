"""A fleet's hung worker is fenced, and workers of different sizes share a label (issue 34).

- Worker HB takes a run and is SIGSTOPped while it waits for the model mid-run (its process
  alive, its sessions open, the run's desktop lease held). Worker HA (``--dead-after 5``)
  declares it dead, ends every session HB opened (all named ``vnc-use worker HB``), takes the
  leg back through DBOS's recovery and finishes the run from its checkpoint: every click once.
  HB, woken, exits 1 on its own with one line, and the click it was about to send never lands.
- Workers of 1 and 2 desktops on one label: 3 runs submitted at once run at the same time on
  the 3 desktops; no worker drives more legs than it has desktops (DBOS's PENDING legs per
  executor, less those a worker handed back for want of a free desktop).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vnc_use.fleet.queue import Enqueuer
from vnc_use.store import postgres
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from fleet_tools import (
    PASSWORD,
    WorkerProcess,
    answered,
    fleet_status,
    presses,
    probe_desktops,
    sessions_of,
)

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Probe]]:
    with probe_desktops(tmp_path_factory, 3, PASSWORD) as found:
        yield found


def _stopped(pid: int, timeout: float = 10.0) -> bool:
    """Whether every thread of process ``pid`` is stopped (state ``T``), waiting up to
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        if states and all(state == "T" for state in states):
            return True
        time.sleep(0.005)
    return False


def _submit(url: str, task: str, thread_id: str, *extra: str) -> subprocess.Popen[str]:
    """``run --fleet`` from a process that has no model key and shares no folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_API_KEY", "VNC_PASSWORD")}
    argv = [*CLI, "run", "--fleet", url, "--task", task, "--thread-id", thread_id, "--no-hitl"]
    return subprocess.Popen(
        [*argv, *extra],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _press(probes: list[Probe], grid: tuple[int, int]) -> tuple[int, float]:
    """The one press at grid point ``grid``: the probe it landed on and its time there."""
    found = []
    for n, probe in enumerate(probes):
        w, h = probe.size
        x, y = grid[0] / 1000 * w, grid[1] / 1000 * h
        found += [
            (n, float(e["t"]))
            for e in probe.log.events("press")
            if math.hypot(e["x"] - x, e["y"] - y) <= 2
        ]
    assert len(found) == 1, (grid, found)
    return found[0]


def test_a_fence_ends_every_session_of_that_worker_and_no_other(
    pg: PostgresServer, tmp_path: Path
) -> None:
    """A worker's sessions (its liveness lock, a leg's checkpoints, journal and desktop lease)
    are named after it; a fence ends those and no other, and frees their locks."""
    import psycopg

    from vnc_use.fleet.db import FleetDb, worker_tag
    from vnc_use.store.lease import LeaseBusy
    from vnc_use.store.storage import open_storage

    postgres.tag_sessions(worker_tag("FT"))
    try:
        alive = FleetDb(pg.url, application_name="heartbeat")
        assert alive.hold_worker_lock("FT")
        storage = open_storage(pg.url, tmp_path / "ft")
        _ = storage.checkpointer
        journal = storage.journal("t1")
        lease = storage.lease("127.0.0.1::5999", "t1")
        lease.acquire(timeout=0)
    finally:
        postgres.tag_sessions(None)
    fencer = FleetDb(pg.url)
    bystander = FleetDb(pg.url, application_name="vnc-use worker FT2")  # a longer id
    other = open_storage(pg.url, tmp_path / "other")
    try:
        with pytest.raises(LeaseBusy, match="in use by run t1"):  # the holder, not the tag
            other.lease("127.0.0.1::5999", "t2").acquire(timeout=0)
        assert not fencer.worker_lock_free("FT")
        assert fencer.fence("FT") >= 4  # liveness, checkpoints, journal, lease
        assert fencer.worker_lock_free("FT")
        with other.lease("127.0.0.1::5999", "t2").hold(timeout=0):
            pass
        with pytest.raises(psycopg.OperationalError):
            journal.dispatched("0:0", "click_at", 1)  # nothing more is journaled, so sent
        with pytest.raises(psycopg.OperationalError):
            alive.heartbeat("FT", {})
        assert alive.lost()
        assert bystander.worker_state("FT") is None and not bystander.lost()
    finally:
        for close in (other.close, storage.close, bystander.close, fencer.close, alive.close):
            with contextlib.suppress(psycopg.Error):  # ended by the fence
                close()


@pytest.mark.timeout(300)
def test_a_hung_worker_is_fenced_its_leg_goes_on_once_and_it_exits_when_it_wakes(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    first, second, hung = (200, 300), (200, 600), (800, 800)
    b_asked = threading.Event()
    workers: dict[str, WorkerProcess] = {}

    def script(body: dict[str, Any], index: int) -> Reply:
        done = answered(body)
        if done == 0:
            return Reply.calls(FunctionCallSpec("click_at", x=first[0], y=first[1]))
        if done == 1 and not b_asked.is_set():
            # HB's second request: HB hangs before it reads the answer (a click it would
            # send when it wakes)
            hb = workers["HB"].proc
            hb.send_signal(signal.SIGSTOP)
            # every thread stopped before the answer goes out: a thread stops only when it
            # next enters the kernel (in a loaded full run HB read this answer and
            # checkpointed it first, and HA then rightly carried out that click, once)
            assert _stopped(hb.pid), "HB did not stop"
            b_asked.set()
            return Reply.calls(FunctionCallSpec("click_at", x=hung[0], y=hung[1]))
        if done == 1:
            return Reply.calls(FunctionCallSpec("click_at", x=second[0], y=second[1]))
        return Reply.text("clicked twice")

    gemini.script(script)
    runs = tmp_path / "hosts"  # each worker a host of its own: nothing shared but the DB
    b = workers["HB"] = WorkerProcess("HB", probes[:1], pg.url, runs)
    a: WorkerProcess | None = None
    submitter = None
    conn = postgres.connect(pg.url)
    try:
        assert b.ready.wait(90), b.output
        submitter = _submit(pg.url, "Click twice #h1", "h1", "--lease-timeout", "10")
        assert b_asked.wait(90), ("HB never reached its second step", b.output)
        assert presses(probes, first) == 1
        # every session HB holds is named after it (its own, its leg's storage, DBOS's)
        names = sessions_of(conn, b.proc.pid, pg.port)
        assert len(names) >= 5, names
        assert all(postgres.tagged(n, "vnc-use worker HB") for n in names), names
        a = WorkerProcess("HA", probes[1:2], pg.url, runs, ("--dead-after", "5"))
        try:
            out, err = submitter.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end: A said {a.output!r}")
        assert submitter.returncode == 0, (out, err, a.output)
        assert "answer: clicked twice" in out and "on worker HA" in out, out
        declared = [line for line in a.lines if line.startswith("worker HB is dead")]
        assert len(declared) == 1, a.output
        assert "(silent for " in declared[0] and "1 of its legs back" in declared[0], declared
        silent = float(declared[0].split("(silent for ", 1)[1].split(" s)", 1)[0])
        assert 5 <= silent < 30, declared  # --dead-after 5, not the default 30
        assert sessions_of(conn, b.proc.pid, pg.port) == []  # all ended, HB still stopped
        assert [presses(probes, p) for p in (first, second, hung)] == [1, 1, 0]
        # HB wakes and reads its model's answer, a click: it sends nothing and exits 1
        b.proc.send_signal(signal.SIGCONT)
        assert b.proc.wait(30) == 1, b.output
        exits = [line for line in b.output.splitlines() if "exiting" in line]
        assert len(exits) == 1 and exits[0].startswith("worker HB: "), b.output
        assert [presses(probes, p) for p in (first, second, hung)] == [1, 1, 0]
        states = {w["worker_id"]: w["state"] for w in fleet_status(pg.url)["workers"]}
        assert states == {"HA": "alive", "HB": "dead"}
    finally:
        conn.close()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        b.stop()
        if a is not None:
            a.stop()
    assert a.proc.returncode == 0, a.output


@pytest.mark.timeout(300)
def test_workers_of_one_and_two_desktops_share_a_label_one_leg_per_desktop(
    pg: PostgresServer, probes: list[Probe], gemini: GeminiStandIn, tmp_path: Path
) -> None:
    def point(run: int, k: int) -> tuple[int, int]:
        return (150 + run * 250, 300 + k * 300)

    def script(body: dict[str, Any], index: int) -> Reply:
        run = int(str(body["contents"][0]["parts"][0]["text"]).rsplit("#m", 1)[1])
        done = answered(body)
        if done in (0, 2):  # a click, 5 s of waiting, a click: each run holds its desktop
            x, y = point(run, done // 2)
            return Reply.calls(FunctionCallSpec("click_at", x=x, y=y))
        if done == 1:
            return Reply.calls(FunctionCallSpec("wait_5_seconds"))
        return Reply.text(f"clicked for m{run}")

    gemini.script(script)
    runs = tmp_path / "hosts"  # each worker a host of its own: nothing shared but the DB
    extra = ("--label", "mixed")
    workers = [
        WorkerProcess("MS", probes[:1], pg.url, runs, extra),
        WorkerProcess("ML", probes[1:], pg.url, runs, extra),
    ]
    desks = {"MS": 1, "ML": 2}
    submitters: list[subprocess.Popen[str]] = []
    samples: list[dict[str, list[str]]] = []
    finished = threading.Event()
    enqueuer: Enqueuer | None = None

    def sample() -> None:  # DBOS's PENDING legs per executor, while the runs go
        assert enqueuer is not None
        while not finished.is_set():
            held: dict[str, list[str]] = {}
            for leg in enqueuer.pending("mixed"):
                if leg["status"] == "PENDING":
                    held.setdefault(str(leg["executor"]), []).append(str(leg["workflow_id"]))
            samples.append(held)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        for worker in workers:
            assert worker.ready.wait(90), worker.output
        enqueuer = Enqueuer(pg.url)  # once a worker made the queues
        # the label's per-worker limit is its biggest worker's, whichever started last
        assert enqueuer.worker_concurrency("mixed") == 2
        sampler.start()
        for run in range(3):
            submitters.append(_submit(pg.url, f"Click #m{run}", f"m{run}", *extra))
        outputs = [proc.communicate(timeout=180) for proc in submitters]
        finished.set()
        sampler.join(10)
        for run, (proc, (out, err)) in enumerate(zip(submitters, outputs, strict=True)):
            assert proc.returncode == 0, (run, out, err, [w.output for w in workers])
            assert f"answer: clicked for m{run}" in out
        # the probes are the truth: each run clicked twice on its own desktop, and all three
        # were between their clicks at once
        clicks = [[_press(probes, point(run, k)) for k in (0, 1)] for run in range(3)]
        assert all(a[0] == b[0] for a, b in clicks), clicks
        assert sorted(a[0] for a, _ in clicks) == [0, 1, 2], clicks
        assert max(a[1] for a, _ in clicks) < min(b[1] for _, b in clicks), clicks
        # a leg DBOS handed a worker beyond its free desktops went back to the queue: no
        # worker ever drove more legs than it has desktops
        ran_here = {}
        for wid in {w for held in samples for ids in held.values() for w in ids}:
            ran_here[wid] = "handed_back" not in enqueuer.result(wid)
        assert samples and any(samples), "no leg was ever seen running"
        for held in samples:
            for executor, ids in held.items():
                assert sum(ran_here[w] for w in ids) <= desks[executor], (executor, ids)
    finally:
        finished.set()
        if enqueuer is not None:
            sampler.join(10)
            enqueuer.destroy()
        for proc in submitters:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for worker in workers:
            worker.stop()
    assert [w.proc.returncode for w in workers] == [0, 0], [w.output for w in workers]


def test_worker_usage_problems_of_fencing_are_one_line() -> None:
    """A worker id that cannot name its sessions, a --dead-after shorter than a few
    heartbeats: one line, exit 2, before the database is reached."""
    url = "postgresql://ann@127.0.0.1:1/fleet"
    cases = [
        (["--worker-id", "host a"], "worker id 'host a'"),
        (["--dead-after", "2"], "--dead-after must be at least 3 seconds"),
    ]
    for extra, says in cases:
        done = run_cli(["worker", "--database", url, "--vnc", "127.0.0.1::5901", *extra])
        assert done.returncode == 2, (extra, done.stdout, done.stderr)
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
