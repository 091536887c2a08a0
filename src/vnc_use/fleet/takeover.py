"""``takeover --fleet URL ID`` and ``handback --fleet URL ID``: a person's hold on a fleet
run's desktop, kept where the run's worker leg checks it.

The hold (:mod:`vnc_use.store.holds`) is written into the fleet's PostgreSQL journal store,
keyed by the desktop the run is pinned to (its lease's key, as the worker's leg computes it).
A leg under way finds it at its next step boundary (``AgentContext.fence``) and pauses itself:
it ends ``awaiting_human`` and its worker is free (a run waiting for a person holds no worker,
like a run waiting for approval). A run no leg acts for is paused here, in its checkpoint.
A hand-back frees the hold and puts the run's next leg on the queue (as ``approve --fleet``
does); that leg continues from a fresh screenshot and tells the model what the person did.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from vnc_use.errors import ConfigError
from vnc_use.fleet.db import RunRow
from vnc_use.fleet.desktops import RDP_PREFIX
from vnc_use.fleet.submit import UNDER_WAY, Submitter, state_of_row
from vnc_use.runs import rules
from vnc_use.status import RunStatus
from vnc_use.store.holds import DesktopHolds, Hold
from vnc_use.store.storage import Storage, open_storage

__all__ = ["check_holder", "desktop_key", "fleet_holds", "take_over"]

POLL_S = 0.2
PAUSABLE = (RunStatus.INTERRUPTED.value, RunStatus.AWAITING_HUMAN.value)
"""States (the run rules') of a run no leg acts for that a takeover pauses here."""


def desktop_key(row: RunRow) -> str:
    """The key of the run's desktop lease, as its worker's leg computes it: the VNC address
    it is pinned to, or an RDP host as ``host::port``; one line for a run not pinned yet."""
    if not row.desktop:
        raise ConfigError(
            f"run {row.thread_id!r} has no desktop yet (its first leg has not started): take "
            "it over once it runs"
        )
    if row.desktop.startswith(RDP_PREFIX):
        from vnc_use.desktops.rdp import RdpTarget

        target = RdpTarget.parse(row.desktop[len(RDP_PREFIX) :])
        host = f"[{target.host}]" if ":" in target.host else target.host
        return f"{host}::{target.port}"
    return row.desktop


@contextmanager
def fleet_holds(url: str, row: RunRow) -> Iterator[tuple[Storage, DesktopHolds]]:
    """The fleet's storage (PostgreSQL: no runs folder is used) and the run desktop's holds."""
    key = desktop_key(row)
    with tempfile.TemporaryDirectory() as nowhere:
        storage = open_storage(url, nowhere)
        try:
            yield storage, storage.holds(key)
        finally:
            storage.close()


def _human(hold: Hold) -> dict[str, Any]:
    return {"asked_by": "person", "holder": hold.holder, "since": hold.since, "epoch": hold.epoch}


def take_over(
    fleet: Submitter, url: str, thread_id: str, person: str, *, force: bool, timeout: float
) -> dict[str, Any]:
    """``person`` takes fleet run ``thread_id``'s desktop; returns the run's outcome once it
    waits for them (``awaiting_human``). A leg under way pauses itself at its next step
    boundary (this waits up to ``timeout`` for it); a run no leg acts for is paused here."""
    row = fleet.run(thread_id)
    rules.check("takeover", thread_id, state_of_row(row))
    with fleet_holds(url, row) as (storage, holds):
        held = holds.held_for(thread_id)
        holds.check_take(thread_id, force)
        hold = holds.take(thread_id, person)
        deadline = time.monotonic() + timeout
        while True:
            row = fleet.run(thread_id)
            result = row.result or {}
            if (
                row.status == RunStatus.AWAITING_HUMAN.value
                and (result.get("human") or {}).get("epoch") == hold.epoch
            ):
                return _with_desktop({**result, "status": row.status}, row)
            if row.status not in UNDER_WAY:
                break
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"run {thread_id!r} did not reach a step boundary within {timeout:g} s; it "
                    "pauses at its next one and the desktop is yours then (vnc-use runs --fleet "
                    "URL shows it)"
                )
            time.sleep(POLL_S)
        if state_of_row(row) not in PAUSABLE:  # it ended, or waits for an approval
            holds.free(thread_id, hold.holder)  # nothing to hold for it
            raise ConfigError(
                f"run {thread_id!r} stopped ({row.status}) before its next step: there is "
                "nothing to take over"
            )
        return _with_desktop(_pause(fleet, storage, row, hold, held), row)


def _with_desktop(found: dict[str, Any], row: RunRow) -> dict[str, Any]:
    """The outcome, its ``human`` naming the desktop the person uses (a VNC viewer on it)."""
    human = dict(found.get("human") or {})
    human["desktop"] = row.desktop
    return {**found, "human": human}


def _pause(
    fleet: Submitter, storage: Storage, row: RunRow, hold: Hold, held: Hold | None
) -> dict[str, Any]:
    """Write the pause of a run no leg acts for: its checkpoint, its row, its events."""
    from vnc_use.agent.graph import build_graph
    from vnc_use.agent.outcome import run_outcome
    from vnc_use.fleet.leg import result_json

    tid = row.thread_id
    graph = build_graph().compile(checkpointer=storage.checkpointer)
    config: Any = {"configurable": {"thread_id": tid}}
    update = {"status": RunStatus.AWAITING_HUMAN.value, "done": True, "human": _human(hold)}
    graph.update_state(config, update, as_node="act")
    snap = graph.get_state(config)
    run_dir = str((row.result or {}).get("run_dir") or "")
    result = result_json(run_outcome(snap.values, snap.next, [], thread_id=tid, run_dir=run_dir))
    if row.worker_id:
        result["worker"] = row.worker_id
    taken = {"forced_from": held.holder} if held is not None else {}
    event = {"ts": time.time(), "event": "taken_over", "node": "takeover", **_human(hold), **taken}
    fleet.store.put_event(tid, json.dumps(event))
    fleet.db.finish_leg(tid, result["status"], result, None)
    return result


def check_holder(holds: DesktopHolds, thread_id: str, person: str | None) -> Hold | None:
    """The person's hold of the run's desktop; refused in one line when ``person`` is not
    its holder (only the holder hands it back, or takes it first with ``--force``)."""
    hold = holds.held_for(thread_id)
    if hold is not None and person and hold.holder and person != hold.holder:
        raise ConfigError(
            f"run {thread_id!r} is held by {hold.describe()}, not by {person}: only they "
            f"hand it back (or take it first: vnc-use takeover --fleet URL {thread_id} --force)"
        )
    return hold
