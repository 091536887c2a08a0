"""Fleet tests' shared parts: a ``vnc-use worker`` as a separate process on a host of its own
(:class:`Host`: its own HOME, working folder, runs folder and TMPDIR; nothing shared with the
other workers but the database), the Gemini stand-in's view of a request, the probe's presses
at a grid point, the fleet's status, the PostgreSQL sessions a process holds."""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vnc_use.testing.desktop import TestDesktop

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe, start_probe

__all__ = [
    "PASSWORD",
    "FleetWorker",
    "Host",
    "WorkerProcess",
    "answered",
    "fleet_status",
    "presses",
    "probe_desktops",
    "sessions_of",
]

PASSWORD = "fleetpw1"
"""The VNC password of the fleet tests' probe desktops (the workers' VNC_PASSWORD)."""


@contextmanager
def probe_desktops(
    tmp_path_factory: pytest.TempPathFactory, count: int, password: str
) -> Iterator[list[Probe]]:
    """``count`` 1024x768 desktops with the probe app, one password for the fleet's workers."""
    started: list[TestDesktop] = []
    found = []
    try:
        for n in range(count):
            desk = TestDesktop(1024, 768, password=password)
            started.append(desk.start())
            log = tmp_path_factory.mktemp(f"probe{n}") / "probe.jsonl"
            found.append(start_probe(desk, str(log)))
        yield found
    finally:
        for desk in started:
            desk.stop()


@dataclass(frozen=True)
class Host:
    """A machine of the fleet, as far as a worker can tell: its own HOME, working folder,
    runs folder and temporary folder under ``root`` (``<hosts>/<name>``)."""

    root: Path

    @classmethod
    def named(cls, hosts: Path, name: str) -> Host:
        host = cls(hosts / name)
        for folder in (host.home, host.work, host.runs, host.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        atexit.register(shutil.rmtree, host.tmp, ignore_errors=True)
        return host

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def tmp(self) -> Path:
        """Its TMPDIR: short, in the machine's temporary folder (a Unix socket's path, e.g.
        Chromium's, must fit 107 bytes; pytest's folders are long), gone when the tests end."""
        digest = hashlib.sha1(str(self.root).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"vnc-use-host-{digest}"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) as this host's: HOME, TMPDIR, no
        XDG folder or runs folder of the test's machine."""
        env = dict(os.environ if base is None else base)
        for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            env.pop(name, None)
        env.pop("VNC_USE_RUNS_DIR", None)
        env.update(HOME=str(self.home), TMPDIR=str(self.tmp))
        return env

    def down_local_desktops(self) -> None:
        """Stop the local desktops a worker of this host started (a killed one leaves them)."""
        from vnc_use.desktops.local import LocalDesktop

        for folder in (self.runs / ".fleet-desktops").glob("*/desktop-*"):
            LocalDesktop(folder).down()


def answered(body: dict[str, Any]) -> int:
    """How many function calls the request answers (the actions the run has done)."""
    parts = [p for c in body.get("contents", []) for p in c.get("parts", [])]
    return sum(1 for p in parts if "functionResponse" in p or "function_response" in p)


def presses(probes: list[Probe], grid: tuple[int, int]) -> int:
    """Presses the probes logged at ``grid`` (a point of the model's 0-1000 grid)."""
    total = 0
    for probe in probes:
        w, h = probe.size
        x, y = grid[0] / 1000 * w, grid[1] / 1000 * h
        total += sum(
            1 for e in probe.log.events("press") if math.hypot(e["x"] - x, e["y"] - y) <= 2
        )
    return total


class FleetWorker:
    """``vnc-use worker --worker-id NAME`` with ``desktops`` (its desktop options, e.g.
    ``["--desktops", "1"]`` or ``["--vnc", ADDR]``) on a host of its own under ``hosts``
    (:class:`Host`: ``hosts/NAME``; its runs folder is ``self.host.runs``), started in its
    working folder; its output in ``lines``, ``ready`` set once it says it takes legs."""

    def __init__(
        self,
        name: str,
        desktops: list[str],
        url: str,
        hosts: Path,
        vnc_password: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.host = Host.named(hosts, name)
        runs = self.host.runs
        argv = [*CLI, "worker", "--database", url, "--worker-id", name, "--runs-dir", str(runs)]
        env = {**self.host.env(env), "VNC_PASSWORD": vnc_password}
        env.pop("VNC_USE_DATABASE_URL", None)
        self.name = name
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [*argv, *desktops],
            env=env,
            cwd=self.host.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(f"worker {self.name}: labels"):
                self.ready.set()

    @property
    def output(self) -> str:
        """What it printed so far (all of it once it exited)."""
        if self.proc.poll() is not None:
            self._reader.join(10)
        return "".join(self.lines)

    def kill(self) -> None:
        """SIGKILL: the process is gone at once (its database session with it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (drain), and SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped one cannot take a SIGTERM
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class WorkerProcess(FleetWorker):
    """A worker over the probes' desktops (``--vnc``), with the probes' password, on a host of
    its own under ``hosts``."""

    def __init__(
        self, name: str, desks: list[Probe], url: str, hosts: Path, extra: tuple[str, ...] = ()
    ) -> None:
        servers = [p.desktop.server for p in desks]
        super().__init__(name, ["--vnc", *servers, *extra], url, hosts, PASSWORD)


def fleet_status(url: str) -> dict[str, Any]:
    """``vnc-use fleet status --json``."""
    done = run_cli(["fleet", "status", "--fleet", url, "--json"])
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _tcp_ports(pid: int, server_port: int) -> set[int]:
    """The local ports of the TCP connections process ``pid`` has open to ``server_port``
    (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def sessions_of(conn: Any, pid: int, server_port: int) -> list[str]:
    """The ``application_name`` of every session process ``pid`` holds with the PostgreSQL
    server on 127.0.0.1:``server_port``, from ``pg_stat_activity`` (on the test's ``conn``)."""
    ports = sorted(_tcp_ports(pid, server_port))
    with conn.cursor() as cur:
        cur.execute(
            "SELECT application_name FROM pg_stat_activity WHERE client_port = ANY(%s) "
            "AND client_addr = '127.0.0.1'",
            (ports,),
        )
        return [str(row["application_name"]) for row in cur.fetchall()]
