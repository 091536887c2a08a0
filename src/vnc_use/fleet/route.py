"""Which queue a run's next leg goes to: the one place that chooses.

A run pinned to a desktop a LIVE worker owns (state ``alive``; the desktop among the keys of
its row's ``desktops``: a VNC address, ``rdp://HOST:PORT``, a local desktop's address) goes to
that worker's own queue (:func:`~vnc_use.fleet.queue.worker_queue_name`): only it reaches a
local desktop, and only it knows when one of its VNC/RDP desktops is free. Any other run (not
pinned yet, or pinned to a desktop no live worker owns: its worker died, drains or stopped)
goes to its label's queue, where any worker of the label continues it (a VNC/RDP desktop from
outside; a local desktop whose worker is gone: the run ends ``error`` in one line naming
``resume --fleet URL --vnc ADDR``).

A local desktop's address (``127.0.0.1::5901``) may be the same on two hosts: its owner is
the run's own worker (the one whose leg pinned it), never another one with the same address.
"""

from __future__ import annotations

from vnc_use.fleet.db import FleetDb, RunRow

__all__ = ["leg_worker"]


def leg_worker(db: FleetDb, row: RunRow) -> str | None:
    """The live worker whose own queue takes ``row``'s next leg; None: its label's queue."""
    if row.desktop is None:
        return None
    owners = [
        str(w["worker_id"])
        for w in db.workers()
        if w["state"] == "alive" and row.desktop in (w["desktops"] or {})
    ]
    if row.kind == "local":
        return row.worker_id if row.worker_id in owners else None
    if row.worker_id in owners:  # the one that drove it last, if two name it alike
        return row.worker_id
    return owners[0] if owners else None
