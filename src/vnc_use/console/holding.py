"""A person at the console taking a run's desktop over ("Take over") and handing it back
("Hand back"), through the run's executor as ``vnc-use takeover`` / ``handback`` do.

**Who holds the run** is a browser: the console gives each browser a random id in a cookie of
its own (``vnc_use_holder``: HttpOnly, SameSite=Strict, made on the first page or verb that
needs it). The hold names the person ``console <10 hex digits>``, the start of the id's
SHA-256, so the record says which browser held it without keeping the id. Every tab of that
browser is the holder; another browser (or a script without that cookie, with the same token)
is somebody else: its live view stays view-only, and its ``handback`` is refused while this
browser holds the run (a takeover with ``force`` takes it, as ``--force`` does on the CLI).

A takeover waits until the run has paused at its next step boundary (the executor's
``takeover``): it runs in a thread of its own, not in the console's event loop.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.errors import ConfigError
from vnc_use.store.holds import Hold

__all__ = ["HOLDER_COOKIE", "FleetEvents", "Holding", "holder_name", "new_holder_id"]

HOLDER_COOKIE = "vnc_use_holder"


def new_holder_id() -> str:
    """A browser's new holder id (192 random bits)."""
    return secrets.token_urlsafe(24)


def holder_name(holder_id: str) -> str:
    """The name a hold gives the browser whose cookie is ``holder_id``."""
    return "console " + hashlib.sha256(holder_id.encode()).hexdigest()[:10]


class Holding:
    """The person verbs of the console's runs (``runs_dir`` here, or a fleet's ``fleet``)."""

    def __init__(self, runs_dir: Path, fleet: str | None = None) -> None:
        self.runs_dir = runs_dir
        self.fleet = fleet

    def hold(self, thread_id: str) -> Hold | None:
        """The hold a person has on the run's desktop now, if any (None also when the run has
        no desktop to take over)."""
        try:
            if self.fleet:
                from vnc_use.fleet.db import FleetDb
                from vnc_use.fleet.takeover import fleet_holds

                db = FleetDb(self.fleet, application_name="vnc-use console")
                try:
                    row = db.run(thread_id)
                finally:
                    db.close()
                if row is None or not row.desktop:
                    return None
                with fleet_holds(self.fleet, row) as (_, holds):
                    return holds.held_for(thread_id)
            from vnc_use.runs.open import open_run_storage
            from vnc_use.runs.takeover import desktop_of

            key = desktop_of(self.runs_dir, thread_id)
            storage = open_run_storage(config.database_url(), self.runs_dir)
            try:
                return storage.holds(key).held_for(thread_id)
            finally:
                storage.close()
        except (ConfigError, OSError):
            return None

    def take(self, thread_id: str, person: str, force: bool) -> Any:
        """``person`` takes the run over (the executor's ``takeover``): returns once the run
        waits for them; a refusal is a :class:`ConfigError` (one line)."""
        if self.fleet:
            from vnc_use.fleet.executor import FleetExecutor

            return FleetExecutor(self.fleet).takeover(thread_id, person, force=force)
        from vnc_use.runs.executor import LocalExecutor

        with LocalExecutor(self.runs_dir, checkpointer=config.database_url()) as executor:
            return executor.takeover(thread_id, person, force=force)

    def check_holder(self, thread_id: str, person: str) -> None:
        """Refuse in one line a hand-back by ``person`` of a run someone else holds."""
        hold = self.hold(thread_id)
        if hold is not None and hold.holder and hold.holder != person:
            raise ConfigError(
                f"run {thread_id!r} is held by {hold.describe()}, not by you: only they hand it "
                'back (or take it first: Take over with {"force": true})'
            )


class FleetEvents:
    """A fleet run's events in the fleet's database (where its worker's next leg reads them:
    the person's clicks and key counts a hand-back tells the model); :meth:`close` when done."""

    def __init__(self, url: str, thread_id: str) -> None:
        from vnc_use.fleet.blobs import RunStore

        self.thread_id = thread_id
        self.store = RunStore(url, application_name="vnc-use console")
        self._lock = threading.Lock()

    def event(self, event: str, /, **fields: Any) -> dict[str, Any]:
        record = {"ts": round(time.time(), 3), "event": event, **fields}
        with self._lock:
            self.store.put_event(self.thread_id, json.dumps(record))
        return record

    def close(self) -> None:
        self.store.close()
