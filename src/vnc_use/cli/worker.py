"""``vnc-use worker``: take run legs from the fleet's queues (see :mod:`vnc_use.fleet`)."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from vnc_use.cli.common import EXIT_DONE, add_runs_dir
from vnc_use.cli.fleet import fleet_url
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
        "--rdp", nargs="+", default=[], metavar="HOST", help="RDP desktops (not yet supported)"
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

    if args.rdp:
        raise ConfigError(
            "--rdp is not supported by vnc-use worker yet: bridge the RDP host with "
            "'vnc-use desktop' or run it under --vnc through a FreeRDP bridge"
        )
    if args.desktops < 0:
        raise ConfigError(f"--desktops must be 0 or more, got {args.desktops}")
    if not args.dead_after >= MIN_DEAD_AFTER:  # NaN too
        raise ConfigError(
            f"--dead-after must be at least {MIN_DEAD_AFTER:g} seconds (a few heartbeats), got "
            f"{args.dead_after:g}"
        )
    if not args.vnc and not args.desktops:
        raise ConfigError("a worker needs desktops: --desktops N (local ones) or --vnc ADDR ...")
    worker_id = args.worker_id or socket.gethostname()
    check_worker_id(worker_id)
    options = WorkerOptions(
        database=fleet_url(args.database),
        worker_id=worker_id,
        labels=list(args.label),
        runs_dir=Path(args.runs_dir).resolve(),
        vnc=list(args.vnc),
        local_desktops=args.desktops,
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
