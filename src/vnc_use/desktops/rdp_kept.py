"""The kept-up RDP bridge of ``vnc-use desktop rdp HOST``: one bridge that outlives the
command, for watching (``vnc-use view``) and for several runs (``vnc-use run --rdp HOST``
uses it instead of starting its own), stopped by ``vnc-use desktop down``.

Its state is in ``<rdp state folder>/bridge`` (mode 0700): ``state.json`` (address, the
processes with their start times and the boot id; no secrets), ``credentials.json`` (the
bridge's random VNC password, mode 0600), ``freerdp.log`` and FreeRDP's own folder. As for the
local desktop, a process is signalled only after checking it is still the one started (same
start time, same boot), never by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.desktops.processes import (
    ProcessRecord,
    boot_id,
    keep_child,
    process_start_time,
    stop_session,
    write_private,
)
from vnc_use.desktops.rdp import RdpBridge, RdpOptions, RdpTarget
from vnc_use.errors import ConfigError

__all__ = ["KeptBridgeStatus", "KeptRdpBridge"]


@dataclass
class KeptBridgeStatus:
    """What :meth:`KeptRdpBridge.status` finds."""

    state: dict[str, Any] | None
    running: bool
    alive: dict[str, bool] = field(default_factory=dict)


class KeptRdpBridge:
    """The kept RDP bridge whose state is in ``state_dir`` (default: the RDP state folder)."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = state_dir or config.rdp_state_dir() / "bridge"

    @property
    def state_file(self) -> Path:
        """``state.json``: where the bridge is and which processes make it up."""
        return self.state_dir / "state.json"

    @property
    def credentials_file(self) -> Path:
        """``credentials.json``: the bridge's VNC password (mode 0600)."""
        return self.state_dir / "credentials.json"

    @property
    def log_path(self) -> Path:
        """FreeRDP's output."""
        return self.state_dir / "freerdp.log"

    # -- queries ----------------------------------------------------------------------------
    def read_state(self) -> dict[str, Any] | None:
        """The recorded state, or None."""
        try:
            data = json.loads(self.state_file.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def status(self) -> KeptBridgeStatus:
        """Whether both the bridge's Xvnc and its FreeRDP session still run."""
        state = self.read_state()
        if state is None:
            return KeptBridgeStatus(None, False)
        alive = {r.name: r.is_ours(state["boot_id"]) for r in _records(state)}
        return KeptBridgeStatus(state, bool(alive) and all(alive.values()), alive)

    def running_for(self, target: RdpTarget) -> dict[str, Any] | None:
        """The state of the running bridge when it is connected to ``target``, else None."""
        status = self.status()
        if status.running and status.state and status.state.get("target") == str(target):
            return status.state
        return None

    def password(self, view_only: bool = False) -> str:
        """The bridge's VNC password (full, or the view-only one)."""
        key = "view_password" if view_only else "password"
        try:
            return str(json.loads(self.credentials_file.read_text("utf-8"))[key])
        except (OSError, ValueError, KeyError):
            raise ConfigError(
                f"no readable credentials in {self.credentials_file}; restart the bridge: "
                "vnc-use desktop down, then vnc-use desktop rdp HOST"
            ) from None

    def password_for(self, server: str | None) -> str | None:
        """The VNC password when ``server`` is the running bridge's address, else None."""
        status = self.status()
        if not server or not status.running or status.state is None:
            return None
        if server.strip() != status.state.get("server"):
            return None
        return self.password()

    # -- lifecycle --------------------------------------------------------------------------
    def up(self, options: RdpOptions, password: str | None) -> tuple[dict[str, Any], bool]:
        """Start the bridge unless it runs for the same server; ``(state, started)``."""
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.state_dir.chmod(0o700)
        with self._locked():
            status = self.status()
            if status.running and status.state is not None:
                if status.state.get("target") != str(options.target):
                    raise ConfigError(
                        f"a kept RDP bridge to {status.state.get('target')} runs; stop it first "
                        "(vnc-use desktop down)"
                    )
                return status.state, False
            self._stop_recorded()
            bridge = RdpBridge(
                options,
                password,
                log_path=self.log_path,
                detached=True,
                work_dir=self.state_dir / "work",
            )
            bridge.start()
            for proc in bridge.processes:
                keep_child(proc)  # reaped when this process stops them (tests, one-shot runs)
            state = self._record(bridge)
            return state, True

    def down(self) -> list[str]:
        """Stop the bridge's processes that are still ours; returns their names."""
        if not self.state_dir.exists():
            return []
        with self._locked():
            return self._stop_recorded()

    # -- internals --------------------------------------------------------------------------
    def _record(self, bridge: RdpBridge) -> dict[str, Any]:
        processes = []
        for name, pid in zip(("Xvnc", "xfreerdp"), bridge.pids, strict=False):
            start = process_start_time(pid)
            if start is not None:
                processes.append({"name": name, "pid": pid, "start_time": start, "argv": []})
        state = {
            "target": str(bridge.options.target),
            "server": bridge.server,
            "display": bridge.display,
            "port": bridge.port,
            "rdp": bridge.describe(),
            "boot_id": boot_id(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "processes": processes,
        }
        write_private(
            self.credentials_file,
            json.dumps({"password": bridge.vnc_password, "view_password": bridge.view_password}),
        )
        write_private(self.state_file, json.dumps(state, indent=2))
        return state

    def _stop_recorded(self) -> list[str]:
        state = self.read_state()
        stopped: list[str] = []
        if state is not None:
            boot = str(state.get("boot_id"))
            stopped = [r.name for r in reversed(_records(state)) if stop_session(r, boot)]
        for path in (self.state_file, self.credentials_file):
            path.unlink(missing_ok=True)
        return stopped

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _records(state: dict[str, Any]) -> list[ProcessRecord]:
    return [ProcessRecord(**p) for p in state.get("processes", [])]
