"""A fleet of desktop hosts on one PostgreSQL: workers take run legs from DBOS queues.

- :mod:`vnc_use.fleet.db`: the fleet's own tables (workers and their heartbeats, runs and
  their outcomes and reports) and the advisory lock that proves a worker is alive;
- :mod:`vnc_use.fleet.blobs`: each run folder's content (screenshots stored once by their
  hash, the record, the events, the video) in the database: a host's runs folder is a cache,
  a leg on another host fetches what it lacks, a report is built wherever it is asked for;
- :mod:`vnc_use.fleet.queue`: the DBOS side (queue names, the leg workflow, enqueueing from
  any machine with :class:`dbos.DBOSClient`); the only importer of ``dbos``;
- :mod:`vnc_use.fleet.worker`: ``vnc-use worker``: desktops, legs, heartbeats, dead-worker
  recovery, draining on SIGTERM;
- :mod:`vnc_use.fleet.submit`: ``run/approve/deny/resume --fleet``: enqueue a leg, wait;
- :mod:`vnc_use.fleet.executor`: :class:`FleetExecutor`, the fleet behind the verbs every
  executor answers (:mod:`vnc_use.runs.executor`);
- :mod:`vnc_use.fleet.status`: ``vnc-use fleet status``.

The hosts share nothing but the database. A submitter needs the database URL and nothing else:
model keys and desktop passwords live in the workers' environment; the outcome, the progress
and the report come back through the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnc_use.fleet.executor import FleetExecutor

__all__ = ["FleetExecutor"]


def __getattr__(name: str) -> Any:
    if name == "FleetExecutor":  # the fleet as an Executor (vnc_use.runs.executor); DBOS on use
        from vnc_use.fleet.executor import FleetExecutor

        return FleetExecutor
    raise AttributeError(f"module 'vnc_use.fleet' has no attribute {name!r}")
