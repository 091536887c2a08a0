"""``vnc-use mcp``: serve a VNC desktop to other agents over the Model Context Protocol.

stdio (the default) keeps stdout for the protocol: every notice goes to stderr. Over HTTP
(streamable, ``--transport http``) the server listens on 127.0.0.1 and requires a bearer
token: ``VNC_USE_MCP_TOKEN`` when set, else a new one printed once.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from vnc_use import config
from vnc_use.cli.common import EXIT_DONE, add_runs_dir, add_video_options, stop_on_signals
from vnc_use.cli.options import (
    add_budget_options,
    add_connection_options,
    add_model_options,
    add_rdp_options,
    add_screen_region,
    add_vnc,
)
from vnc_use.cli.spec import mcp_spec
from vnc_use.desktops.target import ReachedDesktop, reach
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
    add_vnc(p, default="the local desktop, started when needed; password: VNC_PASSWORD")
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
    add_connection_options(p)
    add_screen_region(p)
    add_rdp_options(p, default_help="instead of --vnc; the bridge lives as long as the server")
    add_model_options(p)
    add_budget_options(p)
    add_runs_dir(p)
    add_video_options(p)
    p.set_defaults(func=command)


def _announce(reached: ReachedDesktop) -> None:
    """On stderr (stdout may be the protocol): the local desktop, or the RDP bridge."""
    if "started" in reached.extra:
        what = "started" if reached.extra["started"] else "running"
        print(f"vnc-use mcp: local desktop ({what}) at {reached.server}", file=sys.stderr)
    if reached.rdp:
        rdp = reached.rdp
        cert = f"; certificate SHA-256 {rdp['cert_sha256']} ({rdp.get('cert_trust')})"
        print(
            f"vnc-use mcp: {rdp['label']} bridged at {reached.server}"
            + (cert if rdp.get("cert_sha256") else ""),
            file=sys.stderr,
        )
    sys.stderr.flush()


def command(args: argparse.Namespace) -> int:
    """Serve until the client goes away (stdio), or Ctrl-C / SIGTERM; the session's run folder
    is closed (``run_ended``, its report written) and an ``--rdp`` bridge stopped either way."""
    from vnc_use.desktops.address import parse_server

    if args.vnc is not None:
        parse_server(args.vnc)  # a malformed address fails before anything starts
    spec = mcp_spec(args)  # so does a bad --rdp, --screen-region or model option
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
    log_path = Path(args.runs_dir) / thread_id / "freerdp.log"
    # the first SIGTERM (a host stopping the server) or Ctrl-C asks for a stop, which the
    # server takes between requests; a KeyboardInterrupt raised at whatever the event loop is
    # doing lands inside the SDK's and anyio's bookkeeping (tracebacks, hung exits)
    stop = threading.Event()
    try:
        with (
            stop_on_signals(stop.set, "closing the session and stopping the server"),
            reach(spec.desktop, log_path=log_path) as reached,
        ):
            _announce(reached)
            if not stop.is_set():
                _serve(args, mcp_server, reached, thread_id, spec, stop)
    except KeyboardInterrupt:  # a second signal: at once
        pass
    return EXIT_DONE


def _serve(
    args: argparse.Namespace,
    mcp_server: Any,
    target: Any,
    thread_id: str,
    spec: Any,
    stop: threading.Event,
) -> None:
    from vnc_use.mcp_server.session import DesktopSession

    secret_values = config.secret_values()  # RDP_PASSWORD among them
    session = DesktopSession(
        target,
        args.runs_dir,
        secrets=secret_values,
        thread_id=thread_id,
        spec=spec,
        video=spec.video,
        video_fps=spec.video_fps,
    )
    server = mcp_server.build_server(session)
    try:
        if args.transport == "stdio":
            print(
                f"vnc-use mcp: serving {target.label} over stdio; session {session.thread_id}",
                file=sys.stderr,
                flush=True,
            )
            mcp_server.run(lambda: mcp_server.serve_stdio(server, stop))
        else:
            _serve_http(args, mcp_server, server, session)
    except KeyboardInterrupt:
        pass
    finally:
        session.close()


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
