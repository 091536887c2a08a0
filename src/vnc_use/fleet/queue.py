"""The DBOS side of the fleet (the only module that imports ``dbos``).

Each label is a DBOS queue (``vnc-use-<label>``) in the database's ``dbos`` schema. A leg is
one DBOS workflow (:data:`LEG_WORKFLOW`) whose input is a small JSON object (the thread id,
what to do: ``run``, ``approve``, ``deny`` or ``resume``, and for a first leg the task); the
run's spec is in the fleet's runs table. Its workflow id is ``<thread>-leg<N>``, so a leg is
enqueued once however often a submitter retries.

A worker is a DBOS process whose executor id is its ``--worker-id``: it listens to its labels'
queues and to its own queue (:func:`worker_queue_name`, ``vnc-use-worker:<id>``, with
``worker_concurrency`` its desktop count: only it takes from it), where the legs of runs pinned
to one of its desktops go while it lives (:mod:`vnc_use.fleet.route`). Every leg's input names
its label (:meth:`Enqueuer.enqueue` adds it), so a leg left on a dead or stopped worker's queue
goes back to its label's queue (:meth:`Enqueuer.move_to_labels`, DBOS's public
``resume_workflow`` onto another queue). DBOS keeps a label queue's ``worker_concurrency`` in
the database, one value for every worker of the label: it is the most desktops any live
worker of the label owns (:func:`register_queues`, never lowered while a bigger worker lives),
and a worker DBOS hands more legs than it has free desktops gives the extra ones back to the
queue (:mod:`vnc_use.fleet.worker`). Every session DBOS opens in a worker is named after the worker
(``vnc-use worker <id>: dbos``) so a worker that declares it dead can end them.

When a worker dies, another one hands its PENDING legs back to their queues with DBOS's
workflow recovery (:func:`recover`): ``DBOS._recover_pending_workflows``, the function DBOS's
documented "Workflow Recovery" admin endpoint (``/dbos-workflow-recovery``, self-hosting
guide) runs; this DBOS version ships no admin server, and has no public function that does the
same (``DBOS.resume_workflow`` re-enqueues one workflow whoever runs it now, so a leg another
worker already took back would run twice; recovery re-enqueues only a workflow still PENDING
on the dead executor). It is a private name: pyproject.toml pins ``dbos`` to the 3.4 line so
an upgrade that moves it is a conscious step, and :func:`recover` fails in one line if it is
gone. A leg that is recovered starts again from the top and continues its run from the run's
checkpoint (:mod:`vnc_use.fleet.worker`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from vnc_use.errors import ConfigError

__all__ = [
    "LEG_WORKFLOW",
    "Enqueuer",
    "current_workflow_id",
    "launch_worker",
    "queue_name",
    "recover",
    "register_queues",
    "shutdown",
    "worker_queue_name",
]

LEG_WORKFLOW = "vnc_use_leg"
APP_NAME = "vnc-use-fleet"
APP_VERSION = "vnc-use-fleet-1"
"""One application version for every worker, so any of them may recover another's legs."""
POLL_SECONDS = 0.2
"""How often a worker looks for a leg on each of its queues."""

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_INSTALL_HINT = "install the fleet extra: pip install 'vnc-use[fleet]'"


def queue_name(label: str) -> str:
    """The DBOS queue of a label."""
    if not _LABEL.match(label):
        raise ConfigError(
            f"label {label!r}: use letters, digits, '.', '_' and '-' (at most 63), e.g. "
            "linux-chromium"
        )
    return f"vnc-use-{label}"


WORKER_QUEUE_PREFIX = "vnc-use-worker:"
"""A worker's own queue: ``vnc-use-worker:<id>`` (no label has a ':', so no label's queue
is ever named so)."""


def worker_queue_name(worker_id: str) -> str:
    """The DBOS queue only worker ``worker_id`` takes legs from (ids are checked by
    :func:`vnc_use.fleet.worker.check_worker_id`)."""
    return f"{WORKER_QUEUE_PREFIX}{worker_id}"


def _dbos() -> Any:
    try:
        import dbos
    except ImportError:
        raise ConfigError(f"the fleet needs DBOS: {_INSTALL_HINT}") from None
    return dbos


