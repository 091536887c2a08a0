"""``vnc-use mcp``: serve a VNC desktop to other agents over the Model Context Protocol.

stdio (the default) keeps stdout for the protocol: every notice goes to stderr. Over HTTP
(streamable, ``--transport http``) the server listens on 127.0.0.1 and requires a bearer
token: ``VNC_USE_MCP_TOKEN`` when set, else a new one printed once.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from vnc_use import config
from vnc_use.cli import rdp as rdp_commands
from vnc_use.cli.common import EXIT_DONE, add_runs_dir, add_video_options
from vnc_use.errors import ConfigError

__all__ = ["DEFAULT_PORT", "command", "register"]

#: The HTTP transport's default port on 127.0.0.1.
DEFAULT_PORT = 8765


def register(sub: Any) -> None:
    """Add ``mcp`` to the sub-command parsers."""
    p = sub.add_parser(
        "mcp",
        help="serve the desktop to other agents over MCP (tools: screenshot, click, "
        "type_text, press_keys, scroll, drag, run_task, approve_run, deny_run)",
    )
    p.add_argument(
        "--vnc",
        default=None,
        metavar="HOST::PORT",
        help="VNC server address (password: VNC_PASSWORD); default: the local desktop, "
        "started when needed",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: the host starts this command) or http (streamable HTTP on "
        "127.0.0.1, bearer token required)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"HTTP port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one)",
    )
    p.add_argument("--vnc-user", default=None, metavar="USER", help="default: VNC_USERNAME")
    p.add_argument("--vnc-ca", default=None, metavar="FILE", help="CA of the server's TLS cert")
    rdp_commands.add_options(
        p, default_help="instead of --vnc; the bridge lives as long as the server"
    )
    add_runs_dir(p)
    add_video_options(p)
    p.set_defaults(func=command)


def _target(args: argparse.Namespace, bridge: Any) -> Any:
    from vnc_use.cli.desktop import managed_password
    from vnc_use.mcp_server.session import VncTarget

    if bridge is not None:
        kw = rdp_commands.agent_kwargs(bridge)
        return VncTarget(
            server=kw["vnc_server"],
            password=kw["vnc_password"],
            keyboard=kw["keyboard"],
            rdp=kw["rdp"],
            lost_reason=kw["lost_reason"],
        )
    from vnc_use.desktops.local import LocalDesktop

    server = args.vnc
    if server is None:
        state, started = LocalDesktop().up()
        server = state.server
        what = "started" if started else "running"
        print(f"vnc-use mcp: local desktop ({what}) at {server}", file=sys.stderr, flush=True)
    password = managed_password(server) or config.vnc_password()
    return VncTarget(
        server=server,
        password=password,
        username=args.vnc_user or config.vnc_username(),
        ca_file=args.vnc_ca,
    )


@contextlib.contextmanager
def _bridge(args: argparse.Namespace, thread_id: str) -> Iterator[Any]:
    """The RDP bridge of ``--rdp`` (None without it), up while the server serves; its
    FreeRDP log goes to the session's run folder."""
    options = rdp_commands.options_from(args, None)
    if options is None:
        yield None
        return
    log_path = Path(args.runs_dir) / thread_id / "freerdp.log"
    with rdp_commands.open_bridge(options, log_path) as bridge:
        rdp = bridge.describe()
        cert = f"; certificate SHA-256 {rdp['cert_sha256']} ({rdp.get('cert_trust')})"
        print(
            f"vnc-use mcp: {rdp['label']} bridged at {bridge.server}"
            + (cert if rdp.get("cert_sha256") else ""),
            file=sys.stderr,
            flush=True,
        )
        yield bridge


def command(args: argparse.Namespace) -> int:
    """Serve until the client goes away (stdio), or Ctrl-C / SIGTERM; the session's run folder
    is closed (``run_ended``, its report written) and an ``--rdp`` bridge stopped either way."""
    from vnc_use.desktops.address import parse_server

    if args.vnc is not None:
        parse_server(args.vnc)  # a malformed address fails before anything starts
    rdp_commands.options_from(args, None)  # so does a bad --rdp
    if args.transport == "http" and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: use 0..65535")
    try:
        from vnc_use.mcp_server import server as mcp_server
    except ImportError as exc:
        raise ConfigError(
            f"the MCP SDK is not installed ({exc}): pip install 'vnc-use[mcp]'"
        ) from None
    from vnc_use.mcp_server.session import new_session_id

    thread_id = new_session_id()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a host stopping the server
    try:
        with _bridge(args, thread_id) as bridge:
            _serve(args, mcp_server, _target(args, bridge), thread_id)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_DONE


def _serve(args: argparse.Namespace, mcp_server: Any, target: Any, thread_id: str) -> None:
    from vnc_use.mcp_server.session import DesktopSession

    secret_values = config.secret_values()  # RDP_PASSWORD among them
    session = DesktopSession(
        target,
        args.runs_dir,
        secrets=secret_values,
        thread_id=thread_id,
        video=not args.no_video,
        video_fps=args.video_fps,
    )
    server = mcp_server.build_server(session)
    try:
        if args.transport == "stdio":
            print(
                f"vnc-use mcp: serving {target.label} over stdio; session {session.thread_id}",
                file=sys.stderr,
                flush=True,
            )
            mcp_server.run(lambda: mcp_server.serve_stdio(server))
        else:
            _serve_http(args, mcp_server, server, session)
    except KeyboardInterrupt:
        pass
    finally:
        session.close()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _serve_http(args: argparse.Namespace, mcp_server: Any, server: Any, session: Any) -> None:
    token = config.mcp_token()
    try:
        sock = mcp_server.listen(args.port)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc}); choose another "
            "--port, or 0 for a free one"
        ) from None
    port = sock.getsockname()[1]
    print(f"vnc-use mcp: serving {session.target.label} at http://127.0.0.1:{port}/mcp")
    if token is None:
        token = secrets.token_urlsafe(32)
        print(f"bearer token (shown once): {token}")
    else:
        print(f"bearer token: the one in {config.MCP_TOKEN_VARIABLE}")
    print(f"session {session.thread_id} (read it with: vnc-use report {session.thread_id})")
    print("Ctrl-C stops the server", flush=True)
    mcp_server.run(lambda: mcp_server.serve_http(server, sock, token))
