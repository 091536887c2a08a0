"""``vnc-use worker --rdp``: RDP desktops in the fleet (issue 34, item 1).

A throw-away PostgreSQL, FreeRDP's shadow server with NLA over an X screen of a size that is
not round, the probe app on that screen (its event log is the truth), the Gemini stand-in.
One ``vnc-use worker --rdp`` process owns the RDP host through a bridge it keeps up; a run
submitted with ``run --fleet`` from another process lands its click once; ``fleet status``
names the desktop ``rdp://HOST:PORT``; when the RDP session ends between legs, the next leg
gets a new bridge; a wrong RDP password stops the worker at its start in one line. Then the
worker is SIGKILLed mid-run and a second worker with no RDP host of its
own goes on with the run on that host through a bridge of its own. No secret (the RDP
password, the database URL's) is in the fleet's tables, the run folders or the output.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from vnc_use.testing.gemini_standin import GeminiStandIn, Reply
from vnc_use.testing.postgres import PostgresServer
from vnc_use.testing.rdp_shadow import RdpShadowServer
from vnc_use.testing.x11vnc import X11vncDesktop

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe
from fleet_tools import Host
from rdp_tools import call_at, files_containing, one_line

pytestmark = pytest.mark.desktop

WIDTH, HEIGHT = 1124, 716
"""Not round: the grid and the screenshot each round once on the way to a pixel."""
TOLERANCE = 3
USER, PASSWORD = "alice", "Rdp-Fleet-Pa55!"


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def screen() -> Iterator[X11vncDesktop]:
    with X11vncDesktop(WIDTH, HEIGHT) as desk:
        yield desk


@pytest.fixture(scope="module")
def probe(screen: X11vncDesktop, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    return start_probe(screen, str(tmp_path_factory.mktemp("probe") / "events.jsonl"))


@pytest.fixture(scope="module")
def rdp(screen: X11vncDesktop) -> Iterator[RdpShadowServer]:
    with RdpShadowServer(screen.display, user=USER, password=PASSWORD) as server:
        yield server


def _env(tmp_path: Path, name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RDP_")}
    for variable in ("VNC_PASSWORD", "VNC_USE_DATABASE_URL"):
        env.pop(variable, None)
    env["VNC_USE_RDP_DIR"] = str(tmp_path / f"rdp-state-{name}")  # each its own trust store
    env.update(extra)
    return env


class Worker:
    """A ``vnc-use worker`` process on a host of its own under ``hosts`` (its HOME, working
    folder, runs folder, TMPDIR); its output lines are read as they come."""

    def __init__(self, name: str, args: list[str], url: str, hosts: Path, env: dict[str, str]):
        self.host = Host.named(hosts, name)
        runs = self.host.runs
        argv = [*CLI, "worker", "--database", url, "--worker-id", name, "--runs-dir", str(runs)]
        self.name = name
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [*argv, *args],
            env=self.host.env(env),
            cwd=self.host.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(f"worker {self.name}: labels"):
                self.ready.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def descendants(self) -> list[int]:
        """The PIDs of the worker's processes' children (its bridge: Xvnc, xfreerdp)."""
        found, parents = [], {self.proc.pid}
        for _ in range(3):
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) in found:
                    continue
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat[stat.rfind(")") + 2 :].split()[1]) in parents:
                    found.append(int(entry.name))
            parents |= set(found)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _presses(probe: Probe, point: tuple[int, int], since: int) -> list[dict[str, Any]]:
    return [
        e
        for e in probe.log.events("press")[since:]
        if math.hypot(e["x"] - point[0], e["y"] - point[1]) <= TOLERANCE
    ]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _answered(body: dict[str, Any]) -> int:
    parts = [p for c in body.get("contents", []) for p in c.get("parts", [])]
    return sum(1 for p in parts if "functionResponse" in p or "function_response" in p)


def _rows(url: str) -> str:
    """Everything the fleet's tables hold, as text."""
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(url)
    try:
        rows = db._all("SELECT * FROM vnc_use_fleet_workers")
        rows += db._all("SELECT * FROM vnc_use_fleet_runs")
        rows += db._all("SELECT line FROM vnc_use_fleet_events")  # the run folders' content
        rows += [
            {"data": bytes(r["data"]).decode("utf-8", "replace")}
            for r in db._all("SELECT data FROM vnc_use_fleet_blobs")
        ]
    finally:
        db.close()
    return json.dumps(rows, default=str)