def _sqlalchemy_url(url: str) -> str:
    """DBOS takes a SQLAlchemy URL; psycopg 3 is the driver vnc-use already has."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _session_name(name: str) -> str:
    """The ``application_name`` of DBOS's sessions in this process (a worker's tag first)."""
    from vnc_use.store.postgres import session_name

    return session_name(name) or name


def launch_worker(
    url: str,
    worker_id: str,
    labels: list[str],
    slots: int,
    leg: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Start DBOS in this process as executor ``worker_id``, taking legs of ``labels`` and of
    its own queue (at most ``slots`` at once from it) into ``leg`` (how many at once from a
    label's: :func:`register_queues`). DBOS recovers this executor's own legs left PENDING by
    an earlier life of the same worker id."""
    _recovery()  # a DBOS without it fails here, at the start, not at the first death
    dbos = _dbos()
    logging.getLogger("dbos").setLevel(logging.WARNING)
    dbos.DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": _sqlalchemy_url(url),
            "executor_id": worker_id,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
            "sys_db_pool_size": max(4, slots + 4),
            "notification_listener_polling_interval_sec": 0.2,
            # every session named after the worker, so a fence finds them (db.FleetDb.fence)
            "db_engine_kwargs": {"connect_args": {"application_name": _session_name("dbos")}},
        }
    )

    def vnc_use_leg(payload: dict[str, Any]) -> dict[str, Any]:
        return leg(payload)

    dbos.DBOS.workflow(name=LEG_WORKFLOW, max_recovery_attempts=20)(vnc_use_leg)
    names = [queue_name(label) for label in labels]
    dbos.DBOS.listen_queues([*names, worker_queue_name(worker_id)])
    dbos.DBOS.launch()
    dbos.DBOS.register_queue(  # only this worker takes from it: its own desktop count is right
        worker_queue_name(worker_id),
        worker_concurrency=max(1, slots),
        polling_interval_sec=POLL_SECONDS,
        on_conflict="always_update",
    )


def register_queues(concurrency: dict[str, int]) -> None:
    """Set each label's ``worker_concurrency`` (the legs one worker may take from it at
    once), creating its queue if need be (after :func:`launch_worker`)."""
    dbos = _dbos()
    for label, count in concurrency.items():
        dbos.DBOS.register_queue(
            queue_name(label),
            worker_concurrency=max(1, count),
            polling_interval_sec=POLL_SECONDS,
            on_conflict="always_update",
        )


def recover(worker_id: str) -> int:
    """Hand the PENDING legs of dead executor ``worker_id`` back to their queues (DBOS's
    workflow recovery, see the module's doc); how many."""
    return len(_recovery()([worker_id]))


def _recovery() -> Callable[[list[str]], list[Any]]:
    """DBOS's recovery function (see the module's doc), or one line saying it is missing."""
    dbos = _dbos()
    recover_pending = getattr(dbos.DBOS, "_recover_pending_workflows", None)
    if recover_pending is None:
        version = getattr(dbos, "__version__", "this version")
        raise ConfigError(
            f"DBOS {version} has no workflow recovery (DBOS._recover_pending_workflows) that "
            "vnc-use's fleet needs: install the version pyproject.toml pins (pip install "
            "'vnc-use[fleet]')"
        )
    return recover_pending  # type: ignore[no-any-return]


def current_workflow_id() -> str:
    """The id of the leg (DBOS workflow) running in this thread."""
    return str(_dbos().DBOS.workflow_id)


def shutdown() -> None:
    """Stop DBOS in this process (legs still running stay PENDING for recovery)."""
    _dbos().DBOS.destroy(workflow_completion_timeout_sec=0)


def _require_queues(url: str) -> None:
    """A database no worker has started on has no queues: say so in one line."""
    from vnc_use.store import postgres

    conn = postgres.connect(url, application_name="vnc-use fleet client")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('dbos.workflow_status') IS NOT NULL AS ready")
            row = cur.fetchone()
    finally:
        conn.close()
    if not (row and row["ready"]):
        raise ConfigError(
            f"no worker has ever started on {postgres.redact(url)}: the fleet has no queues "
            "yet; start one with 'vnc-use worker' (see docs/fleet.md)"
        )


