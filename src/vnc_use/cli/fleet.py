"""``--fleet URL`` on ``run``/``approve``/``deny``/``resume``/``runs``/``report``, and
``vnc-use fleet status``: the fleet of workers sharing one PostgreSQL (:mod:`vnc_use.fleet`).

The submitter's machine needs the database URL and nothing else: the model's key and the
desktops' passwords live in the workers' environment; the outcome and the report come back
through the database.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.cli import fleet_record
from vnc_use.cli.common import EXIT_DONE, EXIT_ERROR
from vnc_use.errors import ConfigError

if TYPE_CHECKING:  # the spec pulls in LangGraph: imported when a command builds one
    from vnc_use.runs.spec import RunSpec

__all__ = ["add_fleet_options", "fleet_url", "register", "runs_command"]


def add_fleet_options(p: argparse.ArgumentParser, *, run: bool = False) -> None:
    """``--fleet URL`` (and for ``run``, ``--label NAME``)."""
    p.add_argument(
        "--fleet",
        default=None,
        metavar="URL",
        help="the fleet's database (postgresql://...; 'env': VNC_USE_DATABASE_URL): a worker "
        "of the fleet does the run (vnc-use worker)",
    )
    if run:
        p.add_argument(
            "--label",
            default=None,
            metavar="NAME",
            help="with --fleet: what the run's desktop must offer, the queue it goes to "
            "(default: default)",
        )


def fleet_url(value: str | None) -> str:
    """``--fleet URL`` (``env``: ``VNC_USE_DATABASE_URL``)."""
    url = config.database_url() if value in (None, "", "env") else value
    if not url:
        raise ConfigError(
            "the fleet's database is not given: --fleet postgresql://USER@HOST/DB, or set "
            "VNC_USE_DATABASE_URL and give --fleet env"
        )
    from vnc_use.store.postgres import is_postgres_url

    if not is_postgres_url(url):
        raise ConfigError("--fleet takes the fleet's postgresql://USER@HOST:PORT/DB URL")
    if value not in (None, "", "env") and config.url_has_password(url):
        print(
            "vnc-use: warning: a password in the database URL is visible to other users in the "
            "process list; prefer PGPASSWORD or VNC_USE_DATABASE_URL (--fleet env)",
            file=sys.stderr,
        )
    return url


def runs_command(args: argparse.Namespace) -> int:
    """``vnc-use runs --fleet URL``: the fleet's runs, awaiting approval first."""
    from vnc_use.fleet.db import FleetDb

    db = FleetDb(fleet_url(args.fleet), application_name="vnc-use fleet client")
    try:
        rows = db.runs(limit=args.limit or 100)
    finally:
        db.close()
    rows.sort(key=lambda r: r.status != "awaiting_approval")
    out = [
        {
            "thread_id": r.thread_id,
            "status": r.status,
            "label": r.label,
            "worker": r.worker_id or "",
            "desktop": r.desktop or "",
            "desktop_kind": r.kind or "",
            "task": r.task,
        }
        for r in rows
    ]
    if args.json:
        for row in out:
            print(json.dumps(row, ensure_ascii=False))
        return EXIT_DONE
    if not out:
        print("no runs in the fleet")
        return EXIT_DONE
    print(f"{'THREAD':<14}  {'STATUS':<17}  {'WORKER':<12}  TASK")
    for r in out:
        print(f"{r['thread_id']:<14}  {r['status']:<17}  {r['worker']:<12}  {r['task'][:60]}")
    return EXIT_DONE


def register(sub: Any) -> None:
    """Add ``fleet status``."""
    p = sub.add_parser("fleet", help="the fleet of workers sharing one PostgreSQL")
    fleet_sub = p.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    s = fleet_sub.add_parser(
        "status", help="workers (alive, dead, draining), desktops, queues, runs waiting"
    )
    add_fleet_options(s)
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(func=status_command)
    s = fleet_sub.add_parser(
        "prune",
        help="delete finished runs' screenshots, events and videos (never a run that can "
        "still be resumed or approved)",
    )
    add_fleet_options(s)
    s.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        type=fleet_record.parse_duration,
        help="runs finished longer ago than this: 30d, 12h, 90m, 0 (every finished run)",
    )
    s.set_defaults(func=lambda a: fleet_record.prune_command(a, fleet_url(a.fleet)))


def status_command(args: argparse.Namespace) -> int:
    from vnc_use.fleet.status import fleet_status

    found = fleet_status(fleet_url(args.fleet))
    if args.json:
        print(json.dumps(found, ensure_ascii=False))
        return EXIT_DONE
    print("WORKERS")
    for w in found["workers"]:
        print(
            f"  {w['worker_id']:<16} {w['state']:<9} labels {','.join(w['labels'])}  "
            f"heartbeat {w['heartbeat_age']:g} s ago  legs {w['legs_done']}"
        )
        own = w["queue"]
        if own["queued"] or own["running"]:  # legs of runs pinned to its desktops
            print(f"    its own queue: {own['queued']} queued, {own['running']} running")
        for desk, busy in w["desktops"].items():
            print(f"    {desk:<22} {'busy with run ' + busy if busy else 'free'}")
    print("QUEUES")
    for label, q in found["queues"].items() or {}:
        print(f"  {label:<16} {q['queued']} queued, {q['running']} running")
    if not found["queues"]:
        print("  (empty)")
    print("AWAITING APPROVAL")
    for r in found["awaiting_approval"]:
        print(f"  {r['thread_id']:<14} {r['waiting_on']:<14} {r['task'][:60]}")
    if not found["awaiting_approval"]:
        print("  (none)")
    return EXIT_DONE


def eval_command(
    args: argparse.Namespace,
    tasks: Any,
    spec: RunSpec,
    print_summary: Callable[[dict[str, Any], Path], None],
) -> int:
    """``vnc-use eval TASKS --fleet URL``: every task run a leg on the fleet's queue
    (``tasks``, the run ``spec`` every task shares and how to print the summary come from
    ``eval``)."""
    from vnc_use.evaluation.suite import Evaluation
    from vnc_use.fleet.evaluate import FleetRunner, run_fleet_eval
    from vnc_use.fleet.queue import queue_name
    from vnc_use.fleet.submit import DEFAULT_LABEL

    if args.vnc or args.rdp or args.server or args.desktops != 1 or args.reuse_desktops:
        raise ConfigError(
            "--vnc, --rdp, --server, --desktops and --reuse-desktops cannot go with --fleet: "
            "the workers' desktops run the tasks; drop them"
        )
    url = fleet_url(args.fleet)
    label = args.label or DEFAULT_LABEL
    queue_name(label)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create --out {out} ({exc.strerror}); choose another") from None
    evaluation = Evaluation(tasks, out, [], FleetRunner(url, spec), repeat=args.repeat)
    leg = {"spec": spec.to_json(), "label": label}

    def show(result: Any) -> None:
        if not args.quiet:
            print(f"{result.id} #{result.repeat}: {result.outcome}", flush=True)

    summary = run_fleet_eval(evaluation, url, label, leg, show)
    print_summary(summary, out)
    return EXIT_DONE if summary["complete"] else EXIT_ERROR