def _desktops_of(url: str, worker: str, seconds: float = 20) -> dict[str, Any]:
    """The worker's desktops in ``fleet status`` once one is busy (its next heartbeat)."""
    deadline = time.monotonic() + seconds
    while True:
        done = run_cli(["fleet", "status", "--fleet", url, "--json"])
        assert done.returncode == 0, done.stderr
        found = {w["worker_id"]: w["desktops"] for w in json.loads(done.stdout)["workers"]}
        desks: dict[str, Any] = found.get(worker, {})
        if any(desks.values()) or time.monotonic() > deadline:
            return desks
        time.sleep(0.3)


def _submit(tid: str, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [*CLI, "run", "--fleet", "env", "--task", f"Click the canvas ({tid})"]
    return subprocess.Popen(
        [*argv, "--thread-id", tid, "--no-hitl"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_worker_owns_an_rdp_host_and_another_goes_on_when_it_dies(
    pg: PostgresServer,
    probe: Probe,
    rdp: RdpShadowServer,
    gemini: GeminiStandIn,
    tmp_path: Path,
) -> None:
    size = probe.size
    assert size == (WIDTH, HEIGHT)
    point = probe.canvas_point()
    pin = f"rdp://{rdp.address}"
    asked = threading.Event()
    go_on = threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        if "(r2)" in json.dumps(body) and _answered(body) == 0 and not asked.is_set():
            asked.set()  # r2's first call: the worker is killed while the model "thinks"
            go_on.wait(60)
        if _answered(body) == 0:
            return Reply.calls(call_at("click_at", point, size))
        return Reply.text("Clicked the canvas.")

    gemini.script(script)
    runs = tmp_path / "hosts"  # a host of its own for each worker: nothing shared but the DB
    db_password = urlsplit(pg.url).password or ""
    assert db_password
    owner_args = ["--rdp", rdp.address, "--rdp-user", USER, "--rdp-size", f"{WIDTH}x{HEIGHT}"]
    owner = Worker("R1", owner_args, pg.url, runs, _env(tmp_path, "r1", RDP_PASSWORD=PASSWORD))
    bare: Worker | None = None
    other: Worker | None = None
    submit_env = _env(tmp_path, "s", VNC_USE_DATABASE_URL=pg.url)
    submit_env.pop("GOOGLE_API_KEY", None)  # the submitter has no model key: the workers do
    submitter: subprocess.Popen[str] | None = None
    orphans: list[int] = []
    seen: list[str] = []  # what the commands printed
    try:
        assert owner.ready.wait(90), owner.output
        assert pin in owner.output
        # a run submitted from another process lands its click once, on the RDP host
        since = len(probe.log.events("press"))
        out, err = _submit("r1", submit_env).communicate(timeout=90)
        assert "status: done" in out and "on worker R1" in out, out + err + owner.output
        assert len(_presses(probe, point, since)) == 1
        assert len(probe.log.events("press")[since:]) == 1
        status = run_cli(["fleet", "status", "--fleet", "env"], env=submit_env)
        assert status.returncode == 0, status.stderr
        seen.append(out + err + status.stdout + status.stderr)
        assert "127.0.0.1::" not in status.stdout, status.stdout  # not the bridge's address
        assert any(pin in line and "free" in line for line in status.stdout.splitlines())
        listed = run_cli(["runs", "--fleet", "env", "--json"], env=submit_env)
        row = next(json.loads(r) for r in listed.stdout.splitlines() if '"r1"' in r)
        assert (row["desktop"], row["desktop_kind"], row["worker"]) == (pin, "rdp", "R1")
        saved = json.loads((owner.host.runs / "r1" / "run.json").read_text())
        assert saved["vnc_server"] == f"{pin} (via FreeRDP)" and saved["rdp"]["nla"] is True
        # the RDP session ends between legs (the server restarts): the next leg gets a new
        # bridge from the worker
        bridge = owner.descendants()
        rdp.stop_server()
        rdp.start()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in bridge):  # the bridge saw its session end
            assert time.monotonic() < deadline, bridge
            time.sleep(0.1)
        since = len(probe.log.events("press"))
        out, err = _submit("r1b", submit_env).communicate(timeout=90)
        seen.append(out + err)
        assert "status: done" in out and "on worker R1" in out, out + err + owner.output
        assert len(_presses(probe, point, since)) == 1
        # the owner is SIGKILLed while r2 waits for the model; a worker with no RDP host of its
        # own (its desktop is a VNC one) goes on with r2 on the RDP host, with its own bridge
        since = len(probe.log.events("press"))
        submitter = _submit("r2", submit_env)
        assert asked.wait(60), owner.output
        assert _desktops_of(pg.url, "R1") == {pin: "r2"}  # busy with r2
        orphans = owner.descendants()
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait(10)
        # first a worker without RDP credentials: the leg ends error, one line naming them
        bare = Worker("R2", ["--vnc", "127.0.0.1::1"], pg.url, runs, _env(tmp_path, "r2"))
        go_on.set()
        out, err = submitter.communicate(timeout=90)
        seen.append(out + err)
        assert submitter.returncode == 1 and "on worker R2" in out, out + err + bare.output
        line = one_line(err)
        assert pin in line and "RDP_PASSWORD" in line and "RDP_USERNAME" in line, line
        assert "worker R1 is dead" in bare.output
        bare.stop()
        seen.append(bare.output)
        assert bare.proc.returncode == 0, bare.output
        # then one with them: resume --fleet goes on with r2 on the RDP host
        other_env = _env(tmp_path, "r3", RDP_PASSWORD=PASSWORD, RDP_USERNAME=USER)
        other = Worker("R3", ["--vnc", "127.0.0.1::1"], pg.url, runs, other_env)
        assert other.ready.wait(90), other.output
        resumed = run_cli(["resume", "--fleet", "env", "r2"], env=submit_env, timeout=90)
        seen.append(resumed.stdout + resumed.stderr)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr + other.output
        assert "status: done" in resumed.stdout and "on worker R3" in resumed.stdout
        # R3 held the server to the certificate R1 had seen (run.json): nothing trusted on
        # first use in its own store
        assert (tmp_path / "rdp-state-r1" / "known_hosts.json").is_file()
        assert not (tmp_path / "rdp-state-r3" / "known_hosts.json").exists()
        assert len(_presses(probe, point, since)) == 1
        assert len(probe.log.events("press")[since:]) == 1
        assert not gemini.violations
        # no secret anywhere: tables, run folders, output
        tables = _rows(pg.url)
        assert pin in tables and "127.0.0.1::" not in tables.replace("127.0.0.1::1", "")
        for secret in (PASSWORD, db_password):
            assert secret not in tables
            assert secret not in owner.output + other.output + "".join(seen)
            assert files_containing(runs, secret.encode()) == []
    finally:
        go_on.set()
        if submitter is not None and submitter.poll() is None:
            submitter.kill()
            submitter.wait(10)
        if owner.proc.poll() is None:
            owner.proc.kill()
            owner.proc.wait(10)
        for pid in orphans:  # the killed worker's bridge outlived it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for worker in (bare, other):
            if worker is not None:
                worker.stop()
    assert other is not None and other.proc.returncode == 0, other.output


def test_a_wrong_rdp_password_stops_the_worker_at_its_start_in_one_line(
    pg: PostgresServer, rdp: RdpShadowServer, tmp_path: Path
) -> None:
    """A refused login: exit 1 and one line at the worker's start. With the right password the
    worker starts its bridge, and on SIGTERM stops it with itself."""
    args = ["worker", "--worker-id", "bad", "--rdp", rdp.address, "--rdp-user", USER]
    env = _env(tmp_path, "bad", RDP_PASSWORD="not-the-password", VNC_USE_DATABASE_URL=pg.url)
    done = run_cli([*args, "--runs-dir", str(tmp_path / "runs")], env=env, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert "RDP_PASSWORD" in line and rdp.address in line, line
    assert "not-the-password" not in done.stdout + done.stderr
    good = Worker(
        "good",
        ["--rdp", rdp.address, "--rdp-user", USER],
        pg.url,
        tmp_path / "hosts",
        _env(tmp_path, "good", RDP_PASSWORD=PASSWORD),
    )
    try:
        assert good.ready.wait(90), good.output
        bridge = good.descendants()
        assert bridge and all(_alive(pid) for pid in bridge)
    finally:
        good.stop()
    assert good.proc.returncode == 0, good.output
    assert not any(_alive(pid) for pid in bridge)
