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
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use import config
from vnc_use.cli import fleet_record, progress
from vnc_use.cli.common import EXIT_CODES, EXIT_DONE, EXIT_ERROR
from vnc_use.errors import ConfigError

if TYPE_CHECKING:  # the spec pulls in LangGraph: imported when a command builds one
    from vnc_use.fleet.submit import Submitter
    from vnc_use.runs.spec import RunSpec

__all__ = ["add_fleet_options", "command", "fleet_url", "register", "runs_command"]

PROGRESS_SECONDS = 0.5
"""How often ``run --fleet`` looks for the run's new events while it waits."""


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


_RUN_DROPS = {
    "server": "--server",
    "checkpointer": "--checkpointer",
    "vnc_user": "--vnc-user",
    "vnc_ca": "--vnc-ca",
    "connect_timeout": "--connect-timeout",
    "screen_region": "--screen-region",
    "rdp_user": "--rdp-user",
    "rdp_domain": "--rdp-domain",
    "rdp_size": "--rdp-size",
    "rdp_cert_fingerprint": "--rdp-cert-fingerprint",
    "rdp_paste_text": "--rdp-paste-text",
    "rdp_allow_unverified_login": "--rdp-allow-unverified-login",
}
"""Options of ``run`` a fleet's run cannot honour when given: refused, never dropped."""
_RUN_DEFAULTS = {"vnc_password_env": "VNC_PASSWORD", "rdp_password_env": "RDP_PASSWORD"}


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    """The run's spec (never a secret): the desktop is the worker's to choose."""
    if args.vnc or args.rdp or args.vnc_password:
        raise ConfigError(
            "--vnc, --rdp and --vnc-password cannot go with --fleet: a worker runs the task "
            "on one of its desktops (vnc-use worker --vnc/--desktops); drop them"
        )
    if getattr(args, "view", False) or args.reconnect_window is not None:
        raise ConfigError("--view and --reconnect-window cannot apply with --fleet: drop them")
    dropped = [flag for name, flag in _RUN_DROPS.items() if getattr(args, name, None) is not None]
    dropped += [
        f"--{name.replace('_', '-')}"
        for name, default in _RUN_DEFAULTS.items()
        if getattr(args, name, default) != default
    ]
    if dropped:
        raise ConfigError(
            f"{', '.join(dropped)} cannot go with run --fleet: the worker's desktop, environment "
            "and database apply (a desktop's password: the worker's VNC_PASSWORD); drop them"
        )
    from vnc_use.cli.options import budget_fields, model_fields, video_fields
    from vnc_use.runs.spec import RunSpec

    spec = RunSpec(
        **model_fields(args),
        **budget_fields(args),
        **video_fields(args),
        hitl_mode=not args.no_hitl,
        include_initial_screenshot=not args.no_initial_screenshot,
        confirm_actions=list(args.confirm),
        sensitive_names=list(args.sensitive),
        lease_timeout=args.lease_timeout,
    )
    spec.check()
    return spec.to_json()


_LEG_DROPS = {
    "rdp": "--rdp",
    "vnc_password": "--vnc-password",
    "vnc_user": "--vnc-user",
    "vnc_ca": "--vnc-ca",
    "connect_timeout": "--connect-timeout",
    "reconnect_window": "--reconnect-window",
    "checkpointer": "--checkpointer",
    "video": "--video/--no-video",
    "video_fps": "--video-fps",
}
"""Options of ``approve``/``deny``/``resume`` a fleet's leg cannot honour (the worker's
environment and the run's spec decide them; the fleet's database is the checkpointer)."""


def _next_desktop(args: argparse.Namespace) -> str | None:
    """``approve``/``deny``/``resume --fleet``: the desktop ``--vnc ADDR`` moves the run to
    (its ``HOST::PORT``), None to go on where it is; options a fleet's leg cannot honour are
    refused, never dropped."""
    if getattr(args, "max_cost", None) is not None:
        raise ConfigError(
            f"--max-cost cannot go with {args.command} --fleet yet: the run keeps the cap it "
            "was started with; drop --max-cost"
        )
    given = [flag for name, flag in _LEG_DROPS.items() if getattr(args, name, None) is not None]
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot go with {args.command} --fleet: the worker's environment "
            "and the run's own settings apply (a desktop's password: the worker's VNC_PASSWORD); "
            "drop them (a new desktop: --vnc ADDR)"
        )
    if not args.vnc:
        return None
    from vnc_use.fleet.desktops import vnc_address

    return vnc_address(args.vnc)


def command(args: argparse.Namespace) -> int:
    """``run`` / ``approve`` / ``deny`` / ``resume`` with ``--fleet``."""
    from vnc_use.fleet.queue import queue_name
    from vnc_use.fleet.submit import DEFAULT_LABEL, Submitter

    url = fleet_url(args.fleet)
    spec: dict[str, Any] | None = None
    desktop: str | None = None
    label = (args.label or DEFAULT_LABEL) if args.command == "run" else DEFAULT_LABEL
    if args.command == "run":  # a bad option fails before the database is reached
        queue_name(label)
        spec = _spec(args)
    else:
        desktop = _next_desktop(args)
    with Submitter(url) as fleet:
        seen = 0
        if spec is not None:
            workflow = fleet.start(args.task, spec, label, args.thread_id)
        else:
            seen = fleet.event_count(args.thread_id)
            workflow = fleet.answer(args.thread_id, args.command, desktop=desktop)
        show = None if args.json or getattr(args, "quiet", False) else progress.for_args(args)
        if show is not None:
            waiting = fleet.waiting_line(workflow)
            if waiting:
                print(waiting, flush=True)
        outcome = _wait_showing(fleet, workflow, seen, show)
    status = str(outcome.get("status", "error"))
    if args.json:
        print(json.dumps(outcome, ensure_ascii=False))
    else:
        _report(outcome)
    if status in ("error", "blocked") and outcome.get("error"):
        print(f"vnc-use: {outcome['error']}", file=sys.stderr)
    return EXIT_CODES.get(status, EXIT_ERROR)


def _wait_showing(
    fleet: Submitter, workflow: str, seen: int, show: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any]:
    """The leg's outcome; meanwhile the run's progress lines (``show``), from the events the
    worker records in the database, as a run here prints them."""
    found: dict[str, Any] = {}
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            found.update(fleet.wait(workflow))
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    waiter = threading.Thread(target=wait, daemon=True, name="fleet-wait")
    waiter.start()
    tid = fleet.thread_id or ""
    while True:
        waiter.join(PROGRESS_SECONDS)
        if show is not None:
            for event in fleet.events(tid, seen):
                seen += 1
                show(event)
        if not waiter.is_alive():
            break
    if failed:
        raise failed[0]
    return found


def _report(outcome: dict[str, Any]) -> None:
    tid = outcome.get("thread_id", "")
    steps = int(outcome.get("steps") or 0)
    where = f" on worker {outcome['worker']}" if outcome.get("worker") else ""
    plural = "" if steps == 1 else "s"
    print(f"status: {outcome.get('status')} (thread {tid}{where}, {steps} step{plural})")
    if outcome.get("final_text"):
        print(f"answer: {outcome['final_text']}")
    pending = outcome.get("pending_call")
    if pending:
        print(
            f"waiting for approval of {pending['name']}({json.dumps(pending['args'])}): "
            f"{pending.get('explanation', '')}"
        )
        print(
            f"  approve: vnc-use approve --fleet URL {tid}   deny: vnc-use deny --fleet URL {tid}"
        )
    print(f"report: vnc-use report --fleet URL {tid}")


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
