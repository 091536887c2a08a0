"""Helpers of the RDP tests (the shadow server's and xrdp's): the typed strings, a watched CLI
subprocess, the environment of an RDP run, a model call aimed at a screen point."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from vnc_use.testing.gemini_standin import FunctionCallSpec

from cli_tools import CLI

__all__ = [
    "ASCII",
    "MIXED",
    "TYPED",
    "Watched",
    "call_at",
    "files_containing",
    "one_line",
    "rdp_env",
]

ASCII = "".join(chr(c) for c in range(32, 127))
MIXED = " Mississippi Bookkeeper ABC xyz 1100"
TYPED = ASCII + MIXED


class Watched:
    """A CLI subprocess, with /proc scanned while it runs: the bridge processes it started
    (children named Xvnc/xfreerdp/stdbuf) and any command line holding the password."""

    def __init__(self, args: list[str], env: dict[str, str], secret: str | None) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            CLI + args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.secret = secret.encode() if secret else None
        self.children: dict[int, str] = {}
        self.leaks: list[str] = []
        self.scans = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)
        self._thread.start()
        self.stdout, self.stderr = self.proc.communicate(timeout=120)
        self.seconds = time.monotonic() - self.started
        self._done.set()
        self._thread.join()

    def _scan(self) -> None:
        while not self._done.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if self.secret and self.secret in cmdline:
                    self.leaks.append(cmdline.decode(errors="replace"))
                ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
                name = cmdline.split(b"\0")[0].decode()
                if ppid == self.proc.pid and (name or int(entry.name) not in self.children):
                    self.children[int(entry.name)] = name  # a zombie's command line is empty
            self.scans += 1
            time.sleep(0.02)

    @property
    def returncode(self) -> int:
        return self.proc.returncode

    def alive_children(self) -> list[str]:
        return [
            name
            for pid, name in self.children.items()
            if Path(f"/proc/{pid}").exists() and "Z" not in process_state(pid)
        ]


def process_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rfind(")") + 2 :].split()[0]


def rdp_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RDP_")}
    env["VNC_USE_RDP_DIR"] = str(tmp_path / "rdp-state")
    env.update(extra)
    return env


def call_at(name: str, point: tuple[int, int], size: tuple[int, int], **args: Any) -> Any:
    """A model call aimed at ``point`` (screen pixels) on the 0-999 grid."""
    x, y = (round(v * 1000 / s) for v, s in zip(point, size, strict=True))
    return FunctionCallSpec(name, x=x, y=y, **args)


def files_containing(root: Path, secret: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]
