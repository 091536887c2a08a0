"""Fleet tests' shared parts: a ``vnc-use worker`` as a separate process, the Gemini
stand-in's view of a request, the probe's presses at a grid point."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from cli_tools import CLI
from desktop_fixtures import Probe

__all__ = ["FleetWorker", "answered", "presses"]


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
    ``["--desktops", "1"]`` or ``["--vnc", ADDR]``); its output in ``lines``, ``ready`` set
    once it says it takes legs."""

    def __init__(
        self, name: str, desktops: list[str], url: str, runs: Path, vnc_password: str
    ) -> None:
        argv = [*CLI, "worker", "--database", url, "--worker-id", name, "--runs-dir", str(runs)]
        env = {**os.environ, "VNC_PASSWORD": vnc_password}
        env.pop("VNC_USE_DATABASE_URL", None)
        self.name = name
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [*argv, *desktops],
            env=env,
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

    def kill(self) -> None:
        """SIGKILL: the process is gone at once (its database session with it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (drain), and SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
