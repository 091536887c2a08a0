"""Setup and check commands: a shell, the desktop's environment, a time limit, a log.

Each command runs in its own session with its output appended to a log file (never a pipe:
a command that leaves a program running in the background, ``xterm &``, must not keep us
waiting). When it overruns its time limit, its whole session is stopped. Programs a setup
leaves running stay in the sessions :class:`Commands` remembers, and :meth:`Commands.stop`
ends them after the task.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vnc_use.desktops.processes import process_start_time, session_members, terminate

__all__ = ["CommandResult", "Commands"]


@dataclass(frozen=True)
class CommandResult:
    """How one command ended."""

    command: str
    returncode: int | None
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        """Exit status 0 within the time limit."""
        return not self.timed_out and self.returncode == 0

    def describe(self) -> str:
        """``'grep ...' timed out after 5 s`` / ``... exited with status 1``."""
        if self.timed_out:
            return f"{self.command!r} timed out after {self.seconds:.0f} s"
        return f"{self.command!r} exited with status {self.returncode}"


@dataclass
class Commands:
    """Runs commands for one task with ``env``, logging to ``log``."""

    env: Mapping[str, str]
    log: Path
    cwd: Path | None = None
    sessions: list[tuple[int, int]] = field(default_factory=list)

    def run(self, command: str, timeout: float) -> CommandResult:
        """Run ``command`` in bash (else sh); stop its session when it overruns."""
        shell = shutil.which("bash") or "/bin/sh"
        started = time.monotonic()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"$ {command}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                [shell, "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(self.env),
                cwd=self.cwd,
                start_new_session=True,
            )
        start = process_start_time(proc.pid)
        if start is not None:
            self.sessions.append((proc.pid, start))
        try:
            code: int | None = proc.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            proc.wait()
            code, timed_out = None, True
        return CommandResult(command, code, timed_out, time.monotonic() - started)

    def stop(self) -> None:
        """End what the commands left running (each session they started)."""
        for sid, _ in self.sessions:
            _kill_session(sid)
        self.sessions.clear()


def _kill_session(sid: int) -> None:
    """SIGTERM the live members of session ``sid``, then SIGKILL the ones that stay."""
    members = session_members(sid)
    if members:
        terminate(members, timeout=3.0)
