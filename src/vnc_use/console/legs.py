"""The console's verbs on runs: start, approve, deny, stop, resume, handback.

Each leg of a run (its start, an answer, a resume) runs in a process of its own
(:mod:`vnc_use.console.leg`, in a new session), which carries it out through the run's
executor exactly as the CLI verbs do: the run is an ordinary run (checkpointed, in its run
folder, resumable from the CLI) and goes on when the console stops. What a verb is allowed to
do to a run in its state is the run rules' answer (:mod:`vnc_use.runs.rules`), asked here
before a process starts, under one lock: of two
answers to the same approval the first starts a leg and the second is told the approval was
already answered (409), so the action runs once.

A leg's stderr goes to ``<runs_dir>/.console/<thread_id>.log``; its last line is what the page
shows when a leg ends without recording an outcome (a missing key, an unreachable desktop).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.errors import ConfigError
from vnc_use.record.folder import check_thread_id
from vnc_use.record.runs import read_events
from vnc_use.runs import rules
from vnc_use.status import RunStatus

__all__ = ["Conflict", "Leg", "Legs", "NotFound"]

LOG_DIR = ".console"
_DECISIONS = frozenset({"approved", "denied"})
_STEP_LEFT = frozenset({RunStatus.INTERRUPTED.value, RunStatus.ERROR.value, "unfinished"})
"""Recorded statuses of a run whose checkpoint may have a step left (the leg that continues
it finds out; a finished one it shows as it is)."""


class Conflict(Exception):
    """A verb the run's state does not accept (HTTP 409); the text is one line."""


class NotFound(Exception):
    """No such run (HTTP 404)."""


@dataclass
class Leg:
    """A leg process this console started."""

    verb: str
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.time)
    stop_sent: bool = False

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def _since_last_pause(run_dir: Path) -> list[dict[str, Any]]:
    """The run's events after its last ``run_paused``."""
    after: list[dict[str, Any]] = []
    for event in read_events(run_dir):
        if event.get("event") == "run_paused":
            after = []
        else:
            after.append(event)
    return after


