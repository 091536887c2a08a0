"""The fleet as an :class:`~vnc_use.runs.executor.Executor`: a run's legs go onto the fleet's
queues and a worker does them (:mod:`vnc_use.fleet.submit`, :mod:`vnc_use.fleet.worker`).

Only the database URL is needed here: the model's key and the desktops' passwords live in the
workers' environment; the desktop is the worker's to choose (``label``: the queue, i.e. what
the desktop must offer), and the outcome and report come back through the database. A stop
asked for here is a stop request in the run's journal, in the fleet's database, which the
worker's leg watches between steps.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from vnc_use.errors import ConfigError
from vnc_use.runs import rules
from vnc_use.runs.executor import Decision, refusal
from vnc_use.runs.spec import RunSpec, where_settings
from vnc_use.status import RunStatus

if TYPE_CHECKING:
    from vnc_use.agent.state import RunResult
    from vnc_use.fleet.submit import Submitter

__all__ = ["FLEET_REFUSES", "FleetExecutor"]

LEASE_TIMEOUT = 600.0
"""How long a takeover waits for the leg under way to reach its next step boundary when the
run's spec does not say (its ``lease_timeout``)."""

FLEET_REFUSES = {
    "vnc_password": "--vnc-password",
    "view": "--view",
    "server": "--server",
    "checkpointer": "--checkpointer",
    **{s.name: s.flags for _, s in where_settings() if s.name != "max_cost"},
}
"""Options a fleet's run cannot honour (the worker's desktop, environment, database and runs
folder apply), in the order a refusal names them: the door's own, and the settings that say
where and how a run executes (:func:`~vnc_use.runs.spec.where_settings`) but its cost cap.
A later leg honours ``--vnc ADDR`` (the run moves to that desktop) and ``--max-cost`` (the
run's cap from then on); its video settings are the run's own."""
LEG_HONOURS = frozenset({"vnc", "max_cost"})
RUN_HONOURS = frozenset({"video", "video_fps", "label", "lease_timeout"})


