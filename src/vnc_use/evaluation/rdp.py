"""``vnc-use eval --rdp HOST``: one RDP desktop, reached through a FreeRDP bridge.

:class:`RdpSlot` reaches the desktop (:func:`~vnc_use.desktops.target.reach`: the kept bridge
when one runs for the host, else a private :class:`~vnc_use.desktops.rdp.RdpBridge`, a local
Xvnc with ``xfreerdp`` inside it) at the first task and keeps it for the next ones, the tasks
running one at a time; a session that ended gets a new bridge at the next task. Setup and
check run on this machine with the caller's ``HOME`` and no ``DISPLAY``: they cannot see the
remote screen and must reach the remote machine by their own means (ssh, its API).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from vnc_use import config
from vnc_use.desktops.target import DesktopTarget, ReachedDesktop, reach
from vnc_use.evaluation.desktops import EvalDesktop, command_environment

__all__ = ["RdpSlot"]


class RdpSlot:
    """The RDP desktop of ``target`` (a :class:`~vnc_use.desktops.target.DesktopTarget` with
    ``rdp_server``), reached through a bridge kept between tasks (a new one when its session
    ended); FreeRDP's output goes to ``log_path``."""

    def __init__(self, target: DesktopTarget, log_path: Path) -> None:
        self.name = "rdp"
        self.target = target
        self.log_path = log_path
        self._held: contextlib.ExitStack | None = None
        self._reached: ReachedDesktop | None = None

    def open(self) -> EvalDesktop:
        reached = self._reached
        gone = reached is not None and reached.lost_reason is not None and reached.lost_reason()
        if reached is None or gone:
            self.close()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._held = contextlib.ExitStack()
            reached = self._held.enter_context(reach(self.target, log_path=self.log_path))
            self._reached = reached
        env = command_environment(VNC_SERVER=reached.server, **config.child_environment(("HOME",)))
        return EvalDesktop(self.name, reached.server, reached.password, env, None, reached)

    def done(self) -> None:
        pass

    def close(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None
            self._reached = None
