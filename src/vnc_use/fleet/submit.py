"""``run/approve/deny/resume --fleet URL``: put a leg on the queue and wait for its outcome.

A submitter needs only the database URL. The run's spec goes into the fleet's runs table
(never a secret: names of variables only), the leg onto its label's queue, or a later leg of a
run pinned to a live worker's desktop onto that worker's own queue
(:func:`~vnc_use.fleet.route.leg_worker`); the outcome comes
back through the database (the leg's result, the run's report), so nothing is shared with the
workers but the database.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.fleet.blobs import RunStore
from vnc_use.fleet.db import DEAD_AFTER, FleetDb, RunRow
from vnc_use.fleet.queue import Enqueuer
from vnc_use.fleet.route import leg_worker
from vnc_use.record.folder import check_thread_id
from vnc_use.runs import rules
from vnc_use.status import RunStatus

__all__ = ["DEFAULT_LABEL", "Submitter", "state_of_row"]

DEFAULT_LABEL = "default"


class Submitter:
    """Submit legs to the fleet at ``url``; :meth:`close` when done."""

    def __init__(self, url: str) -> None:
        self.db = FleetDb(url, application_name="vnc-use fleet client")
        self.enqueuer = Enqueuer(url)
        self.store = RunStore(url, conn=self.db.conn)
        self.thread_id: str | None = None
        """The run of the last leg enqueued."""
        self._queue: tuple[str, str | None] = (DEFAULT_LABEL, None)
        """The label and the worker (None: the label's queue) of the last leg enqueued."""

    def close(self) -> None:
        self.enqueuer.destroy()
        self.db.close()

    def __enter__(self) -> Submitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, task: str, spec: dict[str, Any], label: str, thread_id: str | None) -> str:
        """A new run; returns the workflow id of its first leg."""
        if not task.strip():
            raise ConfigError("the task is empty: say in plain words what the agent should do")
        try:
            tid = check_thread_id(thread_id or uuid.uuid4().hex[:12])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not self.db.create_run(tid, label, task, spec):
            raise ConfigError(f"run {tid!r} already exists in the fleet: give another --thread-id")
        self.thread_id, self._queue = tid, (label, None)
        return self.enqueuer.enqueue(
            label, f"{tid}-leg1", {"thread_id": tid, "action": "run", "task": task}
        )

    def answer(
        self,
        thread_id: str,
        action: str,
        desktop: str | None = None,
        *,
        max_cost: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """The next leg of a run: ``approve``, ``deny`` or ``resume``; its workflow id. The run
        rules (:mod:`vnc_use.runs.rules`) refuse what the run's state does not accept.
        ``desktop`` (a VNC ``HOST::PORT``) moves the run there first: the live worker that
        owns it, else any worker of the run's label (with its own ``VNC_PASSWORD``) continues
        it from its checkpoint; a run pinned to a live worker's desktop goes to that worker.
        ``max_cost`` raises the run's cost cap (its spec in the runs table) for this leg on;
        ``extra`` goes into the leg's payload (a ``handback``'s note and person)."""
        row = self.run(thread_id)
        rules.check(action, thread_id, state_of_row(row))  # type: ignore[arg-type]
        if max_cost is not None:
            self.db.set_spec(thread_id, {**row.spec, "max_cost": max_cost})
        if desktop is not None:
            self.db.repin(thread_id, desktop, "vnc")
            row = self.run(thread_id)
        worker = leg_worker(self.db, row)
        number = self.db.next_leg(thread_id, "queued")
        self.thread_id, self._queue = thread_id, (row.label, worker)
        payload = {**(extra or {}), "thread_id": thread_id, "action": action}
        return self.enqueuer.enqueue(row.label, f"{thread_id}-leg{number}", payload, worker)

    def run(self, thread_id: str) -> RunRow:
        row = self.db.run(thread_id)
        if row is None:
            raise ConfigError(f"no run {thread_id!r} in the fleet's database")
        return row

    def waiting_line(self, workflow_id: str) -> str | None:
        """One line when the leg just enqueued waits on a label no live worker takes from
        (None: one does, or the leg went to a live worker's own queue)."""
        label, worker = self._queue
        if worker is not None:
            return None
        alive = [
            w
            for w in self.db.workers()
            if w["state"] == "alive"
            and label in (w["labels"] or [])
            and w["age"] <= DEAD_AFTER
            and not self.db.worker_lock_free(str(w["worker_id"]))
        ]
        if alive:
            return None
        legs = self.enqueuer.pending(label)
        ids = [str(x["workflow_id"]) for x in legs if x["status"] == "ENQUEUED"]
        ahead = ids.index(workflow_id) if workflow_id in ids else len(ids)
        return (
            f"queued: no worker is alive for label {label} ({ahead} "
            f"{'run' if ahead == 1 else 'runs'} ahead of it); it starts when one is "
            "(vnc-use worker --label " + label + ")"
        )

    def event_count(self, thread_id: str) -> int:
        """How many events the run has recorded so far."""
        return self.store.event_count(thread_id)

    def events(self, thread_id: str, since: int) -> list[dict[str, Any]]:
        """The run's events after the first ``since``, as the workers recorded them."""
        found = []
        for line in self.store.events(thread_id, since):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def wait(self, workflow_id: str) -> dict[str, Any]:
        """The outcome of the leg (following its hand-backs: a draining worker's, a worker's
        with no free desktop)."""
        return self.enqueuer.outcome(workflow_id)


UNDER_WAY = ("queued", "running")
"""The fleet's own statuses of a run whose leg is on a queue or on a worker."""
STEP_LEFT = (RunStatus.ERROR.value, RunStatus.INTERRUPTED.value)
"""Statuses of a leg that ended with (perhaps) a step left: the next leg's agent decides."""


def state_of_row(row: RunRow) -> str:
    """The run's state as the run rules read it (:func:`vnc_use.runs.rules.state_of`)."""
    return rules.state_of(
        row.status,
        waiting=row.status == RunStatus.AWAITING_APPROVAL.value,
        under_way=row.status in UNDER_WAY,
        step_left=row.status in STEP_LEFT,
    )