class Enqueuer:
    """Enqueue legs and wait for their outcome from any machine (a ``DBOSClient``)."""

    def __init__(self, url: str) -> None:
        dbos = _dbos()
        _require_queues(url)
        from sqlalchemy import create_engine

        self._engine = create_engine(
            _sqlalchemy_url(url),
            connect_args={
                "application_name": _session_name("vnc-use fleet client"),
                "connect_timeout": 10,
            },
            pool_size=2,
            max_overflow=0,
            pool_pre_ping=True,
        )
        self._client = dbos.DBOSClient(
            system_database_engine=self._engine, application_name=APP_NAME
        )

    def enqueue(
        self, label: str, workflow_id: str, payload: dict[str, Any], worker: str | None = None
    ) -> str:
        """Put a leg of ``label`` on its label's queue, or on worker ``worker``'s own queue
        (the live owner of the run's desktop); the leg's input names its label either way."""
        options: Any = {
            "workflow_name": LEG_WORKFLOW,
            "queue_name": queue_name(label) if worker is None else worker_queue_name(worker),
            "workflow_id": workflow_id,
            "app_version": APP_VERSION,
        }
        leg = {**payload, "label": label}
        return str(self._client.enqueue(options, leg).get_workflow_id())

    def move_to_labels(self, worker_id: str, label_of: Callable[[dict[str, Any]], str]) -> int:
        """Move every leg waiting (ENQUEUED) on the queue of worker ``worker_id`` (dead or
        stopped: it takes no more) to its label's queue, ``label_of`` its input when the input
        names none (a leg enqueued before legs named their label); how many. A leg recovered
        from that worker (DBOS puts it back on the queue it came from) is moved too: call this
        after :func:`recover`. Only for a worker that takes no legs: DBOS's ``resume_workflow``
        enqueues a leg whatever its state short of finished."""
        found = self._client.list_workflows(
            status=["ENQUEUED"],
            name=LEG_WORKFLOW,
            queue_name=worker_queue_name(worker_id),
            load_output=False,
        )
        for leg in found:
            args: tuple[Any, ...] = tuple((leg.input or {}).get("args") or ({},))
            payload = dict(args[0]) if args and isinstance(args[0], dict) else {}
            label = str(payload.get("label") or label_of(payload))
            self._client.resume_workflow(leg.workflow_id, queue_name=queue_name(label))
        return len(found)

    def result(self, workflow_id: str) -> dict[str, Any]:
        """The leg's outcome, waiting until it has one (a recovered leg's, after its retry)."""
        value = self._client.retrieve_workflow(workflow_id).get_result(polling_interval_sec=0.2)
        return dict(value) if isinstance(value, dict) else {}

    def outcome(self, workflow_id: str) -> dict[str, Any]:
        """The outcome of a leg, following its hand-backs to the leg that ran."""
        while True:
            found = self.result(workflow_id)
            handed = found.get("handed_back")
            if not handed:
                return found
            workflow_id = str(handed)

    def pending(
        self, label: str | None = None, executors: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Legs queued or running (of those executors; of ``label``'s queue), oldest first:
        workflow id, status, queue (a label's queue, or a worker's:
        :func:`worker_queue_name`), executor."""
        names = None if label is None else queue_name(label)
        found = self._client.list_workflows(
            status=["ENQUEUED", "PENDING"],
            name=LEG_WORKFLOW,
            queue_name=names,
            executor_id=executors,
            load_input=False,
            load_output=False,
        )
        return [
            {
                "workflow_id": w.workflow_id,
                "status": w.status,
                "queue": w.queue_name,
                "executor": w.executor_id,
            }
            for w in found
        ]

    def worker_concurrency(self, label: str) -> int | None:
        """How many legs of ``label`` one worker may take at once (None: no queue yet)."""
        found = self._client.retrieve_queue(queue_name(label))
        return None if found is None else found.worker_concurrency

    def destroy(self) -> None:
        self._client.destroy()
        self._engine.dispose()
