"""A worker's desktops: each free or busy with one run's leg.

A desktop is named by what another worker can reach: a VNC address, or ``rdp://HOST:PORT``
for an RDP host (:func:`rdp_pin`), never the loopback address of the worker's own FreeRDP
bridge to it. An RDP desk keeps its bridge between legs and gets a new one at a leg whose
session ended (:class:`~vnc_use.evaluation.rdp.RdpSlot`). A leg of a run pinned to an RDP
host this worker does not own (its worker died) reaches it through a bridge of its own for
that leg (:func:`reach_leg`), with this worker's RDP credentials.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from vnc_use import config
from vnc_use.desktops.target import DesktopTarget, ReachedDesktop, reach
from vnc_use.errors import VncUseError
from vnc_use.evaluation.desktops import DesktopSlot, EvalDesktop, LocalSlot, VncSlot
from vnc_use.evaluation.rdp import RdpSlot

__all__ = [
    "RDP_PREFIX",
    "Desk",
    "DesktopPool",
    "LegDesktop",
    "NoFreeDesktop",
    "is_rdp_pin",
    "rdp_pin",
    "reach_leg",
    "vnc_address",
]

RDP_PREFIX = "rdp://"


class NoFreeDesktop(TimeoutError):
    """None of the worker's desktops (or not the one asked for) came free in time."""


def rdp_pin(server: str) -> str:
    """How the fleet names the RDP host ``server`` (``HOST[:PORT]``): ``rdp://HOST:PORT``."""
    from vnc_use.desktops.rdp import RdpTarget

    return f"{RDP_PREFIX}{RdpTarget.parse(server)}"


def is_rdp_pin(desktop: str | None) -> bool:
    """Whether a run's desktop is an RDP host (``rdp://HOST:PORT``)."""
    return bool(desktop) and str(desktop).startswith(RDP_PREFIX)


@dataclass
class LegDesktop:
    """Where one leg connects: the VNC server (an RDP bridge's own for an RDP host), its
    password, and for an RDP host the target and the bridge as reached."""

    server: str
    password: str | None
    target: DesktopTarget | None = None
    reached: ReachedDesktop | None = None


def vnc_address(server: str) -> str:
    """A VNC address as the fleet records it (``HOST::PORT``), so a run's pin and a
    worker's ``--vnc`` compare equal however each was written."""
    from vnc_use.desktops.address import parse_server

    host, port = parse_server(server)
    return f"{host}::{port}"


@dataclass
class Desk:
    """One desktop the worker owns; ``kind`` (:data:`~vnc_use.fleet.db.DESKTOP_KINDS`):
    ``vnc`` for one someone else runs (any worker can reach it), ``local`` for one this
    worker started (only this worker reaches it), ``rdp`` for an RDP host (any worker can
    reach it, through a bridge of its own)."""

    server: str
    password: str | None
    slot: DesktopSlot
    kind: str = "vnc"
    busy_with: str | None = None

    def fresh(self) -> EvalDesktop:
        """The desktop for an eval task: a local one started afresh (its address may change),
        one someone else runs as it is (an RDP host: its bridge, a new one if its session
        ended; its name stays ``rdp://HOST:PORT``)."""
        if isinstance(self.slot, LocalSlot):
            self.slot.close()
        opened = self.slot.open()
        if not isinstance(self.slot, RdpSlot):
            self.server, self.password = opened.server, opened.password
        return opened

    def for_leg(self) -> LegDesktop:
        """Where a run's leg connects: the desktop's address, or for an RDP host its bridge
        (a new one when the session ended since the last leg)."""
        if not isinstance(self.slot, RdpSlot):
            return LegDesktop(self.server, self.password)
        opened = self.slot.open()
        return LegDesktop(opened.server, opened.password, self.slot.target, opened.reached)


class DesktopPool:
    """The worker's desktops (``--vnc`` ones as they are, ``--desktops N`` local ones it
    starts, kept between legs), handed out one leg at a time."""

    def __init__(self) -> None:
        self.desks: dict[str, Desk] = {}
        self._changed = threading.Condition()

    def add_vnc(self, server: str) -> None:
        address = vnc_address(server)
        slot = VncSlot(address, address, config.vnc_password())
        self.desks[slot.name] = Desk(address, slot.password, slot, kind="vnc")

    def add_local(self, root: Path, size: tuple[int, int]) -> None:
        # one password for the fleet's desktops (VNC_PASSWORD), so another worker can go on
        # with a run whose worker died; else each desktop's own
        slot = LocalSlot(root, size, reuse=True, password=config.vnc_password())
        opened = slot.open()
        self.desks[slot.name] = Desk(opened.server, opened.password, slot, kind="local")

    def add_rdp(self, target: DesktopTarget, log_path: Path) -> None:
        """An RDP host (``target.rdp_server``), its bridge started now: a refused login, a
        changed certificate or an unreachable host stops the worker's start in one line."""
        slot = RdpSlot(target, log_path)
        slot.open()
        name = rdp_pin(str(target.rdp_server))
        self.desks[name] = Desk(name, None, slot, kind="rdp")

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


@contextlib.contextmanager
def reach_leg(
    desk: Desk | None, pin: str, settings: DesktopTarget, run_dir: Path, worker_id: str
) -> Iterator[LegDesktop]:
    """Where a leg connects for as long as the block lasts: ``desk`` (one of ours), else the
    run's desktop ``pin`` elsewhere: a VNC address as it is, an RDP host through a bridge of
    this worker's for the leg (its credentials from this worker's environment, the session's
    size and certificate as the run recorded them, else ``settings``)."""
    if desk is not None:
        yield desk.for_leg()
        return
    if not is_rdp_pin(pin):
        yield LegDesktop(pin, None)
        return
    target = _away_target(pin, settings, run_dir)
    with contextlib.ExitStack() as held:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            reached = held.enter_context(reach(target, log_path=run_dir / "freerdp.log"))
        except VncUseError as exc:
            raise VncUseError(
                f"worker {worker_id} could not reach the run's RDP desktop {pin}: {exc}"
            ) from None
        yield LegDesktop(reached.server, reached.password, target, reached)


def _away_target(pin: str, settings: DesktopTarget, run_dir: Path) -> DesktopTarget:
    """The RDP target of a run's host this worker does not own: this worker's settings (user
    name, domain, password variable), with the session size and the certificate the run's
    first bridge recorded in run.json (the workers share the runs folder), when it did."""
    from vnc_use.record import run_record

    host = pin.removeprefix(RDP_PREFIX)  # this worker's own pin is for its own host only
    target = replace(settings, rdp_server=host, local=False, rdp_cert_fingerprint=None)
    record = run_record.load(run_dir)
    rdp = (record.rdp if record is not None else None) or {}
    size = rdp.get("size")
    pinned = rdp.get("cert_fingerprint") or rdp.get("cert_sha256")
    if size:
        target = replace(target, rdp_size=str(size))
    if pinned:  # the certificate the run's own worker saw: no trust on first use here
        target = replace(target, rdp_cert_fingerprint=str(pinned))
    target.check()
    return target
