"""``vnc-use eval --rdp HOST``: one RDP desktop, reached through a FreeRDP bridge.

:class:`RdpSlot` starts a private bridge (:class:`~vnc_use.desktops.rdp.RdpBridge`: a local
Xvnc with ``xfreerdp`` inside it) at the first task and keeps it for the next ones, the tasks
running one at a time; a session that ended gets a new bridge at the next task. Setup and
check run on this machine with the caller's ``HOME`` and no ``DISPLAY``: they cannot see the
remote screen and must reach the remote machine by their own means (ssh, its API).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.evaluation.desktops import EvalDesktop, command_environment

__all__ = ["RdpSlot"]


class RdpSlot:
    """The RDP desktop of ``options`` (:class:`~vnc_use.desktops.rdp.RdpOptions`); FreeRDP's
    output goes to ``log_path``."""

    def __init__(self, options: Any, password: str | None, log_path: Path) -> None:
        self.name = "rdp"
        self.options = options
        self._password = password
        self.log_path = log_path
        self._bridge: Any = None

    def open(self) -> EvalDesktop:
        from vnc_use.desktops.rdp import RdpBridge

        if self._bridge is None or self._bridge.ended:
            self.close()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            bridge = RdpBridge(self.options, self._password, log_path=self.log_path)
            bridge.start()
            self._bridge = bridge
        bridge = self._bridge
        env = command_environment(VNC_SERVER=bridge.server, **config.child_environment(("HOME",)))
        agent = {  # as for `vnc-use run --rdp` (cli.rdp.agent_kwargs)
            "keyboard": bridge.keyboard(),
            "rdp": bridge.describe(),
            "lost_reason": lambda: bridge.ended,
            "reconnect_window_s": 0.0,
        }
        return EvalDesktop(self.name, bridge.server, bridge.vnc_password, env, None, agent)

    def done(self) -> None:
        pass

    def close(self) -> None:
        if self._bridge is not None:
            self._bridge.stop()
            self._bridge = None
