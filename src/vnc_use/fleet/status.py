"""``vnc-use fleet status``: the workers (each with its own queue's depth: the legs of runs
pinned to its desktops), their desktops, the labels' queues, the runs waiting."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vnc_use.fleet.db import DEAD_AFTER, FleetDb
from vnc_use.fleet.queue import Enqueuer, worker_queue_name
from vnc_use.status import RunStatus

__all__ = ["fleet_status"]


def fleet_status(url: str) -> dict[str, Any]:
    """What the fleet looks like now (plain JSON)."""
    db = FleetDb(url, application_name="vnc-use fleet status")
    enqueuer = Enqueuer(url)
    try:
        workers = []
        for row in db.workers():
            state = str(row["state"])
            if state in ("alive", "draining") and (
                row["age"] > DEAD_AFTER or db.worker_lock_free(row["worker_id"])
            ):
                state = "dead"  # not yet declared by a live worker, but gone
            workers.append(
                {
                    "worker_id": row["worker_id"],
                    "state": state,
                    "host": row["host"],
                    "labels": row["labels"],
                    "desktops": row["desktops"] if state != "dead" else {},
                    "heartbeat_age": round(float(row["age"]), 1),
                    "legs_done": row["legs_done"],
                }
            )
        legs = enqueuer.pending()
        queued = Counter(leg["queue"] for leg in legs if leg["status"] == "ENQUEUED")
        running = Counter(leg["queue"] for leg in legs if leg["status"] == "PENDING")
        for w in workers:  # its own queue: legs of runs pinned to its desktops
            name = worker_queue_name(str(w["worker_id"]))
            w["queue"] = {"queued": queued.pop(name, 0), "running": running.pop(name, 0)}
        queues = {
            str(name).removeprefix("vnc-use-"): {"queued": queued[name], "running": running[name]}
            for name in sorted(set(queued) | set(running))
        }
        waiting = [
            {
                "thread_id": r.thread_id,
                "label": r.label,
                "task": r.task,
                "waiting_on": ((r.result or {}).get("pending_call") or {}).get("name", ""),
            }
            for r in db.runs(limit=1000)
            if r.status == RunStatus.AWAITING_APPROVAL.value
        ]
        return {"workers": workers, "queues": queues, "awaiting_approval": waiting}
    finally:
        enqueuer.destroy()
        db.close()
