"""``vnc-use worker``: a long-running process per desktop host that takes run legs from the
fleet's queues (see :mod:`vnc_use.fleet`).

- It owns desktops (:mod:`vnc_use.fleet.desktops`: local, VNC, RDP hosts through bridges it
  keeps up) and drives at most one leg per desktop: a leg DBOS hands it while none of its
  desktops is free (the label's ``worker_concurrency`` is its biggest worker's desktop count,
  :func:`~vnc_use.fleet.queue.register_queues`) waits at most :data:`FREE_DESK_WAIT` and goes
  back to the queue for a worker with a free desktop. It also takes the legs of its own queue:
  those of runs pinned to its desktops (:mod:`vnc_use.fleet.route`); one of a run whose
  desktop is busy with another run waits for it, then goes back to that queue. A leg of a run
  pinned to another host's
  VNC/RDP desktop (a run whose worker died) connects there (an RDP host: through a bridge of
  its own for the leg); a leg of a run pinned to another worker's local desktop
  (``--desktops N``, reachable from that host only) ends the run ``error`` with one line
  naming ``resume --fleet URL --vnc ADDR``, without connecting.
- Every session it opens is named ``vnc-use worker <id>`` (:func:`~vnc_use.fleet.db.worker_tag`).
  It heartbeats every :data:`HEARTBEAT_SECONDS` and holds its liveness lock; every
  :data:`WATCH_SECONDS` it looks for dead workers (lock free: the process is gone; heartbeat
  older than ``--dead-after``: hung or unreachable), declares them dead, **fences** them (ends
  all their sessions: their desktop leases are free, and a hung one that wakes can journal, so
  send, nothing) and hands their legs back to the queues with DBOS's recovery; the legs waiting
  on a dead or stopped worker's own queue go to their labels' queues.
- A worker whose own session was ended or whose row says ``dead`` (it was fenced) exits at
  once with status 1, at its next heartbeat or before and after any leg: a leg it still held
  goes on elsewhere, never twice.
- On SIGTERM (:meth:`Worker.drain`) it stops taking legs, lets each running leg finish its
  step and checkpoint, and enqueues each one's continuation for another worker (on the label's
  queue, never its own); then exits.
- A run that pauses for a person ends its leg: it holds no worker and no desktop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from vnc_use.desktops.target import DesktopTarget
from vnc_use.errors import ConfigError, VncUseError
from vnc_use.fleet import queue
from vnc_use.fleet.blobs import RunStore
from vnc_use.fleet.db import DEAD_AFTER, FleetDb, RunRow, worker_tag
from vnc_use.fleet.desktops import Desk, DesktopPool, NoFreeDesktop, reach_leg
from vnc_use.fleet.leg import LegRequest, drive_leg, result_json
from vnc_use.fleet.route import leg_worker
from vnc_use.status import RunStatus

__all__ = ["HEARTBEAT_SECONDS", "WATCH_SECONDS", "Worker", "WorkerOptions", "check_worker_id"]

HEARTBEAT_SECONDS = 2.0
WATCH_SECONDS = 1.0
FREE_DESK_WAIT = 1.0
"""Seconds a new leg waits for one of this worker's desktops before it goes back to the queue."""
_WORKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")

log = logging.getLogger(__name__)


@dataclass
class WorkerOptions:
    database: str
    worker_id: str
    labels: list[str]
    runs_dir: Path
    vnc: list[str] = field(default_factory=list)
    local_desktops: int = 0
    desktop_size: tuple[int, int] = (1280, 800)
    rdp: list[str] = field(default_factory=list)
    """RDP hosts (``HOST[:PORT]``) this worker owns, each through a bridge kept up."""
    rdp_settings: DesktopTarget = field(default_factory=DesktopTarget)
    """How to reach an RDP host (user name, domain, size, ...; the password's variable):
    this worker's own hosts and those of runs it goes on with (their worker died)."""
    dead_after: float = DEAD_AFTER


