"""A person's hold on a desktop: who took it over, for which run, since when, and its epoch.

A run's lease (:mod:`vnc_use.store.lease`) lives as long as the process that acts; a person
who takes a run over (``vnc-use takeover``) holds its desktop after that process has exited.
The hold is kept durably next to the action journal (the same table, in SQLite or
PostgreSQL), under a thread of its own per desktop (``@desktop:<host>::<port>``): one record
per change, the last one current. Every change moves the desktop's **epoch** on:

- a takeover writes ``held`` (epoch + 1): a leg that began at an older epoch finds, at its
  next step boundary, that its desktop is no longer its own, and pauses instead of acting or
  looking (a stale holder's writes are refused);
- a hand-back writes ``free`` (epoch + 1) and starts the run's next leg at that epoch.

While a desktop is held, no other run takes it (:meth:`DesktopHolds.held_for_other`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from vnc_use.errors import ConfigError, VncUseError
from vnc_use.store.journal import JournalStore

__all__ = ["DesktopHolds", "DesktopMovedOn", "Hold", "leg_fence", "since_text"]

HOLD_KEY = "hold"


@dataclass(frozen=True)
class Hold:
    """One change of a desktop's hold: ``held`` by ``holder`` for run ``run``, or ``free``."""

    epoch: int
    state: str
    run: str
    holder: str | None = None
    since: float | None = None

    @property
    def held(self) -> bool:
        return self.state == "held"

    def describe(self) -> str:
        """``NAME since HH:MM:SS UTC (N s ago)``."""
        return f"{self.holder or 'a person'} since {since_text(self.since)}"


def since_text(since: float | None) -> str:
    """A moment as ``HH:MM:SS UTC (N s ago)``."""
    if since is None:
        return "an unknown time"
    clock = time.strftime("%H:%M:%S UTC", time.gmtime(since))
    return f"{clock} ({max(0.0, time.time() - since):.0f} s ago)"


class DesktopHolds:
    """The hold records of one desktop (``desktop``: its lease's key,
    :attr:`vnc_use.store.lease.Lease.desktop`)."""

    def __init__(self, store: JournalStore, desktop: str) -> None:
        self.store = store
        self.desktop = desktop
        self.thread = f"@desktop:{self.desktop}"

    def current(self) -> Hold | None:
        """The last change, or None when the desktop was never taken over."""
        records = self.store.load(self.thread, HOLD_KEY)
        if not records:
            return None
        data: Any = json.loads(records[-1])
        return Hold(**{k: data.get(k) for k in ("epoch", "state", "run", "holder", "since")})

    def epoch(self) -> int:
        current = self.current()
        return current.epoch if current is not None else 0

    def _write(self, hold: Hold) -> Hold:
        self.store.append(self.thread, HOLD_KEY, json.dumps(asdict(hold)))
        return hold

    def take(self, run: str, holder: str) -> Hold:
        """``holder`` takes the desktop for run ``run`` (a new epoch)."""
        return self._write(Hold(self.epoch() + 1, "held", run, holder, time.time()))

    def free(self, run: str, holder: str | None = None) -> Hold:
        """The desktop handed back to run ``run`` (a new epoch)."""
        return self._write(Hold(self.epoch() + 1, "free", run, holder, time.time()))

    def held_for(self, run: str) -> Hold | None:
        """The hold a person has on the desktop for run ``run``, if any."""
        current = self.current()
        return current if current is not None and current.held and current.run == run else None

    def held_for_other(self, run: str) -> Hold | None:
        """The hold a person has on the desktop for another run than ``run``, if any."""
        current = self.current()
        return current if current is not None and current.held and current.run != run else None

    def check_take(self, run: str, force: bool) -> None:
        """Refuse, in one line, taking ``run`` over while a person holds it (unless
        ``force``) or holds the desktop for another run."""
        held = self.held_for(run)
        if held is not None and not force:
            raise ConfigError(
                f"run {run!r} is held by {held.describe()}; --force takes it from them"
            )
        other = self.held_for_other(run)
        if other is not None:
            raise ConfigError(
                f"the desktop {self.desktop} is held by {other.describe()} for run {other.run}"
            )


class DesktopMovedOn(VncUseError):
    """A leg found its desktop's epoch moved on without its run (a stale holder)."""


def leg_fence(holds: DesktopHolds, thread_id: str) -> Callable[[], dict[str, Any] | None]:
    """The step-boundary check of a leg of run ``thread_id`` beginning now
    (``AgentContext.fence``): a person's hold of the desktop for this run pauses it (also one
    taken in the moment before the leg began: a leg never starts held); an epoch moved on
    otherwise refuses the leg's writes (:class:`DesktopMovedOn`)."""
    began = holds.epoch()

    def fence() -> dict[str, Any] | None:
        hold = holds.current()
        if hold is not None and hold.held and hold.run == thread_id:
            return {"holder": hold.holder, "since": hold.since, "epoch": hold.epoch}
        if hold is None or hold.epoch == began:
            return None
        raise DesktopMovedOn(
            f"the desktop {holds.desktop} moved on without run {thread_id} (its hold is at "
            f"epoch {hold.epoch}, this leg began at {began}): nothing more was sent; "
            f"continue it with 'vnc-use resume {thread_id}'"
        )

    return fence
