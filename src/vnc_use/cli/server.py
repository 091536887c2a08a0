"""``--server URL``: the run commands against LangGraph Server instead of this process.

``vnc-use run --server URL ...`` creates a thread and a run on the server (the run spec as the
run's ``context``, the task as its input) and follows the run's events on the custom stream;
``approve`` / ``deny`` / ``resume --server URL THREAD`` start the next leg of a thread; ``runs
--server URL`` lists the server's threads, those awaiting approval first. Secrets never travel:
the VNC password stays in an environment variable of the server, named by
``--vnc-password-env``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vnc_use.cli import progress
from vnc_use.cli.ask import ask_approval
from vnc_use.cli.common import EXIT_CODES, EXIT_DONE, EXIT_ERROR
from vnc_use.errors import ConfigError
from vnc_use.record.money import format_cost
from vnc_use.record.report import REPORT_NAME
from vnc_use.runs.remote import GRAPH_ID, outcome
from vnc_use.runs.remote import client as _client
from vnc_use.runs.remote import follow as _follow
from vnc_use.runs.remote import reaching as _reaching
from vnc_use.status import RunStatus

if TYPE_CHECKING:  # langgraph is imported when a command needs it, not at start-up
    from vnc_use.agent.state import RunResult
    from vnc_use.runs.spec import RunSpec

__all__ = ["GRAPH_ID", "add_server_options", "command", "runs_command"]


def add_server_options(p: argparse.ArgumentParser, *, run: bool = False) -> None:
    """``--server URL`` (and for ``run``, ``--vnc-password-env NAME``)."""
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="a LangGraph Server serving vnc-use (langgraph dev / langgraph up), e.g. "
        "http://127.0.0.1:2024: the run happens there",
    )
    if run:
        p.add_argument(
            "--vnc-password-env",
            default="VNC_PASSWORD",
            metavar="NAME",
            help="with --server: the environment variable of the server that holds the VNC "
            "password (the password itself never travels); default VNC_PASSWORD",
        )
        p.add_argument(
            "--rdp-password-env",
            default="RDP_PASSWORD",
            metavar="NAME",
            help="with --server --rdp: the environment variable of the server that holds the "
            "RDP password; default RDP_PASSWORD",
        )


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The run spec ``vnc-use run --server`` sends (never a secret)."""
    if args.vnc_password:
        raise ConfigError(
            "--vnc-password cannot go to a server (it would be stored with the run); set the "
            "password in an environment variable of the server and name it with "
            "--vnc-password-env"
        )
    if not (args.vnc or args.rdp):
        raise ConfigError(
            "--server needs --vnc HOST::PORT or --rdp HOST[:PORT]: the desktop the server "
            "connects to"
        )
    from vnc_use.cli.spec import run_spec

    return run_spec(args)  # the same spec a run in this process has; --tool-version too


def refuse_local_only(args: argparse.Namespace) -> None:
    """The options that act in this process cannot apply to a run on a server: one line."""
    if getattr(args, "view", False):
        raise ConfigError(
            "--view cannot apply with --server: the run acts on the server's side; follow it "
            "here (its events are printed) or open the desktop in a VNC viewer, and drop --view"
        )
    if getattr(args, "reconnect_window", None) is not None:
        raise ConfigError(
            "--reconnect-window cannot apply with --server: a served run that loses its desktop "
            "ends as an error; continue it with 'vnc-use resume --server URL THREAD', and drop "
            "--reconnect-window"
        )


def command(args: argparse.Namespace) -> int:
    """``run`` / ``approve`` / ``deny`` / ``resume`` with ``--server``."""
    refuse_local_only(args)
    client = _client(args.server)
    show = progress.for_args(args)
    with _reaching(args.server):
        if args.command == "run":
            spec = spec_from_args(args)
            thread = client.threads.create(
                thread_id=args.thread_id,  # the server's rule: a UUID (422 otherwise)
                metadata={"task": args.task, "vnc": args.vnc or f"rdp://{args.rdp}"},
            )
            tid = str(thread["thread_id"])
            _follow(client, tid, show, input={"task": args.task}, context=spec.to_json())
        else:
            tid = args.thread_id
            leg = _next_leg(client, tid, args.command, getattr(args, "max_cost", None))
            _follow(client, tid, show, **leg)
        result = outcome(client, tid)
        while result.status == RunStatus.AWAITING_APPROVAL and sys.stdin.isatty():
            decision = "approve" if ask_approval(result.pending_call or {}) else "deny"
            _follow(client, tid, show, command={"resume": decision})
            result = outcome(client, tid)
    show.close()
    if not args.json:
        _report(result, args.server)
    if result.status in ("error", "blocked") and result.error:
        print(f"vnc-use: {result.error}", file=sys.stderr)
    return EXIT_CODES.get(result.status, EXIT_ERROR)