class Legs:
    """Starts and tracks the legs of runs under ``runs_dir`` (see the module's doc)."""

    def __init__(
        self,
        runs_dir: str | Path,
        python: str = sys.executable,
        *,
        fleet: str | None = None,
        server: str | None = None,
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.python = python
        self.fleet = fleet
        """The fleet's database URL: its runs go through the fleet's executor."""
        self.server = server
        """A LangGraph Server's URL: its runs go through the served executor."""
        self._legs: dict[str, Leg] = {}
        self._lock = threading.Lock()

    # -- what is running ---------------------------------------------------------------------
    def leg(self, thread_id: str) -> Leg | None:
        """The last leg this console started for the run (alive or not)."""
        return self._legs.get(thread_id)

    def running(self, thread_id: str) -> bool:
        leg = self._legs.get(thread_id)
        return leg is not None and leg.alive

    def leg_error(self, thread_id: str) -> str | None:
        """The last line of a leg that ended with an error, else None."""
        leg = self._legs.get(thread_id)
        if leg is None or leg.alive or leg.process.returncode == 0:
            return None
        try:
            lines = self.log_path(thread_id).read_text("utf-8", errors="replace").splitlines()
        except OSError:
            return None
        text = [line for line in lines if line.strip()]
        return text[-1] if text else f"the {leg.verb} ended with exit code {leg.process.returncode}"

    def log_path(self, thread_id: str) -> Path:
        return self.runs_dir / LOG_DIR / f"{thread_id}.log"

    def status(self, thread_id: str, recorded: str) -> str:
        """The status to show: ``running`` while a leg runs (or the run goes on elsewhere:
        ``unfinished``), ``starting`` before its folder exists, else the recorded one."""
        if self.running(thread_id):
            leg = self._legs[thread_id]
            if leg.verb == "start" and not (self.runs_dir / thread_id).exists():
                return "starting"
            return "running"
        if recorded == "unfinished":
            return "unfinished"
        return recorded

    # -- the verbs ---------------------------------------------------------------------------
    def start(
        self, spec_json: dict[str, Any], task: str, thread_id: str, label: str | None = None
    ) -> None:
        check_thread_id(thread_id)
        with self._lock:
            if thread_id in self._legs or (self.runs_dir / thread_id).exists():
                raise Conflict(f"run {thread_id!r} exists already")
            self._spawn(
                thread_id,
                "start",
                {
                    "verb": "start",
                    "thread_id": thread_id,
                    "task": task,
                    "spec": spec_json,
                    "label": label,
                },
            )

    def answer(self, thread_id: str, verb: str, status: str, reason: str | None = None) -> None:
        """``verb`` is ``approve`` or ``deny``; ``status`` the run's recorded status."""
        with self._lock:
            leg = self._legs.get(thread_id)
            if leg is not None and leg.alive and leg.verb in ("approve", "deny"):
                raise Conflict(f"run {thread_id}: its approval was already answered ({leg.verb})")
            try:
                rules.check(
                    "approve" if verb == "approve" else "deny",
                    thread_id,
                    self._state(thread_id, status),
                )
            except ConfigError as exc:
                answered = [
                    e["event"]
                    for e in _since_last_pause(self.runs_dir / thread_id)
                    if e.get("event") in _DECISIONS
                ]
                if answered:
                    raise Conflict(
                        f"run {thread_id}: its approval was already answered ({answered[0]})"
                    ) from None
                raise Conflict(str(exc)) from None
            order = {"verb": verb, "thread_id": thread_id, "runs_dir": str(self.runs_dir)}
            if reason:
                order["reason"] = reason
            self._spawn(thread_id, verb, order)

    def resume(self, thread_id: str, status: str) -> None:
        with self._lock:
            try:
                way = rules.check("resume", thread_id, self._state(thread_id, status))
            except ConfigError as exc:
                raise Conflict(str(exc)) from None
            if way == "show":
                raise Conflict(f"run {thread_id} has finished ({status}): nothing to resume")
            self._spawn(
                thread_id,
                "resume",
                {"verb": "resume", "thread_id": thread_id, "runs_dir": str(self.runs_dir)},
            )

    def handback(self, thread_id: str, status: str, note: str | None, person: str) -> None:
        """Hand the run back (``person``: who hands it back, checked by the caller to be its
        holder): its next leg, from a fresh screenshot, runs in a process of its own."""
        with self._lock:
            try:
                rules.check("handback", thread_id, self._state(thread_id, status))
            except ConfigError as exc:
                raise Conflict(str(exc)) from None
            order: dict[str, Any] = {
                "verb": "handback",
                "thread_id": thread_id,
                "runs_dir": str(self.runs_dir),
                "person": person,
            }
            if note:
                order["note"] = note
            self._spawn(thread_id, "handback", order)

    def stop(self, thread_id: str, status: str) -> None:
        """Stop the run at its next step boundary: its leg here is told at once (SIGINT, as
        Ctrl-C); a run going on elsewhere (another console, ``vnc-use run``) through the
        executor (a stop request in its journal, which its leg watches). A served run: the
        server's cancel, through the served executor (the leg following it then ends)."""
        if self.server:
            from vnc_use.runs.executor import ServedExecutor

            try:
                ServedExecutor(self.server).stop(thread_id)
            except ConfigError as exc:
                raise Conflict(str(exc)) from None
            return
        with self._lock:
            leg = self._legs.get(thread_id)
            if leg is not None and leg.alive:
                leg.stop_sent = True
                leg.process.send_signal(signal.SIGINT)
                return
        from vnc_use.runs.executor import LocalExecutor

        try:
            rules.check("stop", thread_id, self._state(thread_id, status))
            if self.fleet:
                from vnc_use.fleet.executor import FleetExecutor

                FleetExecutor(self.fleet).stop(thread_id)
                return
            with LocalExecutor(self.runs_dir, checkpointer=config.database_url()) as executor:
                executor.stop(thread_id)
        except ConfigError as exc:
            raise Conflict(str(exc)) from None

    def _state(self, thread_id: str, status: str) -> str:
        """The run's state as the run rules read it (:func:`vnc_use.runs.rules.state_of`),
        from its recorded status and whether a leg of this console runs it; a served run's as
        the server has it now (the served executor asks)."""
        if self.server:
            from vnc_use.runs.executor import ServedExecutor

            try:
                return ServedExecutor(self.server).state(thread_id)
            except ConfigError as exc:
                raise Conflict(str(exc)) from None
        return rules.state_of(
            status,
            waiting=status == RunStatus.AWAITING_APPROVAL and not self.running(thread_id),
            under_way=self.running(thread_id) or status == RunStatus.RUNNING,
            step_left=status in _STEP_LEFT,
        )

    def close(self) -> None:
        """Forget the legs (they go on: each runs in its own session)."""
        for leg in self._legs.values():
            if not leg.alive:
                leg.process.wait()

    # -- internals ---------------------------------------------------------------------------
    def _spawn(self, thread_id: str, verb: str, order: dict[str, Any]) -> None:
        if self.fleet:
            order["fleet"] = self.fleet
        if self.server:
            order["server"] = self.server
        log_path = self.log_path(thread_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [self.python, "-m", "vnc_use.console.leg"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        assert process.stdin is not None
        process.stdin.write(json.dumps(order).encode())
        process.stdin.close()
        self._legs[thread_id] = Leg(verb, process)
