"""``vnc-use console``: the web console on http://127.0.0.1:8765/ (see docs/console.md)."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any

from vnc_use.cli.common import EXIT_DONE, add_runs_dir
from vnc_use.cli.options import add_settings, spec_fields
from vnc_use.errors import ConfigError

__all__ = ["register"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


FORM_SETTINGS = ("provider", "model", "step_limit", "max_cost", "confirm_actions")
"""The run settings the console's form offers, whose defaults its options give."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "console",
        help="the web console: start runs, watch them live, approve or deny, every run's history",
        description="Serve the web console on http://127.0.0.1:PORT/ over the runs of --runs-dir "
        "(or a fleet's, --fleet URL, or a LangGraph Server's, --server URL). "
        "It prints one URL with a login token (VNC_USE_CONSOLE_TOKEN, else a new one).",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        metavar="N",
        help="the port (default 8765, or a free one when it is taken)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; another one is warned about)",
    )
    add_runs_dir(p)
    p.add_argument(
        "--vnc",
        action="append",
        default=[],
        metavar="HOST::PORT",
        help="a VNC desktop runs may be started on (repeat for more; its password: "
        "VNC_PASSWORD in the console's environment)",
    )
    p.add_argument(
        "--rdp",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="an RDP desktop runs may be started on (RDP_USERNAME, RDP_PASSWORD)",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="offer the local desktop too (it is offered when no --vnc or --rdp is given)",
    )
    p.add_argument(
        "--fleet", default=None, metavar="URL", help="the runs of a fleet (PostgreSQL URL)"
    )
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="the runs of a LangGraph Server (its threads); runs start there on the --vnc or "
        "--rdp desktops, which the server connects to",
    )
    add_settings(p, "vnc_password_env")  # the --vnc desktops' password variable
    add_settings(  # the form's defaults: a person may change each for a run
        p,
        *FORM_SETTINGS,
        notes=dict.fromkeys(FORM_SETTINGS, "the form's default"),
        parse={"step_limit": "positive_int"},
    )
    p.set_defaults(func=command)


def _listen(host: str, port: int | None) -> socket.socket:
    """A listening socket on ``host``: ``port``, else 8765, else a free one."""
    from vnc_use.console.serve import DEFAULT_PORT

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for candidate in [port] if port is not None else [DEFAULT_PORT, 0]:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as exc:
            sock.close()
            if port is None and exc.errno == errno.EADDRINUSE:
                continue
            raise ConfigError(
                f"the console cannot listen on {host}:{candidate}: {exc.strerror}"
            ) from None
        sock.listen(128)
        return sock
    raise ConfigError(f"the console found no free port on {host}")


def command(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(
            "vnc-use console needs Starlette and uvicorn: pip install 'vnc-use[console]'"
        ) from None
    from vnc_use.console.serve import ConsoleOptions, make_console, serve

    if args.server and args.fleet:
        raise ConfigError(
            "vnc-use console takes --server or --fleet, not both: the runs of one place"
        )
    if args.server and (args.local or not (args.vnc or args.rdp)):
        raise ConfigError(
            "vnc-use console --server needs --vnc HOST::PORT or --rdp HOST[:PORT] (and no "
            "--local): the desktops the server connects to"
        )
    if args.fleet and (args.vnc or args.rdp or args.local):
        raise ConfigError(
            "vnc-use console --fleet cannot go with --vnc, --rdp or --local: the fleet's "
            "workers own its desktops (the form offers their labels)"
        )
    spec: dict[str, Any] = spec_fields(args, *FORM_SETTINGS)
    options = ConsoleOptions(
        runs_dir=args.runs_dir,
        vnc=list(args.vnc),
        rdp=list(args.rdp),
        local=args.local,
        spec={k: v for k, v in spec.items() if v != []},
        fleet=args.fleet,
        server=args.server,
        vnc_password_env=args.vnc_password_env,
    )
    console = make_console(options)
    sock = _listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    if args.host not in _LOOPBACK:
        print(
            f"vnc-use: warning: the console listens on {args.host}, reachable from other "
            "machines; anyone with its URL can start runs and approve actions (plain HTTP: "
            "put it behind TLS)",
            file=sys.stderr,
        )
    shown = f"[{host}]" if ":" in host else host
    print(f"vnc-use console: http://{shown}:{port}/?token={console.token}", flush=True)
    print("  (the token becomes a cookie; Ctrl-C stops the console, runs go on)", flush=True)
    serve(console, sock)
    return EXIT_DONE
