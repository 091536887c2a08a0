"""``vnc-use worker``: take run legs from the fleet's queues (see :mod:`vnc_use.fleet`)."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from vnc_use import config
from vnc_use.cli.common import EXIT_DONE, add_runs_dir
from vnc_use.cli.fleet import fleet_url
from vnc_use.cli.options import add_rdp_session_options, positive_seconds
from vnc_use.desktops.target import DEFAULT_CONNECT_TIMEOUT, DesktopTarget
from vnc_use.errors import ConfigError
from vnc_use.fleet.db import DEAD_AFTER, MIN_DEAD_AFTER

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="take run legs from the fleet's queues in PostgreSQL (one worker per desktop host)",
    )
    p.add_argument(
        "--database",
        default=None,
        metavar="URL",
        help="the fleet's database, postgresql://...; default: VNC_USE_DATABASE_URL",
    )
    p.add_argument(
        "--desktops", type=int, default=0, metavar="N", help="start N local desktops and use them"
    )
    p.add_argument(
        "--vnc", nargs="+", default=[], metavar="ADDR", help="desktops someone else runs (VNC)"
    )
    p.add_argument(
        "--rdp",
        nargs="+",
        default=[],
        metavar="HOST[:PORT]",
        help="RDP desktops (Windows, xrdp), each through a FreeRDP bridge this worker keeps up; "
        "the password comes from RDP_PASSWORD in the worker's environment",
    )
    add_rdp_session_options(p)
    p.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for an RDP host to answer (default 5)",
    )
    p.add_argument(
        "--label",
        nargs="+",
        default=["default"],
        metavar="NAME",
        help="what this worker's desktops offer (the queues it takes legs from); default: default",
    )
    p.add_argument(
        "--worker-id",
        default=None,
        metavar="ID",
        help="a stable name for this worker (letters, digits, '.', '_', '-'; default: the host "
        "name); a restarted worker with the same id takes back its own unfinished legs",
    )
    p.add_argument(
        "--dead-after",
        type=float,
        default=DEAD_AFTER,
        metavar="SECONDS",
        help=f"declare another worker dead when its last heartbeat is this old (hung, or its "
        f"host gone): end its database sessions and put its legs back on the queues "
        f"(default {DEAD_AFTER:g}, at least {MIN_DEAD_AFTER:g})",
    )
    add_runs_dir(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from vnc_use.fleet.worker import Worker, WorkerOptions, check_worker_id

    if args.desktops < 0:
        raise ConfigError(f"--desktops must be 0 or more, got {args.desktops}")
    if not args.dead_after >= MIN_DEAD_AFTER:  # NaN too
        raise ConfigError(
            f"--dead-after must be at least {MIN_DEAD_AFTER:g} seconds (a few heartbeats), got "
            f"{args.dead_after:g}"
        )
    if not args.vnc and not args.desktops and not args.rdp:
        raise ConfigError(
            "a worker needs desktops: --desktops N (local ones), --vnc ADDR ... or --rdp HOST ..."
        )
    worker_id = args.worker_id or socket.gethostname()
    check_worker_id(worker_id)
    rdp_settings = _rdp_settings(args)
    options = WorkerOptions(
        database=fleet_url(args.database),
        worker_id=worker_id,
        labels=list(args.label),
        runs_dir=Path(args.runs_dir).resolve(),
        vnc=list(args.vnc),
        local_desktops=args.desktops,
        rdp=list(args.rdp),
        rdp_settings=rdp_settings,
        dead_after=args.dead_after,
    )
    worker = Worker(options, say=lambda line: print(line, flush=True))

    def drain(signum: int, frame: FrameType | None) -> None:
        print(f"worker {options.worker_id}: draining", flush=True)
        worker.drain()

    signal.signal(signal.SIGTERM, drain)
    signal.signal(signal.SIGINT, drain)
    try:
        worker.start()
    except BaseException:
        worker.stop("stopped")
        raise
    worker.serve()
    print(f"worker {options.worker_id}: stopped", file=sys.stderr, flush=True)
    return EXIT_DONE


def _rdp_settings(args: argparse.Namespace) -> DesktopTarget:
    """How the worker reaches RDP hosts: its own (``--rdp``) and those of runs whose worker
    died (no secret: the password is read from ``RDP_PASSWORD`` when a bridge starts)."""
    if args.rdp_cert_fingerprint and len(args.rdp) != 1:
        raise ConfigError(
            "--rdp-cert-fingerprint pins one server's certificate: give it with exactly one "
            "--rdp HOST (or leave it out: trust on first use)"
        )
    settings = DesktopTarget(
        local=False,
        rdp_username=args.rdp_user or config.rdp_username(),
        rdp_domain=args.rdp_domain,
        rdp_size=args.rdp_size,
        rdp_cert_fingerprint=args.rdp_cert_fingerprint,
        connect_timeout=args.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
        rdp_paste_text=bool(args.rdp_paste_text),
        rdp_allow_unverified_login=bool(args.rdp_allow_unverified_login),
    )
    for host in args.rdp or ["localhost"]:  # a bad address, size or fingerprint: one line
        replace(settings, rdp_server=host).check()
    from vnc_use.fleet.desktops import rdp_pin

    if len({rdp_pin(host) for host in args.rdp}) != len(args.rdp):
        raise ConfigError("--rdp names one RDP host twice; give each host once")
    return settings
