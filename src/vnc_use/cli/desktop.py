"""``vnc-use desktop up|status|down`` and ``vnc-use view``: the local desktop and its live view.

Also the helpers ``vnc-use run`` uses: :func:`live_view_for_run`, :func:`notice_stream` and
:func:`local_desktop_left` (the run's desktop itself is reached by
:func:`vnc_use.desktops.target.reach`).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

from vnc_use import config
from vnc_use.cli import rdp as rdp_commands
from vnc_use.cli.common import EXIT_DONE, EXIT_ERROR, add_runs_dir
from vnc_use.desktops.local import BROWSERS, ENV_STATE_DIR, DesktopState, LocalDesktop, parse_size
from vnc_use.desktops.target import ReachedDesktop, managed_password
from vnc_use.errors import ConfigError

__all__ = [
    "DEFAULT_VIEW_PORT",
    "command_down",
    "command_status",
    "command_up",
    "command_view",
    "live_view_for_run",
    "local_desktop_left",
    "managed_password",
    "notice_stream",
    "register",
]

#: The live view's preferred port (noVNC's usual one); a free port is used when it is taken.
DEFAULT_VIEW_PORT = 6080


def _state_dir_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="the desktop's state folder (default: $VNC_USE_DESKTOP_DIR, "
        "else $XDG_STATE_HOME/vnc-use/desktop, else ~/.local/state/vnc-use/desktop)",
    )


def register(sub: Any) -> None:
    """Add ``desktop`` (``up``, ``status``, ``down``) and ``view`` to the sub-commands."""
    desktop = sub.add_parser("desktop", help="a local desktop to run tasks on (up/status/down)")
    actions = desktop.add_subparsers(dest="desktop_command", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start the local desktop (or find it running)")
    up.add_argument("--size", default="1440x900", help="WIDTHxHEIGHT (default 1440x900)")
    up.add_argument(
        "--browser", default="auto", choices=BROWSERS, help="default: Chromium, else Firefox ESR"
    )
    up.add_argument(
        "--display",
        type=int,
        default=None,
        metavar="N",
        help="X display number to use (default: the lowest free one from :1)",
    )
    _state_dir_option(up)
    up.set_defaults(func=command_up)
    status = actions.add_parser("status", help="is it running? (exit code 0 yes, 1 no)")
    _state_dir_option(status)
    status.set_defaults(func=command_status)
    down = actions.add_parser("down", help="stop the local desktop")
    _state_dir_option(down)
    down.set_defaults(func=command_down)
    rdp_commands.register_desktop_rdp(actions)

    view = sub.add_parser("view", help="watch the desktop live in a browser (noVNC)")
    view.add_argument(
        "--interactive",
        action="store_true",
        help="let the person at the browser use mouse and keyboard (default: view only)",
    )
    view.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port on 127.0.0.1 (default {DEFAULT_VIEW_PORT}, or a free one if it is taken)",
    )
    view.add_argument(
        "--vnc",
        default=None,
        metavar="HOST::PORT",
        help="another VNC server (password: VNC_VIEW_PASSWORD for view only, else VNC_PASSWORD)"
        "; default: the local desktop, started when needed",
    )
    view.add_argument("--novnc-dir", default=None, help="noVNC folder (default /usr/share/novnc)")
    view.add_argument(
        "thread_id",
        nargs="?",
        default=None,
        metavar="ID",
        help="a run's own desktop (with --interactive: a run you took over, vnc-use takeover "
        "ID; your clicks are recorded with their positions, key presses only as a count)",
    )
    add_runs_dir(view)
    _state_dir_option(view)
    view.set_defaults(func=command_view)


# --------------------------------------------------------------------------- desktop


def _desktop(args: argparse.Namespace) -> LocalDesktop:
    size = parse_size(getattr(args, "size", "1440x900"))
    browser = getattr(args, "browser", "auto")
    display = getattr(args, "display", None)
    return LocalDesktop(
        getattr(args, "state_dir", None), size=size, browser=browser, display=display
    )


def _describe(state: DesktopState) -> str:
    return f"{state.server} (display {state.display}, {state.width}x{state.height})"


def command_up(args: argparse.Namespace) -> int:
    """``vnc-use desktop up``: start the local desktop, or report the one that runs."""
    desk = _desktop(args)
    state, started = desk.up()
    if started:
        print(f"local desktop started at {_describe(state)}")
    else:
        print(f"local desktop already running at {_describe(state)}, since {state.started_at}")
    print(f"  watch it live:    vnc-use view{_state_flag(args)}")
    state_dir = getattr(args, "state_dir", None)
    env = f"{ENV_STATE_DIR}={state_dir} " if state_dir else ""
    print(f'  give it a task:   {env}vnc-use run --task "..."')
    print(f"  any VNC viewer:   vncviewer -passwd {desk.passwd_file} {state.server}")
    print(f"  its passwords:    {desk.credentials_file} (readable by you only)")
    print(f"  stop it:          vnc-use desktop down{_state_flag(args)}")
    return EXIT_DONE


def _state_flag(args: argparse.Namespace) -> str:
    state_dir = getattr(args, "state_dir", None)
    return f" --state-dir {state_dir}" if state_dir else ""


def command_status(args: argparse.Namespace) -> int:
    """``vnc-use desktop status``: exit code 0 when the desktop runs, 1 when it does not."""
    desk = _desktop(args)
    status = desk.status()
    bridge_lines, bridge_up = rdp_commands.status_lines()
    for line in bridge_lines:
        print(line)
    if status.state is None:
        print(f"local desktop: not running (no state in {desk.state_dir})")
        return EXIT_DONE if bridge_up else EXIT_ERROR
    if not status.running:
        print("local desktop: not running (its Xvnc is gone; 'vnc-use desktop down' cleans up)")
    else:
        print(
            f"local desktop: running at {_describe(status.state)}, since {status.state.started_at}"
        )
    for record in status.state.processes:
        alive = "running" if status.alive.get(record.name) else "gone"
        print(f"  {record.name:<8} pid {record.pid:<8} {alive}")
    print(f"  X display:    {status.state.display} (DISPLAY={status.state.display} for X programs)")
    print(f"  state folder: {desk.state_dir}")
    return EXIT_DONE if status.running else EXIT_ERROR


def command_down(args: argparse.Namespace) -> int:
    """``vnc-use desktop down``: stop exactly the processes the desktop started."""
    desk = _desktop(args)
    for line in rdp_commands.down_lines():
        print(line)
    stopped = desk.down()
    if stopped:
        names = ", ".join(f"{r.name} ({r.pid})" for r in stopped)
        print(f"local desktop stopped: {names}")
    else:
        print("local desktop: nothing was running")
    return EXIT_DONE


# --------------------------------------------------------------------------- live view


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _view_target(
    args: argparse.Namespace, reached: ReachedDesktop | None = None
) -> tuple[str, int, str, bool, str]:
    """``(host, port, password, enforced, what)`` for the live view of ``view``/``run --view``
    (``reached``: the run's desktop).

    ``enforced`` tells whether a view-only view is enforced by the VNC server.
    """
    from vnc_use.desktops.address import parse_server

    interactive = bool(getattr(args, "interactive", False))
    if reached is not None and reached.view_password:  # the managed desktop, a bridge
        host, port = parse_server(reached.server)
        password = reached.password if interactive else reached.view_password
        return host, port, password or reached.view_password, True, ""
    server = reached.server if reached is not None else args.vnc
    if server:
        host, port = parse_server(server)
        desk = LocalDesktop(getattr(args, "state_dir", None))
        if desk.password_for(server) is not None:  # the managed desktop, by its address
            creds = desk.credentials()
            return host, port, creds.password if interactive else creds.view_password, True, ""
        bridge = _kept_bridge_passwords(server)
        if bridge:  # the kept RDP bridge: its Xvnc enforces view-only
            return host, port, bridge[0] if interactive else bridge[1], True, ""
        view_pw = config.vnc_view_password()
        full = (reached.password if reached is not None else None) or config.vnc_password()
        if not interactive and view_pw:
            return host, port, view_pw, True, ""
        if not full:
            raise ConfigError(
                f"the live view of {server} needs its password: set VNC_VIEW_PASSWORD "
                "(a view-only password) or VNC_PASSWORD"
            )
        return host, port, full, interactive, server
    desk = _desktop(args)
    state, started = desk.up()
    if started:
        print(f"local desktop started at {_describe(state)}", file=notice_stream(args))
    creds = desk.credentials()
    password = creds.password if interactive else creds.view_password
    return "127.0.0.1", state.port, password, True, ""


def _kept_bridge_passwords(server: str) -> tuple[str, str] | None:
    """The full and view-only passwords of the kept RDP bridge when ``server`` is its address."""
    from vnc_use.desktops.rdp_kept import KeptRdpBridge

    kept = KeptRdpBridge()
    if kept.password_for(server) is None:
        return None
    return kept.password(), kept.password(view_only=True)


def _start_view(args: argparse.Namespace, host: str, port: int, password: str) -> Any:
    from vnc_use.desktops.liveview import LiveView

    interactive = bool(getattr(args, "interactive", False))
    novnc = getattr(args, "novnc_dir", None)
    wanted = getattr(args, "port", None)
    if wanted is None:
        try:
            return LiveView(
                host,
                port,
                password,
                interactive=interactive,
                port=DEFAULT_VIEW_PORT,
                novnc_dir=novnc,
            )
        except ConfigError as exc:
            if "cannot listen" not in str(exc):
                raise
            wanted = 0
    return LiveView(host, port, password, interactive=interactive, port=wanted, novnc_dir=novnc)


def notice_stream(args: argparse.Namespace) -> TextIO:
    """Where notices go: stdout, or stderr when ``--json`` keeps stdout for JSON lines."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def _print_view(view: Any, interactive: bool, enforced: bool, server: str, stream: TextIO) -> None:
    mode = "interactive" if interactive else "view only"
    print(f"live view ({mode}): {view.url}", file=stream)
    print("  the link holds an access token: share it only with people who may watch", file=stream)
    if not interactive and not enforced:
        print(
            f"  note: {server} got its full password, so view-only is only the page's promise; "
            "set VNC_VIEW_PASSWORD to a view-only password to have the server enforce it",
            file=stream,
        )


def command_view(args: argparse.Namespace) -> int:
    """``vnc-use view [ID]``: serve the live view until Ctrl-C (or SIGTERM)."""
    with contextlib.ExitStack() as stack:
        tap = _run_desktop(args, stack) if args.thread_id else None
        host, port, password, enforced, server = _view_target(args)
        if tap is not None:  # the person's input goes through the recording relay
            from pathlib import Path

            from vnc_use.runs.takeover import person_video

            tap.target = (host, port)
            stack.enter_context(
                person_video(Path(args.runs_dir), args.thread_id, f"{host}::{port}", password)
            )
            host, port = stack.enter_context(tap).address
        view = _start_view(args, host, port, password)
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            _print_view(view, args.interactive, enforced, server, sys.stdout)
            if tap is not None:
                print(
                    f"  VNC clients: {host}::{port} (your clicks are recorded with their "
                    "positions, key presses only as a count; never what you type)"
                )
            print("  Ctrl-C stops the view (the desktop keeps running)", flush=True)
            view.serve_forever()
        except KeyboardInterrupt:
            print("live view stopped")
        finally:
            signal.signal(signal.SIGTERM, previous)
            view.stop()
    return EXIT_DONE


def _run_desktop(args: argparse.Namespace, stack: contextlib.ExitStack) -> Any:
    """``view ID``: the run's own desktop (``args.vnc``); with ``--interactive`` only while
    a person holds the run, through a relay that records their clicks and key presses."""
    from pathlib import Path

    from vnc_use.record import run_record
    from vnc_use.runs.takeover import PersonRecorder, held_run

    if args.vnc:
        raise ConfigError("give a run's ID or --vnc HOST::PORT, not both")
    runs_dir = Path(args.runs_dir)
    if not args.interactive:
        args.vnc = run_record.read(runs_dir / args.thread_id).vnc_server
        if not args.vnc:
            raise ConfigError(f"run {args.thread_id!r} has no VNC desktop to show")
        return None
    args.vnc = held_run(runs_dir, args.thread_id)
    from vnc_use.desktops.person_tap import PersonTap

    recorder = PersonRecorder(runs_dir, args.thread_id, list(config.secret_values()))
    stack.callback(recorder.close)
    return PersonTap(("127.0.0.1", 0), recorder.click, recorder.key, recorder.lost)


# --------------------------------------------------------------------------- for `run`


def local_desktop_left() -> str:
    """What became of the local desktop when a run could not start (its model not ready)."""
    status = LocalDesktop().status()
    if status.running and status.state is not None:
        return f"the local desktop at {status.state.server} is running and was left as it is"
    return "the local desktop was not started"


@contextlib.contextmanager
def live_view_for_run(args: argparse.Namespace, reached: ReachedDesktop) -> Iterator[None]:
    """``run --view``: a view-only live view of the run's desktop while the run lasts."""
    if not getattr(args, "view", False):
        yield
        return
    host, port, password, enforced, server = _view_target(args, reached)
    view = _start_view(args, host, port, password).start()
    try:
        stream = notice_stream(args)
        _print_view(view, False, enforced, server, stream)
        stream.flush()
        yield
    finally:
        view.stop()
