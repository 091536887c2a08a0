"""A worker's desktops: each free or busy with one run's leg."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vnc_use import config
from vnc_use.evaluation.desktops import DesktopSlot, EvalDesktop, LocalSlot, VncSlot

__all__ = ["Desk", "DesktopPool", "NoFreeDesktop"]


class NoFreeDesktop(TimeoutError):
    """None of the worker's desktops (or not the one asked for) came free in time."""


@dataclass
class Desk:
    """One desktop the worker owns."""

    server: str
    password: str | None
    slot: DesktopSlot
    busy_with: str | None = None

    def fresh(self) -> EvalDesktop:
        """The desktop for an eval task: a local one started afresh (its address may change),
        one someone else runs as it is."""
        if isinstance(self.slot, LocalSlot):
            self.slot.close()
        opened = self.slot.open()
        self.server, self.password = opened.server, opened.password
        return opened


class DesktopPool:
    """The worker's desktops (``--vnc`` ones as they are, ``--desktops N`` local ones it
    starts, kept between legs), handed out one leg at a time."""

    def __init__(self) -> None:
        self.desks: dict[str, Desk] = {}
        self._changed = threading.Condition()

    def add_vnc(self, server: str) -> None:
        from vnc_use.desktops.address import parse_server

        host, port = parse_server(server)
        address = f"{host}::{port}"
        slot = VncSlot(address, address, config.vnc_password())
        self.desks[slot.name] = Desk(address, slot.password, slot)

    def add_local(self, root: Path, size: tuple[int, int]) -> None:
        # one password for the fleet's desktops (VNC_PASSWORD), so another worker can go on
        # with a run whose worker died; else each desktop's own
        slot = LocalSlot(root, size, reuse=True, password=config.vnc_password())
        opened = slot.open()
        self.desks[slot.name] = Desk(opened.server, opened.password, slot)

    def snapshot(self) -> dict[str, str | None]:
        """Each desktop's address and the run it is busy with (None: free)."""
        with self._changed:
            return {d.server: d.busy_with for d in self.desks.values()}

    def owns(self, server: str) -> bool:
        with self._changed:
            return any(d.server == server for d in self.desks.values())

    def take(self, thread_id: str, server: str | None = None, timeout: float = 600.0) -> Desk:
        """A free desktop (``server``: that one) for run ``thread_id``; waits for it up to
        ``timeout`` seconds (:class:`NoFreeDesktop` after that)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for desk in self.desks.values():
                    if (server is None or desk.server == server) and desk.busy_with in (
                        None,
                        thread_id,
                    ):
                        desk.busy_with = thread_id
                        return desk
                if not self._changed.wait(max(0.0, deadline - time.monotonic())):
                    raise NoFreeDesktop(f"no free desktop for run {thread_id} in {timeout:g} s")

    def give_back(self, desk: Desk) -> None:
        with self._changed:
            desk.busy_with = None
            self._changed.notify_all()

    def close(self) -> None:
        for desk in self.desks.values():
            desk.slot.close()