def _next_leg(client: Any, tid: str, what: str, max_cost: float | None = None) -> dict[str, Any]:
    """The arguments of the run that approves, denies or continues thread ``tid``."""
    thread = client.threads.get(tid)
    waiting = thread.get("status") == "interrupted"
    if what in ("approve", "deny"):
        if not waiting:
            raise ConfigError(f"run {tid!r} is not waiting for an approval")
        return {"command": {"resume": what}}
    if waiting:
        raise ConfigError(f"run {tid!r} waits for an approval: vnc-use approve|deny {tid}")
    return _continued(client, tid, max_cost)


def _continued(client: Any, tid: str, max_cost: float | None) -> dict[str, Any]:
    """A served run that ended ``stuck`` or ``cost_limit`` is set running again, as a local
    ``resume`` does (stall detection afresh; the cost so far kept); ``--max-cost`` raises the
    cap in the spec the server keeps for the thread."""
    from vnc_use.agent import stall
    from vnc_use.runs.spec import SPEC_NAMESPACE

    values = (client.threads.get_state(tid) or {}).get("values") or {}
    status = values.get("status")
    leg: dict[str, Any] = {"input": None}
    if status not in (RunStatus.STUCK, RunStatus.COST_LIMIT):
        return leg
    update: dict[str, Any] = {"status": "running", "done": False, "error": None}
    if status == RunStatus.STUCK:
        update["stall"] = stall.cleared(values.get("stall"))
    client.threads.update_state(tid, update, as_node="act")
    if max_cost is not None:
        item = client.store.get_item(list(SPEC_NAMESPACE), tid) or {}
        leg["context"] = {**(item.get("value") or {}), "max_cost": max_cost}
    return leg


def _report_line(run_dir: str) -> str | None:
    """Where the run's report is: here when the folder is reachable from this machine (the
    same machine, or shared storage), else on the server's side."""
    if not run_dir:
        return None
    report = Path(run_dir) / REPORT_NAME
    if report.exists():
        return f"report: {report}"
    if Path(run_dir).exists():  # here, but the run recorded no outcome (e.g. no desktop)
        return None
    return f"report: {report} (on the server's machine)"


def _report(result: RunResult, url: str) -> None:
    steps = f"{result.steps} step" + ("" if result.steps == 1 else "s")
    print(f"status: {result.status} (thread {result.thread_id} on {url}, {steps})")
    print(f"cost: {format_cost(result.cost_usd)}")
    if result.final_text:
        print(f"answer: {result.final_text}")
    if result.error and result.status not in ("error", "blocked"):
        print(f"reason: {result.error}")
    if result.pending_call:
        p = result.pending_call
        print(f"waiting for approval of {p['name']}({json.dumps(p['args'])}): {p['explanation']}")
        t = result.thread_id
        print(f"  approve: vnc-use approve --server {url} {t}")
        print(f"  deny:    vnc-use deny --server {url} {t}")
    line = _report_line(result.run_dir)
    if line:
        print(line)


def runs_command(args: argparse.Namespace) -> int:
    """``vnc-use runs --server URL``: the server's threads, awaiting approval first."""
    client = _client(args.server)
    with _reaching(args.server):
        threads = client.threads.search(limit=args.limit or 100)
    rows = sorted((_row(t) for t in threads), key=lambda r: r["updated"], reverse=True)
    rows.sort(key=lambda r: r["status"] != RunStatus.AWAITING_APPROVAL)  # stable: newest first
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_DONE
    if not rows:
        print(f"no runs on {args.server}")
        return EXIT_DONE
    print(f"{'THREAD':<36}  {'STATUS':<17}  {'WAITING ON':<14}  TASK")
    for r in rows:
        print(f"{r['thread_id']:<36}  {r['status']:<17}  {r['waiting_on']:<14}  {r['task'][:60]}")
    return EXIT_DONE


def _row(thread: dict[str, Any]) -> dict[str, Any]:
    """One thread as ``runs --server`` shows it."""
    values = thread.get("values") or {}
    waiting = [i for found in (thread.get("interrupts") or {}).values() for i in found]
    status = str(values.get("status") or thread.get("status") or "")
    if thread.get("status") == "interrupted" and waiting:
        status = RunStatus.AWAITING_APPROVAL.value
    elif thread.get("status") == "error":
        status = RunStatus.ERROR.value
    elif thread.get("status") == "busy":
        status = RunStatus.RUNNING.value
    return {
        "thread_id": str(thread["thread_id"]),
        "status": status,
        "waiting_on": str(waiting[0]["value"].get("name", "")) if waiting else "",
        "task": " ".join(str(values.get("task") or thread["metadata"].get("task", "")).split()),
        "steps": values.get("step", 0),
        "updated": str(thread.get("updated_at") or ""),
    }