class FleetExecutor:
    """Runs on the fleet whose database is at ``url`` (see the module's doc)."""

    kind = "fleet"

    def __init__(
        self,
        url: str,
        *,
        label: str | None = None,
        desktop: str | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        from vnc_use.fleet.submit import DEFAULT_LABEL

        self.url = url
        self.on_event = on_event
        """Told the run's events as the worker records them in the database (progress)."""
        self.on_notice = on_notice
        """Told one line when the leg waits (no live worker of its label, a busy desktop)."""
        self.last_outcome: dict[str, Any] = {}
        """The last leg's outcome as the fleet keeps it (its worker too)."""
        self.label = label or DEFAULT_LABEL
        self.desktop = None
        """A VNC ``HOST::PORT`` a later leg moves the run to (None: where it is)."""
        if desktop is not None:  # a bad address fails before the database is reached
            from vnc_use.fleet.desktops import vnc_address

            self.desktop = vnc_address(desktop)
        self.flags = "--fleet URL"
        self._workers: dict[str, str] = {}

    def refuse(
        self, spec: RunSpec | None, given: Mapping[str, Any], verb: str = "run"
    ) -> str | None:
        honoured = RUN_HONOURS if verb == "run" else LEG_HONOURS
        names = [
            flag for name, flag in FLEET_REFUSES.items() if name in given and name not in honoured
        ]
        names += ["--label"] if verb != "run" and "label" in given else []
        return refusal(
            names,
            f"cannot go with {verb} --fleet: the worker's desktop, environment, database and "
            "runs folder apply (a desktop's password: the worker's VNC_PASSWORD); drop them"
            + ("" if verb == "run" else " (a new desktop: --vnc ADDR)"),
        )

    def _submitter(self) -> Submitter:
        from vnc_use.fleet.submit import Submitter

        return Submitter(self.url)

    def _outcome(self, fleet: Submitter, workflow: str, seen: int = 0) -> RunResult:
        """The leg's outcome; meanwhile its waiting line and the run's events."""
        if self.on_event is not None and self.on_notice is not None:
            waiting = fleet.waiting_line(workflow)
            if waiting:
                self.on_notice(waiting)
        self.last_outcome = _wait_showing(fleet, workflow, seen, self.on_event)
        return self._result_of(self.last_outcome)

    def _result_of(self, found: Mapping[str, Any]) -> RunResult:
        from vnc_use.agent.state import RunResult

        tid = str(found.get("thread_id") or "")
        if found.get("worker"):
            self._workers[tid] = str(found["worker"])
        return RunResult(
            status=_status(found.get("status")),
            thread_id=tid,
            run_dir=str(found.get("run_dir") or ""),
            final_text=str(found.get("final_text") or ""),
            steps=int(found.get("steps") or 0),
            error=found.get("error"),
            pending_call=found.get("pending_call"),
            cost_usd=found.get("cost_usd"),
            human=found.get("human"),
        )

    def start(self, spec: RunSpec, task: str, thread_id: str | None = None) -> RunResult:
        from vnc_use.desktops.target import DesktopTarget
        from vnc_use.fleet.queue import queue_name

        queue_name(self.label)  # a bad label fails before the database is reached
        spec.check()
        sent = replace(spec, desktop=DesktopTarget(), runs_dir="runs")  # the worker's own
        with self._submitter() as fleet:
            workflow = fleet.start(task, sent.to_json(), self.label, thread_id)
            return self._outcome(fleet, workflow)

    def answer(
        self,
        thread_id: str,
        decision: Decision,
        reason: str | None = None,
        *,
        spec: RunSpec | None = None,
    ) -> RunResult:
        with self._submitter() as fleet:
            seen = fleet.event_count(thread_id)
            return self._outcome(fleet, fleet.answer(thread_id, decision, self._moved()), seen)

    def resume(
        self, thread_id: str, *, spec: RunSpec | None = None, max_cost: float | None = None
    ) -> RunResult:
        with self._submitter() as fleet:
            seen = fleet.event_count(thread_id)
            workflow = fleet.answer(thread_id, "resume", self._moved(), max_cost=max_cost)
            return self._outcome(fleet, workflow, seen)

    def _moved(self) -> str | None:
        return self.desktop

    def result(self, thread_id: str) -> RunResult:
        from vnc_use.agent.state import RunResult

        with self._submitter() as fleet:
            row = fleet.run(thread_id)
        if row.result:
            return self._result_of({**row.result, "status": row.status})
        return RunResult(status=_status(row.status), thread_id=thread_id, run_dir="")

    def stop(self, thread_id: str) -> None:
        """A stop request in the run's journal (the fleet's database): the worker's leg stops
        at its next step boundary and the run ends ``interrupted``."""
        from vnc_use.fleet.submit import state_of_row
        from vnc_use.store.storage import open_storage

        with self._submitter() as fleet:
            rules.check("stop", thread_id, state_of_row(fleet.run(thread_id)))
        with tempfile.TemporaryDirectory() as nowhere:  # PostgreSQL: no runs folder is used
            storage = open_storage(self.url, nowhere)
            try:
                storage.journal(thread_id).request_stop()
            finally:
                storage.close()

    def takeover(self, thread_id: str, person: str, *, force: bool = False) -> RunResult:
        """Take the fleet run's desktop for ``person`` (:mod:`vnc_use.fleet.takeover`): the
        hold goes into the fleet's database, keyed by the run's desktop; the worker's leg
        pauses at its next step boundary (this waits until it has) and frees its worker."""
        from vnc_use.fleet.takeover import take_over

        with self._submitter() as fleet:
            timeout = float(fleet.run(thread_id).spec.get("lease_timeout") or LEASE_TIMEOUT)
            found = take_over(fleet, self.url, thread_id, person, force=force, timeout=timeout)
        self.last_outcome = found
        return self._result_of(found)

    def handback(
        self,
        thread_id: str,
        note: str | None = None,
        *,
        person: str | None = None,
        spec: RunSpec | None = None,
    ) -> RunResult:
        """Hand the fleet run back (only its holder may): the hold is freed and the run's
        next leg goes onto the queue (as ``approve`` does); it continues from a fresh
        screenshot and tells the model what the person did and the note."""
        from vnc_use.fleet.submit import state_of_row
        from vnc_use.fleet.takeover import check_holder, fleet_holds

        with self._submitter() as fleet:
            row = fleet.run(thread_id)
            rules.check("handback", thread_id, state_of_row(row))
            if row.desktop:  # a run the model paused before a leg pinned it has no hold
                with fleet_holds(self.url, row) as (_, holds):
                    check_holder(holds, thread_id, person)
            seen = fleet.event_count(thread_id)
            extra = {"note": note, "person": person}
            workflow = fleet.answer(thread_id, "handback", self._moved(), extra=extra)
            return self._outcome(fleet, workflow, seen)

    def where(self, result: RunResult) -> str:
        worker = self._workers.get(result.thread_id)
        return f" on worker {worker}" if worker else ""

    def report_line(self, result: RunResult) -> str | None:
        return f"report: vnc-use report --fleet URL {result.thread_id}"

    def close(self) -> None:
        """Nothing stays open between verbs."""


def _status(value: Any) -> RunStatus:
    """The fleet's status as a run status (a queued or running leg: ``running``)."""
    try:
        return RunStatus(str(value))
    except ValueError:
        if value in ("queued", "running"):
            return RunStatus.RUNNING
        raise ConfigError(f"the fleet reports an unknown status {value!r}") from None


PROGRESS_SECONDS = 0.5
"""How often a leg's waiter looks for the run's new events."""


def _wait_showing(
    fleet: Submitter, workflow: str, seen: int, show: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any]:
    """The leg's outcome; meanwhile the run's events (``show``), from those the worker
    records in the database, as a run here shows them."""
    found: dict[str, Any] = {}
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            found.update(fleet.wait(workflow))
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    waiter = threading.Thread(target=wait, daemon=True, name="fleet-wait")
    waiter.start()
    tid = fleet.thread_id or ""
    while True:
        waiter.join(PROGRESS_SECONDS)
        if show is not None:
            for event in fleet.events(tid, seen):
                seen += 1
                show(event)
        if not waiter.is_alive():
            break
    if failed:
        raise failed[0]
    return found