class Worker:
    """One worker process (see the module's doc); :meth:`serve` until :meth:`drain`."""

    def __init__(self, options: WorkerOptions, say: Callable[[str], None]) -> None:
        self.options = options
        self.say = say
        self.pool = DesktopPool()
        self.db: FleetDb | None = None
        self.enqueuer: queue.Enqueuer | None = None
        self.draining = threading.Event()
        self.stopped = threading.Event()
        self.stopping = threading.Event()  # its own session closes: not a fence
        self._agents: dict[str, Stoppable] = {}
        self._legs = 0  # legs in this process now (DBOS workflows started, not returned)
        self._lock = threading.Lock()
        self._exiting = threading.Lock()

    # -- life --------------------------------------------------------------------------------
    def start(self) -> None:
        o = self.options
        check_worker_id(o.worker_id)
        for label in o.labels:
            queue.queue_name(label)  # a bad label fails before anything starts
        from vnc_use.store import postgres

        postgres.tag_sessions(worker_tag(o.worker_id))  # every session: a fence finds them
        self.db = FleetDb(o.database, application_name="heartbeat")
        if not self.db.hold_worker_lock(o.worker_id):
            raise VncUseError(
                f"worker {o.worker_id} is already running (its lock is held); give this one "
                "another --worker-id"
            )
        for address in o.vnc:
            self.pool.add_vnc(address)
        for host in o.rdp:
            log_path = o.runs_dir / ".fleet-desktops" / o.worker_id / f"rdp-{host}.log"
            self.pool.add_rdp(replace(o.rdp_settings, rdp_server=host), log_path)
        for n in range(o.local_desktops):
            root = o.runs_dir / ".fleet-desktops" / o.worker_id / f"desktop-{n + 1}"
            self.pool.add_local(root, o.desktop_size)
        with self.db.setup_lock():  # one worker at a time: LangGraph's migrations race
            _set_up_storage(o.database, o.runs_dir)
            RunStore(o.database).close()  # the run folders' tables (fleet.blobs)
        self.db.register_worker(o.worker_id, o.labels, self.pool.snapshot(), socket.gethostname())
        queue.launch_worker(o.database, o.worker_id, o.labels, len(self.pool.desks), self.leg)
        with self.db.setup_lock():  # one at a time: a bigger worker's count is never undone
            mine = len(self.pool.desks)
            queue.register_queues({x: max(mine, self.db.label_desktops(x)) for x in o.labels})
        self.enqueuer = queue.Enqueuer(o.database)  # after DBOS created its tables
        for target in (self._heartbeats, self._watch):
            threading.Thread(target=target, daemon=True, name=target.__name__).start()
        desks = ", ".join(self.pool.snapshot()) or "none"
        self.say(f"worker {o.worker_id}: labels {', '.join(o.labels)}; desktops {desks}")

    def serve(self) -> None:
        """Until drained: then wait for the running legs to hand back, and stop."""
        self.draining.wait()
        while True:
            with self._lock:
                if not self._legs:
                    break
            self.stopped.wait(0.2)
        self.stop("stopped")

    def drain(self) -> None:
        """Stop taking legs; running legs end at their next step boundary and are handed
        back (safe from a signal handler)."""
        if self.draining.is_set():
            return
        self.draining.set()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.db is not None
        self.db.set_worker_state(self.options.worker_id, "draining")
        with self._lock:
            agents = list(self._agents.values())
        for agent in agents:
            agent.request_stop()

    def stop(self, state: str) -> None:
        """Stop DBOS, say so in the database, give the desktops back (each step even when an
        earlier one failed: the database may be gone)."""
        self.stopping.set()
        steps = [queue.shutdown]
        if self.db is not None:
            db = self.db
            steps += [lambda: db.set_worker_state(self.options.worker_id, state), db.close]
        if self.enqueuer is not None:
            steps.append(self.enqueuer.destroy)
        steps.append(self.pool.close)
        for step in steps:
            try:
                step()
            except Exception as exc:  # e.g. DBOS never launched, the database is away
                log.warning("stopping: %s", exc)
        self.stopped.set()

    # -- heartbeats and the watch over other workers -----------------------------------------
    def _heartbeats(self) -> None:
        while not self.stopped.wait(HEARTBEAT_SECONDS):
            self._beat()

    def _beat(self) -> None:
        """Heartbeat now, with the desktops as they are; exit at once if this worker was
        fenced (see :meth:`_fenced`)."""
        if self.db is None:
            return
        try:
            state = self.db.heartbeat(self.options.worker_id, self.pool.snapshot())
        except Exception as exc:
            if self.db.lost():  # our session was ended: fenced, or the database restarted
                self._fenced("its database session was ended")
            log.warning("heartbeat failed: %s", exc)  # a passing error: try again
            return
        if state == "dead":  # declared dead (hung too long): its legs went elsewhere
            self._fenced("it was declared dead")

    def _fenced(self, why: str) -> None:
        """Another worker declared this one dead and took its legs: stop everything now (its
        sessions are ended: nothing it still holds can be journaled, so sent)."""
        if self.stopping.is_set():  # stop() closed our session itself
            return
        with self._exiting:  # one line, whichever thread noticed first
            self.say(
                f"worker {self.options.worker_id}: {why} (its legs went on elsewhere); exiting"
            )
            os._exit(1)

    def _watch(self) -> None:
        while not self.stopped.wait(WATCH_SECONDS):
            try:
                self.watch_once()
            except Exception as exc:
                log.warning("watching the other workers failed: %s", exc)

    def watch_once(self) -> list[str]:
        """Declare dead workers dead, fence them and recover their legs; which ones this call
        declared."""
        assert self.db is not None
        me = self.options.worker_id
        done = []
        for worker_id, why in self.db.suspects(me, self.options.dead_after).items():
            if self.db.declare_dead(worker_id):
                try:
                    self.db.fence(worker_id)
                except Exception as exc:  # e.g. no right to end its sessions: say so
                    self.say(f"worker {worker_id}: cannot end its sessions: {exc}")
                count = queue.recover(worker_id)
                moved = self._move_legs(worker_id)  # after: recovery may put some there
                also = f"; {moved} moved from its own queue to their labels'" if moved else ""
                self.say(
                    f"worker {worker_id} is dead ({why}): {count} of its legs back on the "
                    f"queues{also}"
                )
                done.append(worker_id)
        self._recover_stranded(me)
        return done

    def _recover_stranded(self, me: str) -> None:
        """Legs DBOS still counts on a stopped or dead worker (one handed to it as it stopped,
        or as a fenced one woke and exited) go back on the queues, and legs waiting on such a
        worker's own queue go to their labels' queues (mostly none)."""
        assert self.db is not None and self.enqueuer is not None
        gone = self.db.gone(me)
        if not gone:
            return
        legs = self.enqueuer.pending()
        stranded = {str(x["executor"]) for x in legs if x["status"] == "PENDING"} & gone
        for worker_id in sorted(stranded):
            queue.recover(worker_id)
        if stranded:  # recovery puts a leg back on the queue it came from: a gone one's too
            legs = self.enqueuer.pending()
        mine = {queue.worker_queue_name(w): w for w in gone}
        for worker_id in sorted({mine[x["queue"]] for x in legs if x["queue"] in mine}):
            self._move_legs(worker_id)

    def _move_legs(self, worker_id: str) -> int:
        """Move the legs waiting on gone worker ``worker_id``'s own queue to their labels'
        queues (after :func:`~vnc_use.fleet.queue.recover`, which puts a leg it took from
        there back there); how many."""
        assert self.db is not None and self.enqueuer is not None
        db = self.db

        def label_of(payload: dict[str, Any]) -> str:
            row = db.run(str(payload.get("thread_id", "")))
            return row.label if row is not None else self.options.labels[0]

        return self.enqueuer.move_to_labels(worker_id, label_of)

    # -- legs ----------------------------------------------------------------------------
    def leg(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The DBOS workflow: one leg (see :mod:`vnc_use.fleet.leg`)."""
        self._beat()  # a fenced worker that woke runs nothing more
        with self._lock:
            self._legs += 1
        try:
            outcome = self._one_leg(payload)
        finally:
            self._beat()  # nor reports a leg that went on elsewhere; its desktop shows free
            with self._lock:
                self._legs -= 1
        if self.db is not None and not outcome.get("handed_back"):
            self.db.count_leg(self.options.worker_id)
        return outcome

    def _one_leg(self, payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("kind") == "eval":
            return self._eval_leg(payload)
        if self.draining.is_set():
            return self._hand_back(payload, str(payload.get("action", "run")))
        db = FleetDb(self.options.database, application_name="vnc-use fleet leg")
        try:
            return self._leg(db, payload)
        finally:
            db.close()

    def _leg(self, db: FleetDb, payload: dict[str, Any]) -> dict[str, Any]:
        tid = str(payload["thread_id"])
        row = db.run(tid)
        if row is None:
            return {"status": "error", "error": f"no fleet run {tid!r}"}
        unreachable = self._unreachable(db, row)
        if unreachable:  # never connect to another host's loopback desktop
            result = {"status": "error", "thread_id": tid, "error": unreachable}
            db.finish_leg(tid, "error", result, None)
            return {"worker": self.options.worker_id, **result}
        try:
            desk = self._desk_for(row)
        except NoFreeDesktop:  # DBOS gave us more legs than free desktops: another worker's
            return self._hand_back(payload, str(payload.get("action", "run")))
        server = desk.server if desk is not None else str(row.desktop)
        kind = desk.kind if desk is not None else str(row.kind)
        try:
            db.pin(tid, server, kind, self.options.worker_id)
            result = self._drive(payload, row, desk, server, db)
        finally:
            if desk is not None:
                self.pool.give_back(desk)
        db.finish_leg(tid, result["status"], result, None)  # the asker builds the report
        if result["status"] == RunStatus.INTERRUPTED.value and self.draining.is_set():
            return self._hand_back(payload, "resume")
        return {"worker": self.options.worker_id, **result}

    def _drive(
        self, payload: dict[str, Any], row: RunRow, desk: Desk | None, server: str, db: FleetDb
    ) -> dict[str, Any]:
        """The leg on its desktop (``desk``, else ``server`` elsewhere: a VNC address, an RDP
        host through a bridge of ours); its result as JSON (a failure: one line, the run stays
        resumable)."""
        o, tid = self.options, row.thread_id
        try:
            store = RunStore(o.database, conn=db.conn)  # on the leg's own session
            # this host's run folder is a cache: what the run did on other hosts comes first
            fetched = store.fetch_run(o.runs_dir, tid)
            if fetched.files:
                log.info("run %s: fetched %d files (%d bytes)", tid, fetched.files, fetched.bytes)
            with reach_leg(desk, server, o.rdp_settings, o.runs_dir / tid, o.worker_id) as at:
                rdp = (at.target, at.reached) if at.target and at.reached else None
                request = LegRequest(
                    payload,
                    row.spec,
                    at.server,
                    at.password,
                    o.runs_dir,
                    o.database,
                    rdp=rdp,
                    store=store,
                )
                # the leg's video reaches the database as it grows, whole at the leg's end
                with store.streaming_video(o.runs_dir / tid, tid):
                    leg = drive_leg(request, lambda a: self._running(tid, a))
                return result_json(leg)
        except VncUseError as exc:
            return {"status": "error", "thread_id": tid, "error": str(exc)}
        except Exception as exc:  # a bug: the run stays resumable, the asker sees one line
            log.exception("leg of run %s failed", tid)
            error = f"internal error on worker {o.worker_id}: {exc!r}"
            return {"status": "error", "thread_id": tid, "error": error}

    def _eval_leg(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A task of ``eval --fleet``: setup, agent and check on a desktop of ours."""
        from vnc_use.fleet.evaluate import run_eval_leg

        tid = str(payload["thread_id"])
        outcome: dict[str, Any] = {"interrupted": True}
        desk = None
        if not self.draining.is_set():
            with contextlib.suppress(NoFreeDesktop):  # none: another worker's, with a free one
                desk = self.pool.take(tid, timeout=FREE_DESK_WAIT)
        if desk is not None:
            try:
                desktop = desk.fresh()
                stopper = _EvalStop()
                self._running(tid, stopper)
                try:
                    outcome = run_eval_leg(
                        payload, desktop, self.options.runs_dir, self.options.worker_id, stopper
                    )
                finally:
                    self._running(tid, None)
            finally:
                self.pool.give_back(desk)
        if outcome.get("interrupted"):  # drained, or no free desktop: another worker does it
            assert self.enqueuer is not None
            label = str(payload.get("label") or self.options.labels[0])
            wid = self.enqueuer.enqueue(label, _next_back(queue.current_workflow_id()), payload)
            return {"handed_back": wid}
        return outcome

    def _unreachable(self, db: FleetDb, row: RunRow) -> str | None:
        """Why this worker cannot continue ``row`` (None: it can): its desktop is a local one
        of another worker (or one this worker no longer has), reachable from that host only."""
        if row.kind != "local" or (
            row.worker_id == self.options.worker_id and self.pool.owns(str(row.desktop))
        ):
            return None
        me, owner = self.options.worker_id, row.worker_id or "?"
        state = {str(w["worker_id"]): str(w["state"]) for w in db.workers()}.get(owner)
        if owner == me:
            why = "which restarted without it"
        elif state == "alive":
            why = f"which worker {me}, taking this leg, cannot reach"
        else:  # dead, stopped, or draining (its local desktops stop with it)
            why = "which is gone" if state != "draining" else "which is stopping"
        return (
            f"run {row.thread_id}'s desktop was a local desktop of worker {owner}, {why}; "
            f"continue it on another desktop: vnc-use resume {row.thread_id} --fleet URL "
            "--vnc ADDR"
        )

    def _desk_for(self, row: RunRow) -> Desk | None:
        """The run's desktop if it is one of ours (waiting until it is free), a free one of
        ours for a run not pinned yet (:class:`NoFreeDesktop` if none comes free within
        :data:`FREE_DESK_WAIT`); None for another host's desktop."""
        if row.desktop is None:
            return self.pool.take(row.thread_id, timeout=FREE_DESK_WAIT)
        if self.pool.owns(row.desktop):
            return self.pool.take(row.thread_id, row.desktop)
        return None

    def _running(self, tid: str, agent: Stoppable | None) -> None:
        with self._lock:
            if agent is None:
                self._agents.pop(tid, None)
            else:
                self._agents[tid] = agent
                if self.draining.is_set():
                    agent.request_stop()

    def _hand_back(self, payload: dict[str, Any], action: str) -> dict[str, Any]:
        """Enqueue the leg's continuation: a draining worker's on the label's queue (for
        another worker); one that found no free desktop where
        :func:`~vnc_use.fleet.route.leg_worker` says (a run pinned to a busy desktop of ours:
        our own queue; any other: the label's)."""
        assert self.enqueuer is not None
        db = FleetDb(self.options.database, application_name="vnc-use fleet leg")
        try:
            tid = str(payload["thread_id"])
            row = db.run(tid)
            label = row.label if row is not None else self.options.labels[0]
            worker = None
            if row is not None and not self.draining.is_set():
                worker = leg_worker(db, row)
            number = db.next_leg(tid, "queued")
        finally:
            db.close()
        nxt = {**payload, "action": action}
        wid = self.enqueuer.enqueue(label, f"{tid}-leg{number}", nxt, worker)
        return {"status": "queued", "thread_id": tid, "handed_back": wid}


def check_worker_id(worker_id: str) -> None:
    """A worker id names its database sessions: letters, digits, '.', '_', '-' (at most 40)."""
    if not _WORKER_ID.match(worker_id):
        raise ConfigError(
            f"worker id {worker_id!r}: use letters, digits, '.', '_' and '-' (at most 40), e.g. "
            "--worker-id host-a"
        )


def _next_back(workflow_id: str) -> str:
    """The id of a leg's continuation handed back: ``<id>-back<N+1>``."""
    base, n = workflow_id, 0
    found = re.match(r"^(.*)-back(\d*)$", workflow_id)
    if found:
        base, n = found.group(1), int(found.group(2) or 1)
    return f"{base}-back{n + 1}"


def _set_up_storage(database: str, runs_dir: Path) -> None:
    """Create the checkpoint and journal tables once, before any leg: legs starting together
    would race on LangGraph's migrations."""
    from vnc_use.store.storage import open_storage

    storage = open_storage(database, runs_dir)
    try:
        _ = storage.checkpointer
        storage.journal("-")
    finally:
        storage.close()


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


class _EvalStop:
    """Stands for an eval task's agent among the running legs: a drain stops it."""

    def __init__(self) -> None:
        self.requested = False
        self.runner: Any = None

    def request_stop(self) -> None:
        self.requested = True
        if self.runner is not None:
            self.runner.stop()
