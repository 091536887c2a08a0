"""Serving the console: the desktops it offers, its token, its secrets, uvicorn.

:func:`make_console` gathers what the app needs from the console's options (the CLI builds
them); :func:`serve` runs it under uvicorn until Ctrl-C.
"""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.console.app import Console
from vnc_use.console.liveview import LiveTarget
from vnc_use.console.start import ConsoleDesktop, Defaults
from vnc_use.desktops.target import DesktopTarget, managed_password, view_password
from vnc_use.errors import ConfigError
from vnc_use.record.runs import RunSummary

__all__ = ["ConsoleOptions", "desktops_of", "live_target", "make_console", "serve"]

DEFAULT_PORT = 8765


@dataclass
class ConsoleOptions:
    """What ``vnc-use console`` was started with."""

    runs_dir: str = "runs"
    vnc: list[str] = field(default_factory=list)
    rdp: list[str] = field(default_factory=list)
    local: bool = False
    spec: dict[str, Any] = field(default_factory=dict)
    """RunSpec fields every run starts from (provider, model, step_limit, confirm_actions...)."""
    vnc_password_env: str = "VNC_PASSWORD"
    fleet: str | None = None
    """The fleet's database URL: its runs, its workers' labels as the desktops."""
    server: str | None = None
    """A LangGraph Server's URL: its threads as the runs; the desktops are the ``--vnc`` and
    ``--rdp`` ones, which the server connects to (their passwords: the server's variables)."""


def desktops_of(options: ConsoleOptions) -> list[ConsoleDesktop]:
    """The desktops a run can be started on: each ``--vnc``, each ``--rdp``, and the local
    desktop (with ``--local``, or when no other is given)."""
    out = [
        ConsoleDesktop(
            address,
            "vnc",
            DesktopTarget(vnc_server=address, vnc_password_env=options.vnc_password_env),
        )
        for address in options.vnc
    ]
    out += [
        ConsoleDesktop(f"rdp://{host}", "rdp", DesktopTarget(rdp_server=host))
        for host in options.rdp
    ]
    if options.local or not out:
        out.append(ConsoleDesktop("local", "local", DesktopTarget(local=True)))
    for desk in out:
        desk.target.check()
    return out


def live_target(summary: RunSummary) -> LiveTarget | None:
    """How the console logs in to show a run's desktop live (None: it cannot, e.g. a fleet's
    desktop whose password only the workers have)."""
    from vnc_use.desktops.address import parse_server

    server = summary.desktop
    if not server or "://" in server:
        return None
    try:
        host, port = parse_server(server)
    except ConfigError:
        return None
    view = view_password(server) or config.vnc_view_password()
    full = managed_password(server) or config.vnc_password()
    if view:
        return LiveTarget(host, port, view, True, full_password=full)
    if not full:  # no password here: no tries a server would count as failed logins
        return None
    return LiveTarget(host, port, full, False, full_password=full)


def make_console(options: ConsoleOptions, token: str | None = None) -> Console:
    """The console of ``options``: its token (``VNC_USE_CONSOLE_TOKEN``, else a new one)."""
    from vnc_use.desktops.liveview import find_novnc

    try:
        novnc: Path | None = find_novnc()
    except ConfigError:
        novnc = None
    Path(options.runs_dir).mkdir(parents=True, exist_ok=True)
    if options.fleet:
        from vnc_use.console.fleet import FleetRuns

        labels = FleetRuns(options.fleet, options.runs_dir).labels()
        desktops = [ConsoleDesktop(label, "label", DesktopTarget()) for label in labels]
    elif options.server:
        from vnc_use.console.served import ServedRuns

        ServedRuns(options.server, options.runs_dir).check()  # one line when it is not there
        desktops = desktops_of(options)
    else:
        desktops = desktops_of(options)
    defaults = Defaults(
        runs_dir=str(Path(options.runs_dir).resolve()),
        desktops=desktops,
        spec=dict(options.spec),
    )
    return Console(
        defaults=defaults,
        token=token or config.console_token() or secrets.token_urlsafe(24),
        secrets=config.secret_values(),
        novnc_dir=novnc,
        live_target=live_target if novnc is not None else None,
        fleet=options.fleet,
        server=options.server,
    )


def serve(console: Console, sock: socket.socket) -> None:
    """Serve on the listening socket ``sock`` until Ctrl-C (uvicorn's own signal handling)."""
    import uvicorn

    from vnc_use.console.app import build_app

    settings = uvicorn.Config(
        build_app(console),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,  # open pages hold event streams: do not wait for them
    )
    uvicorn.Server(settings).run(sockets=[sock])
